// tool_formats.cpp: each tool-call format's markers and the reader of its block's body
// (tool_formats.hpp). The bodies come in three kinds: JSON (an object, a list, one object per
// line, Mistral's NAME[ARGS]{...}), calls between marker tokens with the name and the JSON
// arguments apart (DeepSeek V3 / V3.1, Kimi K2, Solar), and markup whose values are bare text
// (Qwen3-Coder, GLM, MiniMax-M2, DeepSeek's DSML, Gemma 4). A bare value is a JSON string and
// the call `untyped` (tool_reply reads it by the function's schema), unless the markup says
// the value's type (DSML's string="false": the value is JSON).
#include "text/tool_formats.hpp"

#include <string>

#include <nlohmann/json.hpp>

#include "text/json_schema.hpp"

namespace troupe::tool_formats {

using json = nlohmann::ordered_json; // arguments keep the model's key order

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

std::string bare(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return std::string(v);
}

namespace {

// Nesting the recursive readers follow at most (a model's reply is untrusted input).
constexpr int max_depth = 64;

// JSON text parsed, or discarded when it is not JSON or is nested deeper than max_depth (the
// parser and json_nesting do not recurse; copying a value and dump() do).
json parse(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_discarded() && json_nesting(j) > max_depth) return json(json::value_t::discarded);
  return j;
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool name_ok(std::string_view n) {
  return !n.empty() && n.find_first_of(" \t\r\n<>\"{}") == std::string_view::npos;
}

// Arguments as a JSON object; some models write them as a JSON string holding the object.
bool object_of(json a, std::string& out) {
  if (a.is_null()) a = json::object();
  if (a.is_string()) {
    json inner = parse(a.get<std::string>());
    if (inner.is_discarded()) return false;
    a = std::move(inner);
  }
  if (!a.is_object()) return false;
  out = dump(a);
  return true;
}

bool object_text(std::string_view text, std::string& out) {
  json a = parse(trim(text));
  return !a.is_discarded() && object_of(std::move(a), out);
}

bool add_call(std::string_view name, std::string_view args, std::vector<tool_call>& out) {
  tool_call c;
  c.name = std::string(trim(name));
  if (!name_ok(c.name) || !object_text(args, c.arguments)) return false;
  out.push_back(std::move(c));
  return true;
}

// {"name" | "tool_name" (Cohere), "arguments" | "parameters"}
bool call_of(const json& j, tool_call& out) {
  if (!j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end()) name = j.find("tool_name");
  if (name == j.end() || !name->is_string() || !name_ok(name->get<std::string>())) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (!object_of(args == j.end() ? json() : *args, out.arguments)) return false;
  out.name = name->get<std::string>();
  return true;
}

// The text after `at` up to `close`, past it; false if `close` never comes.
bool until(std::string_view s, size_t& at, std::string_view close, std::string_view& got) {
  const size_t e = s.find(close, at);
  if (e == std::string_view::npos) return false;
  got = s.substr(at, e - at);
  at = e + close.size();
  return true;
}

// `s` at `at` (after whitespace) opens with `marker`: past it.
bool opens(std::string_view s, size_t& at, std::string_view marker) {
  const size_t b = s.find_first_not_of(" \t\r\n", at);
  if (b == std::string_view::npos || s.substr(b, marker.size()) != marker) return false;
  at = b + marker.size();
  return true;
}

// Calls between `begin` and `end`, with only whitespace around them; each inner text read by
// `one`.
template <class One>
bool each_marked(std::string_view body, std::string_view begin, std::string_view end, One one) {
  size_t at = 0;
  bool any = false;
  while (!blank(body.substr(at))) {
    std::string_view inner;
    if (!opens(body, at, begin) || !until(body, at, end, inner) || !one(inner)) return false;
    any = true;
  }
  return any;
}

// --- JSON bodies ---

bool read_object(std::string_view body, std::vector<tool_call>& out) { // hermes: one per block
  json j = parse(trim(body));
  tool_call c;
  if (j.is_discarded() || !call_of(j, c)) return false;
  out.push_back(std::move(c));
  return true;
}

// A list of call objects, one object, or one object per line (MiniMax-M1)
bool read_json_calls(std::string_view body, std::vector<tool_call>& out) {
  if (parse_tool_calls(body, out)) return true;
  size_t at = 0;
  while (at < body.size()) {
    size_t nl = body.find('\n', at);
    if (nl == std::string_view::npos) nl = body.size();
    const std::string_view line = trim(body.substr(at, nl - at));
    if (!line.empty() && !read_object(line, out)) return false;
    at = nl + 1;
  }
  return !out.empty();
}

// Mistral: a JSON list, or (templates since Small 3.2 / Devstral) NAME[ARGS]{...} per call,
// with [CALL_ID]ID between the two in some, each call after its own [TOOL_CALLS]
bool read_mistral(std::string_view body, std::vector<tool_call>& out) {
  constexpr std::string_view call_mark = "[TOOL_CALLS]", args_mark = "[ARGS]";
  const std::string_view t = trim(body);
  if (!t.empty() && (t.front() == '[' || t.front() == '{')) return parse_tool_calls(t, out);
  size_t at = 0;
  for (;;) {
    const size_t next = t.find(call_mark, at);
    const std::string_view part =
        t.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
    const size_t args = part.find(args_mark);
    if (args == std::string_view::npos) return false;
    const std::string_view head = part.substr(0, args);
    if (!add_call(head.substr(0, head.find("[CALL_ID]")), part.substr(args + args_mark.size()),
                  out))
      return false;
    if (next == std::string_view::npos) break;
    at = next + call_mark.size();
  }
  return true;
}

// Apertus: a JSON list of {NAME: {arguments}}
bool read_apertus(std::string_view body, std::vector<tool_call>& out) {
  json j = parse(trim(body));
  if (!j.is_array() || j.empty()) return false;
  for (const auto& e : j) {
    if (!e.is_object() || e.size() != 1) return false;
    tool_call c;
    c.name = e.begin().key();
    if (!name_ok(c.name) || !object_of(e.begin().value(), c.arguments)) return false;
    out.push_back(std::move(c));
  }
  return true;
}

// --- calls between marker tokens: a name and JSON arguments ---

// DeepSeek V3.1: NAME<｜tool▁sep｜>{args}; V3 and R1:
// function<｜tool▁sep｜>NAME\n```json\n{args}\n```
bool read_deepseek(std::string_view body, std::vector<tool_call>& out) {
  constexpr std::string_view sep_mark = "<｜tool▁sep｜>", fence_mark = "```json";
  const bool ok =
      each_marked(body, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", [&](std::string_view c) {
        const size_t sep = c.find(sep_mark);
        if (sep == std::string_view::npos) return false;
        std::string_view head = c.substr(0, sep), rest = c.substr(sep + sep_mark.size());
        const size_t fence = rest.find(fence_mark);
        if (trim(head) == "function" && fence != std::string_view::npos) {
          std::string_view args = trim(rest.substr(fence + fence_mark.size()));
          if (args.size() < 3 || args.substr(args.size() - 3) != "```") return false;
          return add_call(rest.substr(0, fence), args.substr(0, args.size() - 3), out);
        }
        return add_call(head, rest, out);
      });
  return ok;
}

// Kimi K2: functions.NAME:INDEX<|tool_call_argument_begin|>{args}
bool read_kimi(std::string_view body, std::vector<tool_call>& out) {
  constexpr std::string_view args_mark = "<|tool_call_argument_begin|>", ns = "functions.";
  const bool ok =
      each_marked(body, "<|tool_call_begin|>", "<|tool_call_end|>", [&](std::string_view c) {
        const size_t a = c.find(args_mark);
        if (a == std::string_view::npos) return false;
        std::string_view id = trim(c.substr(0, a));
        if (id.substr(0, ns.size()) == ns) id.remove_prefix(ns.size());
        const size_t colon = id.rfind(':');
        if (colon != std::string_view::npos &&
            id.find_first_not_of("0123456789", colon + 1) == std::string_view::npos)
          id = id.substr(0, colon);
        return add_call(id, c.substr(a + args_mark.size()), out);
      });
  return ok;
}

// Solar Open: ID<|tool_call:name|>NAME<|tool_call:args|>{args}
bool read_solar(std::string_view body, std::vector<tool_call>& out) {
  constexpr std::string_view name_mark = "<|tool_call:name|>", args_mark = "<|tool_call:args|>";
  const bool ok =
      each_marked(body, "<|tool_call:begin|>", "<|tool_call:end|>", [&](std::string_view c) {
        const size_t n = c.find(name_mark), a = c.find(args_mark);
        if (n == std::string_view::npos || a == std::string_view::npos || a < n) return false;
        const size_t name_at = n + name_mark.size();
        return add_call(c.substr(name_at, a - name_at), c.substr(a + args_mark.size()), out);
      });
  return ok;
}

// --- markup with bare values ---

// Qwen3-Coder (and Seed-OSS): <function=NAME><parameter=KEY>VALUE</parameter>...</function>
bool read_coder(std::string_view body, std::vector<tool_call>& out) {
  tool_call c;
  c.untyped = true;
  json args = json::object();
  size_t at = 0;
  std::string_view name;
  if (!opens(body, at, "<function=") || !until(body, at, ">", name)) return false;
  c.name = std::string(trim(name));
  std::string_view inner;
  if (!until(body, at, "</function>", inner) || !blank(body.substr(at))) return false;
  at = 0;
  while (!blank(inner.substr(at))) {
    std::string_view key, value;
    if (!opens(inner, at, "<parameter=") || !until(inner, at, ">", key) ||
        !until(inner, at, "</parameter>", value))
      return false;
    args[std::string(trim(key))] = bare(value);
  }
  if (!name_ok(c.name)) return false;
  c.arguments = dump(args);
  out.push_back(std::move(c));
  return true;
}

// GLM 4.5+: NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...; Hunyuan 3 writes the
// same tags with ":opensource" in them and <tool_sep:opensource> after the name
bool glm_markup(std::string_view body, std::string_view suffix, std::vector<tool_call>& out) {
  const std::string key_open = "<arg_key" + std::string(suffix) + ">",
                    key_close = "</arg_key" + std::string(suffix) + ">",
                    value_open = "<arg_value" + std::string(suffix) + ">",
                    value_close = "</arg_value" + std::string(suffix) + ">",
                    sep = "<tool_sep" + std::string(suffix) + ">";
  tool_call c;
  c.untyped = true;
  size_t at = std::min(body.find(key_open), body.find(sep));
  c.name = std::string(trim(body.substr(0, at)));
  if (at == std::string_view::npos) at = body.size();
  if (body.substr(at, sep.size()) == sep) at += sep.size();
  json args = json::object();
  while (!blank(body.substr(at))) {
    std::string_view key, value;
    if (!opens(body, at, key_open) || !until(body, at, key_close, key) ||
        !opens(body, at, value_open) || !until(body, at, value_close, value))
      return false;
    args[std::string(trim(key))] = std::string(value);
  }
  if (!name_ok(c.name)) return false;
  c.arguments = dump(args);
  out.push_back(std::move(c));
  return true;
}

bool read_glm(std::string_view body, std::vector<tool_call>& out) {
  return glm_markup(body, "", out);
}
// Hunyuan 3: a block of <tool_call:opensource> blocks, each GLM's markup
bool read_hunyuan(std::string_view body, std::vector<tool_call>& out) {
  if (!each_marked(body, "<tool_call:opensource>", "</tool_call:opensource>",
                   [&](std::string_view c) { return glm_markup(c, ":opensource", out); }))
    return false;
  return true;
}

// A value wrapped in <![CDATA[...]]> (MiniCPM writes values with <, & or newlines so).
std::string_view uncdata(std::string_view v) {
  const std::string_view t = trim(v);
  constexpr std::string_view open = "<![CDATA[", close = "]]>";
  if (t.size() >= open.size() + close.size() && t.substr(0, open.size()) == open &&
      t.substr(t.size() - close.size()) == close)
    return t.substr(open.size(), t.size() - open.size() - close.size());
  return v;
}

// <invoke name="NAME"><parameter name="KEY" [string="true|false"]>VALUE</parameter>...
// </invoke>, each tag after `prefix` (MiniMax-M2: none; DeepSeek V3.2 / V4: ｜DSML｜; Muse:
// atem:). A parameter with string="false" holds JSON; one with no string attribute is bare
// text and its call untyped.
bool invoke_markup(std::string_view body, std::string_view prefix, std::vector<tool_call>& out) {
  const std::string p(prefix);
  const std::string invoke = "<" + p + "invoke name=\"", invoke_end = "</" + p + "invoke>",
                    param = "<" + p + "parameter name=\"", param_end = "</" + p + "parameter>";
  size_t at = 0;
  while (!blank(body.substr(at))) {
    tool_call c;
    std::string_view name, attrs;
    if (!opens(body, at, invoke) || !until(body, at, "\"", name) || !until(body, at, ">", attrs) ||
        !blank(attrs))
      return false;
    c.name = std::string(name);
    json args = json::object();
    while (!opens(body, at, invoke_end)) {
      std::string_view key, value;
      if (!opens(body, at, param) || !until(body, at, "\"", key) || !until(body, at, ">", attrs) ||
          !until(body, at, param_end, value))
        return false;
      const std::string k(key);
      if (attrs.find("string=\"false\"") != std::string_view::npos) {
        json v = parse(trim(value));
        args[k] = v.is_discarded() ? json(std::string(value)) : std::move(v);
      } else {
        if (attrs.find("string=\"true\"") == std::string_view::npos) c.untyped = true;
        args[k] = bare(value);
      }
    }
    if (!name_ok(c.name)) return false;
    c.arguments = dump(args);
    out.push_back(std::move(c));
  }
  return !out.empty();
}

bool read_minimax(std::string_view body, std::vector<tool_call>& out) {
  return invoke_markup(body, "", out);
}
bool read_dsml(std::string_view body, std::vector<tool_call>& out) {
  return invoke_markup(body, "｜DSML｜", out);
}
bool read_atem(std::string_view body, std::vector<tool_call>& out) {
  return invoke_markup(body, "atem:", out);
}

// MiniCPM 5: the block opens with <function name=" and its body is NAME"><param name="KEY">
// VALUE</param>...
bool read_minicpm(std::string_view body, std::vector<tool_call>& out) {
  tool_call c;
  c.untyped = true;
  size_t at = 0;
  std::string_view name, attrs;
  if (!until(body, at, "\"", name) || !until(body, at, ">", attrs) || !blank(attrs)) return false;
  c.name = std::string(name);
  json args = json::object();
  while (!blank(body.substr(at))) {
    std::string_view key, value;
    if (!opens(body, at, "<param name=\"") || !until(body, at, "\"", key) ||
        !until(body, at, ">", attrs) || !until(body, at, "</param>", value))
      return false;
    args[std::string(key)] = std::string(uncdata(value));
  }
  if (!name_ok(c.name)) return false;
  c.arguments = dump(args);
  out.push_back(std::move(c));
  return true;
}

// MiniMax-M3: every tag after the marker ]<]minimax[>[; <invoke name="NAME"> holds one element
// per parameter, <KEY>VALUE</KEY>, an object's or a list's value expanded into elements (a
// list's as <item>s). Leaves are bare text.
struct m3_reader {
  std::string_view s; // the body with the markers taken out
  size_t at = 0;
  int depth = 0;
  // the elements up to `</end>`: an object, a list (all <item>), or the text (no element)
  bool content(std::string_view end, json& v) {
    if (++depth > max_depth) return false;
    const std::string close = "</" + std::string(end) + ">";
    const size_t b = s.find_first_not_of(" \t\r\n", at);
    const bool elements = b != std::string_view::npos && s.compare(b, 1, "<") == 0 &&
                          s.compare(b, close.size(), close) != 0;
    if (!elements) {
      std::string_view text;
      if (!until(s, at, close, text)) return false;
      v = bare(text);
      --depth;
      return true;
    }
    json obj = json::object(), list = json::array();
    bool items = true;
    while (!opens(s, at, close)) {
      std::string_view key;
      if (!opens(s, at, "<") || !until(s, at, ">", key) || key.empty() || key[0] == '/')
        return false;
      json item;
      if (!content(key, item)) return false;
      items = items && key == "item";
      list.push_back(item);
      obj[std::string(key)] = std::move(item);
    }
    v = items ? std::move(list) : std::move(obj);
    --depth;
    return true;
  }
};

bool read_minimax_m3(std::string_view body, std::vector<tool_call>& out) {
  constexpr std::string_view mark = "]<]minimax[>[";
  std::string plain(body);
  // (a marker that the erasures join together is found too: the search steps back)
  for (size_t m = plain.find(mark); m != std::string::npos;
       m = plain.find(mark, m >= mark.size() ? m - mark.size() + 1 : 0))
    plain.erase(m, mark.size());
  m3_reader r{plain};
  while (!blank(r.s.substr(r.at))) {
    tool_call c;
    c.untyped = true;
    std::string_view name;
    if (!opens(r.s, r.at, "<invoke name=\"") || !until(r.s, r.at, "\">", name)) return false;
    c.name = std::string(name);
    json args;
    if (!r.content("invoke", args)) return false;
    if (args == json("")) args = json::object(); // no parameters
    if (!args.is_object() || !name_ok(c.name)) return false;
    c.arguments = dump(args);
    out.push_back(std::move(c));
  }
  return !out.empty();
}

// Gemma 4: call:NAME{key:VALUE,...}, strings between <|"|> marks, other values bare
// (numbers, true, false), objects and lists nested; keys bare or quoted. Read into JSON.
struct gemma_reader {
  std::string_view s;
  size_t at = 0;
  int depth = 0;
  static constexpr std::string_view quote = "<|\"|>";
  bool value(json& v) {
    if (depth > max_depth) return false;
    if (s.substr(at, quote.size()) == quote) {
      std::string_view text;
      at += quote.size();
      if (!until(s, at, quote, text)) return false;
      v = std::string(text);
      return true;
    }
    if (at < s.size() && s[at] == '{') return object(v);
    if (at < s.size() && s[at] == '[') {
      ++at;
      ++depth;
      v = json::array();
      while (at < s.size() && s[at] != ']') {
        json item;
        if (!value(item)) return false;
        v.push_back(std::move(item));
        if (at < s.size() && s[at] == ',') ++at;
      }
      --depth;
      return at++ < s.size();
    }
    const size_t e = s.find_first_of(",}]", at);
    if (e == std::string_view::npos) return false;
    const std::string_view word = trim(s.substr(at, e - at));
    at = e;
    v = word == "None" ? json() : parse(word);
    return !v.is_discarded();
  }
  bool object(json& v) {
    ++at; // '{'
    ++depth;
    v = json::object();
    while (at < s.size() && s[at] != '}') {
      std::string_view key;
      if (s.substr(at, quote.size()) == quote) {
        at += quote.size();
        if (!until(s, at, quote, key) || at >= s.size() || s[at++] != ':') return false;
      } else if (!until(s, at, ":", key)) {
        return false;
      }
      json item;
      if (!value(item)) return false;
      v[std::string(trim(key))] = std::move(item);
      if (at < s.size() && s[at] == ',') ++at;
    }
    --depth;
    return at++ < s.size();
  }
};

bool read_gemma4(std::string_view body, std::vector<tool_call>& out) {
  const std::string_view t = trim(body);
  constexpr std::string_view call = "call:";
  const size_t brace = t.find('{');
  if (t.substr(0, call.size()) != call || brace == std::string_view::npos) return false;
  gemma_reader r{t, brace};
  json args;
  if (!r.object(args) || r.at != t.size()) return false;
  tool_call c;
  c.name = std::string(trim(t.substr(call.size(), brace - call.size())));
  if (!name_ok(c.name)) return false;
  c.arguments = dump(args);
  out.push_back(std::move(c));
  return true;
}

// The order detect_tool_format tries them in: a template that writes several of these
// markers (in an example, a history) is known by the first.
const spec specs[] = {
    {tool_format::deepseek_v4,
     "deepseek_v4",
     "<｜DSML｜tool_calls>",
     "</｜DSML｜tool_calls>",
     read_dsml,
     {"｜DSML｜"}},
    {tool_format::deepseek_v32,
     "deepseek_v32",
     "<｜DSML｜function_calls>",
     "</｜DSML｜function_calls>",
     read_dsml,
     {"｜DSML｜"}},
    {tool_format::deepseek_v3,
     "deepseek_v3",
     "<｜tool▁calls▁begin｜>",
     "<｜tool▁calls▁end｜>",
     read_deepseek,
     {"<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"}},
    {tool_format::kimi_k2,
     "kimi_k2",
     "<|tool_calls_section_begin|>",
     "<|tool_calls_section_end|>",
     read_kimi,
     {"<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"}},
    {tool_format::minimax_m2, "minimax_m2", "<minimax:tool_call>", "</minimax:tool_call>",
     read_minimax},
    {tool_format::seed_oss, "seed_oss", "<seed:tool_call>", "</seed:tool_call>", read_coder},
    {tool_format::minimax_m3,
     "minimax_m3",
     "]<]minimax[>[<tool_call>",
     "]<]minimax[>[</tool_call>",
     read_minimax_m3,
     {"]<]minimax[>["}},
    {tool_format::minimax_m1, "minimax_m1", "<tool_calls>", "</tool_calls>", read_json_calls},
    {tool_format::atem, "atem", "<atem:function_calls>", "</atem:function_calls>", read_atem},
    {tool_format::hunyuan,
     "hunyuan",
     "<tool_calls:opensource>",
     "</tool_calls:opensource>",
     read_hunyuan,
     {"<tool_call:opensource>", "</tool_call:opensource>", "<tool_sep:opensource>",
      "<arg_key:opensource>", "</arg_key:opensource>", "<arg_value:opensource>",
      "</arg_value:opensource>"}},
    {tool_format::qwen3_coder, "qwen3_coder", "<tool_call>", "</tool_call>", read_coder},
    {tool_format::glm,
     "glm",
     "<tool_call>",
     "</tool_call>",
     read_glm,
     {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}},
    {tool_format::hermes, "hermes", "<tool_call>", "</tool_call>", read_object},
    {tool_format::mistral, "mistral", "[TOOL_CALLS]", "", read_mistral, {"[ARGS]", "[CALL_ID]"}},
    {tool_format::nemotron, "nemotron", "<TOOLCALL>", "</TOOLCALL>", read_json_calls},
    {tool_format::cohere, "cohere", "<|START_ACTION|>", "<|END_ACTION|>", read_json_calls},
    {tool_format::granite, "granite", "<|tool_call|>", "", read_json_calls},
    {tool_format::solar,
     "solar",
     "<|tool_calls|>",
     "<|calls|>",
     read_solar,
     {"<|tool_call:begin|>", "<|tool_call:name|>", "<|tool_call:args|>", "<|tool_call:end|>"}},
    {tool_format::gemma4, "gemma4", "<|tool_call>", "<tool_call|>", read_gemma4, {"<|\"|>"}},
    {tool_format::apertus, "apertus", "<|tools_prefix|>", "<|tools_suffix|>", read_apertus},
    {tool_format::minicpm, "minicpm", "<function name=\"", "</function>", read_minicpm},
    {tool_format::lfm2, "lfm2", "<|tool_call_start|>", "<|tool_call_end|>", read_pythonic},
};

} // namespace

const spec* find(tool_format f) {
  for (const auto& s : specs)
    if (s.format == f) return &s;
  return nullptr;
}

std::vector<const spec*> all() {
  std::vector<const spec*> out;
  for (const auto& s : specs) out.push_back(&s);
  return out;
}

} // namespace troupe::tool_formats

namespace troupe {

bool parse_tool_calls(std::string_view text, std::vector<tool_call>& out) {
  using tool_formats::json;
  json j = tool_formats::parse(tool_formats::trim(text));
  if (j.is_discarded()) return false;
  if (j.is_array()) {
    if (j.empty()) return false;
    for (const auto& e : j) {
      tool_call c;
      if (!tool_formats::call_of(e, c)) return false;
      out.push_back(std::move(c));
    }
  } else {
    tool_call c;
    if (!tool_formats::call_of(j, c)) return false;
    out.push_back(std::move(c));
  }
  return true;
}

} // namespace troupe
