// builtins.cpp: jinja2's filters and tests, Python's str / dict / list methods and operators,
// as the published chat templates use them (transformers' tojson: ensure_ascii=False, no HTML
// escaping; the sandbox: lists and dicts cannot be modified).
#include "text/jinja/builtins.hpp"

#include "text/jinja/pystr.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/core.h>

namespace troupe::jinja {
namespace {

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
                        int64_t count = -1) {
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
  throw jinja_error(fmt::format("unknown filter '{}'", name));
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
