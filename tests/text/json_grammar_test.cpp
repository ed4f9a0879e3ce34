// json_grammar_test.cpp: response_format's JSON grammar (text/json_schema, json_grammar,
// json_constraint). The byte automaton takes exactly the documents the schema allows (valid
// and invalid ones written out, nlohmann's parser as the yardstick for JSON itself); schema
// keywords it cannot hold to refuse by name; the token mask equals, token by token, what
// feeding each token's bytes to the automaton says (the trie walk and the free-string
// shortcut are exact), over the bundled SentencePiece and byte-level vocabularies; and random
// walks over allowed tokens always end in JSON that parses and fits the schema.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "formats/gguf.hpp"
#include "text/json_constraint.hpp"
#include "text/json_grammar.hpp"
#include "text/json_schema.hpp"
#include "text/tokenizer.hpp"

using namespace troupe;
using json = nlohmann::json;

namespace {

json_schema schema_of(const std::string& rf) {
  auto s = compile_response_format(rf);
  EXPECT_TRUE(s) << (s ? "" : s.error().to_string());
  return s ? *s : json_schema{};
}

std::string with_schema(const json& schema) {
  return json{{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", schema}}}}.dump();
}

// Whether the grammar takes `doc` whole and is then complete (in some reading).
bool accepts(const json_schema& s, const std::string& doc) {
  json_readings g(s);
  return g.feed(doc) && g.done();
}

const json person = {
    {"type", "object"},
    {"properties",
     {{"name", {{"type", "string"}, {"minLength", 1}, {"maxLength", 8}}},
      {"age", {{"type", "integer"}}},
      {"mood", {{"enum", {"happy", "sad", 3}}}},
      {"email", {{"type", {"string", "null"}}}},
      {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 2}}},
      {"score", {{"type", "number"}}}}},
    {"required", {"name", "age"}},
    {"additionalProperties", false}};

// pydantic's Union[Cat, Dog] (anyOf of two $ref'd objects that both start with '{'), told
// apart by a const "kind"; Union[int, float] (anyOf integer, number: both start with a digit)
const json pets = {
    {"$defs",
     {{"Cat",
       {{"type", "object"},
        {"properties", {{"kind", {{"const", "cat"}}}, {"meows", {{"type", "boolean"}}}}},
        {"required", {"kind", "meows"}},
        {"additionalProperties", false}}},
      {"Dog",
       {{"type", "object"},
        {"properties", {{"kind", {{"const", "dog"}}}, {"barks", {{"type", "integer"}}}}},
        {"required", {"kind", "barks"}},
        {"additionalProperties", false}}}}},
    {"type", "object"},
    {"properties",
     {{"pet", {{"anyOf", {{{"$ref", "#/$defs/Cat"}}, {{"$ref", "#/$defs/Dog"}}}}}},
      {"n", {{"anyOf", {{{"type", "integer"}}, {{"type", "number"}}}}}}}},
    {"required", {"pet"}},
    {"additionalProperties", false}};

// Whether a parsed document is one of pets' (a Cat or a Dog, exactly as defined).
bool fits_pets(const json& d) {
  if (!d.is_object() || !d.contains("pet")) return false;
  for (const auto& [k, v] : d.items())
    if (k != "pet" && !(k == "n" && v.is_number())) return false;
  const json& p = d["pet"];
  if (!p.is_object() || p.size() != 2 || !p.contains("kind")) return false;
  if (p["kind"] == "cat") return p.contains("meows") && p["meows"].is_boolean();
  if (p["kind"] == "dog") return p.contains("barks") && p["barks"].is_number_integer();
  return false;
}

} // namespace

