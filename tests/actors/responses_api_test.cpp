// responses_api_test.cpp: OpenAI's Responses API (/v1/responses) over real HTTP. Input items
// (a user message, a function_call, its function_call_output), instructions and function tools
// are prompted exactly as transformers renders the same chat with Qwen2.5's published template,
// and a reply is the chat endpoint's reply to the same messages; previous_response_id continues
// a stored response; a stream's typed events number themselves and add up to the Response;
// stored responses are read and deleted by id; what is not served is a 400 naming the field.
// The response builder (reasoning, text and calls as output items) and the store's bounds are
// checked without a server, and a harmony model's reasoning effort reaching its prompt.
#include <string>

#include <gtest/gtest.h>

#include "../text/harmony_vocab.hpp"
#include "actors/responses_api.hpp"
#include "gateway_util.hpp"

using namespace gw_test;

namespace {

using ojson = nlohmann::ordered_json;

// The fixture's chat tools in the Responses API's flat shape.
// What the gateway knows of a harmony (GPT-OSS) model with this vocabulary.
serving_info harmony_info(const tokenizer& tok) {
  serving_info info;
  info.model_name = "gpt-oss";
  info.tok = &tok;
  info.context = 4096;
  info.chat = chat_format::harmony;
  info.harmony = harmony_tokens::of(tok);
  return info;
}

ojson responses_tools(const ojson& chat_tools) {
  ojson out = ojson::array();
  for (const auto& t : chat_tools) {
    ojson f = {{"type", "function"}};
    for (auto& [k, v] : t["function"].items()) f[k] = v;
    out.push_back(std::move(f));
  }
  return out;
}

// The text of a Response's message items.
std::string output_text(const json& r) {
  std::string out;
  for (const auto& item : r["output"])
    if (item["type"] == "message")
      for (const auto& part : item["content"]) out += part["text"].get<std::string>();
  return out;
}

std::string chat_text(uint16_t port, json messages, json extra = json::object()) {
  json body = {{"model", "stories"}, {"messages", std::move(messages)}, {"temperature", 0}};
  body.update(extra);
  const reply r = post(port, "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const json& c = r.j["choices"][0]["message"]["content"];
  return c.is_string() ? c.get<std::string>() : "";
}

} // namespace

TEST(ResponsesApi, InputItemsArePromptedAsTransformersRendersTheChat) {
  // Qwen2.5's tool instructions take ~750 of stories' tokens: the context is lifted past 512
  const auto m = stories_with(qwen25("template"), 2048);
  server s({}, {}, m);
  const ojson& ctx = jinja_fixture()["contexts"]["tool_calls"];
  // the fixture's conversation as Responses input items
  const std::string args = R"({"city": "Paris", "unit": "celsius"})";
  ojson input = ojson::array({{{"role", "user"}, {"content", ctx["messages"][0]["content"]}},
                              {{"type", "function_call"},
                               {"call_id", "call_1"},
                               {"name", "get_weather"},
                               {"arguments", args}},
                              {{"type", "function_call_output"},
                               {"call_id", "call_1"},
                               {"output", ctx["messages"][2]["content"]}}});
  ojson body = {{"model", "stories"},
                {"input", input},
                {"tools", responses_tools(ctx["tools"])},
                {"max_output_tokens", 8},
                {"temperature", 0}};
  // the prompt's tokens are transformers' rendering of the same chat
  const serving_info info = jinja_serving_info(*m, qwen25("template"));
  auto parsed = parse_responses_request(body.dump(), info, nullptr);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(parsed))
      << std::get<api_error>(parsed).message;
  EXPECT_EQ(std::get<parsed_request>(parsed).prompts.at(0),
            *m->tok->encode(qwen25("renders", "tool_calls"), false));
  // instructions are the system message before the input
  ojson msgs = ctx["messages"];
  msgs[1]["tool_calls"][0]["function"]["arguments"] = args;
  msgs.insert(msgs.begin(), ojson{{"role", "system"}, {"content", "Be brief."}});
  body["instructions"] = "Be brief.";
  parsed = parse_responses_request(body.dump(), info, nullptr);
  // (ordered: the template shows the tools in the client's key order)
  auto chat = parse_request(
      ojson{{"model", "stories"}, {"messages", msgs}, {"tools", ctx["tools"]}}.dump(), true, info);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(parsed) &&
              std::holds_alternative<parsed_request>(chat));
  EXPECT_EQ(std::get<parsed_request>(parsed).prompts.at(0),
            std::get<parsed_request>(chat).prompts.at(0));
  // over HTTP: the same prompt (its count), and a Response cut by max_output_tokens
  reply r = post(s.port, "/v1/responses", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["object"], "response");
  EXPECT_EQ(r.j["usage"]["input_tokens"], std::get<parsed_request>(chat).prompts[0].size());
  EXPECT_EQ(r.j["status"], "incomplete");
  EXPECT_EQ(r.j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r.j["usage"]["output_tokens"], 8);
  // a named function's call (parameters that leave the random model few choices, so that a
  // reply ends), then its output sent back by previous_response_id
  const ojson tight = ojson::parse(R"([{"type": "function", "name": "get_time",
      "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
                     "required": ["zone"], "additionalProperties": false}}])");
  json call;
  for (int seed = 1; seed <= 4 && call.is_null(); ++seed) {
    body = {{"model", "stories"},
            {"input", ctx["messages"][0]["content"]},
            {"instructions", "Answer with a tool."},
            {"tools", tight},
            {"tool_choice", {{"type", "function"}, {"name", "get_time"}}},
            {"max_output_tokens", 200},
            {"seed", seed}};
    r = post(s.port, "/v1/responses", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    if (r.j["status"] != "completed") continue; // cut off: not a call
    ASSERT_EQ(r.j["output"].size(), 1u) << r.body;
    call = r.j["output"][0];
  }
  ASSERT_FALSE(call.is_null()) << "every reply was cut off by max_output_tokens";
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_time");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  const json call_args = json::parse(call["arguments"].get<std::string>());
  EXPECT_TRUE(call_args["zone"] == "UTC" || call_args["zone"] == "CET") << call_args.dump();
  ojson next = {{"model", "stories"},
                {"previous_response_id", r.j["id"]},
                {"input", ojson::array({{{"type", "function_call_output"},
                                         {"call_id", call["call_id"]},
                                         {"output", "21 C"}}})},
                {"tools", tight},
                {"max_output_tokens", 4}};
  const reply r2 = post(s.port, "/v1/responses", next.dump());
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_EQ(r2.j["previous_response_id"], r.j["id"]);
  // the instructions of the first response are not carried over (the API's rule)
  // (ordered: the template shows the tools in the client's key order)
  const ojson history = {
      {"model", "stories"},
      {"tools",
       {{{"type", "function"},
         {"function", {{"name", "get_time"}, {"parameters", tight[0]["parameters"]}}}}}},
      {"messages",
       {{{"role", "user"}, {"content", ctx["messages"][0]["content"]}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          {{{"id", call["call_id"].get<std::string>()},
            {"type", "function"},
            {"function",
             {{"name", "get_time"}, {"arguments", call["arguments"].get<std::string>()}}}}}}},
        {{"role", "tool"},
         {"tool_call_id", call["call_id"].get<std::string>()},
         {"content", "21 C"}}}}};
  const reply tk = post(s.port, "/tokenize", history.dump());
  ASSERT_EQ(tk.status, 200) << tk.body;
  EXPECT_EQ(r2.j["usage"]["input_tokens"], tk.j["count"]);
}

