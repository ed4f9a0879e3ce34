// tool_calls_test.cpp: reading tool calls out of replies (text/tool_calls.hpp) in each format,
// fed whole and split at every byte (a stream's text arrives in any pieces): the content and the
// calls must come out the same, a call's text never leaks into the content, and text that only
// looks like a call is content.
#include <gtest/gtest.h>

#include "text/tool_calls.hpp"

namespace troupe {
namespace {

struct result {
  std::string text;
  std::vector<tool_call> calls;
};

result run(tool_format f, const std::string& reply, size_t split) {
  tool_call_parser p(f);
  result r;
  for (size_t i = 0; i < reply.size(); i += split) {
    auto d = p.push(reply.substr(i, split));
    r.text += d.text;
    for (auto& c : d.calls) r.calls.push_back(c);
  }
  auto d = p.finish();
  r.text += d.text;
  for (auto& c : d.calls) r.calls.push_back(c);
  return r;
}

// every split gives what the whole reply gives
result check(tool_format f, const std::string& reply) {
  const result whole = run(f, reply, reply.size() + 1);
  for (size_t split = 1; split <= reply.size(); ++split) {
    const result r = run(f, reply, split);
    EXPECT_EQ(r.text, whole.text) << "split " << split;
    EXPECT_EQ(r.calls.size(), whole.calls.size()) << "split " << split;
    for (size_t i = 0; i < r.calls.size() && i < whole.calls.size(); ++i) {
      EXPECT_EQ(r.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(r.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  return whole;
}

TEST(ToolCalls, FormatsAreKnownByTheirTemplatesMarkers) {
  EXPECT_EQ(detect_tool_format("{{- '<tool_call>\\n' }}"), tool_format::hermes);
  EXPECT_EQ(detect_tool_format("<|python_tag|> ... \"parameters\": "), tool_format::llama3);
  EXPECT_EQ(detect_tool_format("{{- '[TOOL_CALLS]' }}"), tool_format::mistral);
  EXPECT_EQ(detect_tool_format("<|im_start|>"), tool_format::none);
}

TEST(ToolCalls, HermesBlocksAreCallsAndTheRestIsContent) {
  result r = check(tool_format::hermes,
                   "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                   "{\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n"
                   "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(r.text, "Let me look.\n");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","unit":"celsius"})"); // the model's order
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  // arguments written as a JSON string are read as the object they hold
  r = check(tool_format::hermes,
            "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a":1})");
  // no call: all content, '<' held only while it could start one
  r = check(tool_format::hermes, "a < b and <tool is not <tool_call");
  EXPECT_EQ(r.text, "a < b and <tool is not <tool_call");
  EXPECT_TRUE(r.calls.empty());
  // a block that is not a call, or is cut off, is content
  r = check(tool_format::hermes, "x<tool_call>{not json}</tool_call>y");
  EXPECT_EQ(r.text, "x<tool_call>{not json}</tool_call>y");
  EXPECT_TRUE(r.calls.empty());
  r = check(tool_format::hermes, "x<tool_call>{\"name\": \"f\", \"argu");
  EXPECT_EQ(r.text, "x<tool_call>{\"name\": \"f\", \"argu");
  r = check(tool_format::hermes, "<tool_call>{\"arguments\": {}}</tool_call>"); // no name
  EXPECT_TRUE(r.calls.empty());
}

// Qwen3-Coder's and GLM's markup: the values are text, read later by the schema
TEST(ToolCalls, MarkupCallsOfQwen3CoderAndGlm) {
  EXPECT_EQ(detect_tool_format("<tool_call>\n<function=x>"), tool_format::qwen3_coder);
  EXPECT_EQ(detect_tool_format("<tool_call>{name}<arg_key>"), tool_format::glm);
  result r = check(tool_format::qwen3_coder,
                   "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan "
                   "Jose\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
                   "</tool_call>");
  EXPECT_EQ(r.text, "Checking.\n");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_TRUE(r.calls[0].untyped);
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"San Jose","days":"3"})");
  const std::string schema =
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}})";
  EXPECT_EQ(typed_arguments(r.calls[0].arguments, schema), R"({"city":"San Jose","days":3})");
  // a string parameter keeps digits as text; a value that is not JSON stays text
  EXPECT_EQ(typed_arguments(R"({"city":"42","days":"soon"})", schema),
            R"({"city":"42","days":"soon"})");
  r = check(tool_format::glm,
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
            "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(typed_arguments(r.calls[0].arguments, schema), R"({"city":"Paris","days":2})");
  // markup that does not close is text
  r = check(tool_format::qwen3_coder, "<tool_call><function=f><parameter=a>1</tool_call>");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, "<tool_call><function=f><parameter=a>1</tool_call>");
}

TEST(ToolCalls, Llama3JsonRepliesAreCalls) {
  result r = check(tool_format::llama3,
                   "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.text, "");
  r = check(tool_format::llama3,
            "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x;y\"}}; {\"name\": \"b\", "
            "\"parameters\": {}}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"s":"x;y"})");
  EXPECT_EQ(r.calls[1].name, "b");
  r = check(tool_format::llama3, "The weather is {fine}.");
  EXPECT_EQ(r.text, "The weather is {fine}.");
  r = check(tool_format::llama3, "{\"not\": \"a call\"}");
  EXPECT_EQ(r.text, "{\"not\": \"a call\"}");
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolCalls, MistralListsAreCalls) {
  result r = check(tool_format::mistral,
                   "Sure. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}}, {\"name\": "
                   "\"g\", \"arguments\": {}}]");
  EXPECT_EQ(r.text, "Sure. ");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].name, "g");
  r = check(tool_format::mistral, "[TOOL_CALLS] oops");
  EXPECT_EQ(r.text, "[TOOL_CALLS] oops");
}

} // namespace
} // namespace troupe
