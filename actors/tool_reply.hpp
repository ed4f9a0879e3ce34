// tool_reply.hpp: what a chat choice's text becomes under its request's tools (the gateway's
// sessions hold one per choice). tool_choice auto: the text goes through a tool_call_parser in
// the template's format, content out as it is decided, each call when complete (at most one
// without parallel_tool_calls); a named function: the whole reply is that call's arguments (the
// grammar held it to their schema); required: the reply is a JSON list of {name, parameters}.
// A reply cut short by max_tokens is not a call: its text is content; so is a call to a
// function that was not offered (its text, as the model wrote it). Each call gets an id
// ("call_" and 24 random letters and digits). Not thread-safe.
// Tests: tests/actors/tool_api_test.cpp
#pragma once

#include <string>
#include <vector>

#include "actors/openai_api.hpp"

namespace troupe::actors {

class tool_reply {
 public:
  explicit tool_reply(const parsed_request& r);

  struct out {
    std::string text;
    std::vector<tool_call> calls;
  };
  out push(const std::string& text);
  /// Calls read elsewhere (harmony's router): checked and named as the parser's are.
  out take_calls(std::vector<tool_call> calls);
  /// One event's share: `read` calls (harmony's; a refused one's text follows the new text),
  /// the new text, then, when the reply `ended` (`cut` by max_tokens), what was held back.
  out step(std::string text, std::vector<tool_call> read, bool ended, bool cut);
  /// The reply ended (`cut`: by max_tokens).
  out finish(bool cut);
  /// Some call was read: the finish reason becomes "tool_calls" (not for a named function,
  /// which OpenAI ends with "stop").
  bool finishes_as_call() const { return calls_ > 0 && mode_ != tool_mode::named; }

 private:
  out take(tool_call_parser::delta d);
  tool_mode mode_;
  std::string name_;
  bool parallel_;
  std::vector<std::string> names_, params_; // the functions offered, their schemas
  tool_call_parser parser_;
  std::string held_; // named / required: the reply so far
  size_t calls_ = 0;
};

/// `prefix` and 24 random letters and digits: "call_..." for tool calls, "resp_...", ...
std::string new_random_id(std::string prefix);
std::string new_tool_call_id();

} // namespace troupe::actors
