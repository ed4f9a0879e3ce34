// json_schema.cpp: compile_response_format (json_schema.hpp): a JSON Schema walked once into
// json_node rules, $refs resolved through a table so a recursive schema becomes a cycle of
// node indices.
#include "text/json_schema.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe {

namespace {

using json = nlohmann::json;

// Keywords that only describe (they change no document's validity).
const std::set<std::string> annotations = {
    "title",  "description", "default",     "examples",     "$schema",
    "$id",    "$comment",    "deprecated",  "readOnly",     "writeOnly",
    "strict", "$defs",       "definitions", "discriminator"}; // OpenAPI's hint for a oneOf
                                                              // (pydantic writes it): no validity
                                                              // of its own
const std::set<std::string> implemented = {
    "type",      "properties", "required", "additionalProperties",
    "items",     "minItems",   "maxItems", "enum",
    "const",     "anyOf",      "oneOf",    "$ref",
    "minLength", "maxLength"};

} // namespace

namespace {
template <class Json>
int nesting_of(const Json& j) {
  int deepest = 0;
  std::vector<std::pair<const Json*, int>> todo = {{&j, 1}};
  while (!todo.empty()) {
    auto [v, d] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d);
    if (d > 1000) return d; // deep enough to refuse; no need to look further
    for (const auto& e : *v) todo.push_back({&e, d + 1});
  }
  return deepest;
}
} // namespace

int json_nesting(const json& j) {
  return nesting_of(j);
}
int json_nesting(const nlohmann::ordered_json& j) {
  return nesting_of(j);
}

int json_first_class(uint8_t c) {
  return c == 'n'               ? 1
         : c == 't'             ? 2
         : c >= '0' && c <= '9' ? 4
         : c == '"'             ? 8
         : c == '['             ? 16
         : c == '{'             ? 32
         : c == 'f'             ? 64
         : c == '-'             ? 128
                                : 0;
}

int json_node_classes(const json_schema& s, int32_t i, int depth) {
  const json_node& x = s.nodes[static_cast<size_t>(i)];
  if (x.never || x.alias >= 0 || depth > 64) return 0;
  int c = 0;
  for (int32_t b : x.branches) c |= json_node_classes(s, b, depth + 1);
  for (const auto& l : x.literals)
    c |= l.empty() ? 0 : json_first_class(static_cast<uint8_t>(l[0]));
  if (!x.branches.empty() || !x.literals.empty()) return c;
  if (x.types & json_node::t_null) c |= 1;
  if (x.types & json_node::t_bool) c |= 2 | 64;
  if (x.types & (json_node::t_int | json_node::t_num)) c |= 4 | 128;
  if (x.types & json_node::t_str) c |= 8;
  if (x.types & json_node::t_arr) c |= 16;
  if (x.types & json_node::t_obj) c |= 32;
  return c;
}

namespace {

// The type bit of a JSON value (an integral number is an integer, as JSON Schema counts).
uint8_t type_of(const json& v) {
  if (v.is_null()) return json_node::t_null;
  if (v.is_boolean()) return json_node::t_bool;
  if (v.is_number_integer() || v.is_number_unsigned()) return json_node::t_int;
  if (v.is_number_float())
    return v.get<double>() == std::floor(v.get<double>()) ? json_node::t_int : json_node::t_num;
  if (v.is_string()) return json_node::t_str;
  if (v.is_array()) return json_node::t_arr;
  return json_node::t_obj;
}

// Characters (code points) of a UTF-8 string.
int32_t chars_of(const std::string& s) {
  int32_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xc0) != 0x80;
  return n;
}

std::string quoted_body(const std::string& name) {
  const std::string q = json(name).dump();
  return q.substr(1, q.size() - 2);
}

struct compiler {
  const json& doc;
  json_schema out;
  std::map<std::string, int32_t> refs;
  std::set<int32_t> pending; // $refs whose schema is being compiled
  int depth = 0;

  error bad(const std::string& where, const std::string& what) {
    return make_error(errc::invalid_argument, "response_format schema{}: {}", where, what);
  }

