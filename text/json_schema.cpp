// json_schema.cpp: compile_response_format (json_schema.hpp): a JSON Schema walked once into
// json_node rules, $refs resolved through a table so a recursive schema becomes a cycle of
// node indices.
#include "text/json_schema.hpp"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace troupe {

namespace {

using json = nlohmann::json;

// Keywords that only describe (they change no document's validity).
const std::set<std::string> annotations = {
    "title",      "description", "default",   "examples", "$schema", "$id",        "$comment",
    "deprecated", "readOnly",    "writeOnly", "strict",   "$defs",   "definitions"};
const std::set<std::string> implemented = {
    "type",      "properties", "required", "additionalProperties",
    "items",     "minItems",   "maxItems", "enum",
    "const",     "anyOf",      "oneOf",    "$ref",
    "minLength", "maxLength"};

// The first characters a value of these types starts with, as classes: a union's branches
// must fall in different classes so the first character says which branch is taken.
int classes_of(const json_node& n) {
  if (!n.literals.empty()) {
    int c = 0;
    for (const auto& l : n.literals) {
      const char f = l.empty() ? 0 : l[0];
      c |= f == 'n'               ? 1
           : f == 't' || f == 'f' ? 2
           : f == '"'             ? 8
           : f == '['             ? 16
           : f == '{'             ? 32
                                  : 4;
    }
    return c;
  }
  int c = 0;
  if (n.types & json_node::t_null) c |= 1;
  if (n.types & json_node::t_bool) c |= 2;
  if (n.types & (json_node::t_int | json_node::t_num)) c |= 4;
  if (n.types & json_node::t_str) c |= 8;
  if (n.types & json_node::t_arr) c |= 16;
  if (n.types & json_node::t_obj) c |= 32;
  return c;
}

struct compiler {
  const json& doc;
  json_schema out;
  std::map<std::string, int32_t> refs;
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
    auto n = node(*target, r.substr(1));
    if (!n) return n.error();
    out.nodes[static_cast<size_t>(id)] = out.nodes[static_cast<size_t>(*n)];
    return id;
  }

  expected<int32_t> node(const json& s, const std::string& where) {
    if (++depth > 64) return bad(where, "nested more than 64 deep");
    struct leave {
      int& d;
      ~leave() { --d; }
    } guard{depth};
    if (s.is_boolean()) {
      if (!s.get<bool>()) return bad(where, "the schema false allows no value");
      return 0;
    }
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
      if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0 ||
          s[key].get<int64_t>() > INT32_MAX)
        return bad(where, std::string(key) + " must be a whole number >= 0");
      v = static_cast<int32_t>(s[key].get<int64_t>());
      return {};
    };
    if (auto st = count("minItems", n.min_items); !st) return st.error();
    if (auto st = count("maxItems", n.max_items); !st) return st.error();
    if (auto st = count("minLength", n.min_length); !st) return st.error();
    if (auto st = count("maxLength", n.max_length); !st) return st.error();
    if (n.min_items > n.max_items || n.min_length > n.max_length)
      return bad(where, "a minimum above its maximum allows no value");
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return bad(where, "properties must be an object");
      if (s["properties"].size() > 64) return bad(where, "more than 64 properties");
      for (const auto& [name, sub] : s["properties"].items()) {
        const std::string quoted = json(name).dump();
        n.keys.push_back(quoted.substr(1, quoted.size() - 2));
        auto id = node(sub, where + "/properties/" + name);
        if (!id) return id.error();
        n.key_nodes.push_back(*id);
      }
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) return bad(where, "required must be a list of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return bad(where, "required must be a list of names");
        const std::string quoted = json(r.get<std::string>()).dump();
        const std::string key = quoted.substr(1, quoted.size() - 2);
        size_t i = 0;
        while (i < n.keys.size() && n.keys[i] != key) ++i;
        if (i == n.keys.size())
          return bad(where, "required '" + r.get<std::string>() + "' is not among properties");
        n.required |= uint64_t{1} << i;
      }
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
    if (s.contains("items")) {
      if (s["items"].is_array()) return bad(where, "items as a list (tuples) is not supported");
      auto id = node(s["items"], where + "/items");
      if (!id) return id.error();
      n.items = *id;
    }
    if (s.contains("enum") || s.contains("const")) {
      if (s.contains("enum")) {
        if (!s["enum"].is_array() || s["enum"].empty())
          return bad(where, "enum must be a non-empty list");
        for (const auto& v : s["enum"]) n.literals.push_back(v.dump());
      }
      if (s.contains("const")) n.literals.push_back(s["const"].dump());
      if (n.literals.size() > 64) return bad(where, "more than 64 enum values");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      if (!s[key].is_array() || s[key].empty())
        return bad(where, std::string(key) + " must be a non-empty list");
      if (s.contains("type") || !n.literals.empty() || s.contains("properties") ||
          s.contains("items"))
        return bad(where, std::string(key) + " beside type, enum, properties or items is not "
                                             "supported");
      json_node merged;
      merged.types = 0;
      int seen = 0;
      bool all_literals = true;
      std::vector<json_node> branches;
      for (size_t b = 0; b < s[key].size(); ++b) {
        auto id = node(s[key][b], where + "/" + key + "/" + std::to_string(b));
        if (!id) return id.error();
        branches.push_back(out.nodes[static_cast<size_t>(*id)]);
        all_literals = all_literals && !branches.back().literals.empty();
      }
      for (const auto& br : branches) {
        const int c = classes_of(br);
        if (!all_literals && (c & seen))
          return bad(where, std::string(key) +
                                " branches that can start with the same character (two "
                                "objects, a string and a string enum, ...) are not supported");
        seen |= c;
        if (all_literals) {
          merged.literals.insert(merged.literals.end(), br.literals.begin(), br.literals.end());
          continue;
        }
        if (!br.literals.empty())
          return bad(where, std::string(key) + " mixing enum / const with other branches is "
                                               "not supported");
        merged.types |= br.types;
        if (br.types & json_node::t_obj) {
          merged.keys = br.keys;
          merged.key_nodes = br.key_nodes;
          merged.required = br.required;
          merged.additional = br.additional;
        }
        if (br.types & json_node::t_arr) {
          merged.items = br.items;
          merged.min_items = br.min_items;
          merged.max_items = br.max_items;
        }
        if (br.types & json_node::t_str) {
          merged.min_length = br.min_length;
          merged.max_length = br.max_length;
        }
      }
      if (merged.literals.size() > 64) return bad(where, "more than 64 enum values");
      n = merged;
    }
    const int32_t id = add();
    out.nodes[static_cast<size_t>(id)] = std::move(n);
    return id;
  }
};

} // namespace

expected<json_schema> compile_response_format(std::string_view response_format) {
  json rf;
  try {
    rf = json::parse(response_format);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument, "response_format is not JSON: {}", e.what());
  }
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
  const json& schema = rf["json_schema"]["schema"];
  compiler c{schema, std::move(out), {}, 0};
  auto root = c.node(schema, "");
  if (!root) return root.error();
  const json_node& r = c.out.nodes[static_cast<size_t>(*root)];
  if (!r.literals.empty() || (r.types & ~(json_node::t_obj | json_node::t_arr)) != 0)
    return make_error(errc::invalid_argument,
                      "response_format schema: the root must be an object or an array");
  c.out.root = *root;
  return std::move(c.out);
}

} // namespace troupe
