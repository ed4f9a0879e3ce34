// tool_calls.hpp: a chat reply's tool calls, read out of the text in the format the model's chat
// template teaches it (as vLLM's tool parsers read them). Most formats put a reply's calls in a
// block between markers (tool_formats.cpp has each one's markers and body):
//   hermes   <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one block per call
//            (Qwen2.5, Qwen3, QwQ, Hermes 2 Pro / 3, Granite 4, MiMo and their fine-tunes)
//   qwen3_coder / seed_oss  <tool_call> (<seed:tool_call>) <function=NAME><parameter=KEY>VALUE
//            </parameter>...</function> (Qwen3-Coder, Qwen3.5, Step 3.5; Seed-OSS)
//   glm / hunyuan  <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...
//            (GLM-4.5 to 4.7, Ling, Laguna; Hunyuan 3 spells the tags with ":opensource")
//   mistral  [TOOL_CALLS] then a JSON list, or NAME[ARGS]{...} per call (Small 3.2, Devstral)
//   deepseek_v3  <｜tool▁calls▁begin｜> calls of NAME<｜tool▁sep｜>{args} (V3.1) or
//            function<｜tool▁sep｜>NAME ```json {args}``` (V3, R1) <｜tool▁calls▁end｜>
//   deepseek_v32 / deepseek_v4  DSML: <｜DSML｜function_calls> (tool_calls) of
//            <｜DSML｜invoke name=..><｜DSML｜parameter name=.. string="true|false">
//   kimi_k2  <|tool_calls_section_begin|> calls of functions.NAME:I then
//            <|tool_call_argument_begin|>{args} <|tool_calls_section_end|>
//   minimax_m2 / atem  <minimax:tool_call> (<atem:function_calls>) <invoke name=..>
//            <parameter name=..>VALUE</parameter>...
//   nemotron <TOOLCALL>[...]</TOOLCALL>; cohere <|START_ACTION|>[{tool_name, parameters}]
//            <|END_ACTION|>; granite <|tool_call|>[...] (Granite 3); minimax_m1 <tool_calls>
//            one JSON object per line (or a list: Apriel) </tool_calls>; apertus
//            <|tools_prefix|>[{NAME: {args}}]<|tools_suffix|>
//   solar    <|tool_calls|> calls of ID<|tool_call:name|>NAME<|tool_call:args|>{args}
//   gemma4   <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>
//   minimax_m3  each tag after ]<]minimax[>[: <tool_call><invoke name=..><KEY>VALUE</KEY>..
//            (objects and lists expanded into elements)
//   minicpm  <function name="NAME"><param name="KEY">VALUE</param></function>
//   lfm2     <|tool_call_start|>[NAME(KEY=VALUE, ...), ...]<|tool_call_end|>, the values Python
//            literals (LFM2, LFM2.5; templates that list tools between <|tool_list_start|> and
//            <|tool_list_end|>)
//   llama3   the whole reply one JSON object {"name": ..., "parameters": {...}} (or several
//            joined by ';'), optionally after <|python_tag|> (Llama 3.1 / 3.2 / 3.3 templates)
// Markup that writes values as bare text gives `untyped` calls (every value a JSON string),
// for the caller to read as the function's parameter schema says (typed_arguments).
// Many of these markers are special tokens, which decoding drops: tool_markers() names them so
// the output side keeps them in the text it hands the parser.
// The parser takes the reply's text as it streams and gives back the text that is content
// (anything that cannot be the start of a call is released at once; a call's text never is)
// and each call when its text is complete. Text that looked like a call but does not parse as
// one is content after all (vLLM does the same); a block that the reply's end cuts off is read
// if its body is whole; whitespace right after a call is the template's layout unless content
// follows it. One object per reply; not thread-safe.
// Tests: tests/text/tool_calls_test.cpp
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe {

enum class tool_format {
  none,
  hermes,
  llama3,
  mistral,
  qwen3_coder,
  glm,
  deepseek_v3,
  deepseek_v32,
  deepseek_v4,
  kimi_k2,
  minimax_m2,
  seed_oss,
  atem,
  hunyuan,
  nemotron,
  cohere,
  granite,
  solar,
  gemma4,
  apertus,
  minimax_m1,
  minimax_m3,
  minicpm,
  lfm2
};
std::string_view to_string(tool_format f);
/// The format a chat template's tool calls take, from the markers it writes; none if unknown.
tool_format detect_tool_format(std::string_view chat_template);
/// The markers a format writes (which a tokenizer may have as special tokens).
std::vector<std::string_view> tool_markers(tool_format f);
/// Every format's name, for messages.
std::string tool_format_names();

struct tool_call {
  std::string id; // the server's name for the call ("call_..."); empty as parsed
  std::string name;
  std::string arguments; // JSON text of an object
  std::string raw;       // the reply's text the call was read from (content if it is refused)
  bool untyped = false;  // qwen3_coder / glm: every value is the text the model wrote
  size_t text_at = std::string::npos; // where in its delta's text the call's block stood
                                      // (npos: after it)
};

/// An untyped call's arguments read by the function's parameter schema (JSON text): a value
/// whose property is not a string is parsed as JSON where it is valid JSON (42, true, [1]);
/// strings, and anything else, stay text.
std::string typed_arguments(const std::string& arguments, const std::string& parameters);

class tool_call_parser {
 public:
  explicit tool_call_parser(tool_format f)
      : f_(f) {}

  struct delta {
    std::string text;             // content now final
    std::vector<tool_call> calls; // calls now complete
  };
  delta push(std::string_view text);
  /// The reply ended: whatever is held back (an unfinished call's text is content).
  delta finish();
  /// How many calls were read so far.
  size_t calls() const { return calls_; }

 private:
  delta blocks(bool end);
  delta llama3_push();
  delta llama3_finish();
  delta release_all(); // everything held is content
  tool_format f_;
  std::string held_;        // text not yet released
  size_t close_from_ = 0;   // blocks: where in held_ (an open block) the close may still begin
  std::string layout_;      // blocks: whitespace right after a call, until content follows it
  bool after_call_ = false; // blocks: nothing but whitespace since the last call
  size_t blank_upto_ = 0;   // llama3: held_ is whitespace up to here
  bool started_ = false;    // llama3: the reply is (or began as) a call
  bool any_text_ = false;   // some non-whitespace content was released
  size_t calls_ = 0;
};

/// Reads `text` as one JSON call object ({"name", "arguments" | "parameters"}) or a list of
/// them; false if it is not.
bool parse_tool_calls(std::string_view text, std::vector<tool_call>& out);

} // namespace troupe
