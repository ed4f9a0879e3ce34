// render.hpp: runs a parsed template (ast.hpp) over a context (a dict value) and returns the
// text; throws jinja_error on a template error or raise_exception. Re-entrant: one program may
// be rendered by several threads at once, each call with its own values.
// Tests: tests/text/jinja_test.cpp
#pragma once

#include <cstdint>
#include <string>

#include "text/jinja/ast.hpp"

namespace troupe::jinja {

struct render_options {
  int64_t now = 0; // what strftime_now() reads, unix seconds (local time); 0: the clock
};

std::string render_program(const program& p, const value& context, const render_options& opt);

} // namespace troupe::jinja
