// think_test.cpp: replies of models that think in a <think> block (text/think.hpp through
// output_processor): the block is the reasoning and what follows it the answer, each without
// the whitespace around it; a prompt that opened the block (DeepSeek-R1's template) starts the
// reply inside it; a reply with no block is all answer, as it came; one cut inside the block
// is all reasoning; stop strings apply to the answer only; the tags count only as single
// tokens. And think_then: the reasoning runs free but for EOS, the answer's rule holds after
// </think>. The vocabulary: the byte-level BPE fixture with <think> and </think> added as
// Qwen3 adds them (ids 641 and 642, not special).
#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "text/output_processor.hpp"
#include "text/think.hpp"

using namespace troupe;

namespace {

std::unique_ptr<tokenizer> think_vocab() {
  nlohmann::json t = test::load_json(test::fixture_path("tokenizers/gpt2_style/tokenizer.json"));
  int id = 641;
  for (const char* s : {"<think>", "</think>"})
    t["added_tokens"].push_back({{"id", id++},
                                 {"content", s},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", false}});
  auto tok = tokenizer::from_hf_json(t.dump(), "", "think test vocab");
  EXPECT_TRUE(tok) << tok.error().message;
  return tok ? std::move(*tok) : nullptr;
}

std::vector<int32_t> enc(const tokenizer& tok, const std::string& s) {
  auto r = tok.encode(s, false, true);
  EXPECT_TRUE(r);
  return r ? *r : std::vector<int32_t>{};
}

struct split {
  std::string text, reasoning;
  size_t accepted = 0, reasoning_tokens = 0;
};

// Pushes `reply` a token at a time (or all at once), then finishes.
split run(const tokenizer& tok, const std::string& prompt, const std::string& reply,
          std::vector<std::string> stops = {}, bool at_once = false) {
  const auto p = enc(tok, prompt);
  output_processor op(tok, p, std::move(stops), 0, std::nullopt, think_tokens::of(tok));
  split out;
  const auto ids = enc(tok, reply);
  for (size_t i = 0; i < ids.size(); i += at_once ? ids.size() : 1) {
    auto d = op.push(std::span<const int32_t>(ids).subspan(i, at_once ? ids.size() : 1));
    out.text += d.text;
    out.reasoning += d.reasoning;
    out.accepted += d.accepted;
    out.reasoning_tokens += d.reasoning_tokens;
  }
  const auto tail = op.finish();
  out.text += tail.text;
  out.reasoning += tail.reasoning;
  return out;
}

} // namespace

TEST(Think, TagsAreSingleTokens) {
  auto tok = think_vocab();
  ASSERT_TRUE(tok);
  const auto ids = think_tokens::of(*tok);
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->open, 641);
  EXPECT_EQ(ids->close, 642);
  EXPECT_EQ(enc(*tok, "<think>x</think>").front(), 641);
  auto plain = tokenizer::from_hf_dir(test::model_path("stories260K-hf"));
  ASSERT_TRUE(plain);
  EXPECT_FALSE(think_tokens::of(**plain)); // no tags of their own: nothing is split
}

TEST(Think, TheBlockIsTheReasoningAndTheRestTheAnswer) {
  auto tok = think_vocab();
  for (bool at_once : {false, true}) {
    const auto s = run(*tok, "Capital of France?",
                       "<think>\nThe user asks.\n\nIt is Paris.\n</think>\n\nParis.", {}, at_once);
    EXPECT_EQ(s.reasoning, "The user asks.\n\nIt is Paris.") << at_once;
    EXPECT_EQ(s.text, "Paris.") << at_once;
    // the block's tokens, its tags too, are the reasoning tokens (usage), however they came
    const auto block = enc(*tok, "<think>\nThe user asks.\n\nIt is Paris.\n</think>");
    EXPECT_EQ(s.reasoning_tokens, block.size()) << at_once;
  }
  // the prompt opened the block (R1's generation prompt ends with "<think>\n")
  const auto r1 = run(*tok, "Capital of France?<think>\n", "Hmm, Paris.\n</think>\n\nParis");
  EXPECT_EQ(r1.reasoning, "Hmm, Paris.");
  EXPECT_EQ(r1.text, "Paris");
  // a tag the user's message quotes, far from the prompt's end, does not open the reply
  const auto quoted = run(*tok, "What does <think> mean in a prompt?", "A tag.");
  EXPECT_EQ(quoted.reasoning, "");
  EXPECT_EQ(quoted.text, "A tag.");
  // an empty block closed in the prompt (thinking turned off): the reply is all answer
  const auto off = run(*tok, "Capital?<think>\n\n</think>\n\n", " Paris\n");
  EXPECT_EQ(off.reasoning, "");
  EXPECT_EQ(off.text, " Paris\n");
}

TEST(Think, NoBlockIsAllAnswerACutBlockAllReasoning) {
  auto tok = think_vocab();
  const auto none = run(*tok, "Q?", "\nParis <think> is a tag here");
  EXPECT_EQ(none.reasoning, "");
  EXPECT_EQ(none.text, "\nParis <think> is a tag here");
  const auto cut = run(*tok, "Q?", "<think>\nStill thinking about it \n");
  EXPECT_EQ(cut.reasoning, "Still thinking about it");
  EXPECT_EQ(cut.text, "");
  // "<think>" spelled in pieces is not the tag
  const auto spelled = run(*tok, "Q?", "<thi");
  EXPECT_EQ(spelled.text, "<thi");
}

TEST(Think, StopStringsApplyToTheAnswerOnly) {
  auto tok = think_vocab();
  const auto s = run(*tok, "Q?", "<think>Maybe STOP here.</think>Paris STOP more", {"STOP"});
  EXPECT_EQ(s.reasoning, "Maybe STOP here.");
  EXPECT_EQ(s.text, "Paris ");
}

namespace {

// A toy answer rule: token 5, then done; EOS (7) allowed once done.
class five final : public token_constraint {
 public:
  std::unique_ptr<token_constraint> clone() const override { return std::make_unique<five>(*this); }
  bool advance(int32_t t) override {
    if (done_ || t != 5) return false;
    done_ = true;
    return true;
  }
  void allowed(std::vector<uint64_t>& bits) const override {
    bits.assign(1, 0);
    bits[0] |= uint64_t{1} << (done_ ? 7 : 5);
  }
  bool done() const override { return done_; }

