// builtins.cpp: jinja2's tests, Python's str / dict / list methods and operators, attribute and
// item lookup, as the published chat templates use them (the sandbox: lists and dicts cannot
// be modified). The filters are filters.cpp; the helpers both use, builtins_impl.hpp.
#include "text/jinja/builtins.hpp"
#include "text/jinja/builtins_impl.hpp"

#include "text/jinja/pystr.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/core.h>

namespace troupe::jinja {
namespace detail {

[[noreturn]] void type_error(std::string_view what, const value& x) {
  throw jinja_error(fmt::format("{}: not supported for a value of type '{}'", what, x.type_name()));
}

void need_object(const value& x, std::string_view what) {
  if (x.is_undefined())
    throw jinja_error(x.as_undefined_name().empty()
                          ? fmt::format("undefined value has no attribute '{}'", what)
                          : fmt::format("'{}' is undefined", x.as_undefined_name()));
}

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string strip(const std::string& s, const value& chars, bool left, bool right) {
  if (chars.is_undefined() || chars.is_none()) return pystr::strip(s, nullptr, left, right);
  if (!chars.is_string()) type_error("strip", chars);
  return pystr::strip(s, &chars.as_string(), left, right);
}

std::vector<value> split(const std::string& s, const value& sep, int64_t maxsplit) {
  std::vector<value> out;
  if (sep.is_undefined() || sep.is_none()) {
    for (auto& part : pystr::split_whitespace(s, maxsplit)) out.emplace_back(std::move(part));
    return out;
  }
  if (!sep.is_string()) type_error("split", sep);
  const std::string& d = sep.as_string();
  if (d.empty()) throw jinja_error("split: empty separator");
  size_t i = 0;
  for (;;) {
    size_t j = s.find(d, i);
    if (j == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.emplace_back(s.substr(i));
      return out;
    }
    out.emplace_back(s.substr(i, j - i));
    i = j + d.size();
  }
}

std::vector<value> rsplit(const std::string& s, const value& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  if (sep.is_undefined() || sep.is_none()) throw jinja_error("rsplit without a separator");
  const std::string& d = sep.as_string();
  std::vector<value> out;
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < d.size()) break;
    size_t j = s.rfind(d, end - d.size());
    if (j == std::string::npos) break;
    out.emplace_back(s.substr(j + d.size(), end - j - d.size()));
    end = j;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

// Python's str.replace, in one pass (an empty `from` inserts `to` between code points)
std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  std::string out;
  int64_t n = 0;
  if (from.empty()) {
    for (size_t i = 0; i <= s.size(); ++n) {
      if (count < 0 || n < count) out += to;
      if (i == s.size()) break;
      size_t len = 1;
      while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
      out.append(s, i, len);
      i += len;
      check_text(out.size());
    }
    return out;
  }
  size_t i = 0;
  for (; count < 0 || n < count; ++n) {
    const size_t at = s.find(from, i);
    if (at == std::string::npos) break;
    out.append(s, i, at - i);
    out += to;
    i = at + from.size();
    check_text(out.size());
  }
  out.append(s, i, std::string::npos);
  check_text(out.size());
  return out;
}

std::string upper(const std::string& s) {
  return pystr::upper(s);
}
std::string lower(const std::string& s) {
  return pystr::lower(s);
}

bool starts_or_ends(const std::string& s, const value& what, bool start) {
  auto one = [&](const value& p) {
    if (!p.is_string()) type_error(start ? "startswith" : "endswith", p);
    const std::string& x = p.as_string();
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0
                 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (what.is_list()) {
    for (const auto& p : what.as_list())
      if (one(p)) return true;
    return false;
  }
  return one(what);
}

/// str.format with {} and {0} fields (the templates' only use).
std::string py_format(const std::string& f, const call_args& a) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (f[i] == '{') {
      size_t e = f.find('}', i);
      if (e == std::string::npos) throw jinja_error("format: unclosed '{'");
      std::string field = f.substr(i + 1, e - i - 1);
      value v;
      if (field.empty()) {
        v = a.get(next++, "\x01");
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        v = a.get(std::stoul(field), "\x01");
      } else {
        v = a.get(SIZE_MAX, field);
      }
      if (v.is_undefined())
        throw jinja_error(fmt::format("format: no argument for '{{{}}}'", field));
      out += to_str(v);
      i = e;
    } else {
      out += f[i];
    }
  }
  return out;
}

