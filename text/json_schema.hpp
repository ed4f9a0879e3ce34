// json_schema.hpp: a response_format (OpenAI's {"type": "json_object"} or {"type":
// "json_schema", "json_schema": {"schema": {...}}}) compiled into the small graph of value
// rules the JSON grammar walks (json_grammar.hpp). The JSON Schema keywords that decide which
// documents are valid are implemented or refused by name: type (one or a list), properties,
// required, additionalProperties (true, false or a schema), items, minItems, maxItems, enum,
// const, anyOf (any branches: those that start alike are read side by side until the bytes
// tell them apart, json_grammar.hpp), oneOf whose branches start with different characters (a
// string or null, an object or an array, ...: exactly one then fits), $ref into #/$defs or
// #/definitions (recursion included), and
// minLength / maxLength for strings. Annotations (title, description, default, examples,
// $schema, $id, strict) change nothing and are ignored. Any other keyword (pattern, format,
// minimum, ...) refuses the request naming it: a schema we cannot hold to is not half-held;
// so does a schema no document fits (type [], a required key that cannot be written, a
// $ref cycle that names no schema), found by a fixpoint over the rules, and one nested past
// 64 levels. enum / const values are filtered by the type and length keywords beside them.
// Tests: tests/text/json_grammar_test.cpp
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/expected.hpp"

namespace troupe {

struct json_node {
  enum type_bit : uint8_t {
    t_null = 1,
    t_bool = 2,
    t_int = 4,
    t_num = 8, // any number (an integer too)
    t_str = 16,
    t_arr = 32,
    t_obj = 64,
    t_any = 127
  };
  uint8_t types = t_any;
  // object: property names as they appear between the quotes (JSON-escaped), their rules
  std::vector<std::string> keys;
  std::vector<int32_t> key_nodes;
  uint64_t required = 0;  // a bit per key
  int32_t additional = 0; // rule of the other keys' values; -1: no other keys
  int32_t items = 0;      // array: rule of the items
  int32_t min_items = 0, max_items = INT32_MAX;
  int32_t min_length = 0, max_length = INT32_MAX; // string: characters
  // enum / const: the allowed values as compact JSON text (the value must be one of them)
  std::vector<std::string> literals;
  std::vector<int32_t> branches; // anyOf / oneOf: the rules (json_grammar reads each that
                                 // the first character allows)
  bool exclusive = false;        // oneOf: its branches must start differently
  uint8_t starts = 0;            // the classes of first characters a value may have (a union
                                 // branch's, json_node_classes; set once compiled)
  bool never = false;            // no value fits (the grammar then never offers one)
  int32_t alias = -1;            // while compiling: a $ref's node, standing for the node it names
};

/// Node 0 is "any JSON value"; `root` the document's rule (an object or an array).
struct json_schema {
  std::vector<json_node> nodes;
  int32_t root = 0;
  bool alike = false; // some anyOf has branches that start alike (read side by side)
};

/// From the text of a response_format object. invalid_argument naming what is refused.
expected<json_schema> compile_response_format(std::string_view response_format);

/// The class of a value's first character: n 1, t 2, a digit 4, '"' 8, '[' 16, '{' 32, f 64,
/// '-' 128 (0: no value starts so). A union's branches must start in different classes.
int json_first_class(uint8_t c);
/// The classes a value of node i may start with (a union through its branches; never: 0).
int json_node_classes(const json_schema& s, int32_t i, int depth = 0);

/// The deepest nesting of arrays and objects in j, found without recursion (a request body
/// may nest deeper than any recursive walk's stack, nlohmann's dump() included).
int json_nesting(const nlohmann::json& j);
int json_nesting(const nlohmann::ordered_json& j);

} // namespace troupe