TEST(ResponsesApi, AStreamsEventsAddUpToTheStoredResponse) {
  server s;
  const json body = {{"model", "stories"},
                     {"instructions", "You tell stories."},
                     {"input", "A story about a cat"},
                     {"max_output_tokens", 10},
                     {"temperature", 0},
                     {"metadata", {{"run", "7"}}}};
  const reply whole = post(s.port, "/v1/responses", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const std::string text = output_text(whole.j);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, chat_text(s.port,
                            {{{"role", "system"}, {"content", "You tell stories."}},
                             {{"role", "user"}, {"content", "A story about a cat"}}},
                            {{"max_tokens", 10}}));
  EXPECT_EQ(whole.j["usage"]["output_tokens"], 10);
  EXPECT_EQ(whole.j["metadata"]["run"], "7");
  EXPECT_EQ(whole.j["instructions"], "You tell stories.");
  // streamed: numbered events, text deltas that join into the text, the Response last
  json streamed = body;
  streamed["stream"] = true;
  const reply st = post(s.port, "/v1/responses", streamed.dump());
  ASSERT_EQ(st.status, 200);
  EXPECT_NE(st.header("Content-Type").find("text/event-stream"), std::string::npos);
  const auto evs = events(st.body);
  ASSERT_GE(evs.size(), 8u);
  std::string deltas;
  for (size_t i = 0; i < evs.size(); ++i) {
    ASSERT_TRUE(evs[i].is_object()) << "no [DONE] in a Responses stream";
    EXPECT_EQ(evs[i]["sequence_number"], i);
    if (evs[i]["type"] == "response.output_text.delta")
      deltas += evs[i]["delta"].get<std::string>();
  }
  // each event's name is on its own event: line too
  EXPECT_NE(dechunk(st.body).find("event: response.output_text.delta\ndata: {"), std::string::npos);
  EXPECT_EQ(evs[0]["type"], "response.created");
  EXPECT_EQ(evs[0]["response"]["status"], "in_progress");
  EXPECT_EQ(evs[1]["type"], "response.in_progress");
  EXPECT_EQ(evs[2]["type"], "response.output_item.added");
  EXPECT_EQ(evs[3]["type"], "response.content_part.added");
  EXPECT_EQ(deltas, text);
  const json& last = evs.back();
  EXPECT_EQ(last["type"], "response.incomplete"); // max_output_tokens reached
  EXPECT_EQ(output_text(last["response"]), text);
  EXPECT_EQ(last["response"]["output"][0]["status"], "incomplete");
  EXPECT_EQ(evs[evs.size() - 2]["type"], "response.output_item.done");
  // stored by id (store defaults to true); deleted; store: false keeps nothing
  const std::string id = last["response"]["id"];
  reply got = get(s.port, "/v1/responses/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.j, last["response"]);
  reply del = raw(s.port, "DELETE /v1/responses/" + id +
                              " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(del.status, 200);
  EXPECT_EQ(del.j["deleted"], true);
  EXPECT_EQ(get(s.port, "/v1/responses/" + id).status, 404);
  json unstored = body;
  unstored["store"] = false;
  const reply u = post(s.port, "/v1/responses", unstored.dump());
  ASSERT_EQ(u.status, 200);
  EXPECT_EQ(u.j["store"], false);
  EXPECT_EQ(get(s.port, "/v1/responses/" + u.j["id"].get<std::string>()).status, 404);
  // a previous_response_id that is not stored: 404 naming it
  json cont = {{"model", "stories"}, {"input", "More"}, {"previous_response_id", id}};
  const reply gone = post(s.port, "/v1/responses", cont.dump());
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.j["error"]["param"], "previous_response_id");
}

TEST(ResponsesApi, InputItemsAreListedBackInPages) {
  server s;
  // a string input is one user message; items keep their ids, get one when they have none
  const json one = {
      {"model", "stories"}, {"input", "A story about a cat"}, {"max_output_tokens", 2}};
  const reply r1 = post(s.port, "/v1/responses", one.dump());
  ASSERT_EQ(r1.status, 200) << r1.body;
  const std::string id1 = r1.j["id"];
  const reply l1 = get(s.port, "/v1/responses/" + id1 + "/input_items");
  ASSERT_EQ(l1.status, 200) << l1.body;
  EXPECT_EQ(l1.j["object"], "list");
  ASSERT_EQ(l1.j["data"].size(), 1u);
  EXPECT_EQ(l1.j["data"][0]["type"], "message");
  EXPECT_EQ(l1.j["data"][0]["role"], "user");
  EXPECT_EQ(l1.j["data"][0]["content"][0],
            json({{"type", "input_text"}, {"text", "A story about a cat"}}));
  EXPECT_EQ(l1.j["first_id"], l1.j["data"][0]["id"]);
  EXPECT_EQ(l1.j["has_more"], false);
  const json items = json::array(
      {{{"role", "user"}, {"content", "Once"}},
       {{"type", "message"}, {"id", "msg_mine"}, {"role", "assistant"}, {"content", "upon"}},
       {{"role", "user"},
        {"content", json::array({{{"type", "input_text"}, {"text", "a time"}}})}}});
  const json three = {{"model", "stories"}, {"input", items}, {"max_output_tokens", 2}};
  const reply r3 = post(s.port, "/v1/responses", three.dump());
  ASSERT_EQ(r3.status, 200) << r3.body;
  const std::string base = "/v1/responses/" + r3.j["id"].get<std::string>() + "/input_items";
  // the API's default order is newest first
  const reply all = get(s.port, base);
  ASSERT_EQ(all.status, 200) << all.body;
  ASSERT_EQ(all.j["data"].size(), 3u);
  EXPECT_EQ(all.j["data"][0]["content"][0]["text"], "a time");
  EXPECT_EQ(all.j["data"][1]["id"], "msg_mine");
  EXPECT_EQ(all.j["data"][1]["content"][0], json({{"type", "output_text"}, {"text", "upon"}}));
  EXPECT_EQ(all.j["data"][2]["content"][0]["text"], "Once");
  // pages in order asc, two at a time, then after the last one seen
  const reply p1 = get(s.port, base + "?order=asc&limit=2");
  ASSERT_EQ(p1.status, 200) << p1.body;
  ASSERT_EQ(p1.j["data"].size(), 2u);
  EXPECT_EQ(p1.j["data"][0]["content"][0]["text"], "Once");
  EXPECT_EQ(p1.j["has_more"], true);
  const reply p2 =
      get(s.port, base + "?order=asc&limit=2&after=" + p1.j["last_id"].get<std::string>());
  ASSERT_EQ(p2.status, 200) << p2.body;
  ASSERT_EQ(p2.j["data"].size(), 1u);
  EXPECT_EQ(p2.j["data"][0]["content"][0]["text"], "a time");
  EXPECT_EQ(p2.j["has_more"], false);
  const reply before = get(s.port, base + "?order=asc&before=msg_mine");
  ASSERT_EQ(before.j["data"].size(), 1u);
  EXPECT_EQ(before.j["data"][0]["content"][0]["text"], "Once");
  // what cannot be listed is refused, naming it
  EXPECT_EQ(get(s.port, base + "?limit=0").j["error"]["param"], "limit");
  EXPECT_EQ(get(s.port, base + "?order=up").j["error"]["param"], "order");
  EXPECT_EQ(get(s.port, base + "?after=msg_nobody").j["error"]["param"], "after");
  EXPECT_EQ(get(s.port, base + "?color=red").status, 400);
  EXPECT_EQ(get(s.port, "/v1/responses/resp_nobody/input_items").status, 404);
  EXPECT_EQ(post(s.port, base, "{}").status, 405);
}

TEST(ResponsesApi, WhatIsNotServedIsRefusedNamingTheField) {
  server s;
  const std::pair<std::string, std::string> cases[] = {
      {R"("input":"x","tools":[{"type":"web_search"}])", "tools"},
      {R"("input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}])", "input"},
      {R"("input":[{"type":"item_reference","id":"msg_1"}])", "input"},
      {R"("input":[{"type":"computer_call","id":"c"}])", "input"},
      {R"("input":[{"role":"tool","content":"x"}])", "input"},
      {R"("input":[{"type":"function_call","name":"f"}])", "input"},
      {R"("input":"x","background":true)", "background"},
      {R"("input":"x","truncation":"auto")", "truncation"},
      {R"("input":"x","reasoning":{"summary":"detailed"})", "reasoning"},
      {R"("input":"x","reasoning":{"effort":"high"})", "reasoning"}, // not a harmony model
      {R"("input":"x","text":{"verbosity":"low"})", "text"},
      {R"("input":"x","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"string","pattern":"^a"}}})",
       "text"},
      {R"("input":"x","include":["nope"])", "include"},
      {R"("input":"x","max_output_tokens":100000)", "max_output_tokens"},
      {R"("input":"x","tool_choice":{"type":"allowed_tools"})", "tool_choice"},
      {R"("input":"x","tool_choice":{"type":1,"name":"f"})", "tool_choice"}, // was a crash
      {R"("input":"x","prompt":{"id":"p"})", "prompt"},
      {R"("input":"x","messages":[])", "messages"},
      {R"("instructions":"x")", "input"},
  };
  for (const auto& [fields, param] : cases) {
    const reply r = post(s.port, "/v1/responses", R"({"model":"stories",)" + fields + "}");
    EXPECT_EQ(r.status, 400) << fields << " -> " << r.body;
    EXPECT_EQ(r.j["error"]["param"], param) << fields << " -> " << r.body;
  }
  // a limit in the chat endpoint's words comes back in this API's
  const reply big = post(s.port, "/v1/responses",
                         R"({"model":"stories","input":"x","max_output_tokens":100000})");
  EXPECT_NE(big.j["error"]["message"].get<std::string>().find("max_output_tokens"),
            std::string::npos)
      << big.body;
  // nested past any real request: refused before it is copied
  std::string deep = R"({"model":"stories","input":"x","metadata":)";
  for (int i = 0; i < 100000; ++i) deep += "[";
  EXPECT_EQ(post(s.port, "/v1/responses", deep + "}").status, 400);
  std::string deeper = R"({"model":"stories","input":"x","metadata":)";
  for (int i = 0; i < 200; ++i) deeper += "[";
  for (int i = 0; i < 200; ++i) deeper += "]";
  EXPECT_EQ(post(s.port, "/v1/responses", deeper + "}").status, 400);
  EXPECT_EQ(get(s.port, "/v1/responses").status, 405);
  EXPECT_EQ(post(s.port, "/v1/responses/resp_1", "{}").status, 405);
}