value bound(function f) {
  return value::func(std::move(f));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&#34;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

value string_method(const std::string& s, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return bound([s, name](call_args& a) {
      return value(strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
    });
  if (name == "split" || name == "rsplit")
    return bound([s, name](call_args& a) {
      value n = a.get(1, "maxsplit", value(int64_t{-1}));
      return value::list(name == "split" ? split(s, a.get(0, "sep"), n.as_int())
                                         : rsplit(s, a.get(0, "sep"), n.as_int()));
    });
  if (name == "startswith" || name == "endswith")
    return bound([s, name](call_args& a) {
      value from = a.get(1, "start"), to = a.get(2, "end");
      if (from.is_undefined() && to.is_undefined())
        return value(starts_or_ends(s, a.get(0, "prefix"), name == "startswith"));
      // str.startswith(prefix, start, end): within the slice s[start:end]
      const value part = get_slice(value(s), from, to, value::undefined());
      return value(starts_or_ends(part.as_string(), a.get(0, "prefix"), name == "startswith"));
    });
  if (name == "upper") return bound([s](call_args&) { return value(upper(s)); });
  if (name == "lower") return bound([s](call_args&) { return value(lower(s)); });
  if (name == "title") return bound([s](call_args&) { return value(pystr::title(s)); });
  if (name == "capitalize") return bound([s](call_args&) { return value(pystr::capitalize(s)); });
  if (name == "replace")
    return bound([s](call_args& a) {
      value from = a.get(0, "old"), to = a.get(1, "new"), n = a.get(2, "count", value(int64_t{-1}));
      if (!from.is_string() || !to.is_string()) throw jinja_error("replace takes two strings");
      return value(replace_all(s, from.as_string(), to.as_string(), n.as_int()));
    });
  if (name == "find" || name == "index" || name == "rfind")
    return bound([s, name](call_args& a) {
      value x = a.get(0, "sub");
      if (!x.is_string()) type_error(name, x);
      size_t i = name == "rfind" ? s.rfind(x.as_string()) : s.find(x.as_string());
      if (i == std::string::npos && name == "index") throw jinja_error("substring not found");
      // Python counts code points, as indexing and slicing here do
      return value(i == std::string::npos ? int64_t{-1} : pystr::index_of(s, i));
    });
  if (name == "count")
    return bound([s](call_args& a) {
      value x = a.get(0, "sub");
      if (!x.is_string() || x.as_string().empty()) type_error("count", x);
      int64_t n = 0;
      for (size_t i = s.find(x.as_string()); i != std::string::npos;
           i = s.find(x.as_string(), i + x.as_string().size()))
        ++n;
      return value(n);
    });
  if (name == "format") return bound([s](call_args& a) { return value(py_format(s, a)); });
  if (name == "join")
    return bound([s](call_args& a) {
      std::string out;
      bool first = true;
      for (const auto& x : iterate(a.get(0, "iterable"))) {
        if (!first) out += s;
        first = false;
        out += to_str(x);
      }
      return value(std::move(out));
    });
  if (name == "splitlines")
    return bound([s](call_args& a) {
      std::vector<value> out;
      for (auto& l : pystr::splitlines(s, a.get(0, "keepends", value(false)).truthy()))
        out.emplace_back(std::move(l));
      return value::list(std::move(out));
    });
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum")
    return bound([s, name](call_args&) {
      if (s.empty()) return value(false);
      for (unsigned char c : s) {
        bool ok = name == "isdigit"   ? std::isdigit(c)
                  : name == "isspace" ? std::isspace(c)
                  : name == "isalpha" ? std::isalpha(c)
                                      : std::isalnum(c);
        if (!ok) return value(false);
      }
      return value(true);
    });
  if (name == "removeprefix" || name == "removesuffix")
    return bound([s, name](call_args& a) {
      value x = a.get(0, "prefix");
      if (!x.is_string()) type_error(name, x);
      const std::string& p = x.as_string();
      if (name == "removeprefix" && starts_or_ends(s, x, true)) return value(s.substr(p.size()));
      if (name == "removesuffix" && !p.empty() && starts_or_ends(s, x, false))
        return value(s.substr(0, s.size() - p.size()));
      return value(s);
    });
  return value::undefined(fmt::format("'str' object has no attribute '{}'", name));
}

value dict_method(const value& d, const std::string& name) {
  if (name == "items")
    return bound([d](call_args&) {
      std::vector<value> out;
      for (const auto& [k, v] : d.as_dict().items) out.push_back(value::list({k, v}));
      return value::list(std::move(out));
    });
  if (name == "keys")
    return bound([d](call_args&) {
      std::vector<value> out;
      for (const auto& kv : d.as_dict().items) out.emplace_back(kv.first);
      return value::list(std::move(out));
    });
  if (name == "values")
    return bound([d](call_args&) {
      std::vector<value> out;
      for (const auto& kv : d.as_dict().items) out.push_back(kv.second);
      return value::list(std::move(out));
    });
  if (name == "get")
    return bound([d](call_args& a) {
      value k = a.get(0, "key");
      const value* v = d.as_dict().find(k);
      return v ? *v : a.get(1, "default", value(none_t{}));
    });
  if (name == "pop" || name == "update" || name == "setdefault" || name == "clear" ||
      name == "popitem")
    return bound([name](call_args&) -> value {
      throw jinja_error(fmt::format("dict.{}: the template may not modify a dict", name));
    });
  return value::undefined(fmt::format("'dict' object has no attribute '{}'", name));
}

value list_method(const value& l, const std::string& name) {
  if (name == "append" || name == "pop" || name == "extend" || name == "insert" ||
      name == "remove" || name == "sort" || name == "reverse" || name == "clear")
    return bound([name](call_args&) -> value {
      throw jinja_error(fmt::format("list.{}: the template may not modify a list", name));
    });
  if (name == "index" || name == "count")
    return bound([l, name](call_args& a) {
      value x = a.get(0, "value");
      int64_t n = 0;
      const auto& items = l.as_list();
      for (size_t i = 0; i < items.size(); ++i)
        if (equal(items[i], x)) {
          if (name == "index") return value(static_cast<int64_t>(i));
          ++n;
        }
      if (name == "index") throw jinja_error("list.index: value not in list");
      return value(n);
    });
  return value::undefined(fmt::format("'list' object has no attribute '{}'", name));
}

int64_t to_index(const value& k, size_t size, bool clamp) {
  if (!k.is_int() && !k.is_bool()) type_error("index", k);
  int64_t i = k.is_bool() ? k.as_bool() : k.as_int();
  const auto n = static_cast<int64_t>(size);
  if (i < 0) i += n;
  if (clamp) i = std::clamp<int64_t>(i, 0, n);
  return i;
}

int64_t length(const value& x) {
  if (x.is_string()) {
    int64_t n = 0; // Python counts code points
    for (unsigned char c : x.as_string()) n += (c & 0xC0) != 0x80;
    return n;
  }
  if (x.is_list()) return static_cast<int64_t>(x.as_list().size());
  if (x.is_dict()) return static_cast<int64_t>(x.as_dict().items.size());
  if (x.is_undefined()) return 0;
  type_error("length", x);
}

value attribute_path(const value& x, const value& path) {
  // jinja2's attribute= argument: "a.b" walks; an integer part indexes
  if (path.is_int()) return get_item(x, path);
  value cur = x;
  std::string p = to_str(path);
  size_t i = 0;
  for (;;) {
    size_t j = p.find('.', i);
    std::string part = p.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit))
      cur = get_item(cur, value(static_cast<int64_t>(std::stoll(part))));
    else
      cur = get_item(cur, value(part));
    if (j == std::string::npos) return cur;
    i = j + 1;
  }
}

