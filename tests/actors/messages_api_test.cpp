// messages_api_test.cpp: Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens)
// over real HTTP. A conversation of content blocks (a user's text, an assistant's tool_use, the
// user's tool_result) with client tools is prompted exactly as transformers renders the same
// chat with Qwen2.5's published template, and count_tokens counts that prompt; a reply is the
// chat endpoint's reply to the same messages; the event stream adds up to the Message; stop
// reasons (max_tokens, stop_sequence with the sequence, tool_use for a forced tool) are
// Anthropic's; errors take Anthropic's shape, and x-api-key authenticates. The builder's
// thinking, text and tool_use blocks are checked without a server.
#include <string>

#include <gtest/gtest.h>

#include "actors/messages_api.hpp"
#include "gateway_util.hpp"

using namespace gw_test;

namespace {

using ojson = nlohmann::ordered_json;

std::string text_of(const json& message) {
  std::string out;
  for (const auto& b : message["content"])
    if (b["type"] == "text") out += b["text"].get<std::string>();
  return out;
}

} // namespace

TEST(MessagesApi, BlocksArePromptedAsTransformersRendersTheChat) {
  // Qwen2.5's tool instructions take ~750 of stories' tokens: the context is lifted past 512
  const auto m = stories_with(qwen25("template"), 2048);
  server s({}, {}, m);
  const ojson& ctx = jinja_fixture()["contexts"]["tool_calls"];
  ojson tools = ojson::array();
  for (const auto& t : ctx["tools"])
    tools.push_back({{"name", t["function"]["name"]},
                     {"description", t["function"]["description"]},
                     {"input_schema", t["function"]["parameters"]}});
  const ojson msgs = ojson::array({{{"role", "user"}, {"content", ctx["messages"][0]["content"]}},
                                   {{"role", "assistant"},
                                    {"content",
                                     {{{"type", "tool_use"},
                                       {"id", "call_1"},
                                       {"name", "get_weather"},
                                       {"input", {{"city", "Paris"}, {"unit", "celsius"}}}}}}},
                                   {{"role", "user"},
                                    {"content",
                                     {{{"type", "tool_result"},
                                       {"tool_use_id", "call_1"},
                                       {"content", ctx["messages"][2]["content"]},
                                       {"cache_control", {{"type", "ephemeral"}}}}}}}});
  ojson body = {{"model", "stories"}, {"max_tokens", 8}, {"messages", msgs}, {"tools", tools}};
  const serving_info info = jinja_serving_info(*m, qwen25("template"));
  auto parsed = parse_messages_request(body.dump(), info);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(parsed))
      << std::get<api_error>(parsed).message;
  const auto want = *m->tok->encode(qwen25("renders", "tool_calls"), false);
  EXPECT_EQ(std::get<parsed_request>(parsed).prompts.at(0), want);
  // count_tokens counts the same prompt
  reply r = post(s.port, "/v1/messages/count_tokens",
                 ojson{{"model", "stories"}, {"messages", msgs}, {"tools", tools}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["input_tokens"], want.size());
  // the system prompt is the chat's system message
  body["system"] = ojson::array({{{"type", "text"}, {"text", "Be brief."}}});
  ojson chat_msgs = ctx["messages"];
  chat_msgs[1]["tool_calls"][0]["function"]["arguments"] =
      R"({"city": "Paris", "unit": "celsius"})";
  chat_msgs.insert(chat_msgs.begin(), ojson{{"role", "system"}, {"content", "Be brief."}});
  parsed = parse_messages_request(body.dump(), info);
  auto chat = parse_request(
      ojson{{"model", "stories"}, {"messages", chat_msgs}, {"tools", ctx["tools"]}}.dump(), true,
      info);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(parsed) &&
              std::holds_alternative<parsed_request>(chat));
  EXPECT_EQ(std::get<parsed_request>(parsed).prompts.at(0),
            std::get<parsed_request>(chat).prompts.at(0));
  // a forced tool: the reply is one tool_use block, its input an object, stop_reason tool_use
  const ojson tight = ojson::parse(R"([{"name": "get_time", "input_schema": {"type": "object",
      "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"],
      "additionalProperties": false}}])");
  json use;
  for (int seed = 1; seed <= 4 && use.is_null(); ++seed) {
    const ojson ask = {{"model", "stories"},
                       {"max_tokens", 200},
                       {"messages", {{{"role", "user"}, {"content", "Time?"}}}},
                       {"tools", tight},
                       {"tool_choice", {{"type", "tool"}, {"name", "get_time"}}},
                       {"top_k", 40},
                       {"temperature", 0.9},
                       {"seed", seed}};
    r = post(s.port, "/v1/messages", ask.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    if (r.j["stop_reason"] == "max_tokens") continue; // cut off: not a call
    EXPECT_EQ(r.j["stop_reason"], "tool_use") << r.body;
    ASSERT_EQ(r.j["content"].size(), 1u) << r.body;
    use = r.j["content"][0];
  }
  ASSERT_FALSE(use.is_null()) << "every reply was cut off by max_tokens";
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["name"], "get_time");
  ASSERT_TRUE(use["input"].is_object());
  EXPECT_TRUE(use["input"]["zone"] == "UTC" || use["input"]["zone"] == "CET") << use.dump();
}