TEST(ResponsesApi, ReasoningTextAndCallsBecomeOutputItemsInOrder) {
  parsed_request r;
  r.chat = true;
  r.model = "m";
  response_builder b(r, "resp_1", 100);
  std::string out = b.start();
  out += b.step("Let me ", "", nullptr, {}, 2);
  out += b.step("think.", "", nullptr, {}, 1);
  out += b.step("", "It is", nullptr, {});
  out += b.step("", " noon.", nullptr, {});
  tool_call call;
  call.id = "call_7";
  call.name = "get_time";
  call.arguments = R"({"zone":"UTC"})";
  out += b.step("", "", nullptr, {call});
  out += b.finish(finish_reason::stop, {5, 9});
  std::vector<std::string> types;
  std::vector<json> data;
  for (size_t at = 0; (at = out.find("event: ", at)) != std::string::npos;) {
    const size_t nl = out.find('\n', at);
    types.push_back(out.substr(at + 7, nl - at - 7));
    const size_t end = out.find("\n\n", nl);
    data.push_back(json::parse(out.substr(nl + 7, end - nl - 7)));
    EXPECT_EQ(data.back()["type"], types.back());
    EXPECT_EQ(data.back()["sequence_number"], data.size() - 1);
    at = end;
  }
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added", // reasoning
                                         "response.content_part.added",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added", // message
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added", // function_call
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  EXPECT_EQ(types, want);
  const json resp = json::parse(b.body());
  EXPECT_EQ(resp["status"], "completed");
  ASSERT_EQ(resp["output"].size(), 3u);
  EXPECT_EQ(resp["output"][0]["type"], "reasoning");
  EXPECT_EQ(resp["output"][0]["content"][0]["text"], "Let me think.");
  EXPECT_EQ(resp["output"][1]["content"][0]["text"], "It is noon.");
  EXPECT_EQ(resp["output"][2]["call_id"], "call_7");
  EXPECT_EQ(resp["output"][2]["arguments"], R"({"zone":"UTC"})");
  EXPECT_EQ(resp["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
  EXPECT_EQ(resp["usage"]["total_tokens"], 14);
  EXPECT_EQ(data.back()["response"], resp);
  // the conversation a later previous_response_id continues: one assistant turn
  const json conv = json::parse(b.conversation());
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]["reasoning_content"], "Let me think.");
  EXPECT_EQ(conv[0]["content"], "It is noon.");
  EXPECT_EQ(conv[0]["tool_calls"][0]["id"], "call_7");
  // a failure after the start: an error event, then response.failed
  response_builder f(r, "resp_2", 100);
  const std::string failed = f.failed({503, "gone", "server_error", "", "unavailable"});
  EXPECT_EQ(failed.rfind("event: error\n", 0), 0u) << failed;
  EXPECT_NE(failed.find("event: response.failed\n"), std::string::npos);
  EXPECT_EQ(json::parse(f.body())["error"]["code"], "server_error"); // the codes a Response has
}

