// scheduler_test.cpp: continuous batching against a simulated paged KV memory. The "model"
// writes each token into its KV slot through the block table and predicts the next token
// from what it reads back through the block table, so wrong block tables, missing
// copy-on-write copies or bad prefix reuse change the outputs. Every sequence must produce
// exactly what it produces alone; preemptions and prefix hits are counted; afterwards every
// block is free. Also the block pool.
#include <algorithm>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "engine/kv_block_pool.hpp"
#include "engine/scheduler.hpp"

using namespace troupe;

namespace {

constexpr int32_t V = 1000;
constexpr int32_t P = 4;

// KV memory: [block][offset] -> token written there (-1 = never written). With a window W
// the "model" reads only the last W positions (and fails the test if their block is 0).
struct fake_model {
  std::vector<std::array<int32_t, P>> kv;
  int32_t window = 0;
  explicit fake_model(int32_t blocks, int32_t w = 0)
      : kv(blocks)
      , window(w) {
    for (auto& b : kv) b.fill(-1);
  }
  std::vector<sampled_token> run(const batch& b) {
    for (auto [src, dst] : b.copies) kv[dst] = kv[src];
    std::vector<sampled_token> out;
    for (const auto& s : b.seqs) {
      for (int32_t i = 0; i < s.count; ++i) {
        const int32_t pos = s.pos0 + i;
        kv[s.blocks[pos / P]][pos % P] = b.tokens[s.begin + i];
      }
      if (!s.logits) continue;
      // next token = a hash of everything the sequence can read
      uint64_t h = 1469598103934665603ull;
      const int32_t last = s.pos0 + s.count - 1;
      for (int32_t pos = window ? std::max(0, last - window + 1) : 0; pos <= last; ++pos) {
        EXPECT_GT(s.blocks[pos / P], 0) << "position " << pos << " reads a freed block";
        const int32_t t = kv[s.blocks[pos / P]][pos % P];
        h = (h ^ static_cast<uint64_t>(t + 7)) * 1099511628211ull;
      }
      h ^= s.sampling.seed * 0x9e3779b97f4a7c15ull;
      int32_t tok = static_cast<int32_t>(h % V);
      if (tok == 0) tok = 1; // keep 0 as EOS, produced only when asked below
      out.push_back({s.seq_id, tok, 0.0f, {}});
    }
    return out;
  }
};

struct run_result {
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, finish_reason> finish;
  scheduler_stats stats;
  int32_t free_after = 0, total = 0;
};

run_result run_all(const std::vector<request>& reqs, int32_t blocks, int32_t budget,
                   int max_inflight = 1, bool prefix = true) {
  kv_block_pool pool(blocks, P);
  scheduler_config cfg;
  cfg.max_batch_tokens = budget;
  cfg.max_context = 512;
  cfg.prefix_caching = prefix;
  cfg.eos_ids = {0};
  scheduler s(pool, cfg);
  for (const auto& r : reqs) EXPECT_TRUE(s.add(r));
  fake_model m(blocks);
  run_result out;
  std::deque<step_plan> inflight;
  for (int guard = 0; guard < 100000 && !(s.idle() && inflight.empty()); ++guard) {
    while (static_cast<int>(inflight.size()) < max_inflight) {
      auto p = s.next_step();
      if (!p) break;
      inflight.push_back(std::move(*p));
    }
    if (inflight.empty()) break;
    step_plan p = std::move(inflight.front());
    inflight.pop_front();
    auto res = m.run(p.b);
    for (const auto& e : s.complete(p.step_id, res)) {
      if (e.has_token) out.tokens[e.seq_id].push_back(e.token.token);
      if (e.finished != finish_reason::none) out.finish[e.seq_id] = e.finished;
    }
  }
  EXPECT_TRUE(s.idle());
  out.stats = s.stats();
  out.free_after = pool.free_count();
  out.total = pool.total();
  return out;
}

request make(int64_t id, int len, int max_tokens, uint64_t salt = 0) {
  request r;
  r.id = id;
  std::mt19937 rng(static_cast<uint32_t>(id * 31 + salt));
  for (int i = 0; i < len; ++i) r.prompt.push_back(1 + static_cast<int32_t>(rng() % (V - 1)));
  r.max_tokens = max_tokens;
  r.sampling.seed = 0;
  return r;
}

} // namespace