TEST(JsonGrammar, AnyOfBranchesThatStartAlikeAreReadSideBySide) {
  const auto s = schema_of(with_schema(pets));
  for (const std::string doc :
       {R"({"pet": {"kind": "cat", "meows": true}})", R"({"pet": {"barks": 3, "kind": "dog"}})",
        R"({"pet": {"kind": "dog", "barks": -1}, "n": 2.5})",
        R"({"n": 7, "pet": {"kind": "cat", "meows": false}})"})
    EXPECT_TRUE(accepts(s, doc)) << doc;
  for (const std::string doc :
       {R"({"pet": {"kind": "cat", "barks": 3}})", R"({"pet": {"kind": "dog", "meows": true}})",
        R"({"pet": {"kind": "cat"}})", R"({"pet": {"kind": "bird", "meows": true}})",
        R"({"pet": {"kind": "cat", "meows": true, "barks": 1}})", R"({"pet": {}})",
        R"({"pet": {"kind": "dog", "barks": 1.5}})", R"({"pet": 3})"})
    EXPECT_FALSE(accepts(s, doc)) << doc;
  // two readings while the object could be either, one once "kind" says which
  json_readings g(s);
  ASSERT_TRUE(g.feed(R"({"pet": {)"));
  EXPECT_EQ(g.states().size(), 2u);
  ASSERT_TRUE(g.feed(R"("kind": "c)"));
  EXPECT_EQ(g.states().size(), 1u);
  ASSERT_TRUE(g.feed(R"(at", "meows": true}, "n": 1)"));
  EXPECT_EQ(g.states().size(), 2u); // 1 may go on as an integer or a number
  ASSERT_TRUE(g.feed("}"));
  EXPECT_TRUE(g.done());
  // readings that meet again merge: 300 numbers of Union[int, float] keep at most two
  const auto nums = schema_of(with_schema(
      {{"type", "array"}, {"items", {{"anyOf", {{{"type", "integer"}}, {{"type", "number"}}}}}}}));
  json_readings a(nums);
  ASSERT_TRUE(a.feed('['));
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(a.feed(std::to_string(i) + (i % 3 ? ".5" : "") + ", "));
    ASSERT_LE(a.states().size(), 2u) << i;
  }
  ASSERT_TRUE(a.feed("0]"));
  EXPECT_TRUE(a.done());
  // a bounded string beside a longer enum value of the same type
  const auto strs = schema_of(with_schema(
      {{"type", "array"},
       {"items",
        {{"anyOf", {{{"type", "string"}, {"maxLength", 3}}, {{"enum", {"a long one"}}}}}}}}));
  EXPECT_TRUE(accepts(strs, R"(["abc", "a long one", "a"])"));
  EXPECT_FALSE(accepts(strs, R"(["abcd"])"));
  EXPECT_FALSE(accepts(strs, R"(["a long two"])"));
}

// After the third black-box pass of unions: oneOf values compare as JSON (1 and 1.0 are one
// number, valid under both branches, so under neither); pydantic's discriminated unions (oneOf
// of objects a required const key tells apart, with OpenAPI's discriminator beside) are read
// as an anyOf; alike oneOf branches nothing tells apart stay refused.
TEST(JsonGrammar, DefectsOfTheUnionPassStayFixed) {
  auto one_of = [](const json& branches) {
    return compile_response_format(with_schema({{"type", "object"},
                                                {"properties", {{"x", {{"oneOf", branches}}}}},
                                                {"required", {"x"}},
                                                {"additionalProperties", false}}));
  };
  EXPECT_FALSE(one_of({{{"const", 1}}, {{"const", 1.0}}})); // no value fits exactly one
  auto some = one_of({{{"enum", {1, 2}}}, {{"const", 1.0}}});
  ASSERT_TRUE(some);
  EXPECT_TRUE(accepts(*some, R"({"x": 2})"));
  EXPECT_FALSE(accepts(*some, R"({"x": 1})"));
  EXPECT_FALSE(accepts(*some, R"({"x": 1.0})"));
  EXPECT_FALSE(one_of({{{"const", {{"a", 1}}}}, {{"const", {{"a", 1.0}}}}}));
  // pydantic: Annotated[Union[Cat, Dog], Field(discriminator="pet_type")]
  json disc = pets;
  for (const char* d : {"Cat", "Dog"}) disc["$defs"][d]["properties"]["kind"]["title"] = "Kind";
  disc["properties"]["pet"] = {
      {"oneOf", {{{"$ref", "#/$defs/Cat"}}, {{"$ref", "#/$defs/Dog"}}}},
      {"discriminator",
       {{"propertyName", "kind"}, {"mapping", {{"cat", "#/$defs/Cat"}, {"dog", "#/$defs/Dog"}}}}}};
  const auto d = schema_of(with_schema(disc));
  EXPECT_TRUE(accepts(d, R"({"pet": {"kind": "dog", "barks": 2}})"));
  EXPECT_FALSE(accepts(d, R"({"pet": {"kind": "dog", "meows": true}})"));
  // the key not required in one, or a value in both: not told apart
  json loose = disc;
  loose["$defs"]["Dog"]["required"] = {"barks"};
  EXPECT_FALSE(compile_response_format(with_schema(loose)));
  json shared = disc;
  shared["$defs"]["Dog"]["properties"]["kind"] = {{"enum", {"dog", "cat"}}};
  EXPECT_FALSE(compile_response_format(with_schema(shared)));
  // an integer and a number beside told-apart objects still meet
  json nums = disc;
  nums["properties"]["pet"]["oneOf"].push_back({{"type", "integer"}});
  nums["properties"]["pet"]["oneOf"].push_back({{"type", "number"}});
  EXPECT_FALSE(compile_response_format(with_schema(nums)));
}

