// builtins_impl.hpp: helpers the builtins (builtins.cpp) and the filters (filters.cpp) share:
// Python's str operations on values, type errors, attribute paths. Internal to text/jinja/.
// Tests: tests/text/jinja_test.cpp
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.hpp"

namespace troupe::jinja::detail {

[[noreturn]] void type_error(std::string_view what, const value& x);
bool is_ws(char c);
std::string strip(const std::string& s, const value& chars, bool left, bool right);
std::vector<value> split(const std::string& s, const value& sep, int64_t maxsplit);
std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count = -1);
std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string html_escape(const std::string& s);
/// len(): code points of a string, items of a list or dict, 0 for undefined.
int64_t length(const value& x);
/// jinja2's attribute= argument: "a.b" walks, an integer part indexes.
value attribute_path(const value& x, const value& path);
/// The positional arguments from `from` on.
call_args rest_args(const call_args& a, size_t from);

} // namespace troupe::jinja::detail
