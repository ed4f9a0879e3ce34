// think.cpp: think blocks in replies and token rules (think.hpp).
#include "text/think.hpp"

#include <algorithm>

namespace troupe {

std::optional<think_tokens> think_tokens::of(const tokenizer& tok) {
  think_tokens t;
  t.open = tok.find("<think>");
  t.close = tok.find("</think>");
  if (t.open < 0 || t.close < 0) return std::nullopt;
  return t;
}

bool think_tokens::opened_by(std::span<const int32_t> prompt) const {
  // the generation prompt's own tag ("<think>\n" at its very end), not one a message quotes
  constexpr size_t last = 3;
  for (size_t i = 0; i < prompt.size() && i < last; ++i) {
    const int32_t id = prompt[prompt.size() - 1 - i];
    if (id == open) return true;
    if (id == close) return false;
  }
  return false;
}

think_router::part think_router::route(int32_t id) {
  switch (state_) {
  case state::first:
    state_ = id == ids_.open ? state::inside : state::after;
    return id == ids_.open ? part::tag : part::content;
  case state::inside:
    if (id != ids_.close) return part::reasoning;
    state_ = state::after;
    return part::tag;
  case state::after:
    break;
  }
  return part::content;
}

namespace {

class think_rule final : public token_constraint {
 public:
  think_rule(std::unique_ptr<token_constraint> answer, think_tokens ids, bool inside, int32_t vocab,
             std::vector<int32_t> eos)
      : answer_(std::move(answer))
      , ids_(ids)
      , state_(inside ? state::inside : state::first)
      , vocab_(vocab)
      , eos_(std::move(eos)) {}

  std::unique_ptr<token_constraint> clone() const override {
    auto c = std::make_unique<think_rule>(answer_->clone(), ids_, false, vocab_, eos_);
    c->state_ = state_;
    return c;
  }
  bool advance(int32_t token) override {
    switch (state_) {
    case state::first:
      if (token == ids_.open) {
        state_ = state::inside;
        return true;
      }
      state_ = state::after;
      return answer_->advance(token);
    case state::inside:
      if (std::find(eos_.begin(), eos_.end(), token) != eos_.end()) return false;
      if (token == ids_.close) state_ = state::after;
      return true;
    case state::after:
      break;
    }
    if (token == ids_.open || token == ids_.close) return false; // no tag in the answer
    return answer_->advance(token);
  }
  void allowed(std::vector<uint64_t>& bits) const override {
    if (state_ == state::after) { // the answer's tokens but the tags (a JSON string could
      answer_->allowed(bits);     // take their bytes)
      for (int32_t t : {ids_.open, ids_.close})
        if (t >= 0 && static_cast<size_t>(t) / 64 < bits.size())
          bits[static_cast<size_t>(t) / 64] &= ~(uint64_t{1} << (t % 64));
      return;
    }
    if (state_ == state::first) { // the answer's first tokens, or the block's opening
      answer_->allowed(bits);
      set(bits, ids_.open);
      return;
    }
    bits.assign(static_cast<size_t>((vocab_ + 63) / 64), ~uint64_t{0});
    if (vocab_ % 64) bits.back() = (uint64_t{1} << (vocab_ % 64)) - 1;
    for (int32_t e : eos_)
      if (e >= 0 && e < vocab_) bits[static_cast<size_t>(e) / 64] &= ~(uint64_t{1} << (e % 64));
  }
  bool done() const override { return state_ == state::after && answer_->done(); }

 private:
  enum class state { first, inside, after };
  static void set(std::vector<uint64_t>& bits, int32_t id) {
    if (id < 0) return;
    if (bits.size() <= static_cast<size_t>(id) / 64) bits.resize(static_cast<size_t>(id) / 64 + 1);
    bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  }

  std::unique_ptr<token_constraint> answer_;
  think_tokens ids_;
  state state_;
  int32_t vocab_;
  std::vector<int32_t> eos_;
};

} // namespace

std::unique_ptr<token_constraint> think_then(std::unique_ptr<token_constraint> answer,
                                             think_tokens ids, bool inside, int32_t vocab_size,
                                             std::vector<int32_t> eos) {
  return std::make_unique<think_rule>(std::move(answer), ids, inside, vocab_size, std::move(eos));
}

} // namespace troupe