TEST(JsonGrammar, JsonObjectModeTakesAnyObjectAndOnlyJson) {
  const auto s = schema_of(R"({"type": "json_object"})");
  for (const std::string doc :
       {"{}", R"({"a": [1, -2.5e-3, 0, "x\u00e9\n\"", true, null, {"b": false}]})",
        "{\n  \"k\": \"caf\xc3\xa9\"\n}", R"({"a":{"a":{"a":[]}}})"}) {
    EXPECT_TRUE(json::accept(doc)) << doc;
    EXPECT_TRUE(accepts(s, doc)) << doc;
  }
  for (const std::string doc :
       {"[1]", "{a: 1}", R"({"a": 01})", "{\"a\": \"\x01\"}", R"({"a": tru})", R"({"a": 1,})",
        R"({"a": 1}})", R"({"a": "\q"})", "{\"a\": \"\xc3\"}", R"({"a": -})", R"({"a" 1})",
        R"({"a": [1 2]})", R"({"a": 1.})", R"({"a": 1e})"}) {
    EXPECT_FALSE(accepts(s, doc)) << doc;
  }
  // a complete document takes nothing more, and whitespace runs are bounded
  json_grammar g(s);
  ASSERT_TRUE(g.feed("{}"));
  EXPECT_TRUE(g.done());
  EXPECT_FALSE(g.feed(' '));
  json_grammar w(s);
  ASSERT_TRUE(w.feed("{\n"));
  for (int i = 0; i < json_grammar::max_ws; ++i) ASSERT_TRUE(w.feed(' '));
  EXPECT_FALSE(w.feed(' '));
  // a run is one space or a newline and an indent; a new run may follow each token
  EXPECT_TRUE(accepts(s, "{\n  \"a\": [\n    1,\n\t2\n  ]\n}"));
  EXPECT_TRUE(accepts(s, " { \"a\" : 1 , \"b\" : [ ] }"));
  EXPECT_FALSE(accepts(s, "{\n\n  \"a\": 1}"));
  EXPECT_FALSE(accepts(s, "{ \n\"a\": 1}"));
  EXPECT_FALSE(accepts(s, "{\"a\":  1}"));
}

TEST(JsonGrammar, ASchemaHoldsItsKeysTypesAndBounds) {
  const auto s = schema_of(with_schema(person));
  for (const std::string doc :
       {R"({"name": "Ann", "age": 30})", R"({"age": -1, "name": "B", "mood": 3})",
        R"({"name": "Ann", "age": 0, "mood": "sad", "email": null, "tags": ["a", "b"],
            "score": 2.5e3})",
        R"({"name":"12345678","age":7,"email":"a@b"})"})
    EXPECT_TRUE(accepts(s, doc)) << doc;
  for (const std::string doc : {R"({"name": "Ann"})",                         // age is required
                                R"({"name": "Ann", "age": 3.5})",             // an integer
                                R"({"name": "Ann", "age": 3, "x": 1})",       // no other keys
                                R"({"name": "Ann", "age": 3, "age": 4})",     // each key once
                                R"({"name": "", "age": 3})",                  // minLength 1
                                R"({"name": "123456789", "age": 3})",         // maxLength 8
                                R"({"name": "A", "age": 3, "mood": "glad"})", // enum
                                R"({"name": "A", "age": 3, "mood": 33})",     // enum 3, not 33
                                R"({"name": "A", "age": 3, "tags": ["a", "b", "c"]})", // maxItems 2
                                R"({"name": "A", "age": 3, "email": 5})", // a string or null
                                R"([])"})
    EXPECT_FALSE(accepts(s, doc)) << doc;
}

TEST(JsonGrammar, RefsRecurseAndUnionsOfDifferentTypes) {
  const json tree = {{"$defs",
                      {{"node",
                        {{"type", "object"},
                         {"properties",
                          {{"v", {{"anyOf", {{{"type", "integer"}}, {{"type", "string"}}}}}},
                           {"kids", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}}}},
                         {"required", {"v"}},
                         {"additionalProperties", false}}}}},
                     {"$ref", "#/$defs/node"}};
  const auto s = schema_of(with_schema(tree));
  EXPECT_TRUE(accepts(s, R"({"v": 1, "kids": [{"v": "a"}, {"v": 2, "kids": [{"v": 3}]}]})"));
  EXPECT_FALSE(accepts(s, R"({"v": 1, "kids": [{"v": true}]})"));
  EXPECT_FALSE(accepts(s, R"({"v": 1, "kids": [{}]})"));
}