  int32_t add() {
    out.nodes.emplace_back();
    return static_cast<int32_t>(out.nodes.size() - 1);
  }

  expected<int32_t> ref(const std::string& r, const std::string& where) {
    if (auto it = refs.find(r); it != refs.end()) return it->second;
    const json* target = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (r.rfind(p, 0) != 0) continue;
      const std::string name = r.substr(p.size());
      const std::string key = p.substr(2, p.size() - 3);
      if (doc.contains(key) && doc[key].is_object() && doc[key].contains(name))
        target = &doc[key][name];
    }
    if (!target)
      return make_error(errc::invalid_argument,
                        "response_format schema{}: $ref '{}' is not one of #/$defs/NAME or "
                        "#/definitions/NAME of this schema",
                        where, r);
    const int32_t id = add();
    refs[r] = id; // before compiling: a recursive reference finds it
    pending.insert(id);
    auto n = node(*target, r.substr(1));
    pending.erase(id);
    if (!n) return n.error();
    out.nodes[static_cast<size_t>(id)].alias = *n; // resolved once everything is compiled
    return id;
  }

  // enum / const filtered by the type and length keywords beside them
  status literals(const json& s, const std::string& where, json_node& n) {
    std::vector<json> values;
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        return bad(where, "enum must be a non-empty list");
      for (const auto& v : s["enum"]) values.push_back(v);
    }
    if (s.contains("const")) {
      const json& c = s["const"];
      if (s.contains("enum") &&
          std::none_of(values.begin(), values.end(), [&](const json& v) { return v == c; }))
        values.clear(); // const outside the enum: nothing fits
      else
        values = {c};
    }
    for (const char* k :
         {"properties", "required", "additionalProperties", "items", "minItems", "maxItems"})
      if (s.contains(k))
        return bad(where, std::string("'") + k + "' beside enum / const is not supported");
    for (const auto& v : values) {
      // every number inside the value too (it is written back as a double prints it)
      std::vector<const json*> todo = {&v};
      while (!todo.empty()) {
        const json* x = todo.back();
        todo.pop_back();
        if (x->is_number_float() && std::fabs(x->get<double>()) >= 9007199254740992.0)
          return bad(where, "enum / const number " + x->dump() +
                                " is past the integers a double holds exactly");
        if (x->is_structured())
          for (const auto& e : *x) todo.push_back(&e);
      }
      const uint8_t t = type_of(v);
      if (s.contains("type") && !(n.types & t) &&
          !(t == json_node::t_int && (n.types & json_node::t_num)))
        continue;
      if (t == json_node::t_str) {
        const int32_t len = chars_of(v.get<std::string>());
        if (len < n.min_length || len > n.max_length) continue;
      }
      const std::string text = v.dump();
      if (std::find(n.literals.begin(), n.literals.end(), text) == n.literals.end())
        n.literals.push_back(text);
    }
    if (n.literals.size() > 64) return bad(where, "more than 64 enum values");
    if (n.literals.empty()) n.never = true;
    return {};
  }

  // anyOf / oneOf: the union keeps its branches and the grammar takes the one the value's first
  // character says (their first characters are checked to differ once every $ref is resolved:
  // a branch may name the schema being defined)
  expected<json_node> union_of(const json& s, const char* key, const std::string& where) {
    for (const auto& [k, v] : s.items())
      if (k != key && k != "$defs" && k != "definitions" && !annotations.count(k))
        return bad(where, "'" + k + "' beside " + key + " is not supported");
    if (!s[key].is_array() || s[key].empty())
      return bad(where, std::string(key) + " must be a non-empty list");
    // the branches as the rules they name; enum / const ones (and ones no value fits) are
    // merged into one enum, so that pydantic's Literal["x"] | Literal["y"] | None is not an
    // overlap of two strings; all of them: the union is that enum
    std::vector<int32_t> lits, rest;
    for (size_t b = 0; b < s[key].size(); ++b) {
      auto id = node(s[key][b], where + "/" + key + "/" + std::to_string(b));
      if (!id) return id.error();
      int32_t at = *id;
      for (size_t steps = 0; out.nodes[static_cast<size_t>(at)].alias >= 0 && !pending.count(at);
           ++steps) {
        if (steps > out.nodes.size())
          return bad(where, "a cycle of $refs that never reaches a schema");
        at = out.nodes[static_cast<size_t>(at)].alias;
      }
      const json_node& br = out.nodes[static_cast<size_t>(at)];
      const bool literal =
          !pending.count(at) && br.branches.empty() && (!br.literals.empty() || br.never);
      (literal ? lits : rest).push_back(at);
    }
    json_node one;
    // oneOf: a value valid under two branches is valid under none; values compare as JSON
    // does (1 and 1.0 are one number), not as text
    std::vector<json> all;
    for (int32_t b : lits)
      for (const auto& l : out.nodes[static_cast<size_t>(b)].literals)
        all.push_back(json::parse(l));
    auto under = [&](const json& v) {
      int n = 0;
      for (int32_t b : lits) {
        bool in = false;
        for (const auto& l : out.nodes[static_cast<size_t>(b)].literals)
          in = in || json::parse(l) == v;
        n += in;
      }
      return n;
    };
    for (int32_t b : lits)
      for (const auto& l : out.nodes[static_cast<size_t>(b)].literals)
        if ((std::string(key) != "oneOf" || under(json::parse(l)) == 1) &&
            std::find(one.literals.begin(), one.literals.end(), l) == one.literals.end())
          one.literals.push_back(l);
    if (one.literals.size() > 64) return bad(where, "more than 64 enum values");
    one.never = one.literals.empty();
    if (rest.empty()) return one;
    if (!lits.empty()) {
      const int32_t id = add();
      out.nodes[static_cast<size_t>(id)] = std::move(one);
      rest.push_back(id);
    }
    json_node merged;
    merged.types = 0;
    merged.branches = std::move(rest);
    merged.exclusive = std::string(key) == "oneOf";
    return merged;
  }

  expected<int32_t> node(const json& s, const std::string& where) {
    if (++depth > 64) return bad(where, "nested more than 64 deep");
    struct leave {
      int& d;
      ~leave() { --d; }
    } guard{depth};
    if (s.is_boolean()) return s.get<bool>() ? 0 : never_node(); // false: no value fits
    if (!s.is_object()) return bad(where, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items())
      if (!annotations.count(k) && !implemented.count(k))
        return bad(where, "'" + k +
                              "' is not supported (supported: type, properties, required, "
                              "additionalProperties, items, minItems, maxItems, enum, "
                              "const, anyOf, oneOf, $ref, minLength, maxLength)");
    if (s.contains("$ref")) {
      for (const auto& [k, v] : s.items())
        if (k != "$ref" && !annotations.count(k))
          return bad(where, "'" + k + "' beside $ref is not supported");
      if (!s["$ref"].is_string()) return bad(where, "$ref must be a string");
      return ref(s["$ref"].get<std::string>(), where);
    }
    json_node n;
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        if (s.contains("anyOf") && s.contains("oneOf"))
          return bad(where, "anyOf beside oneOf is not supported");
        auto u = union_of(s, key, where);
        if (!u) return u.error();
        const int32_t id = add();
        out.nodes[static_cast<size_t>(id)] = std::move(*u);
        return id;
      }
    if (s.contains("type")) {
      const json& t = s["type"];
      std::vector<std::string> names;
      if (t.is_string())
        names.push_back(t.get<std::string>());
      else if (t.is_array())
        for (const auto& e : t) {
          if (!e.is_string()) return bad(where, "type must be a string or a list of strings");
          names.push_back(e.get<std::string>());
        }
      else
        return bad(where, "type must be a string or a list of strings");
      n.types = 0;
      for (const auto& name : names) {
        if (name == "null")
          n.types |= json_node::t_null;
        else if (name == "boolean")
          n.types |= json_node::t_bool;
        else if (name == "integer")
          n.types |= json_node::t_int;
        else if (name == "number")
          n.types |= json_node::t_num;
        else if (name == "string")
          n.types |= json_node::t_str;
        else if (name == "array")
          n.types |= json_node::t_arr;
        else if (name == "object")
          n.types |= json_node::t_obj;
        else
          return bad(where, "unknown type '" + name + "'");
      }
      if (n.types & json_node::t_num) n.types &= static_cast<uint8_t>(~json_node::t_int);
    } else if (s.contains("properties") || s.contains("additionalProperties") ||
               s.contains("required")) {
      n.types = json_node::t_obj;
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      n.types = json_node::t_arr;
    }
    auto count = [&](const char* key, int32_t& v) -> status {
      if (!s.contains(key)) return {};
      const json& x = s[key]; // 2.0 is a whole number too
      if (!x.is_number() || x.get<double>() < 0 || x.get<double>() > INT32_MAX ||
          x.get<double>() != std::floor(x.get<double>()))
        return bad(where, std::string(key) + " must be a whole number >= 0");
      v = static_cast<int32_t>(x.get<double>());
      return {};
    };
    if (auto st = count("minItems", n.min_items); !st) return st.error();
    if (auto st = count("maxItems", n.max_items); !st) return st.error();
    if (auto st = count("minLength", n.min_length); !st) return st.error();
    if (auto st = count("maxLength", n.max_length); !st) return st.error();
    if (n.min_items > n.max_items || n.min_length > n.max_length)
      return bad(where, "a minimum above its maximum allows no value");
    if (s.contains("enum") || s.contains("const")) {
      if (auto st = literals(s, where, n); !st) return st.error();
      const int32_t id = add();
      out.nodes[static_cast<size_t>(id)] = std::move(n);
      return id;
    }
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        n.additional = a.get<bool>() ? 0 : -1;
      } else {
        auto id = node(a, where + "/additionalProperties");
        if (!id) return id.error();
        n.additional = *id;
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return bad(where, "properties must be an object");
      if (s["properties"].size() > 64) return bad(where, "more than 64 properties");
      for (const auto& [name, sub] : s["properties"].items()) {
        n.keys.push_back(quoted_body(name));
        auto id = node(sub, where + "/properties/" + name);
        if (!id) return id.error();
        n.key_nodes.push_back(*id);
      }
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) return bad(where, "required must be a list of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return bad(where, "required must be a list of names");
        const std::string key = quoted_body(r.get<std::string>());
        size_t i = 0;
        while (i < n.keys.size() && n.keys[i] != key) ++i;
        if (i == n.keys.size()) { // required but not described: a key whose value is any
          if (n.keys.size() == 64) return bad(where, "more than 64 properties");
          n.keys.push_back(key); // with no other keys allowed, no value fits it
          n.key_nodes.push_back(n.additional >= 0 ? n.additional : never_node());
        }
        n.required |= uint64_t{1} << i;
      }
    }
    if (s.contains("items")) {
      if (s["items"].is_array()) return bad(where, "items as a list (tuples) is not supported");
      auto id = node(s["items"], where + "/items");
      if (!id) return id.error();
      n.items = *id;
    }
    const int32_t id = add();
    out.nodes[static_cast<size_t>(id)] = std::move(n);
    return id;
  }

  int32_t never_node() {
    const int32_t id = add();
    out.nodes[static_cast<size_t>(id)].types = 0;
    out.nodes[static_cast<size_t>(id)].never = true;
    return id;
  }

  // $ref nodes replaced by the nodes they name; a cycle of $refs alone names none
  status resolve_aliases(int32_t& root) {
    const auto n = static_cast<int32_t>(out.nodes.size());
    auto target = [&](int32_t i) -> int32_t {
      for (int32_t steps = 0; i >= 0 && out.nodes[static_cast<size_t>(i)].alias >= 0; ++steps) {
        if (steps > n) return -1;
        i = out.nodes[static_cast<size_t>(i)].alias;
      }
      return i;
    };
    auto fix = [&](int32_t& i) -> status {
      if (i < 0) return {};
      const int32_t t = target(i);
      if (t < 0) return bad("", "a cycle of $refs that never reaches a schema");
      i = t;
      return {};
    };
    for (auto& node : out.nodes) {
      for (auto& k : node.key_nodes)
        if (auto st = fix(k); !st) return st;
      for (auto& b : node.branches)
        if (auto st = fix(b); !st) return st;
      if (auto st = fix(node.items); !st) return st;
      if (auto st = fix(node.additional); !st) return st;
    }
    return fix(root);
  }

  // What fits, as the least fixpoint (a rule that needs itself forever is empty): per node the
  // type bits a value can be completed in (bit 7: an enum value), then the bits that cannot
  // are taken off, a node with none left is never, and unions are checked to start apart.
  // Whether a union's branches are objects that one required key tells apart: each holds
  // it, each requires it, each allows only literal values there, and no value is in two
  // (pydantic's discriminated unions: "pet_type": const "cat" / const "dog"). Then no
  // document fits two, and a oneOf may be read as an anyOf.
  bool told_apart(const json_node& u) const {
    auto real = [&](int32_t i) {
      for (size_t n = 0; out.nodes[static_cast<size_t>(i)].alias >= 0 && n <= out.nodes.size(); ++n)
        i = out.nodes[static_cast<size_t>(i)].alias;
      return &out.nodes[static_cast<size_t>(i)];
    };
    std::vector<const json_node*> objs;
    int others = 0; // the other branches' first characters: they must not meet
    for (int32_t b : u.branches) {
      const json_node* n = real(b);
      if (n->never) continue;
      const int c = json_node_classes(out, b);
      if (n->types == json_node::t_obj && n->literals.empty() && n->branches.empty()) {
        objs.push_back(n);
        continue;
      }
      if (c & (others | 32)) return false;
      others |= c;
    }
    if (objs.size() < 2) return true;
    for (size_t k = 0; k < objs[0]->keys.size() && k < 64; ++k) {
      const std::string& key = objs[0]->keys[k];
      std::vector<json> values;
      bool ok = true;
      for (const json_node* o : objs) {
        const auto at = std::find(o->keys.begin(), o->keys.end(), key);
        const size_t i = static_cast<size_t>(at - o->keys.begin());
        if (at == o->keys.end() || i >= 64 || !((o->required >> i) & 1)) {
          ok = false;
          break;
        }
        const json_node* v = real(o->key_nodes[i]);
        if (v->literals.empty() || !v->branches.empty()) {
          ok = false;
          break;
        }
        for (const auto& l : v->literals) {
          const json j = json::parse(l);
          if (std::find(values.begin(), values.end(), j) != values.end()) ok = false;
          values.push_back(j);
        }
        if (!ok) break;
      }
      if (ok) return true;
    }
    return false;
  }

  status mark_never() {
    const size_t n = out.nodes.size();
    std::vector<uint8_t> fits(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < n; ++i) {
        const json_node& x = out.nodes[i];
        if (x.never || x.alias >= 0) continue;
        uint8_t f = 0;
        if (!x.literals.empty()) f |= 0x80;
        f |= x.types & (json_node::t_null | json_node::t_bool | json_node::t_int |
                        json_node::t_num | json_node::t_str);
        if ((x.types & json_node::t_arr) &&
            (x.min_items == 0 || fits[static_cast<size_t>(x.items)]))
          f |= json_node::t_arr;
        if (x.types & json_node::t_obj) {
          bool ok = true;
          for (size_t k = 0; k < x.keys.size(); ++k)
            if (((x.required >> k) & 1) && !fits[static_cast<size_t>(x.key_nodes[k])]) ok = false;
          if (ok) f |= json_node::t_obj;
        }
        for (int32_t b : x.branches)
          if (fits[static_cast<size_t>(b)]) f |= 0x80;
        if (f != fits[i]) {
          fits[i] = f;
          changed = true;
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      json_node& x = out.nodes[i];
      if (x.alias >= 0) continue;
      if (x.literals.empty() && x.branches.empty()) x.types &= fits[i];
      if (!fits[i]) x.never = true;
    }
    // other keys of no value are never offered
    for (auto& x : out.nodes)
      if (x.additional >= 0 && out.nodes[static_cast<size_t>(x.additional)].never)
        x.additional = -1;
    // oneOf: a document must fit exactly one branch, which the grammar can promise only when
    // the first character decides (anyOf's alike branches are read side by side instead)
    for (const auto& x : out.nodes) {
      int seen = 0;
      for (int32_t b : x.branches) {
        const int c = json_node_classes(out, b);
        if ((c & seen) && x.exclusive && !told_apart(x))
          return bad("", "oneOf branches that can start with the same character (two objects, "
                         "an integer and a number, ...) are not supported unless they are "
                         "objects a required const / enum key tells apart (pydantic's "
                         "discriminated unions): a document could fit both (anyOf is)");
        if (c & seen) out.alike = true;
        seen |= c;
      }
    }
    return {};
  }
};

} // namespace