TEST(KvBlockPool, RefcountsAndLruEviction) {
  kv_block_pool pool(5, P); // 4 usable
  EXPECT_EQ(pool.total(), 4);
  const int32_t a = pool.allocate(), b = pool.allocate();
  EXPECT_NE(a, 0);
  EXPECT_NE(b, 0);
  pool.publish(a, 111);
  pool.release(a); // cached, evictable
  EXPECT_EQ(pool.free_count(), 3);
  EXPECT_EQ(pool.lookup(111), a); // revived from the cache
  EXPECT_EQ(pool.refcount(a), 1);
  pool.release(a);
  pool.allocate(), pool.allocate();  // the two never-used blocks
  const int32_t c = pool.allocate(); // must evict the cached one
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool.evictions(), 1);
  EXPECT_EQ(pool.lookup(111), -1);
  EXPECT_EQ(pool.allocate(), -1);
}

TEST(Scheduler, BatchedOutputsEqualSoloOutputs) {
  std::vector<request> reqs;
  for (int i = 0; i < 64; ++i)
    reqs.push_back(make(100 * (i + 1), 1 + (i * 7) % 40, 1 + (i * 5) % 20));
  std::map<int64_t, std::vector<int32_t>> solo;
  for (const auto& r : reqs) solo[r.id] = run_all({r}, 64, 512).tokens[r.id];
  auto batched = run_all(reqs, 400, 64, 2);
  for (const auto& r : reqs) EXPECT_EQ(batched.tokens[r.id], solo[r.id]) << "request " << r.id;
  EXPECT_EQ(batched.free_after, batched.total);
}

TEST(Scheduler, PreemptionKeepsOutputsExact) {
  std::vector<request> reqs;
  for (int i = 0; i < 24; ++i) reqs.push_back(make(10 * (i + 1), 5 + i % 9, 30));
  std::map<int64_t, std::vector<int32_t>> solo;
  for (const auto& r : reqs) solo[r.id] = run_all({r}, 64, 512).tokens[r.id];
  auto tight = run_all(reqs, 26, 48, 2, false); // 25 blocks of 4 tokens: far too few for all
  EXPECT_GT(tight.stats.preemptions, 0);
  for (const auto& r : reqs) EXPECT_EQ(tight.tokens[r.id], solo[r.id]) << "request " << r.id;
  EXPECT_EQ(tight.free_after, tight.total);
}

TEST(Scheduler, PrefixBlocksAreReused) {
  request a = make(1, 64, 4), b = make(2, 70, 4);
  std::copy(a.prompt.begin(), a.prompt.end(), b.prompt.begin()); // shares 64 tokens = 16 blocks
  kv_block_pool pool(100, P);
  scheduler_config cfg;
  cfg.eos_ids = {0};
  scheduler s(pool, cfg);
  fake_model m(100);
  ASSERT_TRUE(s.add(a));
  while (!s.idle()) {
    auto p = s.next_step();
    ASSERT_TRUE(p);
    for (auto& e : s.complete(p->step_id, m.run(p->b))) EXPECT_EQ(e.cached_tokens, 0);
  }
  ASSERT_TRUE(s.add(b));
  std::vector<int32_t> got;
  while (!s.idle()) {
    auto p = s.next_step();
    ASSERT_TRUE(p);
    for (auto& e : s.complete(p->step_id, m.run(p->b))) {
      if (e.has_token) got.push_back(e.token.token);
      EXPECT_EQ(e.cached_tokens, 64); // what its usage reports as cached
    }
  }
  EXPECT_EQ(s.stats().prefix_hit_blocks, 16);
  EXPECT_EQ(got, run_all({b}, 100, 512).tokens[2]);
  EXPECT_EQ(pool.free_count(), pool.total());
}