TEST(JsonGrammar, KeywordsItCannotHoldToAreRefusedByName) {
  const std::pair<json, std::string> refused[] = {
      {{{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"pattern", "^x"}}}}}},
       "'pattern'"},
      {{{"type", "object"}, {"properties", {{"a", {{"type", "integer"}, {"minimum", 0}}}}}},
       "'minimum'"},
      {{{"type", "string"}}, "root must be an object or an array"},
      {{{"anyOf", {{{"type", "object"}}, {{"type", "string"}}}}},
       "root must be an object or an array"},
      {{{"oneOf", {{{"type", "object"}}, {{"type", "object"}, {"required", json::array()}}}}},
       "same character"},
      {{{"type", "object"}, {"properties", {{"a", {{"$ref", "#/$defs/missing"}}}}}}, "$ref"},
      {{{"type", "object"}, {"required", {"b"}}, {"additionalProperties", false}}, "no document"},
      {{{"type", "object"},
        {"properties", {{"a", {{"type", json::array()}}}}},
        {"required", {"a"}}},
       "no document"},
      {{{"$defs", {{"a", {{"$ref", "#/$defs/a"}}}}}, {"$ref", "#/$defs/a"}}, "cycle of $refs"},
      {{{"$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"$ref", "#/$defs/a"}}}}},
        {"type", "object"},
        {"properties", {{"x", {{"$ref", "#/$defs/a"}}}}}},
       "cycle of $refs"},
      {{{"type", "object"},
        {"properties",
         {{"a", {{"anyOf", {{{"type", "string"}}, {{"type", "null"}}}}, {"maxLength", 2}}}}}},
       "'maxLength' beside anyOf"},
      {{{"type", "object"},
        {"properties", {{"a", {{"enum", {1, 2}}, {"items", {{"type", "string"}}}}}}}},
       "beside enum"},
  };
  for (const auto& [schema, what] : refused) {
    auto s = compile_response_format(with_schema(schema));
    ASSERT_FALSE(s) << schema.dump();
    EXPECT_NE(s.error().message.find(what), std::string::npos) << s.error().message;
  }
  EXPECT_FALSE(compile_response_format(R"({"type": "yaml"})"));
  EXPECT_FALSE(
      compile_response_format(R"({"type": "json_schema", "json_schema": {"schema": {}}})"));
  EXPECT_FALSE(compile_response_format(
      R"({"type": "json_schema", "json_schema": {"name": "x", "strict": "yes", "schema": {"type": "object"}}})"));
  EXPECT_TRUE(compile_response_format(
      R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "minItems": 2.0}}})"));
  auto either = compile_response_format(
      R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"anyOf": [{"type": "object"}, {"type": "array"}]}}})");
  ASSERT_TRUE(either);
  EXPECT_TRUE(accepts(*either, "[1]"));
  EXPECT_TRUE(accepts(*either, "{}"));
  EXPECT_FALSE(compile_response_format("{"));
  // nesting past what a schema may have is refused, without recursing into it
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto d = compile_response_format(R"({"type": "json_object", "x": )" + deep + "}");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("nested"), std::string::npos);
  EXPECT_GT(json_nesting(json::parse(deep)), 1000);
}

