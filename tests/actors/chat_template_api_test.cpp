// chat_template_api_test.cpp: a chat's prompt is the model's own chat template run as
// transformers runs it. stories260K-hf is given published templates (Qwen2.5, Qwen3, Llama 3.1,
// from tests/fixtures/jinja_templates.json); vLLM's /tokenize shows the prompt a chat request
// gets, which must be our tokenizer's encoding of transformers' rendering of the same
// conversation (the fixture's bos / eos stand-ins replaced by the model's <s> / </s>), for plain
// chats, system prompts, multi-turn, add_generation_prompt false, enable_thinking false and
// continue_final_message. Then what the API does around it: unknown template variables and
// the options a natively rendered template cannot honour are refused, /detokenize inverts.
#include <string>

#include <gtest/gtest.h>

#include "gateway_util.hpp"

using namespace gw_test;

namespace {

using ojson = nlohmann::ordered_json;

const ojson& fixture() {
  return jinja_fixture();
}

const ojson& published(const std::string& name) {
  for (const auto& t : fixture()["templates"])
    if (t["name"] == name) return t;
  ADD_FAILURE() << "no template " << name;
  static const ojson none;
  return none;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size()))
    s.replace(i, from.size(), to);
  return s;
}

// The /tokenize body for a fixture conversation: its messages and the options it was rendered
// with.
json tokenize_body(const ojson& ctx) {
  json b = {{"model", "stories"}, {"messages", json::parse(ctx["messages"].dump())}};
  if (!ctx["add_generation_prompt"].get<bool>()) b["add_generation_prompt"] = false;
  if (ctx.contains("continue_final_message")) b["continue_final_message"] = true;
  if (ctx.contains("enable_thinking")) b["chat_template_kwargs"] = {{"enable_thinking", false}};
  return b;
}

