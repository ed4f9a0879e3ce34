// engine_test.cpp: the engine's continuous batching through the real actor pipeline:
// 64 concurrent greedy requests of mixed prompt lengths give exactly the tokens each gives
// alone (TP 2 x PP 2); with a KV pool too small for all of them, preemption happens and the
// tokens are still exact; afterwards every block is free. Shared prefixes reuse blocks;
// stop strings, cancellation and n > 1 behave. A model whose output depends on where a prompt is
// cut (Dory's last_loop, Zamba2) answers every request as it does alone.
#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "actors/host.hpp"
#include "exec/generator.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

std::shared_ptr<const model_source> stories_hf() {
  static auto m = *open_model(test::model_path("stories260K-hf"));
  return m;
}

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = [] {
    const std::vector<std::string> seeds = {"Once upon a time",
                                            "The little dog",
                                            "Lily and Ben went to the park",
                                            "Tom had a big red ball.",
                                            "One day, a cat",
                                            "The sun was shining and",
                                            "Sam wanted to fly",
                                            "In a small house there lived"};
    std::vector<std::string> out;
    for (int i = 0; i < 64; ++i) {
      std::string s = seeds[i % seeds.size()];
      for (int k = 0; k < i % 5; ++k)
        s += " and then they played with the " + std::to_string(k) + " toys";
      out.push_back(s);
    }
    return out;
  }();
  return p;
}

std::vector<int32_t> solo(const std::string& text, int n) {
  auto g = *exec::generator::create(stories_hf(), {});
  exec::generate_options o;
  o.max_tokens = n;
  o.stop_at_eos = false;
  return g->run(*stories_hf()->tok->encode(text, true), o)->tokens;
}

std::vector<gen_request> requests(int n_tokens) {
  std::vector<gen_request> rs;
  for (const auto& p : prompts()) {
    gen_request r;
    r.prompt = *stories_hf()->tok->encode(p, true);
    r.max_tokens = n_tokens;
    r.ignore_eos = true;
    rs.push_back(r);
  }
  return rs;
}

std::unique_ptr<host> start(int64_t kv_blocks, int tp = 2, int pp = 2) {
  host_options o;
  o.place = *even_placement(stories_hf()->config, tp, pp);
  o.kv_blocks = kv_blocks;
  o.sched.max_batch_tokens = 256;
  auto h = host::start(stories_hf(), o);
  EXPECT_TRUE(h);
  EXPECT_TRUE((*h)->wait_ready(60));
  return std::move(*h);
}

} // namespace

TEST(Engine, SixtyFourConcurrentRequestsMatchSolo) {
  auto h = start(2048);
  auto out = h->generate_many(requests(24));
  ASSERT_TRUE(out) << out.error().to_string();
  for (size_t i = 0; i < prompts().size(); ++i)
    EXPECT_EQ((*out)[i][0].tokens, solo(prompts()[i], 24)) << prompts()[i];
  const auto s = h->stats();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  EXPECT_EQ(s.preemptions, 0);
}

TEST(Engine, PreemptionKeepsTokensExact) {
  auto h = start(48); // 47 blocks of 16 tokens: room for a handful of the 64 sequences
  auto out = h->generate_many(requests(24));
  ASSERT_TRUE(out) << out.error().to_string();
  for (size_t i = 0; i < prompts().size(); ++i)
    EXPECT_EQ((*out)[i][0].tokens, solo(prompts()[i], 24)) << prompts()[i];
  const auto s = h->stats();
  EXPECT_GT(s.preemptions, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST(Engine, SharedPrefixReusesBlocks) {
  auto h = start(512, 1, 1);
  std::string prefix;
  while (stories_hf()->tok->encode(prefix, true)->size() < 256)
    prefix += "Lily and Ben played in the park with a big red ball. ";
  gen_request a, b;
  a.prompt = *stories_hf()->tok->encode(prefix + "Then Lily said", true);
  b.prompt = *stories_hf()->tok->encode(prefix + "Then Ben said", true);
  a.max_tokens = b.max_tokens = 4;
  ASSERT_TRUE(h->generate(a));
  const auto before = h->stats().prefix_hit_blocks;
  auto out = h->generate(b);
  ASSERT_TRUE(out);
  EXPECT_GE(h->stats().prefix_hit_blocks - before, 15); // 256 shared tokens = 16 blocks of 16
  EXPECT_EQ((*out)[0].tokens, solo(prefix + "Then Ben said", 4).size() ? [&] {
    auto g = *exec::generator::create(stories_hf(), {});
    exec::generate_options o;
    o.max_tokens = 4;
    return g->run(b.prompt, o)->tokens;
  }() : std::vector<int32_t>{});
}

TEST(Engine, StopStringsCancelAndParallelCompletions) {
  auto h = start(512, 1, 1);
  gen_request r;
  r.prompt = *stories_hf()->tok->encode("Once upon a time", true);
  r.max_tokens = 32;
  r.stop = {"girl"};
  auto out = h->generate(r);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].finish, finish_reason::stop);
  EXPECT_EQ((*out)[0].text, ", there was a little ");
  // n = 3 sampled completions with one seed: distinct, each reproducible alone
  gen_request s;
  s.prompt = r.prompt;
  s.max_tokens = 12;
  s.n = 3;
  s.sampling.temperature = 2.0f; // stories260K is confident: a hot temperature makes paths differ
  s.sampling.seed = 42;
  auto three = h->generate(s);
  ASSERT_TRUE(three);
  ASSERT_EQ(three->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    gen_request one = s;
    one.n = 1;
    one.sampling.seed = 42 + static_cast<uint64_t>(i);
    auto alone = h->generate(one);
    ASSERT_TRUE(alone);
    EXPECT_EQ((*three)[static_cast<size_t>(i)].tokens, (*alone)[0].tokens) << "completion " << i;
  }
  EXPECT_NE((*three)[0].tokens, (*three)[1].tokens);
  const auto st = h->stats();
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
}