TEST(JsonGrammar, DefectsFoundFromOutsideStayFixed) {
  // arrays as deep as a schema may nest (the grammar once stopped at 32 containers)
  json leaf = {{"type", "integer"}};
  std::string doc = "7";
  for (int i = 0; i < 40; ++i) {
    leaf = {{"type", "array"}, {"minItems", 1}, {"maxItems", 1}, {"items", leaf}};
    doc = "[" + doc + "]";
  }
  EXPECT_TRUE(accepts(schema_of(with_schema(leaf)), doc));
  // 24 digits spent: no '.' or 'e' that no digit could follow; the exponent has its own two
  const auto nums = schema_of(with_schema({{"type", "array"}, {"items", {{"type", "number"}}}}));
  const std::string d24(24, '1'), d23(23, '1');
  EXPECT_FALSE(accepts(nums, "[" + d24 + ".1]"));
  EXPECT_TRUE(accepts(nums, "[" + d24 + "e12]"));
  EXPECT_TRUE(accepts(nums, "[" + d24 + "]"));
  EXPECT_TRUE(accepts(nums, "[" + d23 + ".1e-12]"));
  EXPECT_FALSE(accepts(nums, "[1e123]"));
  // each key once, other keys in the schema's spelling only
  const auto free_obj = schema_of(with_schema(
      {{"type", "object"},
       {"properties", {{"a", {{"type", "integer"}}}, {"q\"", {{"type", "integer"}}}}}}));
  EXPECT_FALSE(accepts(free_obj, R"({"a": 1, "a": "x"})"));
  EXPECT_FALSE(accepts(free_obj, R"({"a": 1, "\u0061": "x"})"));
  EXPECT_FALSE(accepts(free_obj, R"({"\/": 1})"));
  EXPECT_TRUE(accepts(free_obj, R"({"a": 1, "q\"": 2, "b\n": [true]})"));
  // enum / const filtered by the keywords beside them; oneOf drops values both branches allow
  const auto lit =
      schema_of(with_schema({{"type", "object"},
                             {"properties",
                              {{"e", {{"enum", {"a", "b", "c"}}, {"const", "b"}}},
                               {"t", {{"type", "string"}, {"enum", {1, 2, "x"}}}},
                               {"i", {{"type", "integer"}, {"enum", {1.5, 2}}}},
                               {"l", {{"const", "hello"}, {"maxLength", 2}}},
                               {"o", {{"oneOf", {{{"enum", {1, 2}}}, {{"enum", {2, 3}}}}}}}}}}));
  EXPECT_TRUE(accepts(lit, R"({"e": "b", "t": "x", "i": 2, "o": 1})"));
  EXPECT_TRUE(accepts(lit, R"({"o": 3})"));
  for (const char* bad :
       {R"({"e": "a"})", R"({"t": 2})", R"({"i": 1.5})", R"({"o": 2})", R"({"l": "hello"})"})
    EXPECT_FALSE(accepts(lit, bad)) << bad;
  // well-formed UTF-8 only
  const auto str = schema_of(with_schema({{"type", "array"}, {"items", {{"type", "string"}}}}));
  EXPECT_TRUE(accepts(str, "[\"\xe0\xa0\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"]"));
  for (const char* bad : {"[\"\xe0\x80\x80\"]", "[\"\xed\xa0\x80\"]", "[\"\xf0\x80\x80\x80\"]",
                          "[\"\xf4\x90\x80\x80\"]", "[\"\xc0\xaf\"]"})
    EXPECT_FALSE(accepts(str, bad));
  // a key or an item no value fits is never offered; a required key not among properties is
  // any value
  const auto never = schema_of(with_schema(
      {{"type", "object"},
       {"properties",
        {{"x", {{"type", json::array()}}}, {"l", {{"type", "array"}, {"items", false}}}}},
       {"required", {"r"}}}));
  EXPECT_TRUE(accepts(never, R"({"r": {"any": [1]}, "l": []})"));
  EXPECT_FALSE(accepts(never, R"({"r": 1, "x": 1})"));
  EXPECT_FALSE(accepts(never, R"({"r": 1, "l": [1]})"));
  EXPECT_FALSE(accepts(never, R"({"l": []})"));
  // anyOf with a $ref branch (pydantic's Optional[Model])
  const auto opt = schema_of(with_schema(
      {{"$defs",
        {{"P",
          {{"type", "object"},
           {"properties", {{"n", {{"type", "integer"}}}}},
           {"required", {"n"}}}}}},
       {"type", "object"},
       {"properties", {{"p", {{"anyOf", {{{"$ref", "#/$defs/P"}}, {{"type", "null"}}}}}}}},
       {"required", {"p"}}}));
  EXPECT_TRUE(accepts(opt, R"({"p": {"n": 1}})"));
  EXPECT_TRUE(accepts(opt, R"({"p": null})"));
  EXPECT_FALSE(accepts(opt, R"({"p": {}})"));
}

TEST(JsonGrammar, DefectsOfTheSecondPassStayFixed) {
  // a union branch no value fits is not taken (it was an unconstrained value); all of them:
  // refused
  const auto u = schema_of(with_schema(
      {{"type", "object"},
       {"properties",
        {{"v", {{"anyOf", {{{"type", "string"}, {"enum", {1}}}, {{"type", "null"}}}}}},
         {"w",
          {{"oneOf",
            {{{"type", "string"}, {"const", "abc"}, {"maxLength", 2}}, {{"type", "integer"}}}}}}}},
       {"required", {"v"}},
       {"additionalProperties", false}}));
  EXPECT_TRUE(accepts(u, R"({"v": null, "w": 3})"));
  EXPECT_FALSE(accepts(u, R"({"v": "x"})"));
  EXPECT_FALSE(accepts(u, R"({"v": null, "w": "ab"})"));
  auto none = compile_response_format(with_schema(
      {{"type", "object"},
       {"properties",
        {{"v",
          {{"anyOf",
            {{{"type", "string"}, {"enum", {1}}}, {{"type", "integer"}, {"enum", {"a"}}}}}}}}},
       {"required", {"v"}}}));
  EXPECT_FALSE(none);
  // a lone surrogate escape is not a character; a pair is one
  const auto str = schema_of(
      with_schema({{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 2}}}}));
  EXPECT_TRUE(accepts(str, R"(["\ud83d\ude00x", "\u00e9"])"));
  json_grammar g(str);
  ASSERT_TRUE(g.feed(R"(["\ud8cd\u)"));
  EXPECT_FALSE(json_grammar(g).feed('c')); // no low half starts with c: a dead end before
  EXPECT_TRUE(json_grammar(g).feed('D'));
  for (const char* bad : {R"(["\udddd"])", R"(["\ud83d"])", R"(["\ud83dx"])", R"(["\ud83d\u0041"])",
                          R"(["\ud83d\ude00xy"])"})
    EXPECT_FALSE(accepts(str, bad)) << bad;
  // keys outside the schema's come once each, in json_object mode too
  const auto obj = schema_of(R"({"type": "json_object"})");
  EXPECT_FALSE(accepts(obj, R"({"": 1, "": 2})"));
  EXPECT_FALSE(accepts(obj, R"({"k": {"k": 1}, "k": 2})"));
  EXPECT_TRUE(accepts(obj, R"({"k": {"k": 1}, "j": {"k": 2}})"));
  // integers past a double's exact ones cannot be an enum value
  EXPECT_FALSE(compile_response_format(with_schema(
      {{"type", "object"},
       {"properties", {{"c", {{"const", json::parse("123456789012345678901234567890")}}}}}})));
  // branches apart by their first character: true / false / an object; -1 / 7 / null; and
  // enum branches beside others merged (pydantic's Literal["x"] | Literal["y"] | None)
  const auto apart =
      schema_of(with_schema({{"type", "array"},
                             {"items",
                              {{"anyOf",
                                {{{"const", true}},
                                 {{"const", false}},
                                 {{"type", "object"}, {"additionalProperties", false}}}}}}}));
  EXPECT_TRUE(accepts(apart, "[true, false, {}]"));
  EXPECT_FALSE(accepts(apart, "[null]"));
  const auto nums = schema_of(
      with_schema({{"type", "array"},
                   {"items", {{"anyOf", {{{"const", -1}}, {{"const", 7}}, {{"type", "null"}}}}}}}));
  EXPECT_TRUE(accepts(nums, "[-1, 7, null]"));
  EXPECT_FALSE(accepts(nums, "[-7]"));
  const auto lit = schema_of(with_schema(
      {{"type", "array"},
       {"items", {{"anyOf", {{{"const", "x"}}, {{"const", "y"}}, {{"type", "null"}}}}}}}));
  EXPECT_TRUE(accepts(lit, R"(["x", "y", null])"));
  EXPECT_FALSE(accepts(lit, R"(["z"])"));
  // a cycle of $refs reached through a union branch (it looped for ever)
  auto cyc = compile_response_format(with_schema(
      {{"$defs", {{"C", {{"$ref", "#/$defs/C"}}}}},
       {"type", "object"},
       {"properties", {{"a", {{"anyOf", {{{"$ref", "#/$defs/C"}}, {{"type", "null"}}}}}}}}}));
  ASSERT_FALSE(cyc);
  EXPECT_NE(cyc.error().message.find("cycle"), std::string::npos);
  // numbers inside an enum value are held to the same rule; unknown json_schema fields refused
  EXPECT_FALSE(compile_response_format(
      with_schema({{"type", "object"},
                   {"properties", {{"c", {{"const", json::parse("{\"x\": [1.5e20]}")}}}}}})));
  EXPECT_FALSE(compile_response_format(
      R"({"type": "json_schema", "json_schema": {"name": "x", "foo": 1, "schema": {"type": "object"}}})"));
  // a recursive Optional (pydantic's next: Optional["Node"])
  const auto list = schema_of(
      with_schema({{"$defs",
                    {{"Node",
                      {{"type", "object"},
                       {"properties",
                        {{"v", {{"type", "integer"}}},
                         {"next", {{"anyOf", {{{"$ref", "#/$defs/Node"}}, {{"type", "null"}}}}}}}},
                       {"required", {"v", "next"}},
                       {"additionalProperties", false}}}}},
                   {"$ref", "#/$defs/Node"}}));
  EXPECT_TRUE(accepts(list, R"({"v": 1, "next": {"v": 2, "next": null}})"));
  EXPECT_FALSE(accepts(list, R"({"v": 1, "next": {"v": 2}})"));
  EXPECT_FALSE(accepts(list, R"({"v": 1, "next": 3})"));
}