TEST(ChatTemplateApi, PromptsAreTheTemplateAsTransformersRendersIt) {
  const char* cases[] = {"user",         "system_user",  "multi_turn",        "assistant_last",
                         "awkward_text", "thinking_off", "reasoning_history", "continue_final"};
  for (const char* name :
       {"Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct"}) {
    const ojson& t = published(name);
    auto m = stories_with(t["template"].get<std::string>());
    gateway_options go;
    go.model_name = "stories";
    server s(go, {}, m);
    for (const char* c : cases) {
      const ojson& ctx = fixture()["contexts"][c];
      const ojson& want = t["renders"][c];
      if (ctx.contains("enable_thinking") &&
          t["template"].get<std::string>().find("enable_thinking") == std::string::npos)
        continue; // refused below for a template that does not read it
      ASSERT_TRUE(want.contains("text")) << name << " / " << c;
      const std::string text = replace_all(
          replace_all(want["text"].get<std::string>(), "<|bos|>", "<s>"), "<|eos|>", "</s>");
      auto ids = m->tok->encode(text, false, true);
      ASSERT_TRUE(ids);
      const reply r = post(s.port, "/tokenize", tokenize_body(ctx).dump());
      ASSERT_EQ(r.status, 200) << name << " / " << c << ": " << r.body;
      EXPECT_EQ(r.j["tokens"].get<std::vector<int32_t>>(), *ids) << name << " / " << c;
      EXPECT_EQ(r.j["count"], ids->size());
      // and /detokenize gives the text of the ids back
      const reply d =
          post(s.port, "/detokenize", json{{"model", "stories"}, {"tokens", r.j["tokens"]}}.dump());
      ASSERT_EQ(d.status, 200) << d.body;
      EXPECT_EQ(d.j["prompt"], m->tok->decode(*ids)) << name << " / " << c;
    }
    // a chat completion gets the same prompt: usage counts it
    const ojson& ctx = fixture()["contexts"]["multi_turn"];
    json chat = tokenize_body(ctx);
    chat["max_tokens"] = 2;
    const reply r = post(s.port, "/v1/chat/completions", chat.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const reply tk = post(s.port, "/tokenize", tokenize_body(ctx).dump());
    EXPECT_EQ(r.j["usage"]["prompt_tokens"], tk.j["count"]) << name;
  }
}

TEST(ChatTemplateApi, TemplateVariablesAndOptionsAreCheckedAgainstTheTemplate) {
  auto m = stories_with(published("Qwen-Qwen3-0.6B")["template"].get<std::string>());
  gateway_options go;
  go.model_name = "stories";
  server s(go, {}, m);
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  auto tokenize = [&](json extra) {
    json b = {{"model", "stories"}, {"messages", msgs}};
    b.update(extra);
    return post(s.port, "/tokenize", b.dump());
  };
  // a variable the template does not read, or one the server sets, is refused by name
  reply r = tokenize({{"chat_template_kwargs", {{"add_vision_id", true}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("'add_vision_id' is not read by this model's chat template"),
            std::string::npos)
      << r.body;
  r = tokenize({{"chat_template_kwargs", {{"messages", json::array()}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("set by the server"), std::string::npos) << r.body;
  r = tokenize({{"chat_template_kwargs", {{"enable_thinking", "no"}}}});
  EXPECT_EQ(r.status, 400);
  r = tokenize({{"continue_final_message", true}});
  EXPECT_EQ(r.status, 400) << "needs add_generation_prompt false";
  r = tokenize({{"add_generation_prompt", "yes"}});
  EXPECT_EQ(r.status, 400);
  // /tokenize of a prompt is the completions endpoint's encoding (BOS added by default)
  r = post(s.port, "/tokenize", R"({"prompt":"Once upon a time","return_token_strs":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["tokens"][0], m->tok->bos_id());
  EXPECT_EQ(r.j["token_strs"][0], "<s>");
  EXPECT_EQ(r.j["max_model_len"], m->config.ctx);
  r = post(s.port, "/tokenize", R"({"prompt":"x","bogus":1})");
  EXPECT_EQ(r.status, 400);
  r = post(s.port, "/tokenize", R"({"model":"other","prompt":"x"})");
  EXPECT_EQ(r.status, 404);
  r = post(s.port, "/detokenize", R"({"tokens":[1, 99999999]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(get(s.port, "/tokenize").status, 405);
  // natively rendered, the options that need the template are refused with the reason
  gateway_options native = go;
  native.native_chat = true;
  server n(native, {}, m);
  r = post(n.port, "/tokenize", json{{"messages", msgs}, {"add_generation_prompt", false}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("--chat-renderer"), std::string::npos) << r.body;
  // and a template given in place of the checkpoint's is the one that runs
  gateway_options other = go;
  other.chat_template =
      "{% for m in messages %}{% if m.role == 'tool' %}{{ "
      "raise_exception('No tools here.') }}{% endif %}[{{ m.role }}] {{ m.content "
      "}}\n{% endfor %}";
  server o(other, {}, m);
  r = post(o.port, "/tokenize", json{{"messages", msgs}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["tokens"].get<std::vector<int32_t>>(), *m->tok->encode("[user] Hi\n", false, true));
  // template variables keep the client's key order (the body is sent as written)
  gateway_options shows = go;
  shows.chat_template = "{{ opts | tojson }}{% for m in messages %}{{ m.content }}{% endfor %}";
  server v(shows, {}, m);
  r = post(v.port, "/tokenize",
           R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":)"
           R"({"opts":{"zeta":1,"alpha":2}},"return_token_strs":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["tokens"].get<std::vector<int32_t>>(),
            *m->tok->encode(R"({"zeta": 1, "alpha": 2}Hi)", false, true));
  // a variable nested deeper than any template needs is refused, not followed
  r = post(v.port, "/tokenize",
           R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"opts":)" +
               std::string(30000, '[') + std::string(30000, ']') + "}}");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("nested more than"), std::string::npos) << r.body;
  // text parts of a content join with newlines, as vLLM joins them
  r = post(o.port, "/tokenize",
           R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},)"
           R"({"type":"text","text":"b"}]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["tokens"].get<std::vector<int32_t>>(),
            *m->tok->encode("[user] a\nb\n", false, true));
  // the template's own refusal is a 400 with its words
  r = post(o.port, "/tokenize",
           json{{"messages", json::array({{{"role", "tool"}, {"content", "x"}}})}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("No tools here."), std::string::npos) << r.body;
}

} // namespace
