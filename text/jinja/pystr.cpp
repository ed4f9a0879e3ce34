// pystr.cpp: Python's str semantics over UTF-8 (pystr.hpp).
#include "text/jinja/pystr.hpp"

#include <utf8proc.h>
#include <utility>

namespace troupe::jinja::pystr {
namespace {

// The code point at s[i] (lenient: a stray byte reads as itself), and its length.
char32_t next(std::string_view s, size_t i, size_t& len) {
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                  static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) {
    len = 1;
    return static_cast<unsigned char>(s[i]);
  }
  len = static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

void put(std::string& out, char32_t c) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Python's str.isspace for one code point
bool space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool cased(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

void put_upper(std::string& out, char32_t c) {
  if (c == 0xDF) { // ß: Python's full mapping
    out += "SS";
    return;
  }
  put(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
}
void put_lower(std::string& out, char32_t c) {
  put(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}
void put_title(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "Ss";
    return;
  }
  put(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
}

template <class F>
void each(std::string_view s, F f) {
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    const char32_t c = next(s, i, len); // sets len before f reads it
    f(c, i, len);
  }
}

} // namespace

int64_t length(std::string_view s) {
  int64_t n = 0;
  each(s, [&](char32_t, size_t, size_t) { ++n; });
  return n;
}

int64_t index_of(std::string_view s, size_t byte) {
  return length(s.substr(0, byte));
}

std::vector<std::string> chars(std::string_view s) {
  std::vector<std::string> out;
  each(s, [&](char32_t, size_t i, size_t len) { out.emplace_back(s.substr(i, len)); });
  return out;
}

std::string strip(std::string_view s, const std::string* set, bool left, bool right) {
  std::vector<char32_t> drop;
  if (set) each(*set, [&](char32_t c, size_t, size_t) { drop.push_back(c); });
  auto gone = [&](char32_t c) {
    if (!set) return space(c);
    for (char32_t d : drop)
      if (d == c) return true;
    return false;
  };
  std::vector<std::pair<size_t, size_t>> at; // (byte, len) of each code point
  std::vector<char32_t> cps;
  each(s, [&](char32_t c, size_t i, size_t len) {
    at.emplace_back(i, len);
    cps.push_back(c);
  });
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && gone(cps[b])) ++b;
  if (right)
    while (e > b && gone(cps[e - 1])) --e;
  if (b == e) return {};
  const size_t from = at[b].first, to = at[e - 1].first + at[e - 1].second;
  return std::string(s.substr(from, to - from));
}

std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  size_t rest_from = std::string_view::npos;
  each(s, [&](char32_t c, size_t i, size_t len) {
    if (rest_from != std::string_view::npos) return;
    if (space(c)) {
      if (in_word) {
        out.push_back(std::move(cur));
        cur.clear();
        in_word = false;
      }
      return;
    }
    if (!in_word && maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      rest_from = i; // the rest, less trailing whitespace, is the last part
      return;
    }
    in_word = true;
    cur.append(s.substr(i, len));
  });
  if (rest_from != std::string_view::npos) {
    out.push_back(strip(s.substr(rest_from), nullptr, false, true));
  } else if (in_word) {
    out.push_back(std::move(cur));
  }
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    const char32_t c = next(s, i, len);
    if (!line_break(c)) continue;
    size_t end = i + len;
    if (c == '\r' && end < s.size() && s[end] == '\n') ++end, ++len;
    out.emplace_back(s.substr(start, (keepends ? end : i) - start));
    start = end;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  each(s, [&](char32_t c, size_t, size_t) { put_upper(out, c); });
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  each(s, [&](char32_t c, size_t, size_t) { put_lower(out, c); });
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  each(s, [&](char32_t c, size_t, size_t) {
    first ? put_title(out, c) : put_lower(out, c);
    first = false;
  });
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  each(s, [&](char32_t c, size_t, size_t) {
    prev_cased ? put_lower(out, c) : put_title(out, c);
    prev_cased = cased(c);
  });
  return out;
}

std::string title_words(std::string_view s) {
  // jinja2: re.split(r"([-\s({\[<]+)", s), each piece's first character upper, rest lower
  std::string out;
  bool start = true;
  each(s, [&](char32_t c, size_t, size_t) {
    const bool sep = c == '-' || space(c) || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      put(out, c);
      start = true;
      return;
    }
    start ? put_upper(out, c) : put_lower(out, c);
    start = false;
  });
  return out;
}

} // namespace troupe::jinja::pystr