namespace {

bool bit(const std::vector<uint64_t>& b, int32_t id) {
  return (b[static_cast<size_t>(id >> 6)] >> (id & 63)) & 1;
}

// Walks `steps` random allowed tokens from the start (or to the end of the document), and
// at every state checks the mask against feeding each token's bytes to the grammar.
void random_walk(const json_schema& s, const std::shared_ptr<const token_vocab>& v, uint32_t seed,
                 int steps, int check_every, std::string& out, int* taken = nullptr) {
  auto schema = std::make_shared<const json_schema>(s);
  json_token_constraint c(schema, v, {});
  json_readings g(*schema); // the same state, fed byte by byte here
  std::mt19937 rng(seed);
  out.clear();
  std::vector<uint64_t> bits;
  for (int step = 0; step < steps && !c.done(); ++step) {
    if (taken) *taken = step + 1;
    c.allowed(bits);
    std::vector<int32_t> ok;
    const bool check = step % check_every == 0;
    for (int32_t id = 0; id < v->size(); ++id) {
      if (check) {
        json_readings h = g;
        const bool want = !v->bytes(id).empty() && h.feed(v->bytes(id));
        ASSERT_EQ(bit(bits, id), want) << "step " << step << ", token " << id << " '"
                                       << v->bytes(id) << "' after '" << out << "'";
      }
      if (bit(bits, id)) ok.push_back(id);
    }
    if (ok.empty()) {
      ADD_FAILURE() << "no token allowed after " << out;
      break;
    }
    const int32_t t = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
    EXPECT_TRUE(c.advance(t));
    EXPECT_TRUE(g.feed(v->bytes(t)));
    out += v->bytes(t);
  }
}

std::shared_ptr<const token_vocab> llama2_vocab() {
  auto g = open_gguf(test::model_path("llama2-tiny-random/llama-2-tiny-random.gguf"));
  EXPECT_TRUE(g);
  auto tok = tokenizer::from_gguf(**g);
  EXPECT_TRUE(tok);
  return token_vocab::from(**tok);
}

std::shared_ptr<const token_vocab> qwen2_vocab() {
  const json fx = test::load_json(test::fixture_path("tokenizers.json"))["qwen2_bytelevel"];
  const std::string dir =
      std::filesystem::path(test::resolve_fixture_ref(fx["path"].get<std::string>()))
          .parent_path()
          .string();
  auto tok = tokenizer::from_hf_dir(dir);
  EXPECT_TRUE(tok);
  return token_vocab::from(**tok);
}

} // namespace

