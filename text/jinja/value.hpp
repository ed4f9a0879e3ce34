// value.hpp: the values a Jinja chat template computes with, as Python's jinja2 sees them:
// undefined, None, bool, int, float, str, list, dict (insertion-ordered, string keys), a
// callable (macro, bound method, global function) and a namespace (the one mutable object the
// templates use, `namespace(found=false)`). Lists and dicts are shared and immutable once built
// (transformers renders in jinja2's immutable sandbox); a namespace is a dict whose attributes
// `set ns.x = ...` may assign. Text follows Python: str() of a list is its repr
// (['a', 'b']), floats print as Python's repr (1.0, 1e-05), True / False / None.
// Errors inside the interpreter are thrown as jinja_error and caught at render (jinja.hpp);
// nothing here escapes the text module. Not thread-safe per value; a parsed template is.
// Tests: tests/text/jinja_test.cpp
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace troupe::jinja {

struct jinja_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct value;
struct dict;
struct call_args;
using list_ptr = std::shared_ptr<std::vector<value>>;
using dict_ptr = std::shared_ptr<dict>;
using function = std::function<value(call_args&)>;
using func_ptr = std::shared_ptr<function>;

struct undefined_t {
  std::string name; // what was looked up, for the error when it is used as an object
};
struct none_t {};
/// A string marked safe (jinja2's Markup, from the `safe` filter): concatenating it with a
/// plain string HTML-escapes the plain one, as Python's Markup.__add__ / __radd__ do.
struct markup_t {
  std::string s;
};

struct value {
  std::variant<undefined_t, none_t, bool, int64_t, double, std::string, list_ptr, dict_ptr,
               func_ptr, markup_t>
      v;
  // how deeply lists and dicts nest inside (0 for a scalar): at most kMaxDepth, so that
  // printing, comparing and freeing a value never recurse without bound
  uint16_t depth = 0;
  static constexpr uint16_t kMaxDepth = 512;
  /// Recomputes depth after a dict was filled in place (its items know theirs).
  value& refresh_depth();

  value() = default;
  value(none_t n)
      : v(n) {}
  value(bool b)
      : v(b) {}
  value(int i)
      : v(static_cast<int64_t>(i)) {}
  value(int64_t i)
      : v(i) {}
  value(size_t i)
      : v(static_cast<int64_t>(i)) {}
  value(double d)
      : v(d) {}
  value(std::string s)
      : v(std::move(s)) {}
  value(const char* s)
      : v(std::string(s)) {}
  value(list_ptr l);
  value(dict_ptr d);
  value(func_ptr f)
      : v(std::move(f)) {}
  static value undefined(std::string name = {}) {
    value x;
    x.v = undefined_t{std::move(name)};
    return x;
  }
  static value list(std::vector<value> items = {});
  static value markup(std::string s) {
    value x;
    x.v = markup_t{std::move(s)};
    return x;
  }
  static value func(function f) { return value(std::make_shared<function>(std::move(f))); }

  bool is_undefined() const { return v.index() == 0; }
  bool is_none() const { return v.index() == 1; }
  bool is_bool() const { return v.index() == 2; }
  bool is_int() const { return v.index() == 3; }
  bool is_float() const { return v.index() == 4; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return v.index() == 5 || v.index() == 9; }
  bool is_markup() const { return v.index() == 9; }
  bool is_list() const { return v.index() == 6; }
  bool is_dict() const { return v.index() == 7; }
  bool is_func() const { return v.index() == 8; }

  bool as_bool() const { return std::get<bool>(v); }
  const std::string& as_undefined_name() const { return std::get<undefined_t>(v).name; }
  int64_t as_int() const { return std::get<int64_t>(v); }
  double as_double() const {
    return is_int() ? static_cast<double>(as_int()) : std::get<double>(v);
  }
  const std::string& as_string() const {
    return v.index() == 9 ? std::get<markup_t>(v).s : std::get<std::string>(v);
  }
  const std::vector<value>& as_list() const { return *std::get<list_ptr>(v); }
  std::vector<value>& as_list_mut() { return *std::get<list_ptr>(v); }
  dict& as_dict() const { return *std::get<dict_ptr>(v); }
  const function& as_func() const { return *std::get<func_ptr>(v); }

  /// Python truthiness: undefined, None, False, 0, 0.0, '', [] and {} are false.
  bool truthy() const;
  /// Python's type name, for errors ("str", "dict", "NoneType").
  std::string_view type_name() const;
};

struct dict {
  std::vector<std::pair<value, value>> items; // keys: strings, or numbers in a template's literal
  bool is_namespace = false;

  const value* find(std::string_view key) const;
  const value* find(const value& key) const;
  void set(value key, value v);
  static value make(bool is_namespace = false);
};

/// Positional and keyword arguments of a call.
struct call_args {
  std::vector<value> args;
  std::vector<std::pair<std::string, value>> kwargs;
  /// The n-th positional argument, or the keyword `name`, or `fallback`.
  value get(size_t n, std::string_view name, value fallback = value::undefined()) const;
};

/// str(x) as jinja2 prints it: strings as they are, other values as Python's str().
std::string to_str(const value& x);
/// repr(x): 'text' with Python's quoting, [..], {'k': v}, True, None.
std::string repr(const value& x);
/// json.dumps(x, ensure_ascii=False, indent=indent, separators=..., sort_keys=...) as
/// transformers' tojson filter calls it; indent < 0 means None.
std::string to_json(const value& x, int indent, std::string_view item_sep, std::string_view key_sep,
                    bool sort_keys);
/// Python's == (1 == 1.0, lists and dicts compared by value).
bool equal(const value& a, const value& b);
/// Python's <, for numbers and strings (and lists element-wise); jinja_error otherwise.
bool less(const value& a, const value& b);

value from_json(const nlohmann::ordered_json& j);

} // namespace troupe::jinja