TEST(ResponsesApi, TheStoreDropsTheOldestPastItsBounds) {
  response_store by_count(2, 1000);
  by_count.put("a", {"1", "[]"});
  by_count.put("b", {"2", "[]"});
  by_count.put("c", {"3", "[]"});
  EXPECT_FALSE(by_count.get("a"));
  EXPECT_EQ(by_count.get("c")->body, "3");
  EXPECT_EQ(by_count.size(), 2u);
  response_store by_bytes(100, 10);
  by_bytes.put("a", {"12345", ""});
  by_bytes.put("b", {"12345", ""});
  by_bytes.put("c", {"1", ""});
  EXPECT_FALSE(by_bytes.get("a"));
  EXPECT_TRUE(by_bytes.get("b") && by_bytes.get("c"));
  by_bytes.put("c", {"12", ""}); // put again: replaced, its old bytes given back
  EXPECT_EQ(by_bytes.get("c")->body, "12");
  EXPECT_TRUE(by_bytes.get("b"));
  EXPECT_TRUE(by_bytes.erase("c"));
  by_bytes.put("d", {"12345", ""}); // fits beside b only because c's bytes were given back
  EXPECT_TRUE(by_bytes.get("b") && by_bytes.get("d"));
  by_bytes.put("big", {std::string(11, 'x'), ""}); // larger than the whole store: not kept
  EXPECT_FALSE(by_bytes.get("big"));
  EXPECT_TRUE(by_bytes.erase("b"));
  EXPECT_FALSE(by_bytes.erase("b"));
}

