// harmony.hpp: the channels of a GPT-OSS reply. Under the harmony chat format
// (chat_template.hpp) the model answers in messages, each a header and a body:
//   <|channel|>analysis<|message|>...reasoning...<|end|>
//   <|start|>assistant<|channel|>final<|message|>...answer...<|return|>
// The router reads the reply token by token and says where each token belongs: the header
// (role, channel name, recipient, <|constrain|> format; never shown), the reasoning (the
// analysis channel, served as reasoning_content) or the content (the final channel, and
// commentary meant for the user) or a tool call (a body whose header names a recipient
// "to=functions.NAME": the call's JSON arguments, ended by <|call|>). Special tokens are
// matched by id, so text that merely spells
// "<|channel|>" stays text. A reply that never opens a message body (a model that ignores the
// format) is all content: the caller decodes the held header tokens as such (unframed()).
// One router per completion; not thread-safe. Tests: tests/text/harmony_test.cpp
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer.hpp"

namespace troupe {

/// The ids of harmony's special tokens in a vocabulary.
struct harmony_tokens {
  int32_t start = -1, channel = -1, message = -1, end = -1, ret = -1, call = -1, constrain = -1;
  /// nullopt when the vocabulary lacks <|start|>, <|channel|>, <|message|> or <|end|>.
  static std::optional<harmony_tokens> of(const tokenizer& tok);
};

class harmony_router {
 public:
  enum class part { header, reasoning, content, tool };
  harmony_router(const tokenizer& tok, harmony_tokens ids)
      : tok_(tok)
      , ids_(ids) {}
  /// Where generated token `id` belongs.
  part route(int32_t id);
  /// True while no message body has been opened; the header ids seen so far are then the
  /// reply's only text (unframed output), in order.
  bool unframed() const { return !framed_; }
  const std::vector<int32_t>& held() const { return held_; }
  /// The function a tool body calls (part::tool: "get_weather" of to=functions.get_weather).
  const std::string& tool_name() const { return tool_; }

 private:
  enum class state { header, channel_name, body };
  const tokenizer& tok_;
  harmony_tokens ids_;
  state state_ = state::header; // the generation prompt ends inside a header ("<|start|>assistant")
  std::string channel_;         // the current message's channel name, as read
  bool reasoning_ = false;      // the current body is the analysis channel
  std::string header_;          // the current header's text (role, channel, recipient)
  std::string tool_;            // the current body calls this function ("" if none)
  bool framed_ = false;
  std::vector<int32_t> held_; // header ids before the first body (unframed fallback)
};

} // namespace troupe
