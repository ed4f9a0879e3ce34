// tool_calls.cpp: reading tool calls out of a reply (tool_calls.hpp).
#include "text/tool_calls.hpp"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

namespace troupe {
namespace {

using json = nlohmann::ordered_json; // arguments keep the model's key order

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>", kMistral = "[TOOL_CALLS]";

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// How many of the last bytes of `s` could begin `marker` (held back until decided).
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool call_of(const json& j, tool_call& out) {
  if (!j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  json a = args == j.end() || args->is_null() ? json::object() : *args;
  if (a.is_string()) { // some models write the arguments as a JSON string
    json inner = json::parse(a.get<std::string>(), nullptr, false);
    if (inner.is_discarded()) return false;
    a = std::move(inner);
  }
  if (!a.is_object()) return false;
  out.name = name->get<std::string>();
  out.arguments = a.dump(-1, ' ', false, json::error_handler_t::replace);
  return true;
}

// The text between `open` and `close` after `from`; npos when absent.
std::string_view between(std::string_view s, std::string_view open, std::string_view close,
                         size_t& from) {
  const size_t a = s.find(open, from);
  if (a == std::string_view::npos) return {};
  const size_t b = s.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  from = b + close.size();
  return s.substr(a + open.size(), b - a - open.size());
}

// A value as the model wrote it between its tags: one newline on each side is layout.
std::string bare(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return std::string(v);
}

// One qwen3_coder or glm block (the text inside <tool_call>...</tool_call>).
bool parse_markup_call(tool_format f, std::string_view body, std::vector<tool_call>& out) {
  tool_call c;
  c.untyped = true;
  json args = json::object();
  if (f == tool_format::qwen3_coder) {
    const size_t a = body.find("<function="), b = body.find('>', a);
    if (a == std::string_view::npos || b == std::string_view::npos) return false;
    c.name = std::string(trim(body.substr(a + 10, b - a - 10)));
    const size_t end = body.find("</function>", b);
    if (end == std::string_view::npos || !blank(body.substr(end + 11))) return false;
    std::string_view inner = body.substr(b + 1, end - b - 1);
    size_t at = 0;
    for (;;) {
      const size_t p = inner.find("<parameter=", at);
      if (p == std::string_view::npos) {
        if (!blank(inner.substr(at))) return false;
        break;
      }
      if (!blank(inner.substr(at, p - at))) return false;
      const size_t q = inner.find('>', p);
      const size_t e = q == std::string_view::npos ? q : inner.find("</parameter>", q);
      if (e == std::string_view::npos) return false;
      args[std::string(trim(inner.substr(p + 11, q - p - 11)))] =
          bare(inner.substr(q + 1, e - q - 1));
      at = e + 12;
    }
  } else { // glm: the name, then key / value pairs
    const size_t k = body.find("<arg_key>");
    c.name = std::string(trim(body.substr(0, k)));
    size_t at = k == std::string_view::npos ? body.size() : k;
    while (at < body.size()) {
      const std::string_view key = between(body, "<arg_key>", "</arg_key>", at);
      if (key.data() == nullptr) return false;
      const std::string_view val = between(body, "<arg_value>", "</arg_value>", at);
      if (val.data() == nullptr) return false;
      args[std::string(trim(key))] = std::string(val);
      const size_t next = body.find("<arg_key>", at);
      if (next == std::string_view::npos) {
        if (!blank(body.substr(at))) return false;
        break;
      }
      if (!blank(body.substr(at, next - at))) return false;
      at = next;
    }
  }
  if (c.name.empty() || c.name.find_first_of(" \t\n<>") != std::string::npos) return false;
  c.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  out.push_back(std::move(c));
  return true;
}

} // namespace

std::string typed_arguments(const std::string& arguments, const std::string& parameters) {
  json args = json::parse(arguments, nullptr, false);
  const json schema = json::parse(parameters, nullptr, false);
  if (!args.is_object()) return arguments;
  for (auto& [k, v] : args.items()) {
    if (!v.is_string()) continue;
    const json* prop = nullptr;
    if (schema.is_object() && schema.contains("properties") && schema["properties"].is_object() &&
        schema["properties"].contains(k))
      prop = &schema["properties"][k];
    const bool text =
        !prop || !prop->is_object() || !prop->contains("type") || (*prop)["type"] == "string" ||
        ((*prop)["type"].is_array() && std::find((*prop)["type"].begin(), (*prop)["type"].end(),
                                                 "string") != (*prop)["type"].end());
    if (text) continue;
    json parsed = json::parse(v.get<std::string>(), nullptr, false);
    if (!parsed.is_discarded()) v = std::move(parsed);
  }
  return args.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string_view to_string(tool_format f) {
  switch (f) {
  case tool_format::hermes:
    return "hermes";
  case tool_format::llama3:
    return "llama3";
  case tool_format::mistral:
    return "mistral";
  default:
    return "none";
  }
}

tool_format detect_tool_format(std::string_view t) {
  if (t.find(kOpen) != std::string_view::npos) {
    if (t.find("<function=") != std::string_view::npos) return tool_format::qwen3_coder;
    if (t.find("<arg_key>") != std::string_view::npos) return tool_format::glm;
    return tool_format::hermes;
  }
  if (t.find(kMistral) != std::string_view::npos) return tool_format::mistral;
  // Llama 3.1 / 3.3 name <|python_tag|>; 3.2 only teaches the JSON ("name" and "parameters")
  if ((t.find(kPythonTag) != std::string_view::npos ||
       t.find("<|start_header_id|>") != std::string_view::npos) &&
      t.find("\"parameters\"") != std::string_view::npos)
    return tool_format::llama3;
  return tool_format::none;
}

bool parse_tool_calls(std::string_view text, std::vector<tool_call>& out) {
  json j = json::parse(trim(text), nullptr, false);
  if (j.is_discarded()) return false;
  std::vector<tool_call> calls;
  if (j.is_array()) {
    if (j.empty()) return false;
    for (const auto& e : j) {
      tool_call c;
      if (!call_of(e, c)) return false;
      calls.push_back(std::move(c));
    }
  } else {
    tool_call c;
    if (!call_of(j, c)) return false;
    calls.push_back(std::move(c));
  }
  for (auto& c : calls) out.push_back(std::move(c));
  return true;
}

tool_call_parser::delta tool_call_parser::hermes(bool end) {
  delta d;
  for (;;) {
    const size_t open = held_.find(kOpen);
    if (open == std::string::npos) {
      const size_t keep = end ? 0 : partial_suffix(held_, kOpen);
      std::string out = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      // between and after calls, whitespace is the template's layout, not content
      if (calls_ > 0 && blank(out)) out.clear();
      d.text += out;
      return d;
    }
    std::string before = held_.substr(0, open);
    const size_t close = held_.find(kClose, open + kOpen.size());
    if (close == std::string::npos) {
      if (!end) { // the call is still being written: release only what came before it
        if (!(calls_ > 0 && blank(before))) d.text += before;
        held_.erase(0, open);
        return d;
      }
      d.text += held_; // cut off inside a call: it is content after all
      held_.clear();
      return d;
    }
    const std::string_view body =
        std::string_view(held_).substr(open + kOpen.size(), close - open - kOpen.size());
    std::vector<tool_call> calls;
    if (!(calls_ > 0 && blank(before))) d.text += before;
    const bool read = f_ == tool_format::hermes ? parse_tool_calls(body, calls)
                                                : parse_markup_call(f_, body, calls);
    if (read && calls.size() == 1) {
      calls_ += 1;
      calls[0].raw = held_.substr(open, close + kClose.size() - open);
      d.calls.push_back(std::move(calls[0]));
    } else {
      d.text += held_.substr(open, close + kClose.size() - open);
    }
    held_.erase(0, close + kClose.size());
  }
}

tool_call_parser::delta tool_call_parser::push(std::string_view text) {
  held_ += text;
  if (f_ == tool_format::hermes || f_ == tool_format::qwen3_coder || f_ == tool_format::glm)
    return hermes(false);
  delta d;
  if (f_ == tool_format::none) {
    d.text = std::move(held_);
    held_.clear();
    return d;
  }
  if (started_) return d; // a call runs to the end of the reply
  if (f_ == tool_format::mistral) {
    if (size_t at = held_.find(kMistral); at != std::string::npos) {
      d.text = held_.substr(0, at);
      held_.erase(0, at);
      started_ = true;
      return d;
    }
    const size_t keep = partial_suffix(held_, kMistral);
    d.text = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return d;
  }
  // llama3: the reply is a call if it opens with '{' or <|python_tag|> (after whitespace)
  if (any_text_) {
    d.text = std::move(held_);
    held_.clear();
    return d;
  }
  const std::string_view t = trim(held_);
  if (t.empty()) return d;
  if (t.front() == '{' || t.rfind(kPythonTag, 0) == 0) {
    started_ = true;
    return d;
  }
  if (kPythonTag.rfind(t, 0) == 0) return d; // could still become the tag
  any_text_ = true;
  d.text = std::move(held_);
  held_.clear();
  return d;
}

tool_call_parser::delta tool_call_parser::finish() {
  if (f_ == tool_format::hermes || f_ == tool_format::qwen3_coder || f_ == tool_format::glm)
    return hermes(true);
  delta d;
  if (started_) {
    std::string_view body = trim(held_);
    if (f_ == tool_format::mistral) body.remove_prefix(kMistral.size());
    if (f_ == tool_format::llama3 && body.rfind(kPythonTag, 0) == 0)
      body.remove_prefix(kPythonTag.size());
    std::vector<tool_call> calls;
    bool ok = !trim(body).empty();
    if (ok && f_ == tool_format::llama3) { // several calls may be joined by ';'
      std::string_view rest = body;
      while (ok && !rest.empty()) {
        size_t semi = std::string_view::npos;
        // a ';' outside the JSON: try each one until the part before it parses
        for (size_t at = rest.find(';'); at != std::string_view::npos; at = rest.find(';', at + 1))
          if (parse_tool_calls(rest.substr(0, at), calls)) {
            semi = at;
            break;
          }
        if (semi == std::string_view::npos) {
          ok = parse_tool_calls(rest, calls);
          break;
        }
        rest = trim(rest.substr(semi + 1));
      }
    } else if (ok) {
      ok = parse_tool_calls(body, calls);
    }
    if (ok) {
      calls_ += calls.size();
      for (auto& c : calls) c.raw = held_; // the reply: a call's own text is not kept apart
      if (!calls.empty()) {                // so the whole text goes back once if one is not offered
        for (size_t i = 1; i < calls.size(); ++i) calls[i].raw.clear();
      }
      d.calls = std::move(calls);
    } else {
      d.text = held_;
    }
    held_.clear();
    return d;
  }
  d.text = std::move(held_);
  held_.clear();
  return d;
}

} // namespace troupe