TEST(JsonConstraint, TokenBytesAreAsTheyAppearInText) {
  auto v = llama2_vocab();
  auto g = open_gguf(test::model_path("llama2-tiny-random/llama-2-tiny-random.gguf"));
  auto tok = tokenizer::from_gguf(**g);
  // the bytes of a text's tokens after the first add up to the text's decode after the first
  auto ids = (*tok)->encode(R"(Hello {"a": "b\n", "caf√©": [1, 2]} world)", false, false);
  ASSERT_TRUE(ids);
  std::string joined;
  for (size_t i = 1; i < ids->size(); ++i) joined += v->bytes((*ids)[i]);
  const std::string first = (*tok)->decode_bytes(std::vector<int32_t>{(*ids)[0]});
  EXPECT_EQ(first + joined, (*tok)->decode_bytes(*ids));
  EXPECT_TRUE(v->bytes((*tok)->eos_id()).empty()); // special: never allowed
  EXPECT_EQ(v->bytes((*tok)->find("<0x22>")), "\"");
}

TEST(JsonConstraint, TheMaskIsExactlyWhatTheGrammarTakes) {
  const auto s = schema_of(with_schema(person));
  const auto j = schema_of(R"({"type": "json_object"})");
  std::string out;
  for (const auto& v : {llama2_vocab(), qwen2_vocab()}) {
    int taken = 0;
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      random_walk(s, v, seed, 60, 2, out, &taken);
      EXPECT_GT(taken, 5) << out; // a walk long enough to reach strings, numbers, keys
    }
    // json_object: "{}" may end a walk at once; walks until three have gone somewhere
    int long_walks = 0;
    for (uint32_t seed = 10; seed < 40 && long_walks < 3; ++seed) {
      random_walk(j, v, seed, 60, 2, out, &taken);
      long_walks += taken > 5;
    }
    EXPECT_EQ(long_walks, 3);
  }
}