TEST(MessagesApi, AStreamsEventsAddUpToTheMessage) {
  server s;
  json body = {{"model", "stories"},
               {"max_tokens", 12},
               {"system", "You tell stories."},
               {"messages", {{{"role", "user"}, {"content", "A story about a cat"}}}},
               {"temperature", 0}};
  const reply whole = post(s.port, "/v1/messages", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.j["type"], "message");
  EXPECT_EQ(whole.j["role"], "assistant");
  EXPECT_EQ(whole.j["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(whole.j["stop_reason"], "max_tokens");
  EXPECT_EQ(whole.j["usage"]["output_tokens"], 12);
  const std::string text = text_of(whole.j);
  EXPECT_FALSE(text.empty());
  // the chat endpoint's reply to the same messages
  const reply chat = post(s.port, "/v1/chat/completions",
                          json{{"model", "stories"},
                               {"max_tokens", 12},
                               {"temperature", 0},
                               {"messages",
                                {{{"role", "system"}, {"content", "You tell stories."}},
                                 {{"role", "user"}, {"content", "A story about a cat"}}}}}
                              .dump());
  EXPECT_EQ(text, chat.j["choices"][0]["message"]["content"]);
  EXPECT_EQ(whole.j["usage"]["input_tokens"], chat.j["usage"]["prompt_tokens"]);
  body["stream"] = true;
  const reply st = post(s.port, "/v1/messages", body.dump());
  ASSERT_EQ(st.status, 200);
  const auto evs = events(st.body);
  ASSERT_GE(evs.size(), 7u);
  std::vector<std::string> types;
  std::string deltas;
  for (const auto& e : evs) {
    ASSERT_TRUE(e.is_object());
    types.push_back(e["type"]);
    if (e["type"] == "content_block_delta") {
      EXPECT_EQ(e["index"], 0);
      EXPECT_EQ(e["delta"]["type"], "text_delta");
      deltas += e["delta"]["text"].get<std::string>();
    }
  }
  EXPECT_EQ(deltas, text);
  EXPECT_EQ(types[0], "message_start");
  // message_start's usage is final: the prompt, less what the prefix cache gave (this second
  // request finds the first one's blocks)
  const json& u0 = evs[0]["message"]["usage"];
  EXPECT_GT(u0["cache_read_input_tokens"].get<int64_t>(), 0) << evs[0].dump();
  EXPECT_EQ(u0["input_tokens"].get<int64_t>() + u0["cache_read_input_tokens"].get<int64_t>(),
            whole.j["usage"]["input_tokens"].get<int64_t>());
  EXPECT_EQ(types[1], "ping");
  EXPECT_EQ(types[2], "content_block_start");
  EXPECT_EQ(evs[2]["content_block"]["type"], "text");
  EXPECT_EQ(types[types.size() - 3], "content_block_stop");
  EXPECT_EQ(types[types.size() - 2], "message_delta");
  EXPECT_EQ(evs[evs.size() - 2]["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(evs[evs.size() - 2]["usage"]["output_tokens"], 12);
  EXPECT_EQ(types.back(), "message_stop");
  EXPECT_NE(dechunk(st.body).find("event: content_block_delta\ndata: {"), std::string::npos);
  // a stop sequence: the text stops before it, and the reply names it
  const std::string word = text.substr(text.find_last_of(' ', text.size() - 2) + 1, 3);
  body["stream"] = false;
  body["stop_sequences"] = {"zzz", word};
  const reply stopped = post(s.port, "/v1/messages", body.dump());
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  EXPECT_EQ(stopped.j["stop_reason"], "stop_sequence") << stopped.body << " word " << word;
  EXPECT_EQ(stopped.j["stop_sequence"], word);
  EXPECT_EQ(text_of(stopped.j), text.substr(0, text.find(word)));
  // count_tokens of the same request
  const reply n = post(
      s.port, "/v1/messages/count_tokens",
      json{{"model", "stories"}, {"system", "You tell stories."}, {"messages", body["messages"]}}
          .dump());
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.j["input_tokens"], whole.j["usage"]["input_tokens"]);
}

TEST(MessagesApi, ErrorsTakeAnthropicsShapeAndNameTheField) {
  server s;
  const std::pair<std::string, std::string> cases[] = {
      {R"("messages":[{"role":"user","content":"x"}])", "max_tokens"},
      {R"("max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}])",
       "image"},
      {R"("max_tokens":4,"messages":[{"role":"system","content":"x"}])", "role"},
      {R"("max_tokens":4,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}])",
       "bash_20250124"},
      {R"("max_tokens":4,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"bogus"})",
       "thinking"},
      {R"("max_tokens":4,"messages":[{"role":"user","content":"x"}],"stop_sequences":[""])",
       "stop_sequences"},
      {R"("max_tokens":4,"messages":[{"role":"user","content":"x"}],"mcp_servers":[{}])",
       "mcp_servers"},
      {R"("max_tokens":4,"messages":[{"role":"user","content":"x"}],"frequency":1)", "frequency"},
      {R"("max_tokens":4,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"any"})",
       "'tool_choice' needs 'tools'"},
  };
  // a format whose type is not a string (was a JSON type_error thrown on a parsing thread)
  const reply typed =
      post(s.port, "/v1/messages",
           R"({"model":"stories","max_tokens":4,"messages":[{"role":"user","content":"x"}],)"
           R"("output_config":{"format":{"type":1}}})");
  EXPECT_EQ(typed.status, 400) << typed.body;
  for (const auto& [fields, word] : cases) {
    const reply r = post(s.port, "/v1/messages", R"({"model":"stories",)" + fields + "}");
    EXPECT_EQ(r.status, 400) << fields << " -> " << r.body;
    EXPECT_EQ(r.j["type"], "error") << r.body;
    EXPECT_EQ(r.j["error"]["type"], "invalid_request_error") << r.body;
    EXPECT_NE(r.j["error"]["message"].get<std::string>().find(word), std::string::npos)
        << fields << " -> " << r.body;
  }
  const reply nf =
      post(s.port, "/v1/messages",
           R"({"model":"nope","max_tokens":4,"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(nf.j["error"]["type"], "not_found_error");
  EXPECT_EQ(get(s.port, "/v1/messages").j["error"]["type"], "invalid_request_error");
  // x-api-key authenticates, as Anthropic's clients send the key
  gateway_options go;
  go.api_key = "sekrit";
  server locked(go);
  const std::string ask =
      R"({"model":"stories","max_tokens":2,"messages":[{"role":"user","content":"x"}]})";
  const reply no = post(locked.port, "/v1/messages", ask, "x-api-key: wrong\r\n");
  EXPECT_EQ(no.status, 401);
  EXPECT_EQ(no.j["error"]["type"], "authentication_error");
  EXPECT_EQ(post(locked.port, "/v1/messages", ask, "x-api-key: sekrit\r\n").status, 200);
}

TEST(MessagesApi, ThinkingTextAndToolUseBecomeBlocksInOrder) {
  parsed_request r;
  r.chat = true;
  r.model = "m";
  message_builder b(r, "msg_1", 7);
  std::string out = b.start();
  out += b.step("Let me ", "", {});
  out += b.step("think.", "It is", {});
  out += b.step("", " noon.", {});
  tool_call call;
  call.id = "call_7";
  call.name = "get_time";
  call.arguments = R"({"zone":"UTC"})";
  out += b.step("", "", {call});
  out += b.finish(finish_reason::stop, "", 9);
  std::vector<std::string> types;
  std::vector<json> data;
  for (size_t at = 0; (at = out.find("event: ", at)) != std::string::npos;) {
    const size_t nl = out.find('\n', at);
    types.push_back(out.substr(at + 7, nl - at - 7));
    const size_t end = out.find("\n\n", nl);
    data.push_back(json::parse(out.substr(nl + 7, end - nl - 7)));
    EXPECT_EQ(data.back()["type"], types.back());
    at = end;
  }
  const std::vector<std::string> want = {"message_start",       "ping",
                                         "content_block_start", // thinking
                                         "content_block_delta", "content_block_delta",
                                         "content_block_stop",
                                         "content_block_start", // text
                                         "content_block_delta", "content_block_delta",
                                         "content_block_stop",
                                         "content_block_start", // tool_use
                                         "content_block_delta", "content_block_stop",
                                         "message_delta",       "message_stop"};
  EXPECT_EQ(types, want);
  EXPECT_EQ(data[11]["delta"]["type"], "input_json_delta");
  EXPECT_EQ(json::parse(data[11]["delta"]["partial_json"].get<std::string>())["zone"], "UTC");
  EXPECT_EQ(data[10]["index"], 2);
  const json m = json::parse(b.body());
  ASSERT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][0]["thinking"], "Let me think.");
  EXPECT_EQ(m["content"][1]["text"], "It is noon.");
  EXPECT_EQ(m["content"][2]["input"]["zone"], "UTC");
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 7);
  EXPECT_EQ(m["usage"]["output_tokens"], 9);
}

