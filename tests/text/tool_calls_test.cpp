// tool_calls_test.cpp: reading tool calls out of replies (text/tool_calls.hpp) in each format,
// fed whole and split at every byte (a stream's text arrives in any pieces): the content and the
// calls must come out the same, a call's text never leaks into the content, and text that only
// looks like a call is content. Every published template of tests/fixtures/jinja_templates.json
// that renders an assistant's call (transformers' rendering of get_weather(Paris, celsius)) is
// known by its markers and its rendering reads back as that call.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
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

// Each published template that renders the fixture's call: its format, then the call read back
// out of the whole rendering (the system prompt's examples and the tool's result around it).
TEST(ToolCalls, PublishedTemplatesCallsReadBack) {
  using ojson = nlohmann::ordered_json;
  const ojson f = ojson::parse(test::read_file(test::fixture_path("jinja_templates.json")));
  const std::string schema =
      f["contexts"]["tool_calls"]["tools"][0]["function"]["parameters"].dump();
  std::vector<std::string> unread;
  size_t read = 0;
  // templates that leave the calls out of the history (the model writes LFM2's Python calls
  // from what it learnt, not from the template), known by the tool list they write
  const std::set<std::string> no_calls_in_history = {"LFM2-8B-A1B", "LFM2.5-Instruct"};
  for (const auto& t : f["templates"]) {
    const tool_format fmt = detect_tool_format(t["template"].get<std::string>());
    if (t["name"] == "LFM2.5-8B-A1B") { // renders them (no text)
      EXPECT_EQ(fmt, tool_format::lfm2);
    }
    const auto& r = t["renders"]["tool_calls"];
    if (!r.contains("text")) continue; // transformers refused the conversation
    const std::string name = t["name"], text = r["text"];
    if (no_calls_in_history.contains(name)) {
      EXPECT_EQ(fmt, tool_format::lfm2) << name;
      continue;
    }
    if (fmt == tool_format::none) {
      unread.push_back(name);
      continue;
    }
    // llama3's call is a whole reply: its assistant turn alone (the rest of the rendering is
    // read whole: a block format finds the call's block within it)
    std::string reply = text;
    if (fmt == tool_format::llama3) {
      const std::string head = "assistant<|end_header_id|>\n\n";
      const size_t a = text.find(head, text.rfind("Paris?")) + head.size();
      reply = text.substr(a, text.find("<|e", a) - a);
    }
    for (size_t split : {reply.size(), size_t{1}, size_t{7}}) {
      const result got = run(fmt, reply, split);
      bool found = false;
      for (const auto& c : got.calls)
        found |= c.name == "get_weather" &&
                 typed_arguments(c.arguments, schema) == R"({"city":"Paris","unit":"celsius"})";
      EXPECT_TRUE(found) << name << " (" << to_string(fmt) << "), split " << split << ": "
                         << got.calls.size() << " calls";
    }
    ++read;
  }
  EXPECT_EQ(read, 42u);
  // the templates that render a call in a format no parser reads: a role of their own (GigaChat's
  // "function call", functionary's >>>NAME), Kimi K3's <|open|> markup; and SmolLM3's, which
  // leaves the call out of the history and names no format
  const std::vector<std::string> expected_unread = {"GigaChat3-10B-A1.8B", "GigaChat3.1-10B-A1.8B",
                                                    "HuggingFaceTB-SmolLM3-3B", "Kimi-K3",
                                                    "meetkai-functionary-medium-v3.1"};
  EXPECT_EQ(unread, expected_unread);
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
  // whitespace after a call is layout unless content follows it, however the text is split
  r = check(tool_format::hermes,
            "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\nThe end.\n");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.text, "\n\nThe end.\n");
  r = check(tool_format::hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\n");
  EXPECT_EQ(r.text, "");
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
  // ';' inside strings do not split; many of them are read in one pass
  const std::string code =
      "{\"name\": \"run\", \"parameters\": {\"code\": \"" + std::string(20000, ';') + "\"}}";
  r = run(tool_format::llama3, code, code.size());
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"code\":\"" + std::string(20000, ';') + "\"}");
  r = check(tool_format::llama3, "{\"name\": \"a\", \"parameters\": {}};;");
  EXPECT_TRUE(r.calls.empty()); // an empty call between two ';' is no call
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