// A model that writes rows behind a sequence's position (DeepSeek-V4's compressed entries, at the
// slots of their indices) shares no block: the same prompt again is computed, not looked up, and
// n > 1 completions each have their own blocks.
TEST(Scheduler, UnshareableBlocksAreNeverShared) {
  request a = make(1, 64, 4), b = make(2, 64, 4), c = make(3, 10, 3);
  b.prompt = a.prompt;
  c.n = 3;
  kv_block_pool pool(100, P);
  scheduler_config cfg;
  cfg.eos_ids = {0};
  cfg.share_blocks = false;
  scheduler s(pool, cfg);
  fake_model m(100);
  for (const request& r : {a, b, c}) {
    ASSERT_TRUE(s.add(r));
    while (!s.idle()) {
      auto p = s.next_step();
      ASSERT_TRUE(p);
      for (auto& e : s.complete(p->step_id, m.run(p->b))) EXPECT_EQ(e.cached_tokens, 0);
    }
  }
  EXPECT_EQ(s.stats().prefix_hit_blocks, 0);
  EXPECT_EQ(s.stats().cow_copies, 0);
  EXPECT_EQ(pool.free_count(), pool.total());
}

TEST(Scheduler, ParallelCompletionsShareThePromptWithCopyOnWrite) {
  request r = make(1, 10, 6); // the 10th prompt token sits in a partly filled, shared block
  r.n = 3;
  auto together = run_all({r}, 64, 512);
  EXPECT_GT(together.stats.cow_copies, 0);
  for (int i = 0; i < 3; ++i) {
    request solo = r;
    solo.n = 1;
    solo.id = 1 + i;
    solo.sampling.seed = static_cast<uint64_t>(i);
    EXPECT_EQ(together.tokens[1 + i], run_all({solo}, 64, 512).tokens[1 + i]) << "completion " << i;
  }
  EXPECT_EQ(together.free_after, together.total);
}

TEST(Scheduler, StopConditionsAndCancel) {
  kv_block_pool pool(64, P);
  scheduler_config cfg;
  cfg.eos_ids = {0};
  cfg.max_context = 20;
  scheduler s(pool, cfg);
  request r = make(1, 15, 100); // context ends first
  ASSERT_TRUE(s.add(r));
  request c = make(2, 5, 100);
  ASSERT_TRUE(s.add(c));
  fake_model m(64);
  std::map<int64_t, finish_reason> fin;
  std::map<int64_t, int> count;
  int steps = 0;
  while (!s.idle()) {
    auto p = s.next_step();
    ASSERT_TRUE(p);
    if (++steps == 3) s.cancel(2); // in flight: freed when this step completes
    for (auto& e : s.complete(p->step_id, m.run(p->b))) {
      count[e.seq_id] += e.has_token;
      if (e.finished != finish_reason::none) fin[e.seq_id] = e.finished;
    }
  }
  EXPECT_EQ(fin[1], finish_reason::length);
  EXPECT_EQ(count[1], 5); // 15 + 5 = the context of 20
  EXPECT_EQ(fin[2], finish_reason::cancelled);
  EXPECT_EQ(pool.free_count(), pool.total());
  request bad = make(3, 25, 1);
  EXPECT_EQ(s.add(bad).error().code, errc::out_of_range);
}

namespace {

// A rule that allows one token after another from a list and is then complete.
struct token_list_rule final : token_constraint {
  std::vector<int32_t> want;
  size_t at = 0;
  std::unique_ptr<token_constraint> clone() const override {
    return std::make_unique<token_list_rule>(*this);
  }
  bool advance(int32_t t) override { return at < want.size() && want[at++] == t; }
  void allowed(std::vector<uint64_t>& bits) const override {
    bits.assign((V + 63) / 64, 0);
    if (at < want.size())
      bits[static_cast<size_t>(want[at] >> 6)] |= uint64_t{1} << (want[at] & 63);
  }
  bool done() const override { return at == want.size(); }
};

} // namespace

