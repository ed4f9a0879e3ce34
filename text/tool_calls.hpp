// tool_calls.hpp: a chat reply's tool calls, read out of the text in the format the model's chat
// template teaches it (as vLLM's tool parsers read them):
//   hermes   <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one block per call
//            (Qwen2.5, Qwen3, QwQ, Hermes 2 Pro / 3 and their fine-tunes: templates that write
//            <tool_call>)
//   llama3   the whole reply one JSON object {"name": ..., "parameters": {...}} (or several
//            joined by ';'), optionally after <|python_tag|> (Llama 3.1 / 3.2 / 3.3 templates)
//   mistral  [TOOL_CALLS] then a JSON list of {"name", "arguments"} (Mistral templates)
//   qwen3_coder  <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function>
//            </tool_call> (Qwen3-Coder's template)
//   glm      <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>
//            (GLM-4.5 / 4.6)
// The last two write values as bare text: their calls come out `untyped` (every value a JSON
// string), for the caller to read as the function's parameter schema says (typed_arguments).
// The parser takes the reply's text as it streams and gives back the text that is content
// (anything that cannot be the start of a call is released at once; a call's text never is)
// and each call when its text is complete. Text that looked like a call but does not parse as
// one is content after all (vLLM does the same). One object per reply; not thread-safe.
// Tests: tests/text/tool_calls_test.cpp
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe {

enum class tool_format { none, hermes, llama3, mistral, qwen3_coder, glm };
std::string_view to_string(tool_format f);
/// The format a chat template's tool calls take, from the markers it writes; none if unknown.
tool_format detect_tool_format(std::string_view chat_template);

struct tool_call {
  std::string id; // the server's name for the call ("call_..."); empty as parsed
  std::string name;
  std::string arguments; // JSON text of an object
  std::string raw;       // the reply's text the call was read from (content if it is refused)
  bool untyped = false;  // qwen3_coder / glm: every value is the text the model wrote
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
  delta hermes(bool end);
  tool_format f_;
  std::string held_;      // text not yet released
  bool started_ = false;  // llama3 / mistral: the reply is (or began as) a call
  bool any_text_ = false; // some non-whitespace content was released
  size_t calls_ = 0;
};

/// Reads `text` as one JSON call object ({"name", "arguments" | "parameters"}) or a list of
/// them; false if it is not.
bool parse_tool_calls(std::string_view text, std::vector<tool_call>& out);

} // namespace troupe