TEST(MessagesApi, WhatClaudeCodeSendsIsServed) {
  server s;
  // its request shape: system blocks with cache_control, thinking with a budget, context
  // management, top-level cache_control and diagnostics, metadata.user_id, more than four stop
  // sequences, a max_tokens far past the context
  const std::string body = R"({"model":"stories","max_tokens":64000,
      "system":[{"type":"text","text":"You tell stories.","cache_control":{"type":"ephemeral"}},
                {"type":"text","text":"Be brief."}],
      "messages":[{"role":"user","content":[{"type":"text","text":"A story"}]},
                  {"role":"user","content":"about a cat"}],
      "thinking":{"type":"enabled","budget_tokens":1024},
      "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
      "cache_control":{"type":"ephemeral"},"diagnostics":{},
      "metadata":{"user_id":"u1"},"stop_sequences":["qqq1","qqq2","qqq3","qqq4","qqq5"],
      "temperature":0})";
  const reply r = post(s.port, "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  // the context ran out before max_tokens: Anthropic's stop reason for it
  EXPECT_EQ(r.j["stop_reason"], "model_context_window_exceeded") << r.body;
  EXPECT_EQ(r.j["usage"]["input_tokens"].get<int64_t>() +
                r.j["usage"]["output_tokens"].get<int64_t>(),
            stories()->config.ctx)
      << r.body;
  // blocks and consecutive turns of one role join with newlines, as the chat endpoint joins
  const reply n = post(s.port, "/v1/messages/count_tokens", R"({"model":"stories",
      "system":[{"type":"text","text":"You tell stories."},{"type":"text","text":"Be brief."}],
      "messages":[{"role":"user","content":"A story"},{"role":"user","content":"about a cat"}]})");
  const reply t = post(s.port, "/tokenize", R"({"model":"stories","messages":[
      {"role":"system","content":"You tell stories.\nBe brief."},
      {"role":"user","content":"A story\nabout a cat"}]})");
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.j["input_tokens"], t.j["count"]);
}