TEST(ResponsesApi, ReasoningEffortReachesTheHarmonySystemBlock) {
  auto tok = test::harmony_vocab();
  ASSERT_TRUE(tok);
  const serving_info info = harmony_info(*tok);
  auto r = parse_responses_request(
      R"({"model":"gpt-oss","instructions":"Be brief.","input":"Capital of France?",)"
      R"("reasoning":{"effort":"high","summary":"auto"}})",
      info, nullptr);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(r)) << std::get<api_error>(r).message;
  const auto& req = std::get<parsed_request>(r);
  EXPECT_TRUE(req.reasoning); // the analysis channel comes back as a reasoning item
  EXPECT_NE(req.prompt_texts.at(0).find("\nReasoning: high\n"), std::string::npos);
  EXPECT_NE(req.prompt_texts[0].find("Be brief."), std::string::npos);
  response_builder b(req, "resp_1", 1);
  EXPECT_EQ(json::parse(b.body())["reasoning"]["effort"], "high");
  auto low = parse_responses_request(
      R"({"model":"gpt-oss","input":"x","reasoning":{"effort":"extreme"}})", info, nullptr);
  ASSERT_TRUE(std::holds_alternative<api_error>(low));
  EXPECT_EQ(std::get<api_error>(low).param, "reasoning");
  EXPECT_NE(std::get<api_error>(low).message.find("reasoning.effort"), std::string::npos)
      << std::get<api_error>(low).message;
}

