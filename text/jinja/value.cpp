// value.cpp: Python's truthiness, str(), repr(), json.dumps and == / < for jinja values.
#include "text/jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <tuple>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace troupe::jinja {

namespace {
uint16_t deeper_than(uint16_t inner) {
  if (inner >= value::kMaxDepth)
    throw jinja_error("a value nests too deeply (more than 512 levels)");
  return static_cast<uint16_t>(inner + 1);
}
} // namespace

value::value(list_ptr l)
    : v(std::move(l)) {
  uint16_t d = 0;
  for (const auto& e : as_list()) d = std::max(d, e.depth);
  depth = deeper_than(d);
}

value::value(dict_ptr p)
    : v(std::move(p)) {
  uint16_t d = 0;
  for (const auto& [k, e] : as_dict().items) d = std::max(d, e.depth);
  depth = deeper_than(d);
}

value& value::refresh_depth() {
  if (is_dict()) {
    uint16_t d = 0;
    for (const auto& [k, e] : as_dict().items) d = std::max(d, e.depth);
    depth = deeper_than(d);
  }
  return *this;
}

value value::list(std::vector<value> items) {
  return value(std::make_shared<std::vector<value>>(std::move(items)));
}

value dict::make(bool is_namespace) {
  auto d = std::make_shared<dict>();
  d->is_namespace = is_namespace;
  return value(std::move(d));
}

const value* dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

const value* dict::find(const value& key) const {
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

void dict::set(value key, value v) {
  for (auto& [k, old] : items)
    if (equal(k, key)) {
      old = std::move(v);
      return;
    }
  items.emplace_back(std::move(key), std::move(v));
}

value call_args::get(size_t n, std::string_view name, value fallback) const {
  if (n < args.size()) return args[n];
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return fallback;
}

bool value::truthy() const {
  switch (v.index()) {
  case 0:
  case 1:
    return false;
  case 2:
    return as_bool();
  case 3:
    return as_int() != 0;
  case 4:
    return std::get<double>(v) != 0.0;
  case 5:
    return !as_string().empty();
  case 6:
    return !as_list().empty();
  case 7:
    return !as_dict().items.empty();
  case 9:
    return !as_string().empty();
  default:
    return true;
  }
}

std::string_view value::type_name() const {
  switch (v.index()) {
  case 0:
    return "undefined";
  case 1:
    return "NoneType";
  case 2:
    return "bool";
  case 3:
    return "int";
  case 4:
    return "float";
  case 5:
    return "str";
  case 6:
    return "list";
  case 7:
    return as_dict().is_namespace ? "Namespace" : "dict";
  case 9:
    return "Markup";
  default:
    return "function";
  }
}

namespace {

/// Python's float repr: the shortest digits that read back, fixed notation for exponents in
/// [-4, 16), scientific otherwise ("1e-05", "1e+16"), always a '.0' on an integral fixed value.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    const size_t whole = static_cast<size_t>(exp) + 1;
    if (digits.size() <= whole) {
      out = digits + std::string(whole - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, whole) + "." + digits.substr(whole);
    }
  }
  return neg ? "-" + out : out;
}

std::string str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        out += fmt::format("\\u{:04x}", c);
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

struct json_writer {
  int indent;
  std::string_view item_sep, key_sep;
  bool sort_keys;
  std::string out;

  void newline(int depth) {
    out += '\n';
    out.append(static_cast<size_t>(indent * depth), ' ');
  }
  void write(const value& x, int depth) {
    if (depth > 512) throw jinja_error("tojson: the value nests too deeply");
    if (x.is_undefined() || x.is_none()) {
      out += "null";
    } else if (x.is_bool()) {
      out += x.as_bool() ? "true" : "false";
    } else if (x.is_int()) {
      out += std::to_string(x.as_int());
    } else if (x.is_float()) {
      const double d = x.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                             : float_repr(d);
    } else if (x.is_string()) {
      json_string(out, x.as_string());
    } else if (x.is_list()) {
      const auto& l = x.as_list();
      out += '[';
      if (l.empty()) {
        out += ']';
        return;
      }
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(depth + 1);
        write(l[i], depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += ']';
    } else if (x.is_dict()) {
      std::vector<std::pair<std::string, const value*>> items; // json.dumps: keys become text
      for (const auto& [k, v] : x.as_dict().items) {
        std::string key = k.is_string() ? k.as_string()
                          : k.is_bool() ? (k.as_bool() ? "true" : "false")
                          : k.is_none() ? "null"
                                        : repr(k);
        items.emplace_back(std::move(key), &v);
      }
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      if (items.empty()) {
        out += '}';
        return;
      }
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(depth + 1);
        json_string(out, items[i].first);
        out += key_sep;
        write(*items[i].second, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += '}';
    } else {
      throw jinja_error("tojson: a function is not JSON serializable");
    }
  }
};

} // namespace

std::string to_str(const value& x) {
  if (x.is_string()) return x.as_string();
  if (x.is_undefined()) return "";
  return repr(x);
}

namespace {
constexpr int kMaxDepth = 512; // nesting of values printed, compared or converted

void deeper(int depth) {
  if (depth > kMaxDepth) throw jinja_error("a value nests too deeply (more than 512 levels)");
}

std::string repr_at(const value& x, int depth);
bool equal_at(const value& a, const value& b, int depth);
bool less_at(const value& a, const value& b, int depth);
value from_json_at(const nlohmann::ordered_json& j, int depth);
} // namespace

std::string repr(const value& x) {
  return repr_at(x, 0);
}
bool equal(const value& a, const value& b) {
  return equal_at(a, b, 0);
}
bool less(const value& a, const value& b) {
  return less_at(a, b, 0);
}
value from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 0);
}

