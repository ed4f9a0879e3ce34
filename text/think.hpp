// think.hpp: the reasoning of models that think between <think> and </think> before they
// answer (Qwen3, QwQ, DeepSeek-R1 and its distills). A chat reply of such a model is split on
// its way out, as vLLM's reasoning parsers and llama.cpp's server split it: the text between
// the tags is the reasoning (served as reasoning_content), the text after the closing tag the
// answer (content), the tags themselves neither. A reply reasons when its first token opens
// the block (Qwen3) or when the prompt already opened it (R1's template ends its generation
// prompt with "<think>\n"); otherwise it is all answer (Qwen3 with thinking off, whose template
// writes an empty block into the prompt). A reply cut before </think> is all reasoning. Tags
// are matched by id, so only vocabularies where both are single tokens split; text that spells
// "<think>" in pieces stays text. The same states make think_then, a token rule that lets the
// reasoning run free (but for EOS: the answer must come) and holds the answer to another rule
// (a response_format's JSON) from the token after </think> on, as vLLM applies a grammar only
// after the reasoning ends. One router or rule per completion; not thread-safe.
// Tests: tests/text/think_test.cpp
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/token_constraint.hpp"
#include "text/tokenizer.hpp"

namespace troupe {

/// The ids of the think tags in a vocabulary.
struct think_tokens {
  int32_t open = -1, close = -1;
  /// nullopt unless both "<think>" and "</think>" are tokens of their own.
  static std::optional<think_tokens> of(const tokenizer& tok);
  /// Whether a completion of `prompt` starts inside a think block: one of its last three
  /// tokens opens one (a template's generation prompt; a tag a message quotes is not).
  bool opened_by(std::span<const int32_t> prompt) const;
};

class think_router {
 public:
  enum class part { tag, reasoning, content };
  think_router(think_tokens ids, bool inside)
      : ids_(ids)
      , state_(inside ? state::inside : state::first) {}
  /// Where generated token `id` belongs.
  part route(int32_t id);
  bool reasoning() const { return state_ == state::inside; }

 private:
  enum class state { first, inside, after };
  think_tokens ids_;
  state state_;
};

/// A rule that lets a think block run (all tokens but `eos`), then holds what follows
/// </think> to `answer`. `inside`: the prompt opened the block.
std::unique_ptr<token_constraint> think_then(std::unique_ptr<token_constraint> answer,
                                             think_tokens ids, bool inside, int32_t vocab_size,
                                             std::vector<int32_t> eos);

} // namespace troupe