TEST(MessagesApi, AnAssistantTurnLastIsAPrefillTheReplyContinues) {
  const auto m = stories_with(qwen25("template"), 2048);
  const serving_info info = jinja_serving_info(*m, qwen25("template"));
  auto r = parse_messages_request(R"({"model":"stories","max_tokens":8,"messages":[
      {"role":"user","content":"Once"},{"role":"assistant","content":"upon a"}]})",
                                  info);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(r)) << std::get<api_error>(r).message;
  const std::string& text = std::get<parsed_request>(r).prompt_texts.at(0);
  EXPECT_EQ(text.substr(text.size() - 6), "upon a") << text; // no end of turn, no new turn
}

TEST(MessagesApi, AModelAliasIsServedUnderItsName) {
  // Claude Code asks for fixed model names (its background requests a small model's):
  // --served-model-name stories,claude-haiku serves both
  gateway_options go;
  go.model_aliases = {"claude-haiku"};
  server s(go);
  const reply r =
      post(s.port, "/v1/messages",
           R"({"model":"claude-haiku","max_tokens":2,"messages":[{"role":"user","content":"x"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["model"], "claude-haiku");
  EXPECT_EQ(
      post(s.port, "/v1/chat/completions",
           R"({"model":"claude-haiku","max_tokens":2,"messages":[{"role":"user","content":"x"}]})")
          .status,
      200);
  const reply models = get(s.port, "/v1/models");
  ASSERT_EQ(models.j["data"].size(), 2u) << models.body;
  EXPECT_EQ(models.j["data"][1]["id"], "claude-haiku");
  EXPECT_EQ(get(s.port, "/v1/models/claude-haiku").status, 200);
  EXPECT_EQ(
      post(s.port, "/v1/messages",
           R"({"model":"claude-opus","max_tokens":2,"messages":[{"role":"user","content":"x"}]})")
          .status,
      404);
}

TEST(MessagesApi, PrefixCacheHitsAreCachedTokensInChatResponsesAndMessagesUsage) {
  server s;
  // a prompt of several KV blocks, asked for twice: the second finds its blocks cached
  std::string story = "Once upon a time there was a little girl named Lily who liked to play.";
  for (int i = 0; i < 2; ++i) story += " " + story;
  const json msgs = {{{"role", "user"}, {"content", story}}};
  const std::string chat = json{{"model", "stories"}, {"messages", msgs}, {"max_tokens", 2}}.dump();
  const reply first = post(s.port, "/v1/chat/completions", chat);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const reply again = post(s.port, "/v1/chat/completions", chat);
  const int64_t prompt = again.j["usage"]["prompt_tokens"];
  const int64_t cached = again.j["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 0) << again.body;
  EXPECT_LT(cached, prompt); // at least the last token is computed
  // the Responses API and the Messages API say the same in their words
  const reply resp =
      post(s.port, "/v1/responses",
           json{{"model", "stories"}, {"input", story}, {"max_output_tokens", 2}}.dump());
  EXPECT_EQ(resp.j["usage"]["input_tokens_details"]["cached_tokens"], cached) << resp.body;
  const reply msg = post(s.port, "/v1/messages",
                         json{{"model", "stories"}, {"messages", msgs}, {"max_tokens", 2}}.dump());
  EXPECT_EQ(msg.j["usage"]["cache_read_input_tokens"], cached) << msg.body;
  EXPECT_EQ(msg.j["usage"]["input_tokens"], prompt - cached); // Anthropic's: the rest
}
