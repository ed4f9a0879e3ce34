// chat_template_test.cpp: for every family render_chat knows, the published chat template of a
// real instruct checkpoint is recognised by detect_chat_format and rendered byte for byte as
// transformers renders it (tests/fixtures/chat_templates.json, written by make_chat_fixtures.py;
// nothing in it comes from Troupe). Templates that share a family's marker tokens but not its
// layout (Zephyr, Tulu 2, OLMo 1, Tulu 3) must not be claimed by a family that renders them
// otherwise. Gemma's template refuses a system message (transformers raises); Troupe joins it
// to the first user turn, so those renderings are not compared. GPT-OSS's harmony template
// states a date and a reasoning effort: rendered with the fixture's date, at the default effort
// and at "high".
#include <gtest/gtest.h>

#include <array>

#include "../test_paths.hpp"
#include "text/chat_template.hpp"
#include "text/tokenizer.hpp"

using namespace troupe;
using nlohmann::json;

namespace {

const json& fixture() {
  static const json j = test::load_json(test::fixture_path("chat_templates.json"));
  return j;
}

constexpr std::array all_formats{chat_format::plain,  chat_format::llama2,    chat_format::llama3,
                                 chat_format::chatml, chat_format::mistral,   chat_format::gemma,
                                 chat_format::phi3,   chat_format::command_r, chat_format::olmo2,
                                 chat_format::harmony};

std::vector<chat_message> conversation(const std::string& name) {
  std::vector<chat_message> out;
  for (const auto& m : fixture()["conversations"][name])
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

} // namespace

TEST(ChatTemplate, PublishedTemplatesRenderAsTransformersDoes) {
  const json& families = fixture()["families"];
  ASSERT_EQ(families.size(), all_formats.size() - 1); // every family but plain
  for (const auto& fam : families) {
    const auto name = fam["family"].get<std::string>();
    SCOPED_TRACE(name + " (" + fam["model"].get<std::string>() + ")");
    const chat_format detected = detect_chat_format(fam["template"].get<std::string>());
    EXPECT_EQ(to_string(detected), name);
    chat_format f = chat_format::plain;
    for (chat_format c : all_formats)
      if (to_string(c) == name) f = c;
    ASSERT_NE(f, chat_format::plain) << "no chat_format is called " << name;
    harmony_settings harmony;
    if (fam.contains("date")) harmony.date = fam["date"].get<std::string>();
    for (const auto& [conv, expected] : fam["renders"].items()) {
      SCOPED_TRACE(conv);
      const auto r =
          render_chat(f, conversation(conv),
                      chat_default_system(f, fam["template"].get<std::string>()), harmony);
      ASSERT_TRUE(r) << r.error().message;
      if (expected.contains("error")) { // Gemma's template refuses a system role; Troupe joins it
        EXPECT_EQ(name, "gemma") << expected["error"];
        continue;
      }
      const auto text = expected["text"].get<std::string>();
      EXPECT_EQ(*r, text);
      // BOS: the text starts with it exactly when chat_has_bos says so
      if (fam["bos_token"].is_string())
        EXPECT_EQ(text.rfind(fam["bos_token"].get<std::string>(), 0) == 0, chat_has_bos(f));
      else
        EXPECT_FALSE(chat_has_bos(f));
    }
  }
}

TEST(ChatTemplate, HarmonyStatesTheReasoningEffort) {
  for (const auto& fam : fixture()["families"]) {
    if (fam["family"] != "harmony") continue;
    const harmony_settings high{fam["date"].get<std::string>(), "high"};
    for (const auto& [conv, expected] : fam["renders_reasoning_high"].items()) {
      SCOPED_TRACE(conv);
      const auto r = render_chat(chat_format::harmony, conversation(conv), {}, high);
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_EQ(*r, expected["text"].get<std::string>());
    }
    const harmony_settings bad{fam["date"].get<std::string>(), "extreme"};
    EXPECT_FALSE(render_chat(chat_format::harmony, conversation("user_only"), {}, bad));
    return;
  }
  FAIL() << "no harmony family in the fixture";
}

TEST(ChatTemplate, HarmonyRefusesWhatItsTemplateWouldDropOrRaiseOn) {
  // a later system message (the template drops it silently) and a reply carrying channel tags
  // (the template raises)
  EXPECT_FALSE(render_chat(chat_format::harmony, {{"user", "a"}, {"system", "b"}}));
  EXPECT_FALSE(render_chat(
      chat_format::harmony,
      {{"user", "a"}, {"assistant", "<|channel|>analysis<|message|>think"}, {"user", "b"}}));
  // an empty system message opens no developer block (Jinja's truth of "")
  const auto r =
      render_chat(chat_format::harmony, {{"system", ""}, {"user", "a"}}, {}, {"2026-01-01", "low"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->find("developer"), std::string::npos);
  EXPECT_NE(r->find("Current date: 2026-01-01\n\nReasoning: low"), std::string::npos);
}

TEST(ChatTemplate, LookalikesAreNotClaimedByAFamilyThatRendersThemOtherwise) {
  for (const auto& look : fixture()["lookalikes"]) {
    SCOPED_TRACE(look["model"].get<std::string>());
    const chat_format f = detect_chat_format(look["template"].get<std::string>());
    if (f == chat_format::plain) continue; // the documented fallback claims nothing
    for (const auto& [conv, expected] : look["renders"].items()) {
      if (!expected.contains("text")) continue;
      const auto r = render_chat(f, conversation(conv));
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_EQ(*r, expected["text"].get<std::string>()) << conv << " as " << to_string(f);
    }
  }
}

TEST(ChatTemplate, EndOfTurnIsTheTokenThatClosesAnAssistantTurn) {
  for (const auto& fam : fixture()["families"]) {
    const auto name = fam["family"].get<std::string>();
    const chat_format f = detect_chat_format(fam["template"].get<std::string>());
    const auto ends = chat_end_of_turn(f);
    const std::string_view end = ends.empty() ? std::string_view() : ends[0];
    const std::string text = fam["renders"]["multi_turn"]["text"].get<std::string>();
    const std::string reply = "Hello! How can I help you today?";
    if (name == "harmony") {
      // a reply in the history closes its message with <|end|>; generation ends on the
      // template's eos, <|return|> (or <|call|> for a tool call)
      EXPECT_NE(text.find(reply + "<|end|>"), std::string::npos);
      EXPECT_EQ(end, fam["eos_token"].get<std::string>());
      ASSERT_EQ(ends.size(), 2u);
      EXPECT_EQ(ends[1], "<|call|>");
    } else if (end.empty()) { // the model's eos closes the turn (Llama 2 after a space); a stop
                              // already
      EXPECT_TRUE(name == "llama2" || name == "mistral" || name == "olmo2") << name;
      const std::string eos = fam["eos_token"].get<std::string>();
      EXPECT_TRUE(text.find(reply + eos) != std::string::npos ||
                  text.find(reply + " " + eos) != std::string::npos)
          << name;
    } else {
      EXPECT_NE(text.find(reply + std::string(end)), std::string::npos) << name << ": " << end;
    }
  }
  EXPECT_TRUE(chat_end_of_turn(chat_format::plain).empty());
}

TEST(ChatTemplate, RejectsUnknownRolesAndEmptyConversations) {
  for (chat_format f : all_formats) {
    SCOPED_TRACE(std::string(to_string(f)));
    EXPECT_FALSE(render_chat(f, {}));
    EXPECT_FALSE(render_chat(f, {{"tool", "x"}}));
  }
  EXPECT_FALSE(render_chat(chat_format::llama2, {{"user", "a"}, {"system", "b"}}));
  EXPECT_FALSE(render_chat(chat_format::command_r, {{"user", "a"}, {"system", "b"}}));
}

// tokenizer_config.json may hold named templates (Command-R: default, tool_use, rag); the
// default one is the chat template.
// The system prompt a ChatML template inserts when none is given: Qwen2's and Qwen2.5's
// (whose tool branch opens the same block without the literal), none for a plain ChatML.
TEST(ChatTemplate, DefaultSystemPromptIsTheTemplatesLiteral) {
  EXPECT_EQ(chat_default_system(chat_format::chatml,
                                "{% if loop.first and messages[0]['role'] != 'system' %}{{ "
                                "'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' "
                                "}}{% endif %}"),
            "You are a helpful assistant.");
  const std::string qwen25 =
      "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' "
      "%}{{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. "
      "You are a helpful assistant.' }}{%- endif %}{%- else %}{%- if messages[0]['role'] == "
      "'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' "
      "}}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are "
      "a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}";
  EXPECT_EQ(chat_default_system(chat_format::chatml, qwen25),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(chat_default_system(chat_format::chatml,
                                "{% for message in messages %}{{'<|im_start|>' + message['role'] + "
                                "'\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"),
            "");
  EXPECT_EQ(chat_default_system(chat_format::llama3, "<|im_start|>system\nX<|im_end|>"), "");
  auto r = render_chat(chat_format::chatml, {{"user", "hi"}}, "Be brief.");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                "<|im_start|>assistant\n");
  r = render_chat(chat_format::chatml, {{"system", "S"}, {"user", "hi"}}, "Be brief.");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->find("Be brief."), std::string::npos);
}

TEST(ChatTemplate, NamedTemplatesGiveTheDefault) {
  const std::string tok = test::read_file(test::model_path("stories260K-hf/tokenizer.json"));
  json cfg = {{"chat_template",
               json::array({{{"name", "tool_use"}, {"template", "{{ tools }}"}},
                            {{"name", "default"},
                             {"template", "{{ bos_token }}<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
                                          "<|CHATBOT_TOKEN|>"}}})}};
  auto t = tokenizer::from_hf_json(tok, cfg.dump(), "named.json");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(detect_chat_format((*t)->chat_template()), chat_format::command_r);
  // a name that is not a string names no template (it used to throw out of the load)
  cfg["chat_template"][0]["name"] = 5;
  cfg["chat_template"][1]["name"] = json::array({"default"});
  t = tokenizer::from_hf_json(tok, cfg.dump(), "named.json");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ((*t)->chat_template(), "");
}
