// output_processor.hpp: what happens to a completion's tokens on the way to its client, kept
// out of the engine's step loop (the gateway's session actors and host::generate run it):
// incremental detokenization (stream_decoder), stop strings (stop_matcher, held back until
// decided, never shown), and min_tokens (stop strings count only after that many tokens).
// When a stop string completes, the tokens after the one that completed it are not accepted;
// the caller tells the engine to end the sequence. Under the harmony chat format a
// harmony_router splits the reply: the analysis channel comes out as reasoning (its own
// decoder, no stop strings), headers not at all, a body addressed to functions.NAME as a tool
// call (complete at <|call|> or the reply's end), the rest as the text; a think_router does the
// same for a <think> block (think.hpp: the reasoning and the answer each without the
// whitespace around them, as llama.cpp's server trims them). token_pieces() gives each
// token's own bytes in context, for logprobs whose token strings join back into the text. One
// object per completion; not thread-safe. Tests: tests/text/output_processor_test.cpp
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "text/harmony.hpp"
#include "text/stop_matcher.hpp"
#include "text/think.hpp"
#include "text/tokenizer.hpp"
#include "text/tool_calls.hpp"

namespace troupe {

class output_processor {
 public:
  output_processor(const tokenizer& tok, std::span<const int32_t> prompt,
                   std::vector<std::string> stops, int min_tokens = 0,
                   std::optional<harmony_tokens> harmony = std::nullopt,
                   std::optional<think_tokens> think = std::nullopt, bool include_stop = false);

  struct delta {
    std::string text;             // text now final (may be empty)
    std::string reasoning;        // harmony, think blocks: reasoning now final
    std::vector<tool_call> calls; // harmony: tool calls now complete (id unset)
    size_t accepted = 0;         // how many of the pushed ids count (all, unless a stop string hit)
    size_t reasoning_tokens = 0; // of those, the ones that were reasoning (a think block with
                                 // its tags, harmony's analysis channel)
  };
  /// Feeds newly generated ids. Once stopped(), nothing more is accepted.
  delta push(std::span<const int32_t> ids);
  /// The completion ended for another reason (EOS, length): the text still held back (for an
  /// unframed harmony reply, all of it) and the reasoning's rest (accepted: 0).
  delta finish();
  bool stopped() const { return stops_.stopped(); }
  /// The stop string that ended the completion ("" when none did).
  const std::string& stop_string() const { return stops_.matched(); }
  /// Harmony: read bodies addressed to functions.NAME as tool calls (the request offered
  /// tools); otherwise they are text, as other commentary.
  void read_tool_calls(bool on) { read_tools_ = on; }
  /// Tool calls are read from the text in `f`: its markers stay in the text where the
  /// tokenizer has them as special tokens (which decoding otherwise drops).
  void keep_tool_markers(tool_format f);
  /// Special tokens' text is part of the reply (vLLM's skip_special_tokens: false); call
  /// before the first push.
  void show_special_tokens() { dec_.show_special(); }
  int64_t tokens() const { return tokens_; }

 private:
  stream_decoder dec_;
  stop_matcher stops_;
  std::optional<harmony_router> router_;
  std::optional<think_router> think_;
  stream_decoder reasoning_dec_;
  // harmony: the tool call being read (its function, its arguments' text so far)
  const tokenizer& tok_;
  std::optional<stream_decoder> tool_dec_;
  std::string tool_name_, tool_args_;
  bool read_tools_ = false;
  void end_tool_call(delta& d);
  // think blocks: the reasoning without the whitespace around it (trailing whitespace held
  // until more reasoning follows), and the answer without the whitespace after </think>
  std::string reasoning_ws_;
  bool reasoning_started_ = false, answer_ws_ = false;
  std::string reasoning_text(int32_t id);
  std::string reasoning_text_finish(); // the block ended: its decoder's rest, trimmed
  std::string answer_text(std::string text);
  int min_tokens_;
  int64_t tokens_ = 0; // accepted so far
  bool finished_ = false;
};

/// The bytes each of `ids` adds to the text when it follows `context` (decoded in a short
/// window, special tokens skipped): concatenated they are the decoded text of `ids` after
/// `context`. A piece may end or start inside a UTF-8 character (byte-fallback tokens).
std::vector<std::string> token_pieces(const tokenizer& tok, std::span<const int32_t> context,
                                      std::span<const int32_t> ids);

} // namespace troupe