// A request's token rule: every sampling row carries the allowed tokens (each completion its
// own copy of the rule), the completion ends "stop" once the rule is complete, and a token
// the rule refuses (a sampler that ignored it) ends it with an error.
TEST(Scheduler, ATokenRuleNarrowsEverySampleAndEndsTheCompletion) {
  kv_block_pool pool(64, P);
  scheduler_config cfg;
  cfg.eos_ids = {0};
  scheduler s(pool, cfg);
  auto rule = std::make_shared<token_list_rule>();
  rule->want = {11, 12, 13};
  request r = make(1, 6, 100);
  r.n = 2;
  r.constraint = rule;
  ASSERT_TRUE(s.add(r));
  request free_req = make(5, 6, 4); // no rule: no allow bits
  ASSERT_TRUE(s.add(free_req));
  std::map<int64_t, std::vector<int32_t>> got;
  std::map<int64_t, finish_reason> fin;
  bool refused_once = false;
  while (!s.idle()) {
    auto p = s.next_step();
    ASSERT_TRUE(p);
    std::vector<sampled_token> out;
    for (const auto& q : p->b.seqs) {
      if (!q.logits) continue;
      if (q.seq_id == 5) {
        EXPECT_TRUE(q.allow.empty());
        out.push_back({q.seq_id, 7, 0.0f, {}});
        continue;
      }
      ASSERT_EQ(q.allow.size(), static_cast<size_t>((V + 63) / 64));
      int32_t pick = -1, allowed = 0;
      for (int32_t t = 0; t < V; ++t)
        if ((q.allow[static_cast<size_t>(t >> 6)] >> (t & 63)) & 1) {
          pick = t;
          ++allowed;
        }
      EXPECT_EQ(allowed, 1);
      // completion 1 (seq 2) is given a refused token once it has its first
      if (q.seq_id == 2 && !got[2].empty() && !refused_once) {
        refused_once = true;
        pick = 99;
      }
      out.push_back({q.seq_id, pick, 0.0f, {}});
    }
    for (auto& e : s.complete(p->step_id, out)) {
      if (e.has_token) got[e.seq_id].push_back(e.token.token);
      if (e.finished != finish_reason::none) fin[e.seq_id] = e.finished;
      if (e.finished == finish_reason::error) {
        EXPECT_NE(e.why.find("response_format"), std::string::npos);
      }
    }
  }
  EXPECT_EQ(got[1], (std::vector<int32_t>{11, 12, 13}));
  EXPECT_EQ(fin[1], finish_reason::stop);
  EXPECT_EQ(got[2], (std::vector<int32_t>{11}));
  EXPECT_EQ(fin[2], finish_reason::error);
  EXPECT_EQ(fin[5], finish_reason::length);
  EXPECT_EQ(rule->at, 0u); // the request's rule is a prototype: completions advance copies
  EXPECT_EQ(pool.free_count(), pool.total());
}

TEST(Scheduler, ResetKvRecomputesExactly) {
  std::vector<request> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(make(i + 1, 6 + i, 12));
  kv_block_pool pool(200, P);
  scheduler_config cfg;
  cfg.eos_ids = {0};
  cfg.max_batch_tokens = 16;
  scheduler s(pool, cfg);
  for (auto& r : reqs) ASSERT_TRUE(s.add(r));
  fake_model m(200);
  std::map<int64_t, std::vector<int32_t>> got;
  int steps = 0;
  while (!s.idle()) {
    auto p = s.next_step();
    ASSERT_TRUE(p);
    if (++steps % 5 == 0) { // a shard died: this step fails and all KV is lost
      s.fail(p->step_id);
      s.reset_kv();
      m = fake_model(200);
      continue;
    }
    for (auto& e : s.complete(p->step_id, m.run(p->b)))
      if (e.has_token) got[e.seq_id].push_back(e.token.token);
  }
  EXPECT_GT(s.stats().recomputes, 0);
  for (const auto& r : reqs) EXPECT_EQ(got[r.id], run_all({r}, 64, 512).tokens[r.id]);
  EXPECT_EQ(pool.free_count(), pool.total());
}

