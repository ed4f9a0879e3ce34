// tool_pythonic.cpp: tool calls written as Python (LFM2 / LFM2.5 between <|tool_call_start|> and
// <|tool_call_end|>): a list of calls `[name(key=value, ...), ...]` (or one call alone), each
// value a Python literal - a string in single or double quotes with backslash escapes, a
// number, True / False / None, a list or tuple, a dict - turned into the JSON arguments. A
// positional argument, an expression or anything else that is not a literal means the body is
// not calls (the block stays content). Untrusted input: nesting is bounded, nothing recurses
// past it. Tests: tests/text/tool_calls_test.cpp (Lfm2Pythonic).
#include <string>

#include <nlohmann/json.hpp>

#include "text/tool_formats.hpp"
#include "text/unicode.hpp"

namespace troupe::tool_formats {

namespace {

using json = nlohmann::ordered_json;

constexpr int max_depth = 64;

struct py_reader {
  std::string_view s;
  size_t at = 0;
  int depth = 0;

  void space() {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\t' || s[at] == '\n' || s[at] == '\r')) ++at;
  }
  bool eat(char c) {
    space();
    if (at < s.size() && s[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  static bool ident_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && ((c >= '0' && c <= '9') || c == '.' || c == '-'));
  }
  // a name (a function's may hold '.' or '-', as tool names do)
  bool name(std::string& out) {
    space();
    const size_t b = at;
    while (at < s.size() && ident_char(s[at], at == b)) ++at;
    out.assign(s.substr(b, at - b));
    return !out.empty();
  }
  bool hex(size_t n, uint32_t& cp) {
    if (at + n > s.size()) return false;
    cp = 0;
    for (size_t i = 0; i < n; ++i) {
      const char c = s[at++];
      const uint32_t d = c >= '0' && c <= '9'   ? static_cast<uint32_t>(c - '0')
                         : c >= 'a' && c <= 'f' ? static_cast<uint32_t>(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? static_cast<uint32_t>(c - 'A' + 10)
                                                : 16u;
      if (d > 15) return false;
      cp = cp * 16 + d;
    }
    return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
  }
  bool string(std::string& out) {
    const char q = s[at++];
    while (at < s.size() && s[at] != q) {
      const char c = s[at++];
      if (c == '\n') return false; // a quoted string ends on its line
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= s.size()) return false;
      const char e = s[at++];
      uint32_t cp = 0;
      switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '0':
        out += '\0';
        break;
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      case 'x':
        if (!hex(2, cp)) return false;
        unicode::append_utf8(out, cp);
        break;
      case 'u':
        if (!hex(4, cp)) return false;
        unicode::append_utf8(out, cp);
        break;
      case 'U':
        if (!hex(8, cp)) return false;
        unicode::append_utf8(out, cp);
        break;
      default:
        out += '\\', out += e; // Python keeps an unknown escape as written
      }
    }
    return at++ < s.size();
  }
  // the rest of a list, tuple or dict after its opening bracket (a trailing comma allowed)
  bool items(char close, json& arr) {
    arr = json::array();
    for (;;) {
      if (eat(close)) return true;
      json v;
      if (!value(v)) return false;
      arr.push_back(std::move(v));
      if (eat(close)) return true;
      if (!eat(',')) return false;
    }
  }
  bool dict(json& obj) {
    obj = json::object();
    for (;;) {
      if (eat('}')) return true;
      json key, item;
      if (!value(key) || !key.is_string() || !eat(':') || !value(item)) return false;
      obj[key.get<std::string>()] = std::move(item);
      if (eat('}')) return true;
      if (!eat(',')) return false;
    }
  }
  bool value(json& v) {
    if (++depth > max_depth) return false;
    space();
    if (at >= s.size()) return false;
    const char c = s[at];
    bool ok = false;
    if (c == '"' || c == '\'') {
      std::string str;
      ok = string(str);
      v = std::move(str);
    } else if (c == '[' || c == '(') {
      ++at;
      ok = items(c == '[' ? ']' : ')', v);
    } else if (c == '{') {
      ++at;
      ok = dict(v);
    } else { // a bare word: True, False, None or a number
      const size_t b = at;
      while (at < s.size() &&
             std::string_view(",)]}: \t\r\n").find(s[at]) == std::string_view::npos)
        ++at;
      const std::string_view word = s.substr(b, at - b);
      if (word == "True" || word == "False" || word == "None") {
        v = word == "None" ? json() : json(word == "True");
        ok = true;
      } else if (!word.empty() && (word[0] == '-' || (word[0] >= '0' && word[0] <= '9'))) {
        v = json::parse(word, nullptr, false);
        ok = !v.is_discarded() && v.is_number();
      }
    }
    --depth;
    return ok;
  }
  // name(key=value, ...)
  bool call(tool_call& c) {
    std::string fn;
    if (!name(fn) || !eat('(')) return false;
    json args = json::object();
    for (;;) {
      if (eat(')')) break;
      std::string key;
      json v;
      if (!name(key) || key.find_first_of(".-") != std::string::npos || !eat('=') || !value(v))
        return false; // a positional argument, or not a literal
      args[key] = std::move(v);
      if (eat(')')) break;
      if (!eat(',')) return false;
    }
    c.name = std::move(fn);
    c.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
    return true;
  }
};

} // namespace

bool read_pythonic(std::string_view body, std::vector<tool_call>& out) {
  py_reader r{trim(body)};
  const bool list = r.eat('[');
  do {
    tool_call c;
    if (!r.call(c)) return false;
    out.push_back(std::move(c));
  } while (list && r.eat(','));
  if (list && !r.eat(']')) return false;
  r.space();
  return r.at == r.s.size();
}

} // namespace troupe::tool_formats