call_args rest_args(const call_args& a, size_t from) {
  call_args r;
  for (size_t i = from; i < a.args.size(); ++i) r.args.push_back(a.args[i]);
  return r;
}

} // namespace detail

using namespace detail;

void check_text(size_t bytes) {
  if (bytes > kMaxText) throw jinja_error("the template builds a string of more than 64 MiB");
}

void check_items(size_t n) {
  if (n > kMaxItems) throw jinja_error("the template builds a list of more than 1 Mi items");
}

std::vector<value> iterate(const value& x) {
  if (x.is_list()) return x.as_list();
  if (x.is_dict()) {
    std::vector<value> out;
    for (const auto& kv : x.as_dict().items) out.emplace_back(kv.first);
    return out;
  }
  if (x.is_string()) {
    std::vector<value> out;
    const std::string& s = x.as_string();
    for (size_t i = 0; i < s.size();) {
      size_t n = 1;
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0xF0)
        n = 4;
      else if (c >= 0xE0)
        n = 3;
      else if (c >= 0xC0)
        n = 2;
      out.emplace_back(s.substr(i, n));
      i += n;
    }
    return out;
  }
  if (x.is_undefined()) return {};
  type_error("iteration", x);
}

value get_attr(const value& obj, const std::string& name) {
  need_object(obj, name);
  if (obj.is_dict()) {
    if (obj.as_dict().is_namespace) {
      const value* v = obj.as_dict().find(std::string_view(name));
      return v ? *v : value::undefined();
    }
    if (value m = dict_method(obj, name); !m.is_undefined()) return m;
    const value* v = obj.as_dict().find(std::string_view(name));
    return v ? *v : value::undefined();
  }
  if (obj.is_string()) return string_method(obj.as_string(), name);
  if (obj.is_list()) return list_method(obj, name);
  return value::undefined();
}

