// tool_calls.cpp: reading tool calls out of a reply (tool_calls.hpp): the streaming parser over
// a format's block markers (tool_formats.hpp has the markers and the body readers), llama3's
// whole-reply JSON, and telling the formats apart by the markers a template writes.
#include "text/tool_calls.hpp"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "text/json_schema.hpp"
#include "text/tool_formats.hpp"

namespace troupe {
namespace {

using json = nlohmann::ordered_json; // arguments keep the model's key order
using tool_formats::blank;
using tool_formats::trim;

constexpr std::string_view kPythonTag = "<|python_tag|>";

// How many of the last bytes of `s` could begin `marker` (held back until decided).
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
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
    // nested deeper than any schema, it stays text (dump() recurses)
    if (!parsed.is_discarded() && json_nesting(parsed) <= 64) v = std::move(parsed);
  }
  return args.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string_view to_string(tool_format f) {
  if (f == tool_format::llama3) return "llama3";
  const auto* s = tool_formats::find(f);
  return s ? s->name : "none";
}

std::string tool_format_names() {
  std::string out = "llama3";
  for (const auto* s : tool_formats::all()) out += ", " + std::string(s->name);
  return out;
}

tool_format detect_tool_format(std::string_view t) {
  // templates that build their markers out of variables: known by the variables' text
  if (has(t, "]<]minimax[>[") && has(t, "<tool_call>")) return tool_format::minimax_m3;
  if (has(t, "'｜DSML｜'"))
    return has(t, "function_calls") ? tool_format::deepseek_v32 : tool_format::deepseek_v4;
  if (has(t, "'<tool_calls{}>'") && has(t, ":opensource")) return tool_format::hunyuan;
  // LFM2's templates write the tool list (between markers, or after "List of tools: ") and
  // leave the calls out of the history (LFM2.5-8B-A1B's render them: its marker is found below)
  if (has(t, "<|tool_list_start|>") || (has(t, "List of tools: [") && has(t, "<|im_start|>")))
    return tool_format::lfm2;
  for (const auto* s : tool_formats::all()) {
    if (!has(t, s->open)) continue;
    if (s->open == "<tool_call>") { // three formats share the block: its body tells them apart
      if (has(t, "<function=")) return tool_format::qwen3_coder;
      if (has(t, "<arg_key>")) return tool_format::glm;
      return tool_format::hermes;
    }
    if (s->format == tool_format::solar && !has(t, "<|tool_call:begin|>")) continue;
    return s->format;
  }
  // Llama 3.1 / 3.3 name <|python_tag|>; 3.2 only teaches the JSON ("name" and "parameters")
  if ((has(t, kPythonTag) || has(t, "<|start_header_id|>")) && has(t, "\"parameters\""))
    return tool_format::llama3;
  return tool_format::none;
}

std::vector<std::string_view> tool_markers(tool_format f) {
  if (f == tool_format::llama3) return {kPythonTag};
  const auto* s = tool_formats::find(f);
  if (!s) return {};
  std::vector<std::string_view> out{s->open};
  if (!s->close.empty()) out.push_back(s->close);
  for (auto m : s->inner)
    if (!m.empty()) out.push_back(m);
  return out;
}

// Blocks between a format's markers: text outside them is content, each block's body is read
// as calls (a block that does not read is content).
tool_call_parser::delta tool_call_parser::blocks(bool end) {
  const auto& s = *tool_formats::find(f_);
  delta d;
  // whitespace after a call is the template's layout until content follows it (then it is
  // content, however the text was split): held, dropped before a block or at the reply's end
  auto content = [&](std::string text) {
    if (after_call_ && blank(text)) {
      layout_ += text;
      return;
    }
    d.text += layout_;
    layout_.clear();
    d.text += text;
    after_call_ = after_call_ && blank(text);
  };
  for (;;) {
    const size_t open = held_.find(s.open);
    if (open == std::string::npos) {
      const size_t keep = end ? 0 : partial_suffix(held_, s.open);
      content(held_.substr(0, held_.size() - keep));
      held_.erase(0, held_.size() - keep);
      if (end) layout_.clear();
      return d;
    }
    content(held_.substr(0, open));
    held_.erase(0, open);
    // the close is looked for in the text not searched yet (a long call arrives in many pieces)
    const size_t close = s.close.empty()
                             ? std::string::npos
                             : held_.find(s.close, std::max(s.open.size(), close_from_));
    if (close == std::string::npos && !end) { // still being written: held
      if (!s.close.empty() && held_.size() >= s.close.size())
        close_from_ = held_.size() - s.close.size() + 1;
      return d;
    }
    close_from_ = 0;
    const size_t body_end = close == std::string::npos ? held_.size() : close;
    const size_t block_end = close == std::string::npos ? held_.size() : close + s.close.size();
    const std::string_view body =
        std::string_view(held_).substr(s.open.size(), body_end - s.open.size());
    std::vector<tool_call> calls;
    if (s.read(body, calls) && !calls.empty()) {
      calls_ += calls.size();
      layout_.clear();
      after_call_ = true;
      // the block's text goes back, where it stood in the text, if one of its calls is refused
      calls[0].raw = held_.substr(0, block_end);
      for (auto& c : calls) {
        c.text_at = d.text.size();
        d.calls.push_back(std::move(c));
      }
    } else {
      content(held_.substr(0, block_end));
    }
    held_.erase(0, block_end);
    if (end && held_.empty()) layout_.clear();
  }
}

tool_call_parser::delta tool_call_parser::push(std::string_view text) {
  held_ += text;
  if (f_ == tool_format::llama3) return llama3_push();
  if (f_ != tool_format::none) return blocks(false);
  return release_all();
}

tool_call_parser::delta tool_call_parser::finish() {
  if (f_ == tool_format::llama3) return llama3_finish();
  if (f_ != tool_format::none) return blocks(true);
  return release_all();
}

tool_call_parser::delta tool_call_parser::release_all() {
  delta d;
  d.text = std::move(held_);
  held_.clear();
  return d;
}

// llama3: the reply is a call if it opens with '{' or <|python_tag|> (after whitespace)
tool_call_parser::delta tool_call_parser::llama3_push() {
  delta d;
  if (started_) return d; // a call runs to the end of the reply
  if (any_text_) return release_all();
  // the leading whitespace found so far is not looked at again
  const size_t b = held_.find_first_not_of(" \t\r\n", blank_upto_);
  if (b == std::string::npos) {
    blank_upto_ = held_.size();
    return d;
  }
  const std::string_view t = std::string_view(held_).substr(b);
  if (t.front() == '{' || t.rfind(kPythonTag, 0) == 0) {
    started_ = true;
    return d;
  }
  if (kPythonTag.rfind(t, 0) == 0) return d; // could still become the tag
  any_text_ = true;
  return release_all();
}

tool_call_parser::delta tool_call_parser::llama3_finish() {
  if (!started_) return release_all();
  delta d;
  std::string_view body = trim(held_);
  if (body.rfind(kPythonTag, 0) == 0) body.remove_prefix(kPythonTag.size());
  std::vector<tool_call> calls;
  bool ok = !trim(body).empty();
  // several calls may be joined by ';': the ones outside strings and brackets split them (one
  // pass: a reply with many ';' in its strings costs no more than one with none)
  size_t from = 0, depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; ok && i <= body.size(); ++i) {
    const char ch = i < body.size() ? body[i] : ';';
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      ++depth;
    } else if ((ch == '}' || ch == ']') && depth > 0) {
      --depth;
    } else if (ch == ';' && (depth == 0 || i == body.size())) {
      const std::string_view part = trim(body.substr(from, i - from));
      if (!part.empty() || i < body.size()) ok = parse_tool_calls(part, calls);
      from = i + 1;
    }
  }
  if (ok) {
    calls_ += calls.size();
    // the reply: a call's own text is not kept apart, so the whole text goes back once if one
    // is not offered
    if (!calls.empty()) calls[0].raw = held_;
    d.calls = std::move(calls);
  } else {
    d.text = held_;
  }
  held_.clear();
  return d;
}

} // namespace troupe