namespace {
std::string repr_at(const value& x, int depth) {
  deeper(depth);
  switch (x.v.index()) {
  case 0:
    return "";
  case 1:
    return "None";
  case 2:
    return x.as_bool() ? "True" : "False";
  case 3:
    return std::to_string(x.as_int());
  case 4:
    return float_repr(x.as_double());
  case 5:
    return str_repr(x.as_string());
  case 9:
    return "Markup(" + str_repr(x.as_string()) + ")";
  case 6: {
    std::string out = "[";
    const auto& l = x.as_list();
    for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + repr_at(l[i], depth + 1);
    return out + "]";
  }
  case 7: {
    const auto& d = x.as_dict();
    std::string out = d.is_namespace ? "<Namespace {" : "{";
    for (size_t i = 0; i < d.items.size(); ++i)
      out += (i ? ", " : "") + repr_at(d.items[i].first, depth + 1) + ": " +
             repr_at(d.items[i].second, depth + 1);
    return out + (d.is_namespace ? "}>" : "}");
  }
  default:
    return "<function>";
  }
}

bool equal_at(const value& a, const value& b, int depth) {
  deeper(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.is_bool() && b.is_number()) return equal_at(value(int64_t{a.as_bool()}), b, depth);
  if (b.is_bool() && a.is_number()) return equal_at(a, value(int64_t{b.as_bool()}), depth);
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.v.index() != b.v.index()) return false;
  switch (a.v.index()) {
  case 0:
  case 1:
    return true;
  case 2:
    return a.as_bool() == b.as_bool();
  case 5:
    return a.as_string() == b.as_string();
  case 6: {
    const auto &l = a.as_list(), &r = b.as_list();
    if (l.size() != r.size()) return false;
    for (size_t i = 0; i < l.size(); ++i)
      if (!equal_at(l[i], r[i], depth + 1)) return false;
    return true;
  }
  case 7: {
    const auto &l = a.as_dict(), &r = b.as_dict();
    if (l.items.size() != r.items.size()) return false;
    for (const auto& [k, v] : l.items) {
      const value* o = r.find(k);
      if (!o || !equal_at(v, *o, depth + 1)) return false;
    }
    return true;
  }
  default:
    return std::get<func_ptr>(a.v) == std::get<func_ptr>(b.v);
  }
}

bool less_at(const value& a, const value& b, int depth) {
  deeper(depth);
  auto num = [](const value& x) { return x.is_number() || x.is_bool(); };
  auto dbl = [](const value& x) { return x.is_bool() ? (x.as_bool() ? 1.0 : 0.0) : x.as_double(); };
  if (num(a) && num(b)) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    return dbl(a) < dbl(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const auto &l = a.as_list(), &r = b.as_list();
    for (size_t i = 0; i < l.size() && i < r.size(); ++i) {
      if (less_at(l[i], r[i], depth + 1)) return true;
      if (less_at(r[i], l[i], depth + 1)) return false;
    }
    return l.size() < r.size();
  }
  throw jinja_error(fmt::format("'<' not supported between instances of '{}' and '{}'",
                                a.type_name(), b.type_name()));
}

value from_json_at(const nlohmann::ordered_json& j, int depth) {
  deeper(depth);
  switch (j.type()) {
  case nlohmann::ordered_json::value_t::null:
    return value(none_t{});
  case nlohmann::ordered_json::value_t::boolean:
    return value(j.get<bool>());
  case nlohmann::ordered_json::value_t::number_integer:
    return value(j.get<int64_t>());
  case nlohmann::ordered_json::value_t::number_unsigned:
    if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw jinja_error("an integer beyond 64 bits (" + j.dump() + ")");
    return value(static_cast<int64_t>(j.get<uint64_t>()));
  case nlohmann::ordered_json::value_t::number_float:
    return value(j.get<double>());
  case nlohmann::ordered_json::value_t::string:
    return value(j.get<std::string>());
  case nlohmann::ordered_json::value_t::array: {
    std::vector<value> items;
    items.reserve(j.size());
    for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
    return value::list(std::move(items));
  }
  case nlohmann::ordered_json::value_t::object: {
    value d = dict::make();
    for (const auto& [k, e] : j.items())
      d.as_dict().items.emplace_back(value(k), from_json_at(e, depth + 1));
    return d.refresh_depth();
  }
  default:
    return value(none_t{});
  }
}

} // namespace

std::string to_json(const value& x, int indent, std::string_view item_sep, std::string_view key_sep,
                    bool sort_keys) {
  json_writer w{indent, item_sep, key_sep, sort_keys, {}};
  w.write(x, 0);
  return std::move(w.out);
}

} // namespace troupe::jinja