namespace {

// Every node's first-character classes, once, for the grammar's union dispatch.
void set_starts(json_schema& s) {
  for (size_t i = 0; i < s.nodes.size(); ++i)
    s.nodes[i].starts = static_cast<uint8_t>(json_node_classes(s, static_cast<int32_t>(i)));
}

} // namespace

expected<json_schema> compile_response_format(std::string_view response_format) {
  json rf;
  try {
    rf = json::parse(response_format);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument, "response_format is not JSON: {}", e.what());
  }
  if (json_nesting(rf) > 80) // the schema's own 64 levels and the wrapping around them
    return make_error(errc::invalid_argument, "response_format is nested more than 80 deep");
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return make_error(errc::invalid_argument, "response_format must be an object with a type");
  const std::string type = rf["type"].get<std::string>();
  json_schema out;
  out.nodes.emplace_back(); // 0: any value
  if (type == "json_object") {
    json_node obj;
    obj.types = json_node::t_obj;
    out.nodes.push_back(obj);
    out.root = 1;
    set_starts(out);
    return out;
  }
  if (type != "json_schema")
    return make_error(errc::invalid_argument,
                      "response_format type '{}' is not supported (text, json_object or "
                      "json_schema)",
                      type);
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object() ||
      !rf["json_schema"].contains("schema"))
    return make_error(errc::invalid_argument,
                      "response_format json_schema needs {{\"json_schema\": {{\"name\": ..., "
                      "\"schema\": {{...}}}}}}");
  const json& js = rf["json_schema"];
  for (const auto& [k, v] : js.items())
    if (k != "name" && k != "description" && k != "schema" && k != "strict")
      return make_error(errc::invalid_argument,
                        "response_format json_schema: unknown field '{}' (name, description, "
                        "schema, strict)",
                        k);
  if (!js.contains("name") || !js["name"].is_string() || js["name"].get<std::string>().empty() ||
      chars_of(js["name"].get<std::string>()) > 64)
    return make_error(errc::invalid_argument,
                      "response_format json_schema needs a name (a string of 1-64 characters)");
  if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null())
    return make_error(errc::invalid_argument, "response_format json_schema strict must be true "
                                              "or false");
  const json& schema = js["schema"];
  compiler c{schema, std::move(out), {}, {}, 0};
  auto root = c.node(schema, "");
  if (!root) return root.error();
  int32_t top = *root;
  if (auto st = c.resolve_aliases(top); !st) return st.error();
  if (auto st = c.mark_never(); !st) return st.error();
  const json_node& r = c.out.nodes[static_cast<size_t>(top)];
  if (r.never)
    return make_error(errc::invalid_argument,
                      "response_format schema: no document fits it (an empty type list, a "
                      "required key whose value cannot be written, ...)");
  // the first characters the root may start with: '[' and '{' only (a union's branches too)
  if (!r.literals.empty() || (json_node_classes(c.out, top, 0) & ~(16 | 32)) != 0)
    return make_error(errc::invalid_argument,
                      "response_format schema: the root must be an object or an array");
  c.out.root = top;
  set_starts(c.out);
  return std::move(c.out);
}

} // namespace troupe
