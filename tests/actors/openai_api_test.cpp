// openai_api_test.cpp: chat requests to a harmony (GPT-OSS) model: the prompt is the harmony
// rendering with the requested reasoning effort, generation stops on <|return|> and <|call|>,
// replies carry reasoning_content (null when there was none) beside the content, in full and
// in stream deltas; reasoning_effort is refused, by name, for a model of another chat format
// and for a value the template does not know.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../text/harmony_vocab.hpp"
#include "actors/openai_api.hpp"

using namespace troupe;
using namespace troupe::actors;
using nlohmann::json;

namespace {

serving_info harmony_model(const tokenizer& tok) {
  serving_info info;
  info.model_name = "gpt-oss";
  info.tok = &tok;
  info.context = 4096;
  info.chat = chat_format::harmony;
  info.harmony = harmony_tokens::of(tok);
  return info;
}

const std::string ask =
    R"({"model":"gpt-oss","messages":[{"role":"developer","content":"Be brief."},)"
    R"({"role":"user","content":"Capital of France?"}])";

} // namespace

TEST(OpenAiApi, HarmonyChatRendersTheRequestedReasoningEffort) {
  auto tok = test::harmony_vocab();
  ASSERT_TRUE(tok);
  const serving_info info = harmony_model(*tok);
  auto r = parse_request(ask + R"(,"reasoning_effort":"high"})", true, info);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(r)) << std::get<api_error>(r).message;
  const auto& req = std::get<parsed_request>(r);
  EXPECT_TRUE(req.reasoning);
  const std::string& text = req.prompt_texts.at(0);
  EXPECT_EQ(text.rfind("<|start|>system<|message|>", 0), 0u);
  EXPECT_NE(text.find("\nReasoning: high\n"), std::string::npos);
  EXPECT_NE(text.find("<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
                      "<|start|>user<|message|>Capital of France?<|end|><|start|>assistant"),
            std::string::npos);
  // the special tokens are tokens, not text
  const auto ids = tok->encode(text, false, true);
  ASSERT_TRUE(ids);
  EXPECT_EQ(req.prompts.at(0), *ids);
  EXPECT_EQ(req.prompts[0].front(), info.harmony->start);
  // a reply ends on <|return|>, a tool call on <|call|>; <|end|> only closes a message
  const auto& stops = req.base.stop_ids;
  EXPECT_NE(std::find(stops.begin(), stops.end(), info.harmony->ret), stops.end());
  EXPECT_NE(std::find(stops.begin(), stops.end(), info.harmony->call), stops.end());
  EXPECT_EQ(std::find(stops.begin(), stops.end(), info.harmony->end), stops.end());
  // the reply is split by its special tokens: they cannot be shown as text
  auto shown = parse_request(ask + R"(,"skip_special_tokens":false})", true, info);
  ASSERT_TRUE(std::holds_alternative<api_error>(shown));
  EXPECT_EQ(std::get<api_error>(shown).param, "skip_special_tokens");
  // the default effort is the template's, medium
  auto d = parse_request(ask + "}", true, info);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(d));
  EXPECT_NE(std::get<parsed_request>(d).prompt_texts.at(0).find("\nReasoning: medium\n"),
            std::string::npos);
}

TEST(OpenAiApi, ReasoningEffortIsRefusedWhereItMeansNothing) {
  auto tok = test::harmony_vocab();
  ASSERT_TRUE(tok);
  serving_info info = harmony_model(*tok);
  auto bad = parse_request(ask + R"(,"reasoning_effort":"extreme"})", true, info);
  ASSERT_TRUE(std::holds_alternative<api_error>(bad));
  EXPECT_EQ(std::get<api_error>(bad).param, "reasoning_effort");
  info.chat = chat_format::chatml;
  auto other = parse_request(ask + R"(,"reasoning_effort":"low"})", true, info);
  ASSERT_TRUE(std::holds_alternative<api_error>(other));
  EXPECT_EQ(std::get<api_error>(other).status, 400);
  EXPECT_NE(std::get<api_error>(other).message.find("chatml"), std::string::npos);
  EXPECT_FALSE(std::holds_alternative<api_error>(parse_request(ask + "}", true, info)));
}

TEST(OpenAiApi, RepliesCarryReasoningContentBesideTheContent) {
  auto tok = test::harmony_vocab();
  ASSERT_TRUE(tok);
  auto r = parse_request(ask + "}", true, harmony_model(*tok));
  ASSERT_TRUE(std::holds_alternative<parsed_request>(r));
  const auto& req = std::get<parsed_request>(r);
  choice_result thought{0, "Paris.", "The user wants a capital.", finish_reason::stop, {}};
  choice_result plain{1, "Paris.", "", finish_reason::stop, {}};
  const json body = json::parse(completion_body(req, "id", 0, {thought, plain}, 10, 5, *tok));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Paris.");
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "The user wants a capital.");
  EXPECT_TRUE(body["choices"][1]["message"]["reasoning_content"].is_null());
  const std::string chunk = stream_chunk(req, "id", 0, 0, "", finish_reason::none, true, nullptr,
                                         *tok, nullptr, "The user");
  const json ev = json::parse(chunk.substr(6));
  EXPECT_EQ(ev["choices"][0]["delta"]["reasoning_content"], "The user");
  EXPECT_EQ(ev["choices"][0]["delta"]["role"], "assistant");
  // another format's replies have no reasoning_content at all
  serving_info chatml = harmony_model(*tok);
  chatml.chat = chat_format::chatml;
  auto c = parse_request(ask + "}", true, chatml);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(c));
  const json cb =
      json::parse(completion_body(std::get<parsed_request>(c), "id", 0, {plain}, 10, 5, *tok));
  EXPECT_FALSE(cb["choices"][0]["message"].contains("reasoning_content"));
}
