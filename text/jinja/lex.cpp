// lex.cpp: Jinja source -> text and tags, with jinja2's whitespace rules as transformers
// configures them (trim_blocks: a block or comment tag eats the newline after it;
// lstrip_blocks: spaces and tabs before a block or comment tag that starts its line go; '-'
// inside a tag's delimiter strips all whitespace on that side, '+' keeps it; {% raw %} text is
// not read), and a tag's content -> tokens (names, numbers, Python string literals with their
// escapes, operators). See lex.hpp.
#include "text/jinja/lex.hpp"

#include <cctype>
#include <cstring>

#include <fmt/core.h>

#include "text/unicode.hpp"

namespace troupe::jinja::lex {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

int count_lines(std::string_view s, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to && i < s.size(); ++i) n += s[i] == '\n';
  return n;
}

std::vector<segment> segment_source(std::string_view src) {
  std::vector<segment> out;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true; // the text at pos starts a line (for lstrip_blocks)
  bool strip_next = false;   // the last tag ended with '-'
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string_view::npos && open + 1 >= src.size()) open = std::string_view::npos;
    std::string text(
        src.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos));
    if (strip_next) {
      size_t i = 0;
      while (i < text.size() && is_space(text[i])) ++i;
      text.erase(0, i);
    }
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({seg_kind::text, std::move(text), line});
      break;
    }
    const char type = src[open + 1];
    size_t inner = open + 2;
    char mark = inner < src.size() ? src[inner] : '\0';
    if (mark == '-' || mark == '+')
      ++inner;
    else
      mark = '\0';
    // whitespace before the tag
    if (mark == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (mark != '+' && type != '{') {
      const size_t nl = text.rfind('\n');
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      if (nl != std::string::npos || line_starting) {
        bool blank = true;
        for (size_t i = from; i < text.size(); ++i)
          blank = blank && (text[i] == ' ' || text[i] == '\t');
        if (blank) text.erase(from);
      }
    }
    if (!text.empty()) out.push_back({seg_kind::text, text, line});
    line += count_lines(src, pos, open);
    // find the tag's end
    size_t end = 0, after = 0;
    char end_mark = '\0';
    if (type == '#') {
      end = src.find("#}", inner);
      if (end == std::string_view::npos)
        throw jinja_error(fmt::format("line {}: unclosed comment", line));
      after = end + 2;
    } else {
      const char close = type == '{' ? '}' : '%';
      int depth = 0;
      char quote = '\0';
      size_t i = inner;
      for (; i < src.size(); ++i) {
        const char c = src[i];
        if (quote) {
          if (c == '\\')
            ++i;
          else if (c == quote)
            quote = '\0';
          continue;
        }
        if (c == '\'' || c == '"')
          quote = c;
        else if (c == '(' || c == '[' || c == '{')
          ++depth;
        else if ((c == ')' || c == ']' || (c == '}' && depth > 0)) && depth > 0)
          --depth;
        else if (depth == 0 && c == close && i + 1 < src.size() && src[i + 1] == '}')
          break;
      }
      if (i >= src.size())
        throw jinja_error(fmt::format("line {}: unclosed '{{{}' tag", line, type));
      end = i;
      after = i + 2;
    }
    if (end > inner && (src[end - 1] == '-' || src[end - 1] == '+')) end_mark = src[end - 1];
    const size_t content_end = end_mark ? end - 1 : end;
    const std::string content(src.substr(inner, content_end - inner));
    if (type == '%' && trimmed(content) == "raw") {
      // {% raw %} ... {% endraw %}: the text between is not read as template
      size_t at = after, close_open = std::string_view::npos, close_end = 0;
      char close_mark = '\0', close_end_mark = '\0';
      while ((at = src.find("{%", at)) != std::string_view::npos) {
        size_t k = at + 2;
        char m = k < src.size() && (src[k] == '-' || src[k] == '+') ? src[k++] : '\0';
        const size_t e = src.find("%}", k);
        if (e == std::string_view::npos) break;
        std::string_view body = src.substr(k, e - k);
        char em = '\0';
        if (!body.empty() && (body.back() == '-' || body.back() == '+')) {
          em = body.back();
          body.remove_suffix(1);
        }
        if (trimmed(std::string(body)) == "endraw") {
          close_open = at;
          close_end = e + 2;
          close_mark = m;
          close_end_mark = em;
          break;
        }
        at = k;
      }
      if (close_open == std::string_view::npos)
        throw jinja_error(fmt::format("line {}: {{% raw %}} without {{% endraw %}}", line));
      std::string raw(src.substr(after, close_open - after));
      if (end_mark == '-')
        raw.erase(0, raw.find_first_not_of(" \t\r\n\f\v") == std::string::npos
                         ? raw.size()
                         : raw.find_first_not_of(" \t\r\n\f\v"));
      if (close_mark == '-') {
        while (!raw.empty() && is_space(raw.back())) raw.pop_back();
      } else if (close_mark != '+') {      // lstrip_blocks before {% endraw %}; {% raw %} keeps
        const size_t nl = raw.rfind('\n'); // the newline after it (as jinja2 does)
        if (nl != std::string::npos && raw.find_first_not_of(" \t", nl + 1) == std::string::npos)
          raw.erase(nl + 1);
      }
      if (!raw.empty()) out.push_back({seg_kind::text, raw, line});
      line += count_lines(src, open, close_end);
      pos = close_end;
      strip_next = close_end_mark == '-';
      line_starting = false;
      if (!strip_next && close_end_mark != '+' && pos < src.size() && src[pos] == '\n') {
        ++pos;
        ++line;
        line_starting = true;
      }
      continue;
    }
    if (type != '#') out.push_back({type == '{' ? seg_kind::var : seg_kind::block, content, line});
    line += count_lines(src, open, after);
    pos = after;
    strip_next = end_mark == '-';
    line_starting = false;
    if (!strip_next && end_mark != '+' && type != '{' && pos < src.size() && src[pos] == '\n') {
      ++pos; // trim_blocks
      ++line;
      line_starting = true;
    }
  }
  return out;
}