// Union[Cat, Dog]: the mask of two readings is exactly what feeding each token to them says
// (at the union's start too, where a token such as "1." fits only the reading the walk forks
// to), and every finished walk is a Cat or a Dog, never a mix.
TEST(JsonConstraint, UnionsOfObjectsWalkExactly) {
  const auto s = schema_of(with_schema(pets));
  auto schema = std::make_shared<const json_schema>(s);
  std::map<std::string, int> multi; // per prefix: tokens of several bytes allowed there
  for (const auto& v : {llama2_vocab(), qwen2_vocab()}) {
    std::map<char, int32_t> byte_token; // a token of each single byte
    for (int32_t id = 0; id < v->size(); ++id)
      if (v->bytes(id).size() == 1) byte_token.emplace(v->bytes(id)[0], id);
    for (const std::string prefix : {R"({"n":)", R"({"pet":)", R"({"pet": {"kind":)"}) {
      json_token_constraint c(schema, v, {});
      json_readings g(*schema);
      for (char ch : prefix) {
        ASSERT_TRUE(byte_token.count(ch)) << ch;
        ASSERT_TRUE(c.advance(byte_token[ch])) << prefix;
        ASSERT_TRUE(g.feed(static_cast<uint8_t>(ch)));
      }
      std::vector<uint64_t> bits;
      c.allowed(bits);
      for (int32_t id = 0; id < v->size(); ++id) {
        json_readings h = g;
        const bool want = !v->bytes(id).empty() && h.feed(v->bytes(id));
        ASSERT_EQ(bit(bits, id), want) << "after '" << prefix << "': '" << v->bytes(id) << "'";
        multi[prefix] += want && v->bytes(id).size() > 1;
      }
    }
  }
  for (const auto& [prefix, n] : multi) EXPECT_GT(n, 0) << prefix; // " {", " 1", ...
  // tokens that run past the byte where the readings part: only the reading the walk forks
  // to takes them (the integer reading comes first and stops at '.', Cat first and stops at 'd')
  auto toy = token_vocab::from_bytes(
      {"{", "}", "\"", ":", " ", "1", ".", "5", "n", "1.5", R"({"kind": "dog", "barks": 1})",
       R"({"kind": "cat", "meows": true})", R"({"kind": "cow")", "p", "e", "t"});
  for (const auto& [prefix, token, want] : {std::tuple{std::string(R"({"n":)"), 9, true},
                                            std::tuple{std::string(R"({"pet":)"), 10, true},
                                            std::tuple{std::string(R"({"pet":)"), 11, true},
                                            std::tuple{std::string(R"({"pet":)"), 12, false}}) {
    json_token_constraint c(schema, toy, {});
    for (char ch : prefix) {
      int32_t id = -1;
      for (int32_t k = 0; k < toy->size(); ++k)
        if (toy->bytes(k) == std::string(1, ch)) id = k;
      ASSERT_TRUE(id >= 0 && c.advance(id)) << ch;
    }
    std::vector<uint64_t> bits;
    c.allowed(bits);
    EXPECT_EQ(bit(bits, token), want) << prefix << " " << toy->bytes(token);
  }
  int finished = 0;
  for (const auto& v : {llama2_vocab(), qwen2_vocab()})
    for (uint32_t seed = 0; seed < 12; ++seed) {
      std::string out;
      random_walk(s, v, 500 + seed, 200, seed < 3 ? 1 : 1 << 30, out);
      json_readings g(s);
      if (!g.feed(out) || !g.done()) continue;
      ++finished;
      json doc;
      ASSERT_NO_THROW(doc = json::parse(out)) << out;
      EXPECT_TRUE(fits_pets(doc)) << out;
    }
  EXPECT_GT(finished, 3);
}

TEST(JsonConstraint, RandomWalksEndInJsonThatFitsTheSchema) {
  const auto s = schema_of(with_schema(person));
  auto v = llama2_vocab();
  int finished = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::string out;
    random_walk(s, v, 100 + seed, 400, 1 << 30, out);
    json_readings g(s);
    if (!g.feed(out) || !g.done()) continue; // cut at 400 tokens: nothing to parse
    ++finished;
    json doc;
    ASSERT_NO_THROW(doc = json::parse(out)) << out;
    ASSERT_TRUE(doc.is_object());
    EXPECT_TRUE(doc.contains("name") && doc["name"].is_string()) << out;
    EXPECT_TRUE(doc.contains("age") && doc["age"].is_number_integer()) << out;
    for (const auto& [k, val] : doc.items()) EXPECT_TRUE(person["properties"].contains(k)) << k;
  }
  EXPECT_GT(finished, 5); // a uniform walk closes strings and objects often enough
}
