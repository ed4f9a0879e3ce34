// builtins.hpp: what jinja2 and transformers provide to a chat template besides syntax: the
// filters (tojson, trim, join, map, selectattr, ...), the tests (defined, string, mapping, ...),
// the methods of str, dict and list that the published templates call (strip, split,
// startswith, items, get, ...), attribute and item lookup with jinja2's rules (a dict's
// methods before its keys, a missing key is undefined, using an undefined value as an
// object is an error) and Python's operators. Everything throws jinja_error on misuse.
// Tests: tests/text/jinja_test.cpp
#pragma once

#include <string_view>

#include "text/jinja/value.hpp"

namespace troupe::jinja {

/// The largest string (64 MiB) and list (1 Mi items) a template may build: beyond, an error.
constexpr size_t kMaxText = size_t{64} << 20, kMaxItems = size_t{1} << 20;
void check_text(size_t bytes);
void check_items(size_t n);

value get_attr(const value& obj, const std::string& name);
value get_item(const value& obj, const value& key);
value get_slice(const value& obj, const value& start, const value& stop, const value& step);
value call_filter(std::string_view name, const value& x, call_args& a);
bool call_test(std::string_view name, const value& x, call_args& a);
value binary_op(std::string_view op, const value& a, const value& b);
/// The items `for` walks: a list's elements, a dict's keys, a string's characters;
/// undefined walks nothing.
std::vector<value> iterate(const value& x);

} // namespace troupe::jinja