// ---- tokens inside a tag ----

using unicode::append_utf8;

std::vector<token> tokenize(std::string_view s, int line) {
  std::vector<token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({tok_kind::name, std::string(s.substr(i, j - i)), {}});
      i = j;
      continue;
    }
    if (c == '0' && i + 2 < s.size() &&
        (s[i + 1] == 'x' || s[i + 1] == 'X' || s[i + 1] == 'o' || s[i + 1] == 'O' ||
         s[i + 1] == 'b' || s[i + 1] == 'B')) { // 0x1F, 0o17, 0b101
      const int base = s[i + 1] == 'x' || s[i + 1] == 'X'   ? 16
                       : s[i + 1] == 'o' || s[i + 1] == 'O' ? 8
                                                            : 2;
      size_t j = i + 2;
      std::string digits;
      while (j < s.size() && (std::isxdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) {
        if (s[j] != '_') digits += s[j];
        ++j;
      }
      token t{tok_kind::integer, std::string(s.substr(i, j - i)), {}};
      try {
        size_t used = 0;
        t.lit = value(static_cast<int64_t>(std::stoll(digits, &used, base)));
        if (used != digits.size()) throw std::invalid_argument("digits");
      } catch (const std::exception&) {
        throw jinja_error(fmt::format("line {}: bad number '{}'", line, t.text));
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string digits;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') digits += s[k];
      token t{is_float ? tok_kind::number : tok_kind::integer, digits, {}};
      try {
        t.lit =
            is_float ? value(std::stod(digits)) : value(static_cast<int64_t>(std::stoll(digits)));
      } catch (const std::exception&) {
        throw jinja_error(fmt::format("line {}: bad number '{}'", line, digits));
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string text;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          text += s[j];
          continue;
        }
        const char e = s[++j];
        auto hex = [&](int digits) { // \xHH, \uHHHH, \UHHHHHHHH: a code point
          uint32_t cp = 0;
          for (int k = 0; k < digits; ++k) {
            const char h = j + 1 < s.size() ? s[j + 1] : '\0';
            if (!std::isxdigit(static_cast<unsigned char>(h)))
              throw jinja_error(fmt::format("line {}: truncated \\{} escape", line, e));
            const int v = std::isdigit(static_cast<unsigned char>(h))
                              ? h - '0'
                              : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10;
            cp = cp * 16 + static_cast<uint32_t>(v);
            ++j;
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            throw jinja_error(fmt::format("line {}: escape of an invalid code point", line));
          append_utf8(text, cp);
        };
        switch (e) {
        case 'n':
          text += '\n';
          break;
        case 't':
          text += '\t';
          break;
        case 'r':
          text += '\r';
          break;
        case 'a':
          text += '\a';
          break;
        case 'b':
          text += '\b';
          break;
        case 'f':
          text += '\f';
          break;
        case 'v':
          text += '\v';
          break;
        case '\\':
          text += '\\';
          break;
        case '\'':
          text += '\'';
          break;
        case '"':
          text += '"';
          break;
        case '\n':
          break;
        case 'x':
          hex(2);
          break;
        case 'u':
          hex(4);
          break;
        case 'U':
          hex(8);
          break;
        default:
          if (e >= '0' && e <= '7') { // octal, up to three digits
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && j + 1 < s.size() && s[j + 1] >= '0' && s[j + 1] <= '7'; ++k)
              cp = cp * 8 + static_cast<uint32_t>(s[++j] - '0');
            append_utf8(text, cp);
          } else {
            text += '\\';
            text += e;
          }
        }
      }
      if (j >= s.size()) throw jinja_error(fmt::format("line {}: unterminated string", line));
      out.push_back({tok_kind::string, text, value(text)});
      i = j + 1;
      continue;
    }
    static const char* const ops[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[",
                                      "]",  "{",  "}",  ".",  ",",  ":",  "|", "~", "+",
                                      "-",  "*",  "/",  "%",  "<",  ">",  "="};
    bool found = false;
    for (const char* op : ops) {
      const size_t n = std::strlen(op);
      if (s.substr(i, n) == op) {
        out.push_back({tok_kind::op, op, {}});
        i += n;
        found = true;
        break;
      }
    }
    if (!found) throw jinja_error(fmt::format("line {}: unexpected character '{}'", line, c));
  }
  out.push_back({tok_kind::end, "", {}});
  return out;
}

} // namespace troupe::jinja::lex