// Models whose output depends on where a sequence is cut into steps, as transformers runs them
// (model_config::input_cut_matters): Dory's last_loop (a block holds the last run's entries, which
// the earlier runs of a later chunk read in place of their own) and Zamba2's step clamp (on a
// prompt, not on a decode step). The host takes no prefix from the cache and cuts every sequence
// in the same pieces whatever else runs (its recomputes too): a request gives what it gives alone,
// whatever ran before or beside it, preempted or not (with a prefix hit, a prompt cut by stall-free
// batching or a recompute in one piece the tokens change: each was seen before the host fixed the
// pieces)
static void answers_as_alone(const std::string& name) {
  SCOPED_TRACE(name);
  auto m = *open_model(test::fixture_path("models/" + name));
  auto alone = [&](const std::vector<int32_t>& prompt) {
    auto g = *exec::generator::create(m, {});
    exec::generate_options o;
    o.max_tokens = 8;
    o.stop_at_eos = false;
    return g->run(prompt, o)->tokens;
  };
  // prompts of 60 tokens, 52 of them shared (a prefix of 3 blocks of 16; 4 blocks each, 5 once
  // they generate)
  std::string prefix;
  while (m->tok->encode(prefix, true)->size() < 52) prefix += "Lily and Ben played in the park. ";
  std::vector<gen_request> rs;
  for (const char* end : {" Then Lily said that the sun was warm and the sky was blue",
                          " Then Ben said he wanted to run to the big tree by the pond",
                          " The dog ran after the ball and the cat sat on the old mat",
                          " They went home and ate soup with bread and milk at the table"}) {
    gen_request r;
    r.prompt = *m->tok->encode(prefix, true);
    r.prompt.resize(52);
    const auto tail = *m->tok->encode(end, false);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.begin() + 8);
    r.max_tokens = 8;
    r.ignore_eos = true;
    rs.push_back(r);
  }
  std::vector<std::vector<int32_t>> want;
  for (const auto& r : rs) want.push_back(alone(r.prompt));
  for (const int64_t blocks : {256, 9}) { // (9: 8 blocks of 16; a sequence grows to ~72)
    host_options o;
    o.place = *even_placement(m->config, 1, 1);
    o.kv_blocks = blocks;
    o.sched.step_target_s = 1e-4; // (asked for; fixed pieces leave prompts whole)
    auto h = host::start(m, o);
    ASSERT_TRUE(h);
    ASSERT_TRUE((*h)->wait_ready(60));
    ASSERT_TRUE((*h)->generate(rs[0])); // (its blocks would serve the others' prefix)
    for (int round = 0; round < 2; ++round) {
      auto out = (*h)->generate_many(rs);
      ASSERT_TRUE(out) << out.error().to_string();
      for (size_t i = 0; i < rs.size(); ++i)
        EXPECT_EQ((*out)[i][0].tokens, want[i]) << blocks << " blocks, request " << i;
    }
    const auto st = (*h)->stats();
    EXPECT_EQ(st.prefix_hit_blocks, 0);
    if (blocks < 16) {
      EXPECT_GT(st.preemptions, 0);
    }
    EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  }
}

TEST(Engine, CutDependentModelsAnswerAsAlone) {
  for (const char* name : {"dory_last", "zamba2"}) answers_as_alone(name);
}
