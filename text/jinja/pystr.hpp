// pystr.hpp: Python's str methods over UTF-8 text, as a chat template sees them: whitespace is
// Python's (str.isspace: Unicode spaces such as U+00A0 and U+3000 included), case mapping is
// Unicode's (utf8proc's simple mappings, and ß upper-cases to SS as in Python), positions and
// lengths count code points. Pure functions. Tests: tests/text/jinja_test.cpp
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja::pystr {

/// Code points in s.
int64_t length(std::string_view s);
/// The code point index of byte offset `byte` (at a character boundary).
int64_t index_of(std::string_view s, size_t byte);
/// The code points of s, each as its bytes.
std::vector<std::string> chars(std::string_view s);

/// str.strip / lstrip / rstrip: `chars` null: Python's whitespace; else any code point of it.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
/// str.split() without a separator: runs of whitespace (maxsplit < 0: no limit).
std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit);
/// str.splitlines(keepends).
std::vector<std::string> splitlines(std::string_view s, bool keepends);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);
/// str.title(): a cased character after a cased one is lower case, others title case.
std::string title(std::string_view s);
/// jinja2's title filter: each word (after whitespace, '-', or an opening bracket) capitalised.
std::string title_words(std::string_view s);

} // namespace troupe::jinja::pystr