 private:
  bool done_ = false;
};

// A toy rule that takes any token (a JSON string's content, say).
class everything final : public token_constraint {
 public:
  std::unique_ptr<token_constraint> clone() const override {
    return std::make_unique<everything>(*this);
  }
  bool advance(int32_t) override { return true; }
  void allowed(std::vector<uint64_t>& bits) const override { bits.assign(2, ~uint64_t{0}); }
  bool done() const override { return false; }
};

bool has(const std::vector<uint64_t>& bits, int32_t id) {
  return static_cast<size_t>(id) / 64 < bits.size() &&
         (bits[static_cast<size_t>(id) / 64] >> (id % 64)) & 1;
}

} // namespace

TEST(Think, TheAnswerRuleHoldsAfterTheBlock) {
  const think_tokens ids{40, 41};
  auto rule = think_then(std::make_unique<five>(), ids, false, 100, {7});
  std::vector<uint64_t> bits;
  rule->allowed(bits); // first: the answer's start or the block's opening
  EXPECT_TRUE(has(bits, 5));
  EXPECT_TRUE(has(bits, 40));
  EXPECT_FALSE(has(bits, 3));
  ASSERT_TRUE(rule->advance(40));
  rule->allowed(bits); // inside: anything but EOS, up to the vocabulary
  EXPECT_TRUE(has(bits, 3) && has(bits, 99) && has(bits, 41));
  EXPECT_FALSE(has(bits, 7));
  EXPECT_FALSE(has(bits, 100));
  EXPECT_TRUE(rule->advance(3));
  auto copy = rule->clone();      // in the same state
  EXPECT_FALSE(rule->advance(7)); // EOS inside the block is not allowed
  ASSERT_TRUE(copy->advance(41));
  EXPECT_FALSE(copy->done());
  copy->allowed(bits);
  EXPECT_TRUE(has(bits, 5));
  EXPECT_FALSE(has(bits, 3));
  // no tag in the answer, even where the answer's rule would take its bytes
  auto tags = think_then(std::make_unique<everything>(), ids, true, 100, {7});
  ASSERT_TRUE(tags->advance(41));
  tags->allowed(bits);
  EXPECT_TRUE(has(bits, 3));
  EXPECT_FALSE(has(bits, 40) || has(bits, 41));
  EXPECT_FALSE(tags->clone()->advance(40));
  EXPECT_FALSE(tags->clone()->advance(41));
  ASSERT_TRUE(copy->advance(5));
  EXPECT_TRUE(copy->done());
  // without a block the answer starts at once; a prompt that opened one starts inside it
  auto direct = think_then(std::make_unique<five>(), ids, false, 100, {7});
  EXPECT_TRUE(direct->advance(5));
  EXPECT_TRUE(direct->done());
  auto inside = think_then(std::make_unique<five>(), ids, true, 100, {7});
  inside->allowed(bits);
  EXPECT_TRUE(has(bits, 3));
  EXPECT_FALSE(inside->advance(5) && inside->done());
}
