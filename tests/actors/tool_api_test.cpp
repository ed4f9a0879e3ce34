// tool_api_test.cpp: tools over the chat API with stories260K-hf wearing Qwen2.5's published
// template (tools in <tools>, calls in <tool_call> blocks). The prompt with tools, and with an
// earlier call and its result, is transformers' rendering (tests/fixtures/jinja_templates.json);
// a named function holds the random model to its parameters' schema and the reply is that call;
// "required" holds it to a list of calls; streams carry the calls as tool_calls deltas that
// add up to the whole reply's; misuse is a 400 that names the field.
#include <string>

#include <gtest/gtest.h>

#include "actors/tool_reply.hpp"
#include "gateway_util.hpp"

using namespace gw_test;

namespace {

using ojson = nlohmann::ordered_json;

const ojson& fixture() {
  return jinja_fixture();
}

std::string qwen_template() {
  return qwen25("template");
}

std::string text_of(const std::string& case_name) {
  return qwen25("renders", case_name);
}

struct tools_server {
  // Qwen2.5's tool instructions take ~750 of stories' tokens: the context is lifted past the
  // 512 it was trained on (the replies are checked for their shape, not their words)
  std::shared_ptr<const model_source> m = stories_with(qwen_template(), 2048);
  server s;
  tools_server()
      : s(options(), {}, m) {}
  static gateway_options options() {
    gateway_options go;
    go.model_name = "stories";
    return go;
  }
};

// the fixture's tools, as a client sends them (in its key order: the template shows it)
ojson fixture_tools() {
  return fixture()["contexts"]["tools"]["tools"];
}

// Tools whose parameters leave the random model few choices, so that its replies end.
ojson tight_tools() {
  return ojson::parse(R"([
    {"type": "function", "function": {"name": "get_time", "description": "The time.",
     "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
                    "required": ["zone"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_day", "description": "The day.",
     "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}])");
}

TEST(ToolApi, ToolsAndEarlierCallsArePromptedAsTransformersRendersThem) {
  tools_server t;
  ojson body = {{"messages", fixture()["contexts"]["tools"]["messages"]},
                {"tools", fixture_tools()}};
  reply r = post(t.s.port, "/tokenize", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["tokens"].get<std::vector<int32_t>>(), *t.m->tok->encode(text_of("tools"), false));
  // an assistant turn that called a tool (OpenAI's shape: arguments as JSON text) and the result
  ojson msgs = fixture()["contexts"]["tool_calls"]["messages"];
  for (auto& call : msgs[1]["tool_calls"])
    call["function"]["arguments"] = R"({"city": "Paris", "unit": "celsius"})";
  body = {{"messages", msgs}, {"tools", fixture()["contexts"]["tool_calls"]["tools"]}};
  r = post(t.s.port, "/tokenize", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["tokens"].get<std::vector<int32_t>>(),
            *t.m->tok->encode(text_of("tool_calls"), false));
}

TEST(ToolApi, ANamedFunctionHoldsTheReplyToItsParameters) {
  tools_server t;
  json body = {{"model", "stories"},
               {"max_tokens", 200},
               {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
               {"tools", json::parse(tight_tools().dump())},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}};
  int calls_seen = 0;
  for (int seed : {1, 2, 3}) {
    body["seed"] = seed;
    const reply r = post(t.s.port, "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json& choice = r.j["choices"][0];
    if (choice["finish_reason"] == "length") continue; // cut off: not a call
    EXPECT_EQ(choice["finish_reason"], "stop");        // as OpenAI ends a forced call
    const json& msg = choice["message"];
    EXPECT_TRUE(msg["content"].is_null()) << r.body;
    ASSERT_EQ(msg["tool_calls"].size(), 1u) << r.body;
    const json& call = msg["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
    EXPECT_EQ(call["function"]["name"], "get_time");
    const json args = json::parse(call["function"]["arguments"].get<std::string>());
    ASSERT_TRUE(args.is_object());
    ASSERT_EQ(args.size(), 1u) << args.dump(); // the schema's one required key, no other
    EXPECT_TRUE(args["zone"] == "UTC" || args["zone"] == "CET") << args.dump();
    ++calls_seen;
  }
  EXPECT_GT(calls_seen, 0) << "every reply was cut off by max_tokens";
}

TEST(ToolApi, RequiredCallsStreamAsDeltasThatAddUpToTheReply) {
  tools_server t;
  json body = {{"model", "stories"},
               {"max_tokens", 300},
               {"seed", 7},
               {"temperature", 0.8},
               {"messages", {{{"role", "user"}, {"content", "Weather and time?"}}}},
               {"tools", json::parse(tight_tools().dump())},
               {"tool_choice", "required"},
               {"parallel_tool_calls", false}};
  const reply whole = post(t.s.port, "/v1/chat/completions", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json& choice = whole.j["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "tool_calls") << whole.body;
  const json& calls = choice["message"]["tool_calls"];
  ASSERT_GE(calls.size(), 1u);
  for (const auto& c : calls) {
    const std::string name = c["function"]["name"];
    EXPECT_TRUE(name == "get_time" || name == "get_day") << name;
    EXPECT_TRUE(json::parse(c["function"]["arguments"].get<std::string>()).is_object());
  }
  body["stream"] = true;
  const reply streamed = post(t.s.port, "/v1/chat/completions", body.dump());
  ASSERT_EQ(streamed.status, 200);
  json got = json::array();
  std::string finish;
  for (const auto& e : events(streamed.body)) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const json& ch = e["choices"][0];
    if (ch["delta"].contains("tool_calls")) { // a chunk of their own, before the finish
      EXPECT_TRUE(ch["finish_reason"].is_null()) << e.dump();
    }
    if (ch["delta"].contains("tool_calls"))
      for (const auto& c : ch["delta"]["tool_calls"]) {
        EXPECT_EQ(c["index"], got.size());
        got.push_back(c);
      }
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(got.size(), calls.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i]["function"], calls[i]["function"]);    // the same seed, the same calls
    EXPECT_EQ(got[i]["id"].get<std::string>().size(), 29u); // call_ + 24
  }
  EXPECT_EQ(calls.size(), 1u); // one call only without parallel_tool_calls
  // with them, a list of calls
  body["stream"] = false;
  body["parallel_tool_calls"] = true;
  const reply many = post(t.s.port, "/v1/chat/completions", body.dump());
  ASSERT_EQ(many.status, 200) << many.body;
  if (many.j["choices"][0]["finish_reason"] == "tool_calls") {
    EXPECT_GE(many.j["choices"][0]["message"]["tool_calls"].size(), 1u);
  }
}

TEST(ToolApi, AutoRepliesWithoutACallAreContent) {
  tools_server t;
  json body = {{"model", "stories"},
               {"max_tokens", 8},
               {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
               {"tools", json::parse(fixture_tools().dump())}};
  const reply r = post(t.s.port, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(r.j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_NE(r.j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(r.j["choices"][0]["message"]["content"].is_string());
}

TEST(ToolApi, MisuseIsRefusedByName) {
  tools_server t;
  auto ask = [&](json extra) {
    json b = {{"model", "stories"},
              {"max_tokens", 4},
              {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    b.update(extra);
    return post(t.s.port, "/v1/chat/completions", b.dump());
  };
  auto refused = [&](json extra, const std::string& param, const std::string& words) {
    const reply r = ask(extra);
    EXPECT_EQ(r.status, 400) << extra.dump();
    EXPECT_EQ(r.j["error"]["param"], param) << r.body;
    EXPECT_NE(r.body.find(words), std::string::npos) << r.body;
  };
  const json tools = json::parse(fixture_tools().dump());
  refused({{"tool_choice", "required"}}, "tool_choice", "needs 'tools'");
  refused(
      {{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
      "tool_choice", "not among the tools");
  refused({{"tools", tools}, {"tool_choice", "sometimes"}}, "tool_choice", "must be");
  refused({{"tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}}}, "tools",
          "letters, digits");
  refused({{"tools", {{{"type", "retrieval"}}}}}, "tools", "each tool must be");
  refused({{"tools", {tools[0], tools[0]}}}, "tools", "two tools are named");
  refused({{"tools", tools},
           {"tool_choice", "required"},
           {"response_format", {{"type", "json_object"}}}},
          "response_format", "cannot be combined");
  json patterned = tools;
  patterned[0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^[A-Z]";
  refused({{"tools", patterned}, {"tool_choice", "required"}}, "tools", "pattern");
  refused({{"messages",
            {{{"role", "assistant"},
              {"content", nullptr},
              {"tool_calls",
               {{{"id", "c1"},
                 {"type", "function"},
                 {"function", {{"name", "f"}, {"arguments", "{oops"}}}}}}}}}},
          "messages", "JSON text");
  // a model whose template takes no tools: auto is refused; a named function still holds
  server plain(tools_server::options());
  json b = {{"model", "stories"},
            {"max_tokens", 4},
            {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
            {"tools", tools}};
  reply r = post(plain.port, "/v1/chat/completions", b.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("does not take tools"), std::string::npos) << r.body;
  b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  b["max_tokens"] = 60;
  r = post(plain.port, "/v1/chat/completions", b.dump());
  EXPECT_EQ(r.status, 200) << r.body;
}

} // namespace

namespace {

std::shared_ptr<const model_source> stories_with_published(const std::string& name) {
  for (const auto& t : fixture()["templates"])
    if (t["name"] == name) return stories_with(t["template"].get<std::string>(), 2048);
  ADD_FAILURE() << name;
  return nullptr;
}

std::string published_text(const std::string& name, const std::string& case_name) {
  for (const auto& t : fixture()["templates"])
    if (t["name"] == name) {
      std::string s = t["renders"][case_name]["text"];
      for (size_t at = s.find("<|bos|>"); at != std::string::npos; at = s.find("<|bos|>"))
        s.replace(at, 7, "<s>");
      return s;
    }
  return "";
}

} // namespace

// What a second black-box pass found: Llama 3.2's template (its JSON calls without
// <|python_tag|>), $defs in "required", an assistant turn with calls and no content key,
// tools: [] and calls to functions not offered.
TEST(ToolApi, PublishedFormatsDefsAndHistoryShapes) {
  const std::string llama32 = "meta-llama-Llama-3.2-3B-Instruct";
  auto m = stories_with_published(llama32);
  server s(tools_server::options(), {}, m);
  // its date is today's unless told: the fixture's day, through chat_template_kwargs
  ojson body = {{"messages", fixture()["contexts"]["tools"]["messages"]},
                {"tools", fixture_tools()},
                {"chat_template_kwargs", {{"date_string", "02 Dec 2026"}}}};
  reply r = post(s.port, "/tokenize", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["tokens"].get<std::vector<int32_t>>(),
            *m->tok->encode(published_text(llama32, "tools"), false));
  // Qwen3-Coder's template: tools and an earlier call in its markup, as transformers renders
  {
    auto coder = stories_with_published("Qwen3-Coder");
    server q(tools_server::options(), {}, coder);
    ojson msgs = fixture()["contexts"]["tool_calls"]["messages"];
    for (auto& call : msgs[1]["tool_calls"])
      call["function"]["arguments"] = R"({"city": "Paris", "unit": "celsius"})";
    const reply c = post(
        q.port, "/tokenize",
        ojson{{"messages", msgs}, {"tools", fixture()["contexts"]["tool_calls"]["tools"]}}.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.j["tokens"].get<std::vector<int32_t>>(),
              *coder->tok->encode(published_text("Qwen3-Coder", "tool_calls"), false));
  }
  // auto is accepted: the template teaches llama3's JSON
  json chat = {{"model", "stories"},
               {"max_tokens", 4},
               {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
               {"tools", json::parse(fixture_tools().dump())}};
  r = post(s.port, "/v1/chat/completions", chat.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  // tools: [] reaches the template as an empty list (Llama's says it is in ipython then)
  chat["tools"] = json::array();
  const reply none = post(s.port, "/tokenize", json{{"messages", chat["messages"]}}.dump());
  const reply empty = post(s.port, "/tokenize",
                           json{{"messages", chat["messages"]}, {"tools", json::array()}}.dump());
  ASSERT_EQ(empty.status, 200) << empty.body;
  EXPECT_NE(empty.j["tokens"], none.j["tokens"]);
  // an assistant turn with calls may leave out content (OpenAI's SDK does)
  r = post(s.port, "/tokenize",
           R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":)"
           R"([{"id":"c1","type":"function","function":{"name":"get_time","arguments":"{}"}}]}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  // "required" with a function whose parameters use $defs (pydantic's nested models)
  tools_server t;
  json defs_tool = json::parse(R"([{"type": "function", "function": {"name": "set_zone",
      "parameters": {"type": "object", "properties": {"where": {"$ref": "#/$defs/Zone"}},
                     "required": ["where"], "additionalProperties": false,
                     "$defs": {"Zone": {"enum": ["UTC", "CET"]}}}}}])");
  r = post(t.s.port, "/v1/chat/completions",
           json{{"model", "stories"},
                {"max_tokens", 200},
                {"seed", 3},
                {"messages", {{{"role", "user"}, {"content", "Zone?"}}}},
                {"tools", defs_tool},
                {"tool_choice", "required"},
                {"parallel_tool_calls", false}}
               .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  if (r.j["choices"][0]["finish_reason"] == "tool_calls") {
    const json args = json::parse(
        r.j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(args["where"] == "UTC" || args["where"] == "CET") << args.dump();
  }
}

TEST(ToolApi, ACallToAFunctionNotOfferedIsText) {
  parsed_request req;
  req.tools = tool_mode::automatic;
  req.tool_fmt = tool_format::hermes;
  req.tool_names = {"get_time"};
  tool_reply reply(req);
  const std::string text = "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>"
                           "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  auto a = reply.push(text);
  auto b = reply.finish(false);
  EXPECT_EQ(a.text + b.text, "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(a.calls.size() + b.calls.size(), 1u);
  EXPECT_EQ((a.calls.empty() ? b.calls : a.calls)[0].name, "get_time");
  EXPECT_TRUE(reply.finishes_as_call());
  // llama3's reply is one: a call not offered makes it all text
  req.tool_fmt = tool_format::llama3;
  tool_reply whole(req);
  const std::string two =
      R"({"name": "get_time", "parameters": {}}; {"name": "x", "parameters": {}})";
  auto c = whole.push(two);
  auto d = whole.finish(false);
  EXPECT_EQ(c.text + d.text, two);
  EXPECT_TRUE(c.calls.empty() && d.calls.empty());
  // so is a block of several calls (DeepSeek's): the block's text, none of its calls; a block
  // after it still counts
  req.tool_fmt = tool_format::deepseek_v3;
  tool_reply blocks(req);
  const std::string block =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}"
      "<｜tool▁call▁end｜><｜tool▁call▁begin｜>x<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>";
  const std::string good = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}"
                           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  auto e = blocks.push(block + good);
  auto f = blocks.finish(false);
  EXPECT_EQ(e.text + f.text, block);
  ASSERT_EQ(e.calls.size() + f.calls.size(), 1u);
  // a refused block's text stays where it stood, before the text after it
  req.tool_fmt = tool_format::hermes;
  tool_reply order(req);
  const std::string refused = "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>";
  auto g = order.push("Before " + refused + " after");
  auto h = order.finish(false);
  EXPECT_EQ(g.text + h.text, "Before " + refused + " after");
}

// Templates that teach the formats of DeepSeek V3.2, MiniMax-M2, Gemma 4 and Nemotron take
// tool_choice auto (DeepSeek V3.1's published template never renders the tools: auto stays
// refused for it, as for any template that does not read them).
TEST(ToolApi, PublishedMarkerFormatsTakeAuto) {
  for (const std::string name : {"deepseek-ai-DeepSeek-V3.2", "MiniMax-M2", "google-gemma-4-31B-it",
                                 "NVIDIA-Nemotron-Nano-v2", "deepseek-ai-DeepSeek-V3.1"}) {
    auto m = stories_with_published(name);
    server s(tools_server::options(), {}, m);
    json chat = {{"model", "stories"},
                 {"max_tokens", 4},
                 {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                 {"tools", json::parse(fixture_tools().dump())}};
    const reply r = post(s.port, "/v1/chat/completions", chat.dump());
    EXPECT_EQ(r.status, name == "deepseek-ai-DeepSeek-V3.1" ? 400 : 200) << name << ": " << r.body;
  }
}