value get_item(const value& obj, const value& key) {
  need_object(obj, key.is_string() ? key.as_string() : repr(key));
  if (obj.is_dict()) {
    if (const value* v = obj.as_dict().find(key)) return *v;
    if (key.is_string() && !obj.as_dict().is_namespace) return dict_method(obj, key.as_string());
    return value::undefined();
  }
  if (obj.is_list()) {
    if (key.is_string()) return list_method(obj, key.as_string());
    int64_t i = to_index(key, obj.as_list().size(), false);
    if (i < 0 || i >= static_cast<int64_t>(obj.as_list().size())) return value::undefined();
    return obj.as_list()[static_cast<size_t>(i)];
  }
  if (obj.is_string()) {
    if (key.is_string()) return string_method(obj.as_string(), key.as_string());
    auto chars = iterate(obj);
    int64_t i = to_index(key, chars.size(), false);
    if (i < 0 || i >= static_cast<int64_t>(chars.size())) return value::undefined();
    return chars[static_cast<size_t>(i)];
  }
  return value::undefined();
}

value get_slice(const value& obj, const value& start, const value& stop, const value& step) {
  need_object(obj, "[:]");
  std::vector<value> items;
  if (obj.is_list())
    items = obj.as_list();
  else if (obj.is_string())
    items = iterate(obj);
  else
    type_error("slicing", obj);
  const auto n = static_cast<int64_t>(items.size());
  const int64_t st = step.is_undefined() || step.is_none() ? 1 : step.as_int();
  if (st == 0) throw jinja_error("slice step cannot be zero");
  auto bound_of = [&](const value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    return st > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = bound_of(start, st > 0 ? 0 : n - 1);
  const int64_t e = bound_of(stop, st > 0 ? n : -1);
  std::vector<value> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(items[static_cast<size_t>(i)]);
  if (obj.is_string()) {
    std::string s;
    for (const auto& c : out) s += c.as_string();
    return value(std::move(s));
  }
  return value::list(std::move(out));
}

bool call_test(std::string_view name, const value& x, call_args& a) {
  if (name == "defined") return !x.is_undefined();
  if (name == "undefined") return x.is_undefined();
  if (name == "none") return x.is_none();
  if (name == "string") return x.is_string();
  if (name == "mapping") return x.is_dict() && !x.as_dict().is_namespace;
  if (name == "iterable") return x.is_list() || x.is_dict() || x.is_string() || x.is_undefined();
  if (name == "sequence") return x.is_list() || x.is_dict() || x.is_string() || x.is_undefined();
  if (name == "number") return x.is_number() || x.is_bool();
  if (name == "integer") return x.is_int();
  if (name == "float") return x.is_float();
  if (name == "boolean") return x.is_bool();
  if (name == "true") return x.is_bool() && x.as_bool();
  if (name == "false") return x.is_bool() && !x.as_bool();
  if (name == "callable") return x.is_func();
  if (name == "odd" || name == "even") {
    if (!x.is_int()) type_error(name, x);
    return (((x.as_int() % 2) + 2) % 2 == 1) == (name == "odd");
  }
  if (name == "divisibleby") {
    value d = a.get(0, "num");
    if (!x.is_int() || !d.is_int() || d.as_int() == 0) type_error(name, x);
    return x.as_int() % d.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(x, a.get(0, "other"));
  if (name == "ne" || name == "!=") return !equal(x, a.get(0, "other"));
  if (name == "lt" || name == "lessthan" || name == "<") return less(x, a.get(0, "other"));
  if (name == "gt" || name == "greaterthan" || name == ">") return less(a.get(0, "other"), x);
  if (name == "le" || name == "<=") return !less(a.get(0, "other"), x);
  if (name == "ge" || name == ">=") return !less(x, a.get(0, "other"));
  if (name == "in") return binary_op("in", x, a.get(0, "seq")).as_bool();
  if (name == "sameas") {
    value o = a.get(0, "other");
    if (x.is_none() || x.is_bool() || o.is_none() || o.is_bool())
      return equal(x, o) && x.v.index() == o.v.index();
    return x.v.index() == o.v.index() && equal(x, o) && (x.is_int() || x.is_string());
  }
  if (name == "lower") return x.is_string() && lower(x.as_string()) == x.as_string();
  if (name == "upper") return x.is_string() && upper(x.as_string()) == x.as_string();
  throw jinja_error(fmt::format("unknown test '{}'", name));
}

value binary_op(std::string_view op, const value& a, const value& b) {
  if (op == "~") {
    std::string l = to_str(a), r = to_str(b);
    check_text(l.size() + r.size());
    return value(l + r);
  }
  if (op == "==") return value(equal(a, b));
  if (op == "!=") return value(!equal(a, b));
  if (op == "<") return value(less(a, b));
  if (op == ">") return value(less(b, a));
  if (op == "<=") return value(!less(b, a));
  if (op == ">=") return value(!less(a, b));
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) type_error("'in <string>'", a);
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_dict()) {
      found = b.as_dict().find(a) != nullptr;
    } else if (b.is_list()) {
      for (const auto& e : b.as_list()) found = found || equal(e, a);
    } else if (!b.is_undefined()) {
      type_error("'in'", b);
    }
    return value(op == "in" ? found : !found);
  }
  auto numeric = [](const value& x) { return x.is_number() || x.is_bool(); };
  auto as_num = [](const value& x) { return x.is_bool() ? value(int64_t{x.as_bool()}) : x; };
  if (op == "+") {
    if (a.is_markup() || b.is_markup()) {
      if (!a.is_string() || !b.is_string())
        throw jinja_error(fmt::format("unsupported operand type(s) for +: '{}' and '{}'",
                                      a.type_name(), b.type_name()));
      auto safe = [](const value& x) {
        return x.is_markup() ? x.as_string() : html_escape(x.as_string());
      };
      return value::markup(safe(a) + safe(b));
    }
    if (a.is_string() && b.is_string()) return value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      auto out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return value::list(std::move(out));
    }
  }
  if (op == "*") {
    const value& s = a.is_string() || a.is_list() ? a : b;
    const value& n = &s == &a ? b : a;
    if ((s.is_string() || s.is_list()) && n.is_int()) {
      const auto times = static_cast<size_t>(std::max<int64_t>(n.as_int(), 0));
      const size_t unit = s.is_string() ? s.as_string().size() : s.as_list().size();
      if (unit > 0 && times > (s.is_string() ? kMaxText : kMaxItems) / unit)
        s.is_string() ? check_text(kMaxText + 1) : check_items(kMaxItems + 1);
      if (s.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n.as_int(); ++i) out += s.as_string();
        return value(std::move(out));
      }
      std::vector<value> out;
      for (int64_t i = 0; i < n.as_int(); ++i)
        out.insert(out.end(), s.as_list().begin(), s.as_list().end());
      return value::list(std::move(out));
    }
  }
  if (!numeric(a) || !numeric(b))
    throw jinja_error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op,
                                  a.type_name(), b.type_name()));
  const value x = as_num(a), y = as_num(b);
  const bool ints = x.is_int() && y.is_int();
  // Python's integers do not wrap: past 64 bits is an error here, not a wrong number
  if (ints && (op == "+" || op == "-" || op == "*")) {
    int64_t r = 0;
    const bool over = op == "+"   ? __builtin_add_overflow(x.as_int(), y.as_int(), &r)
                      : op == "-" ? __builtin_sub_overflow(x.as_int(), y.as_int(), &r)
                                  : __builtin_mul_overflow(x.as_int(), y.as_int(), &r);
    if (over) throw jinja_error(fmt::format("integer {} overflows 64 bits", op));
    return value(r);
  }
  if (op == "+") return value(x.as_double() + y.as_double());
  if (op == "-") return value(x.as_double() - y.as_double());
  if (op == "*") return value(x.as_double() * y.as_double());
  if (op == "/") {
    if (y.as_double() == 0) throw jinja_error("division by zero");
    return value(x.as_double() / y.as_double());
  }
  if (op == "//" || op == "%") {
    if (y.as_double() == 0) throw jinja_error("integer division or modulo by zero");
    if (ints) {
      int64_t q = x.as_int() / y.as_int(), r = x.as_int() % y.as_int();
      if (r != 0 && ((r < 0) != (y.as_int() < 0))) {
        --q;
        r += y.as_int();
      }
      return op == "//" ? value(q) : value(r);
    }
    const double q = std::floor(x.as_double() / y.as_double());
    return op == "//" ? value(q) : value(x.as_double() - q * y.as_double());
  }
  if (op == "**") {
    if (ints && y.as_int() >= 0) {
      int64_t p = 1;
      for (int64_t k = 0; k < y.as_int(); ++k) {
        if (__builtin_mul_overflow(p, x.as_int(), &p))
          throw jinja_error("integer ** overflows 64 bits");
        if (p == 0 || p == 1) break; // 0 ** n, 1 ** n
        if (p == -1) {               // (-1) ** n
          if ((y.as_int() - k - 1) % 2 == 1) p = 1;
          break;
        }
      }
      return value(p);
    }
    return value(std::pow(x.as_double(), y.as_double()));
  }
  throw jinja_error(fmt::format("unknown operator '{}'", op));
}

} // namespace troupe::jinja
