// harmony_test.cpp: a GPT-OSS reply split by channel on its way out (text/harmony.hpp through
// output_processor): the analysis channel is the reasoning, the final channel the text, headers
// neither; stop strings apply to the text only; a reply that never opens a message is all text;
// "<|channel|>" spelled in plain text is text. The vocabulary: harmony_vocab.hpp.
#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "harmony_vocab.hpp"
#include "text/harmony.hpp"
#include "text/output_processor.hpp"

using namespace troupe;
using troupe::test::harmony_vocab;

namespace {

std::vector<int32_t> enc(const tokenizer& tok, const std::string& s) {
  auto r = tok.encode(s, false, true);
  EXPECT_TRUE(r);
  return r ? *r : std::vector<int32_t>{};
}

struct split {
  std::string text, reasoning;
  size_t accepted = 0;
};

// Pushes `reply` one token at a time, as the engine streams, then finishes.
split run(const tokenizer& tok, const std::string& reply, std::vector<std::string> stops = {}) {
  const auto prompt =
      enc(tok, "<|start|>user<|message|>Capital of France?<|end|><|start|>assistant");
  output_processor op(tok, prompt, std::move(stops), 0, harmony_tokens::of(tok));
  split out;
  for (int32_t id : enc(tok, reply)) {
    auto d = op.push(std::span<const int32_t>(&id, 1));
    out.text += d.text;
    out.reasoning += d.reasoning;
    out.accepted += d.accepted;
  }
  const auto tail = op.finish();
  out.text += tail.text;
  out.reasoning += tail.reasoning;
  return out;
}

} // namespace

TEST(Harmony, TokensAreFoundByName) {
  auto tok = harmony_vocab();
  ASSERT_TRUE(tok);
  const auto ids = harmony_tokens::of(*tok);
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->start, 641);
  EXPECT_EQ(ids->constrain, 647);
  auto stories = tokenizer::from_hf_dir(test::model_path("stories260K-hf"));
  ASSERT_TRUE(stories);
  EXPECT_FALSE(harmony_tokens::of(**stories)); // no harmony tokens: nothing to split
}

TEST(Harmony, AnalysisIsReasoningAndFinalIsTheText) {
  auto tok = harmony_vocab();
  ASSERT_TRUE(tok);
  const auto s = run(*tok, "<|channel|>analysis<|message|>The user asks for a capital. It is "
                           "Paris.<|end|><|start|>assistant<|channel|>final<|message|>The "
                           "capital of France is Paris.<|return|>");
  EXPECT_EQ(s.reasoning, "The user asks for a capital. It is Paris.");
  EXPECT_EQ(s.text, "The capital of France is Paris.");
}

TEST(Harmony, CommentaryForTheUserIsTextAndHeadersAreNeither) {
  auto tok = harmony_vocab();
  ASSERT_TRUE(tok);
  const auto s = run(*tok, "<|channel|>commentary<|message|>Looking it up.<|end|><|start|>"
                           "assistant<|channel|>final <|constrain|>json<|message|>{\"a\": 1}"
                           "<|return|>");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.text, "Looking it up.{\"a\": 1}");
}

TEST(Harmony, StopStringsApplyToTheTextOnly) {
  auto tok = harmony_vocab();
  ASSERT_TRUE(tok);
  const std::string reply = "<|channel|>analysis<|message|>Answer with Paris, then stop.<|end|>"
                            "<|start|>assistant<|channel|>final<|message|>It is Paris, of "
                            "course.<|return|>";
  const auto s = run(*tok, reply, {"Paris"});
  EXPECT_EQ(s.reasoning, "Answer with Paris, then stop.");
  EXPECT_EQ(s.text, "It is ");
  EXPECT_LT(s.accepted, enc(*tok, reply).size()); // the tokens after the stop are not taken
}

TEST(Harmony, AnUnframedReplyIsAllText) {
  auto tok = harmony_vocab();
  ASSERT_TRUE(tok);
  const auto s = run(*tok, "Paris is the capital.");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.text, "Paris is the capital.");
}

TEST(Harmony, SpelledTagsInTheBodyStayText) {
  auto tok = harmony_vocab();
  ASSERT_TRUE(tok);
  const auto prompt = enc(*tok, "<|start|>assistant");
  output_processor op(*tok, prompt, {}, 0, harmony_tokens::of(*tok));
  std::vector<int32_t> ids = enc(*tok, "<|channel|>final<|message|>");
  const auto body = tok->encode("write <|channel|> literally", false, false); // not special
  ASSERT_TRUE(body);
  ids.insert(ids.end(), body->begin(), body->end());
  auto d = op.push(ids);
  const auto tail = op.finish();
  EXPECT_EQ(d.text + tail.text, "write <|channel|> literally");
  EXPECT_EQ(d.reasoning + tail.reasoning, "");
}

namespace {

struct called {
  std::string text, reasoning;
  std::vector<tool_call> calls;
};

called run_tools(const tokenizer& tok, const std::string& reply, bool read) {
  const auto prompt = enc(tok, "<|start|>user<|message|>Weather?<|end|><|start|>assistant");
  output_processor op(tok, prompt, {}, 0, harmony_tokens::of(tok));
  op.read_tool_calls(read);
  called out;
  auto add = [&](output_processor::delta d) {
    out.text += d.text;
    out.reasoning += d.reasoning;
    for (auto& c : d.calls) out.calls.push_back(c);
  };
  for (int32_t id : enc(tok, reply)) add(op.push(std::span<const int32_t>(&id, 1)));
  add(op.finish());
  return out;
}

} // namespace

// A body addressed to functions.NAME (in the channel part or the role part, as the model card
// shows both) is a tool call when the request offered tools; otherwise it is text as before.
TEST(Harmony, BodiesAddressedToAFunctionAreToolCalls) {
  auto tok = harmony_vocab();
  ASSERT_TRUE(tok);
  const std::string reply =
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
      "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", "
      "\"unit\": \"celsius\"}<|call|>";
  called r = run_tools(*tok, reply, true);
  EXPECT_EQ(r.reasoning, "Need the weather.");
  EXPECT_EQ(r.text, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","unit":"celsius"})");
  // the recipient in the role part; generation stopped on <|call|> before it came through
  r = run_tools(*tok,
                "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}",
                true);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_time");
  EXPECT_EQ(r.calls[0].arguments, "{}");
  // arguments that are not a JSON object are text; no tools offered: the body is text
  r = run_tools(*tok, "<|channel|>commentary to=functions.f<|message|>not json<|call|>", true);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, "not json");
  r = run_tools(*tok, reply, false);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, "{\"city\": \"Paris\", \"unit\": \"celsius\"}");
  // arguments nested deeper than any schema are text too (not a stack overflow in dump())
  std::string deep = "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  r = run_tools(*tok, "<|channel|>commentary to=functions.f<|message|>" + deep + "<|call|>", true);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, deep);
}