// Formats whose markers are special tokens (the output side keeps them in the text): several
// calls in one block, the names and JSON arguments apart.
TEST(ToolCalls, MarkerTokenFormatsReadEveryCallOfTheBlock) {
  result r = check(
      tool_format::deepseek_v3,
      "Looking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
      "{\"city\": \"Paris\"}<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁"
      "sep｜>get_time\n```json\n{\"zone\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(r.text, "Looking.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather"); // V3.1's NAME<sep>{args}
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.calls[1].name, "get_time"); // V3's and R1's function<sep>NAME ```json```
  EXPECT_EQ(r.calls[1].arguments, R"({"zone":"CET"})");
  EXPECT_FALSE(r.calls[0].raw.empty()); // the block's text rides on its first call
  EXPECT_TRUE(r.calls[1].raw.empty());
  // Kimi K2 (its templates' renderings fail in transformers' sandbox: written here by hand
  // from the template): functions.NAME:INDEX names the call
  r = check(tool_format::kimi_k2,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>"
            "functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
            "<|tool_calls_section_end|>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.text, "");
  // Mistral's newer templates (Small 3.2, Devstral): NAME[ARGS]{...}, [CALL_ID] between
  r = check(tool_format::mistral,
            "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[CALL_ID]"
            "a1b2c3d4e[ARGS]{}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.calls[1].name, "get_time");
  // Granite 3: <|tool_call|> and a JSON list to the reply's end
  r = check(tool_format::granite,
            "<|tool_call|>[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"zone":"UTC"})");
  // a block whose body does not read, or is cut off, is content, markers and all
  const std::string broken = "x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                             "{\"city\": <｜tool▁call▁end｜><｜tool▁calls▁end｜>y";
  r = check(tool_format::deepseek_v3, broken);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, broken);
  r = check(tool_format::kimi_k2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0");
  // a block that the reply's end leaves open is read when its body is whole
  r = check(tool_format::solar, "<|tool_calls|><|tool_call:begin|>c1<|tool_call:name|>get_time"
                                "<|tool_call:args|>{}<|tool_call:end|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_time");
}

// Markup formats: values are text unless the markup types them; objects and lists nest.
TEST(ToolCalls, MarkupFormatsTypeWhatTheyCan) {
  // DSML: string="false" holds JSON, so the call is typed as it stands
  result r =
      check(tool_format::deepseek_v32,
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter "
            "name=\"s\" string=\"true\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"n\" "
            "string=\"false\">[1, 2]</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke "
            "name=\"g\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"s":"42","n":[1,2]})");
  EXPECT_FALSE(r.calls[0].untyped);
  EXPECT_EQ(r.calls[1].name, "g");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  // MiniMax-M2: bare values, read later by the schema
  r = check(tool_format::minimax_m2,
            "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"n\">3</parameter>\n"
            "</invoke>\n</minimax:tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_TRUE(r.calls[0].untyped);
  EXPECT_EQ(typed_arguments(r.calls[0].arguments, R"({"properties":{"n":{"type":"integer"}}})"),
            R"({"n":3})");
  // Gemma 4: strings in <|"|>, numbers and booleans bare, objects and lists nested
  r = check(tool_format::gemma4, "<|tool_call>call:f{a:<|\"|>x, y<|\"|>,b:2.5,c:true,"
                                 "d:{<|\"|>k<|\"|>:[1,<|\"|>z<|\"|>]}}<tool_call|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a":"x, y","b":2.5,"c":true,"d":{"k":[1,"z"]}})");
  // MiniMax-M3: an object's value as elements, a list's as <item>s
  r = check(tool_format::minimax_m3,
            "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"f\">]<]minimax[>[<q>hi"
            "]<]minimax[>[</q>]<]minimax[>[<l>]<]minimax[>[<item>1]<]minimax[>[</item>]<]minimax[>["
            "<item>2]<]minimax[>[</item>]<]minimax[>[</l>]<]minimax[>[</invoke>\n]<]minimax[>["
            "</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"q":"hi","l":["1","2"]})");
  // a marker the erasures join together is a marker too
  r = check(tool_format::minimax_m3,
            "]<]minimax[>[<tool_call>]<]minimax[>[<invoke name=\"f\">]<]minimax[>[<q>h]<]minimax"
            "]<]minimax[>[[>[i]<]minimax[>[</q>]<]minimax[>[</invoke>]<]minimax[>[</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"q":"hi"})");
  // MiniCPM: values in CDATA are the text inside
  r = check(tool_format::minicpm, "<function name=\"f\"><param name=\"code\"><![CDATA[a < b]]>"
                                  "</param></function>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"code":"a < b"})");
  // Cohere names the function tool_name
  r = check(tool_format::cohere, "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": "
                                 "\"f\", \"parameters\": {}}]<|END_ACTION|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  // nesting past what a reader follows is content, not a crash (a reply is untrusted input)
  std::string deep = "<|tool_call>call:f{a:", m3 = "]<]minimax[>[<tool_call><invoke name=\"f\">";
  for (int i = 0; i < 100000; ++i) deep += "[", m3 += "<a>";
  deep += "<tool_call|>", m3 += "]<]minimax[>[</tool_call>";
  r = run(tool_format::gemma4, deep, deep.size());
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, deep);
  r = run(tool_format::minimax_m3, m3, m3.size());
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, m3);
  std::string json_deep = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ";
  for (int i = 0; i < 100000; ++i) json_deep += "[";
  for (int i = 0; i < 100000; ++i) json_deep += "]";
  json_deep += "}}</tool_call>";
  r = run(tool_format::hermes, json_deep, json_deep.size());
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.text, json_deep);
  // so is a bare value that would read as deep JSON: it stays the model's text
  const std::string deep_value = json_deep.substr(json_deep.find('['), 200000);
  const std::string typed = typed_arguments(nlohmann::json{{"a", deep_value}}.dump(),
                                            R"({"properties":{"a":{"type":"array"}}})");
  EXPECT_EQ(nlohmann::json::parse(typed)["a"], deep_value);
  // markup that does not close is content
  r = check(tool_format::minimax_m2,
            "<minimax:tool_call><invoke name=\"f\"><parameter name=\"n\">3</minimax:tool_call>");
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolCalls, MarkersOfAFormat) {
  const auto m = tool_markers(tool_format::deepseek_v3);
  EXPECT_NE(std::find(m.begin(), m.end(), "<｜tool▁sep｜>"), m.end());
  EXPECT_NE(std::find(m.begin(), m.end(), "<｜tool▁calls▁end｜>"), m.end());
  EXPECT_TRUE(tool_markers(tool_format::none).empty());
  EXPECT_NE(tool_format_names().find("kimi_k2"), std::string::npos);
}

} // namespace
} // namespace troupe