TEST(ResponsesApi, ReasoningItemsGoBackWithTheAssistantTurnAfterThem) {
  auto tok = test::harmony_vocab();
  ASSERT_TRUE(tok);
  const serving_info info = harmony_info(*tok);
  // a stateless client's history: reasoning (as this server wrote it with include
  // reasoning.encrypted_content: the text in encrypted_content), the answer, a new question;
  // and a reasoning item a user message follows, which no assistant turn owns
  auto r = parse_responses_request(R"({"model":"gpt-oss","input":[
      {"role":"user","content":"Hi"},
      {"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"They greet me."},
      {"role":"assistant","content":[{"type":"output_text","text":"Hello!"}]},
      {"type":"reasoning","id":"rs_2","summary":[],"content":[{"type":"reasoning_text","text":"stray"}]},
      {"role":"user","content":"Bye"},
      {"role":"assistant","content":"Goodbye."},
      {"role":"user","content":"Again"}],
      "include":["reasoning.encrypted_content"]})",
                                   info, nullptr);
  ASSERT_TRUE(std::holds_alternative<parsed_request>(r)) << std::get<api_error>(r).message;
  const auto& req = std::get<parsed_request>(r);
  response_builder b(req, "resp_1", 1);
  const json conv = json::parse(b.conversation());
  ASSERT_EQ(conv.size(), 5u) << conv.dump();
  EXPECT_EQ(conv[1]["reasoning_content"], "They greet me.");
  EXPECT_FALSE(conv[3].contains("reasoning_content")) << conv.dump();
  // this server's reasoning items carry their text in encrypted_content when asked
  b.step("Thinking.", "", nullptr, {});
  b.finish(finish_reason::stop, {1, 1});
  EXPECT_EQ(json::parse(b.body())["output"][0]["encrypted_content"], "Thinking.");
}

