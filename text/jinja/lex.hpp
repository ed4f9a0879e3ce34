// lex.hpp: the Jinja lexer's two stages (lex.cpp): the source cut into text and tag segments
// with jinja2's whitespace control applied, and one tag's content cut into tokens. Used by the
// parser (parse.cpp); throws jinja_error with the line on malformed input.
// Tests: tests/text/jinja_test.cpp
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.hpp"

namespace troupe::jinja::lex {

enum class seg_kind { text, var, block };

struct segment {
  seg_kind k;
  std::string content; // text, or the tag's inside without delimiters and whitespace marks
  int line;
};

enum class tok_kind { name, string, integer, number, op, end };

struct token {
  tok_kind k;
  std::string text;
  value lit;
};

/// The source (newlines already \n) as text, {{ }} and {% %} segments; comments dropped.
std::vector<segment> segment_source(std::string_view src);
/// One tag's content as tokens, ending with tok_kind::end.
std::vector<token> tokenize(std::string_view s, int line);

} // namespace troupe::jinja::lex