namespace troupe {
namespace {

// LFM2's Python calls: a list of name(key=literal) between its markers, the literals (strings
// in either quotes with escapes, numbers, True / False / None, lists, tuples, dicts) as JSON;
// what is not literal calls (a positional argument, an expression, an unclosed list) is content.
TEST(ToolCalls, Lfm2Pythonic) {
  EXPECT_EQ(detect_tool_format("List of tools: <|tool_list_start|>{{ tools }}<|tool_list_end|>"),
            tool_format::lfm2);
  result r = check(tool_format::lfm2,
                   "<|tool_call_start|>[get_weather(location=\"Tokyo\", days=3, metric=True), "
                   "get_time()]<|tool_call_end|>Checking the weather.");
  EXPECT_EQ(r.text, "Checking the weather.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"location":"Tokyo","days":3,"metric":true})");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  r = check(tool_format::lfm2,
            "<|tool_call_start|>[search(q='it\\'s \\u00e9t\\xe9\\n', tags=['a', \"b\",], "
            "range=(1, -2.5e3), opts={'deep': None, 'n': [1, {}]},)]<|tool_call_end|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments,
            "{\"q\":\"it's \xc3\xa9t\xc3\xa9\\n\",\"tags\":[\"a\",\"b\"],\"range\":[1,-2500.0],"
            "\"opts\":{\"deep\":null,\"n\":[1,{}]}}");
  r = check(tool_format::lfm2, "<|tool_call_start|>lookup(id=7)<|tool_call_end|>"); // no list
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"id":7})");
  for (const char* body : {"[f(1)]", "[f(a=b)]", "[f(a=1 + 2)]", "[f(a=1)", "[f(a='x)]",
                           "[f(a=1) g(b=2)]", "[(a=1)]", "[f(a=[1, 2)]"}) {
    const std::string reply = std::string("<|tool_call_start|>") + body + "<|tool_call_end|>";
    r = check(tool_format::lfm2, reply);
    EXPECT_TRUE(r.calls.empty()) << body;
    EXPECT_EQ(r.text, reply) << body;
  }
  std::string deep = "[f(a=" + std::string(100, '[') + std::string(100, ']') + ")]";
  r = check(tool_format::lfm2, "<|tool_call_start|>" + deep + "<|tool_call_end|>");
  EXPECT_TRUE(r.calls.empty());
}

} // namespace
} // namespace troupe