TEST(Scheduler, SlidingWindowFreesBlocksBehindIt) {
  // window 8 over blocks of 4: a sequence needs at most 4 blocks at a time, however long
  auto run = [](int32_t blocks, const std::vector<request>& reqs, scheduler_stats* st) {
    kv_block_pool pool(blocks, P);
    scheduler_config cfg;
    cfg.eos_ids = {0};
    cfg.max_batch_tokens = 5; // chunked prefills of 5 tokens
    cfg.max_context = 512;
    cfg.window = 8;
    scheduler s(pool, cfg);
    for (const auto& r : reqs) EXPECT_TRUE(s.add(r));
    fake_model m(blocks, 8);
    std::map<int64_t, std::vector<int32_t>> got;
    for (int guard = 0; guard < 100000 && !s.idle(); ++guard) {
      auto p = s.next_step();
      if (!p) break;
      for (auto& e : s.complete(p->step_id, m.run(p->b)))
        if (e.has_token) got[e.seq_id].push_back(e.token.token);
    }
    EXPECT_TRUE(s.idle());
    EXPECT_EQ(pool.free_count(), pool.total());
    if (st) *st = s.stats();
    return got;
  };
  request r = make(1, 23, 60);
  request two = make(5, 11, 30);
  two.n = 2; // followers share the leader's prompt blocks, zeros included
  const auto roomy = run(200, {r, two}, nullptr);
  scheduler_stats st;
  const auto tight = run(13, {r, two}, &st); // 12 blocks: 3 sequences x 4, nothing spare
  EXPECT_EQ(tight.at(1), roomy.at(1));
  EXPECT_EQ(tight.at(5), roomy.at(5));
  EXPECT_EQ(tight.at(6), roomy.at(6));
  EXPECT_EQ(tight.at(1).size(), 60u);
  EXPECT_GT(st.window_freed_blocks, 20);
  EXPECT_EQ(st.preemptions, 0);
}

TEST(StepCost, FitsTheLineAndInvertsIt) {
  step_cost c;
  for (int i = 0; i < 3; ++i) c.observe(64, 0.002 + 1e-4 * 64);
  EXPECT_FALSE(c.fitted()); // one size only: no slope to learn
  for (int i = 0; i < 40; ++i) {
    const int32_t n = 1 + (i * 37) % 300;
    c.observe(n, 0.002 + 1e-4 * n);
  }
  ASSERT_TRUE(c.fitted());
  EXPECT_NEAR(c.per_token(), 1e-4, 1e-7);
  EXPECT_NEAR(c.fixed(), 0.002, 1e-5);
  EXPECT_NEAR(c.tokens_within(0.012), 100, 1);
  EXPECT_EQ(c.tokens_within(0.001), 0);     // under the fixed part
  EXPECT_LE(c.tokens_within(1.0), 2 * 299); // not past twice the largest step seen lately
  EXPECT_GT(c.tokens_within(1.0), 299);
  // recent steps count most: the machine got twice as slow
  for (int i = 0; i < 200; ++i) {
    const int32_t n = 1 + (i * 37) % 300;
    c.observe(n, 0.004 + 2e-4 * n);
  }
  EXPECT_NEAR(c.per_token(), 2e-4, 2e-6);
}

