// unicode.cpp: UTF-8 helpers (unicode.hpp).
#include "text/unicode.hpp"

#include <array>
#include <cstdlib>
#include <unordered_map>

#include <utf8proc.h>

namespace troupe::unicode {

int seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) return 2;
  if ((c & 0xf0) == 0xe0) return 3;
  if ((c & 0xf8) == 0xf0) return 4;
  return 1;
}

namespace {

// Decodes one code point at s[i]; returns its length, or 0 when invalid.
int decode(std::string_view s, size_t i, uint32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  int n;
  uint32_t min;
  if ((c & 0xe0) == 0xc0)
    n = 2, cp = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0)
    n = 3, cp = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0)
    n = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (int k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

} // namespace

size_t first_invalid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    int n = decode(s, i, cp);
    if (!n) return i;
    i += n;
  }
  return std::string_view::npos;
}

bool valid(std::string_view s) {
  return first_invalid(s) == std::string_view::npos;
}

std::vector<std::string_view> chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    int n = decode(s, i, cp);
    if (!n) n = 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

size_t incomplete_tail(std::string_view s) {
  // look back at most 3 bytes for a lead byte whose sequence runs past the end
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xc0) == 0x80) continue; // continuation byte: keep looking for the lead
    const int n = seq_len(c);
    if (n > 1 && static_cast<size_t>(n) > back) {
      // all bytes after the lead must be continuations for this to be a prefix
      return back;
    }
    return 0;
  }
  return 0;
}

std::string repair(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    int n = decode(s, i, cp);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd"; // U+FFFD
      ++i;
    }
  }
  return out;
}

namespace {

struct byte_map {
  std::array<std::string, 256> to_char;
  std::unordered_map<uint32_t, uint8_t> from_cp;
  byte_map() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + extra++;
      append_utf8(to_char[b], cp);
      from_cp[cp] = static_cast<uint8_t>(b);
    }
  }
};

const byte_map& bytes() {
  static const byte_map m;
  return m;
}

} // namespace

const std::string& byte_to_char(uint8_t b) {
  return bytes().to_char[b];
}

bool chars_to_bytes(std::string_view text, std::string& out) {
  const auto& m = bytes();
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    int n = decode(text, i, cp);
    if (!n) return false;
    auto it = m.from_cp.find(cp);
    if (it == m.from_cp.end()) return false;
    out += static_cast<char>(it->second);
    i += n;
  }
  return true;
}

expected<std::string> normalize(std::string_view s, nf form) {
  if (!valid(s)) return make_error(errc::invalid_argument, "text is not valid UTF-8");
  int options = UTF8PROC_STABLE;
  switch (form) {
  case nf::nfc:
    options |= UTF8PROC_COMPOSE;
    break;
  case nf::nfd:
    options |= UTF8PROC_DECOMPOSE;
    break;
  case nf::nfkc:
    options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    break;
  case nf::nfkd:
    options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(options));
  if (n < 0)
    return make_error(errc::invalid_argument, "normalisation failed: {}", utf8proc_errmsg(n));
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    int n = decode(s, i, cp);
    if (!n) {
      out += s[i++];
      continue;
    }
    append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    i += n;
  }
  return out;
}

} // namespace troupe::unicode