TEST(ResponsesApi, LogprobsComeWithTheTextTheyBelongTo) {
  server s;
  const json body = {{"model", "stories"},     {"input", "Once upon a time"},
                     {"max_output_tokens", 6}, {"temperature", 0},
                     {"top_logprobs", 2},      {"include", {"message.output_text.logprobs"}}};
  const reply r = post(s.port, "/v1/responses", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json& part = r.j["output"][0]["content"][0];
  ASSERT_EQ(part["logprobs"].size(), 6u) << r.body; // one per token, the tokens' text the text
  std::string joined;
  for (const auto& lp : part["logprobs"]) {
    joined += lp["token"].get<std::string>();
    EXPECT_LE(lp["logprob"].get<double>(), 0.0);
    EXPECT_EQ(lp["top_logprobs"].size(), 2u);
    EXPECT_GE(lp["logprob"].get<double>(), lp["top_logprobs"][1]["logprob"].get<double>());
  }
  EXPECT_EQ(joined, part["text"]);
  // streamed, the deltas carry the same tokens (their logprobs within rounding: the prompt's
  // KV now comes from the prefix cache)
  json streamed = body;
  streamed["stream"] = true;
  const reply st = post(s.port, "/v1/responses", streamed.dump());
  json lps = json::array();
  for (const auto& e : events(st.body))
    if (e["type"] == "response.output_text.delta")
      for (const auto& lp : e["logprobs"]) lps.push_back(lp);
  ASSERT_EQ(lps.size(), part["logprobs"].size()) << st.body;
  for (size_t i = 0; i < lps.size(); ++i) {
    EXPECT_EQ(lps[i]["token"], part["logprobs"][i]["token"]);
    EXPECT_NEAR(lps[i]["logprob"].get<double>(), part["logprobs"][i]["logprob"].get<double>(),
                1e-4);
  }
  // none asked for, none made
  json plain = body;
  plain.erase("top_logprobs");
  plain.erase("include");
  const reply p = post(s.port, "/v1/responses", plain.dump());
  ASSERT_EQ(p.status, 200) << p.body;
  const json& none = p.j.at("output").at(0).at("content").at(0).at("logprobs");
  EXPECT_TRUE(none.is_array() && none.empty()) << p.body;
}