// Stall-free batching: four streams decode when a 400-token prompt arrives. With a step target,
// steps that carry the decodes take only the prefill share the learnt step time allows (a
// simulated clock: 1 ms + 0.1 ms per token), so the streams never wait for one long step and
// the prompt is prefilled over several steps; without it one step takes the whole prompt.
// Outputs are the same either way.
TEST(Scheduler, StallFreeStepsKeepDecodingStreamsNearTheTarget) {
  using outputs = std::map<int64_t, std::vector<int32_t>>;
  auto run = [](double target, double& worst_decode_step, int& prompt_steps) -> outputs {
    kv_block_pool pool(512, P);
    scheduler_config cfg;
    cfg.max_batch_tokens = 512;
    cfg.max_context = 1024;
    cfg.eos_ids = {0};
    cfg.step_target_s = target;
    scheduler s(pool, cfg);
    fake_model m(512);
    outputs out;
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(s.add(make(i + 1, 3 + 5 * i, 60)));
    worst_decode_step = 0;
    prompt_steps = 0;
    for (int step = 0; step < 1000 && !s.idle(); ++step) {
      if (step == 30) {
        EXPECT_TRUE(s.add(make(9, 400, 4)));
      }
      auto p = s.next_step();
      if (!p) {
        ADD_FAILURE() << "no step while sequences are left";
        break;
      }
      const double seconds = 0.001 + 1e-4 * static_cast<double>(p->b.tokens.size());
      bool decodes = false, prompt = false;
      for (const auto& q : p->b.seqs) {
        decodes |= q.seq_id != 9 && q.count == 1;
        prompt |= q.seq_id == 9 && q.count > 1;
      }
      if (decodes && step >= 30) worst_decode_step = std::max(worst_decode_step, seconds);
      prompt_steps += prompt;
      s.observe_step(static_cast<int32_t>(p->b.tokens.size()), seconds);
      for (const auto& e : s.complete(p->step_id, m.run(p->b)))
        if (e.has_token) out[e.seq_id].push_back(e.token.token);
    }
    EXPECT_TRUE(s.idle());
    EXPECT_EQ(pool.free_count(), pool.total());
    if (target > 0) {
      EXPECT_GT(s.stats().prefill_capped_steps, 0);
    }
    return out;
  };
  double worst_off = 0, worst_on = 0;
  int steps_off = 0, steps_on = 0;
  const auto off = run(0, worst_off, steps_off);
  const auto on = run(0.01, worst_on, steps_on);
  EXPECT_EQ(on, off);
  EXPECT_EQ(steps_off, 1);
  EXPECT_GT(worst_off, 0.04); // the whole prompt in one step beside the decodes
  EXPECT_GE(steps_on, 4);     // about 86 prompt tokens a step
  EXPECT_LE(worst_on, 0.01 * 1.05);
}

// fixed_chunks (a model whose output depends on where its input is cut): under load, with
// preemptions and a stall-free cap asked for, every piece a sequence is computed in is the one it
// gets alone: its prompt in chunks ending at multiples of G (or at its end), then a token a step,
// a recompute the same
TEST(Scheduler, FixedChunksCutEverySequenceAlike) {
  constexpr int32_t G = 8;
  std::vector<request> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(make(100 + i, 3 + 7 * i % 29, 6 + i % 5));
  std::map<int64_t, int32_t> prompt_len;
  for (const request& r : reqs) prompt_len[r.id] = static_cast<int32_t>(r.prompt.size());
  kv_block_pool pool(16, P); // room for a few of them at once: preemptions
  scheduler_config cfg;
  cfg.max_batch_tokens = 20;
  cfg.max_context = 512;
  cfg.eos_ids = {0};
  cfg.share_blocks = false;
  cfg.fixed_chunks = G;
  cfg.step_target_s = 1e-9; // (would cut prompts short beside decodes; fixed pieces do not)
  scheduler s(pool, cfg);
  for (const request& r : reqs) ASSERT_TRUE(s.add(r));
  fake_model m(16);
  std::map<int64_t, std::vector<int32_t>> tokens;
  int pieces = 0;
  for (int guard = 0; guard < 100000 && !s.idle(); ++guard) {
    auto p = s.next_step();
    ASSERT_TRUE(p);
    int32_t used = 0;
    for (const batch_seq& q : p->b.seqs) {
      const int32_t L = prompt_len.at(q.seq_id);
      if (q.pos0 < L)
        EXPECT_TRUE(q.pos0 % G == 0 && q.count == std::min(L - q.pos0, G))
            << q.seq_id << ": [" << q.pos0 << ", +" << q.count << ") of a prompt of " << L;
      else
        EXPECT_EQ(q.count, 1) << q.seq_id << " at " << q.pos0;
      used += q.count;
      ++pieces;
    }
    EXPECT_LE(used, cfg.max_batch_tokens);
    for (const auto& e : s.complete(p->step_id, m.run(p->b)))
      if (e.has_token) tokens[e.seq_id].push_back(e.token.token);
  }
  EXPECT_TRUE(s.idle());
  EXPECT_GT(s.stats().preemptions, 0);
  EXPECT_GT(pieces, 0);
  for (const request& r : reqs) // (the fake model's tokens do not depend on the cuts: a check
                                // that nothing was lost or repeated)
    EXPECT_EQ(tokens[r.id], run_all({r}, 40, 20, 1, false).tokens[r.id]) << r.id;
  EXPECT_EQ(pool.free_count(), pool.total());
}
