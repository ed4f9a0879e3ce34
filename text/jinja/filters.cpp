// filters.cpp: jinja2's filters as the published chat templates use them (transformers' tojson:
// ensure_ascii=False, no HTML escaping; map / select / selectattr with the tests of
// builtins.cpp; round, slice, unique, title as jinja2 defines them).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <fmt/core.h>

#include "text/jinja/builtins.hpp"
#include "text/jinja/builtins_impl.hpp"
#include "text/jinja/pystr.hpp"

namespace troupe::jinja {
namespace {

using namespace detail;

std::string indent_text(const std::string& s, const value& width, bool first, bool blank) {
  if (!width.is_string() && (!width.is_int() || width.as_int() < 0)) type_error("indent", width);
  if (!width.is_string()) check_text(static_cast<size_t>(width.as_int()));
  std::string pad =
      width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  std::string out;
  size_t i = 0;
  bool first_line = true;
  while (i <= s.size()) {
    size_t j = s.find('\n', i);
    std::string line = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    const bool is_blank = std::all_of(line.begin(), line.end(), is_ws);
    if ((first_line ? first : true) && (blank || !is_blank || first_line) &&
        !(first_line && !first))
      out += pad;
    out += line;
    check_text(out.size());
    first_line = false;
    if (j == std::string::npos) break;
    out += '\n';
    i = j + 1;
  }
  return out;
}

} // namespace

using namespace detail;

value call_filter(std::string_view name, const value& x, call_args& a) {
  if (name == "tojson") {
    value indent = a.get(0, "indent", value(none_t{}));
    value seps = a.get(2, "separators", value(none_t{}));
    const bool sort = a.get(3, "sort_keys", value(false)).truthy();
    const int ind = indent.is_none() ? -1 : static_cast<int>(indent.as_int());
    std::string item_sep = ind >= 0 ? "," : ", ", key_sep = ": ";
    if (seps.is_list() && seps.as_list().size() == 2) {
      item_sep = to_str(seps.as_list()[0]);
      key_sep = to_str(seps.as_list()[1]);
    }
    return value(to_json(x, ind, item_sep, key_sep, sort));
  }
  if (name == "trim") {
    if (!x.is_string()) return value(strip(to_str(x), a.get(0, "chars"), true, true));
    return value(strip(x.as_string(), a.get(0, "chars"), true, true));
  }
  if (name == "length" || name == "count") return value(length(x));
  if (name == "default" || name == "d") {
    const bool boolean = a.get(1, "boolean", value(false)).truthy();
    if (x.is_undefined() || (boolean && !x.truthy())) return a.get(0, "default_value", value(""));
    return x;
  }
  if (name == "string") return x.is_markup() ? x : value(to_str(x));
  if (name == "safe") return x.is_markup() ? x : value::markup(to_str(x));
  if (name == "escape" || name == "e" || name == "forceescape") {
    if (x.is_markup() && name != "forceescape") return x;
    return value::markup(html_escape(to_str(x)));
  }
  if (name == "upper") return value(upper(to_str(x)));
  if (name == "lower") return value(lower(to_str(x)));
  if (name == "capitalize") return value(pystr::capitalize(to_str(x)));
  if (name == "title") return value(pystr::title_words(to_str(x)));
  if (name == "replace") {
    value from = a.get(0, "old"), to = a.get(1, "new"), n = a.get(2, "count", value(none_t{}));
    return value(replace_all(to_str(x), to_str(from), to_str(to), n.is_none() ? -1 : n.as_int()));
  }
  if (name == "join") {
    value sep = a.get(0, "d", value("")), attr = a.get(1, "attribute", value(none_t{}));
    std::string out;
    bool first = true;
    for (const auto& e : iterate(x)) {
      if (!first) out += to_str(sep);
      first = false;
      out += to_str(attr.is_none() ? e : attribute_path(e, attr));
    }
    return value(std::move(out));
  }
  if (name == "first" || name == "last") {
    auto items = iterate(x);
    if (items.empty()) return value::undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return value::list(iterate(x));
  if (name == "items") {
    if (x.is_undefined()) return value::list();
    if (!x.is_dict()) type_error("items", x);
    call_args none;
    return get_attr(x, "items").as_func()(none);
  }
  if (name == "reverse") {
    if (x.is_string())
      return get_slice(x, value::undefined(), value::undefined(), value(int64_t{-1}));
    auto items = iterate(x);
    std::reverse(items.begin(), items.end());
    return value::list(std::move(items));
  }
  if (name == "int") {
    if (x.is_int()) return x;
    if (x.is_float()) return value(static_cast<int64_t>(x.as_double()));
    if (x.is_bool()) return value(int64_t{x.as_bool()});
    if (x.is_string()) {
      try {
        size_t used = 0;
        int64_t v = std::stoll(x.as_string(), &used);
        if (used == x.as_string().size()) return value(v);
        return value(static_cast<int64_t>(std::stod(x.as_string())));
      } catch (const std::exception&) {
      }
    }
    return a.get(0, "default", value(int64_t{0}));
  }
  if (name == "float") {
    if (x.is_number()) return value(x.as_double());
    if (x.is_string()) {
      try {
        return value(std::stod(x.as_string()));
      } catch (const std::exception&) {
      }
    }
    return a.get(0, "default", value(0.0));
  }
  if (name == "abs") {
    if (x.is_int()) return value(x.as_int() < 0 ? -x.as_int() : x.as_int());
    if (x.is_float()) return value(std::fabs(x.as_double()));
    type_error("abs", x);
  }
  if (name == "round") {
    // jinja2: common is Python's round() (half to even on the exact binary value, an int stays
    // an int), ceil and floor at that precision
    const int64_t prec = a.get(0, "precision", value(int64_t{0})).as_int();
    const std::string method = to_str(a.get(1, "method", value("common")));
    if (!x.is_number()) type_error("round", x);
    if (method != "common" && method != "ceil" && method != "floor")
      throw jinja_error("round: method must be common, ceil or floor");
    if (method == "common" && x.is_int()) return x;
    const double v = x.as_double();
    if (method == "common") {
      if (prec < 0 || prec > 300) return value(v);
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), v); // glibc: exact, ties even
      return value(std::strtod(buf, nullptr));
    }
    const double p = std::pow(10.0, static_cast<double>(prec));
    return value((method == "ceil" ? std::ceil(v * p) : std::floor(v * p)) / p);
  }
  if (name == "indent") {
    value width = a.get(0, "width", value(int64_t{4}));
    const bool first = a.get(1, "first", value(false)).truthy();
    const bool blank = a.get(2, "blank", value(false)).truthy();
    return value(indent_text(to_str(x), width, first, blank));
  }
  if (name == "dictsort") {
    if (!x.is_dict()) type_error("dictsort", x);
    const bool case_sensitive = a.get(0, "case_sensitive", value(false)).truthy();
    const bool by_value = to_str(a.get(1, "by", value("key"))) == "value";
    const bool rev = a.get(2, "reverse", value(false)).truthy();
    std::vector<value> pairs;
    for (const auto& [k, v] : x.as_dict().items) pairs.push_back(value::list({k, v}));
    auto key = [&](const value& p) {
      value k = p.as_list()[by_value ? 1 : 0];
      return k.is_string() && !case_sensitive ? value(lower(k.as_string())) : k;
    };
    std::stable_sort(pairs.begin(), pairs.end(), [&](const value& l, const value& r) {
      return rev ? less(key(r), key(l)) : less(key(l), key(r));
    });
    return value::list(std::move(pairs));
  }
  if (name == "sort") {
    auto items = iterate(x);
    const bool rev = a.get(0, "reverse", value(false)).truthy();
    const bool case_sensitive = a.get(1, "case_sensitive", value(false)).truthy();
    value attr = a.get(2, "attribute", value(none_t{}));
    auto key = [&](const value& e) {
      value k = attr.is_none() ? e : attribute_path(e, attr);
      return k.is_string() && !case_sensitive ? value(lower(k.as_string())) : k;
    };
    std::stable_sort(items.begin(), items.end(), [&](const value& l, const value& r) {
      return rev ? less(key(r), key(l)) : less(key(l), key(r));
    });
    return value::list(std::move(items));
  }
  if (name == "unique") { // jinja2: case-insensitive unless told, by an attribute if given
    const bool case_sensitive = a.get(0, "case_sensitive", value(false)).truthy();
    value attr = a.get(1, "attribute", value(none_t{}));
    auto key = [&](const value& e) {
      value k = attr.is_none() ? e : attribute_path(e, attr);
      return k.is_string() && !case_sensitive ? value(lower(k.as_string())) : k;
    };
    std::vector<value> out, keys;
    for (const auto& e : iterate(x)) {
      const value k = key(e);
      bool seen = false;
      for (const auto& o : keys) seen = seen || equal(o, k);
      if (!seen) {
        out.push_back(e);
        keys.push_back(k);
      }
    }
    return value::list(std::move(out));
  }
  if (name == "min" || name == "max") {
    auto items = iterate(x);
    if (items.empty()) return value::undefined();
    value best = items[0];
    for (const auto& e : items)
      if (name == "min" ? less(e, best) : less(best, e)) best = e;
    return best;
  }
  if (name == "sum") {
    value total = a.get(1, "start", value(int64_t{0}));
    value attr = a.get(0, "attribute", value(none_t{}));
    for (const auto& e : iterate(x))
      total = binary_op("+", total, attr.is_none() ? e : attribute_path(e, attr));
    return total;
  }
  if (name == "wordcount")
    return value(static_cast<int64_t>(split(to_str(x), value::undefined(), -1).size()));
  if (name == "map") {
    std::vector<value> out;
    if (!x.truthy()) return value::list(); // jinja2 maps and selects over `if value:`
    value attr = a.get(SIZE_MAX, "attribute");
    if (!attr.is_undefined()) {
      value dflt = a.get(SIZE_MAX, "default");
      for (const auto& e : iterate(x)) {
        value v = attribute_path(e, attr);
        out.push_back(v.is_undefined() && !dflt.is_undefined() ? dflt : v);
      }
      return value::list(std::move(out));
    }
    value f = a.get(0, "\x01");
    if (!f.is_string()) throw jinja_error("map needs a filter name or attribute=");
    call_args rest = rest_args(a, 1);
    for (const auto& e : iterate(x)) out.push_back(call_filter(f.as_string(), e, rest));
    return value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool attr_form = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "select" || name == "selectattr";
    size_t at = 0;
    value attr;
    if (attr_form) attr = a.get(at++, "\x01");
    value test = a.get(at++, "\x01");
    call_args rest = rest_args(a, at);
    std::vector<value> out;
    if (!x.truthy()) return value::list();
    for (const auto& e : iterate(x)) {
      value subject = attr_form ? attribute_path(e, attr) : e;
      const bool ok =
          test.is_undefined() ? subject.truthy() : call_test(to_str(test), subject, rest);
      if (ok == keep) out.push_back(e);
    }
    return value::list(std::move(out));
  }
  if (name == "slice") { // jinja2: `n` slices, the first ones one longer
    const int64_t n = a.get(0, "slices").as_int();
    if (n <= 0 || n > static_cast<int64_t>(kMaxItems))
      throw jinja_error("slice count must be 1..2^20");
    auto items = iterate(x);
    const size_t per = items.size() / static_cast<size_t>(n),
                 extra = items.size() % static_cast<size_t>(n);
    std::vector<value> out;
    size_t at = 0;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      const size_t len = per + (i < extra ? 1 : 0);
      out.push_back(value::list(std::vector<value>(items.begin() + static_cast<long>(at),
                                                   items.begin() + static_cast<long>(at + len))));
      at += len;
    }
    return value::list(std::move(out));
  }
  if (name == "batch") {
    const int64_t n = a.get(0, "linecount").as_int();
    if (n <= 0) throw jinja_error("batch size must be positive");
    auto items = iterate(x);
    std::vector<value> out;
    for (size_t i = 0; i < items.size(); i += static_cast<size_t>(n))
      out.push_back(value::list(std::vector<value>(
          items.begin() + static_cast<long>(i),
          items.begin() + static_cast<long>(std::min(items.size(), i + static_cast<size_t>(n))))));
    return value::list(std::move(out));
  }
  if (name == "center") {
    std::string s = to_str(x);
    const int64_t w = a.get(0, "width", value(int64_t{80})).as_int();
    const int64_t len = length(value(s)); // Python counts code points
    if (len >= w) return value(s);
    check_text(static_cast<size_t>(w));
    const int64_t marg = w - len, left = marg / 2 + (marg & w & 1); // CPython's str.center
    return value(std::string(static_cast<size_t>(left), ' ') + s +
                 std::string(static_cast<size_t>(marg - left), ' '));
  }
  if (name == "attr") return get_attr(x, to_str(a.get(0, "name")));
  if (name == "format") { // printf-style: %s %d %i %f %r %%, positional
    const std::string f = to_str(x);
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] != '%') {
        out += f[i];
        continue;
      }
      if (++i >= f.size()) throw jinja_error("format: a lone '%' at the end");
      const char k = f[i];
      if (k == '%') {
        out += '%';
        continue;
      }
      if (next >= a.args.size()) throw jinja_error("format: not enough arguments");
      const value& v = a.args[next++];
      if (k == 's')
        out += to_str(v);
      else if (k == 'r')
        out += repr(v);
      else if ((k == 'd' || k == 'i') && (v.is_number() || v.is_bool()))
        out += std::to_string(v.is_int()    ? v.as_int()
                              : v.is_bool() ? int64_t{v.as_bool()}
                                            : static_cast<int64_t>(v.as_double()));
      else if (k == 'f' && (v.is_number() || v.is_bool()))
        out += fmt::format("{:.6f}", v.is_bool() ? double(v.as_bool()) : v.as_double());
      else
        throw jinja_error(fmt::format("format: '%{}' is not supported (s, d, i, f, r)", k));
      check_text(out.size());
    }
    if (next != a.args.size()) throw jinja_error("format: not all arguments converted");
    return value(std::move(out));
  }
  throw jinja_error(fmt::format("unknown filter '{}'", name));
}

} // namespace troupe::jinja
