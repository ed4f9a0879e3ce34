// scheduler_state_test.cpp: the scheduler with a recurrent state per sequence (linear attention
// layers: scheduler_config::state_slots). The fake model keeps, per state slot, a running hash
// of every token the sequence it serves has fed, and which sequence owns it up to which
// position: a sequence at position 0 starts its slot afresh, any other must continue its own
// slot exactly where it stopped. So a slot handed to two live sequences, a state taken over
// from a prefix or a leader, or a step replayed onto an advanced state fails the test or changes
// the outputs, which must equal each sequence's output alone.
#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "engine/kv_block_pool.hpp"
#include "engine/scheduler.hpp"

using namespace troupe;

namespace {

constexpr int32_t V = 1000;
constexpr int32_t P = 4;

struct slot_state {
  int64_t owner = -1;
  int32_t pos = 0; // positions fed
  uint64_t h = 0;
};

struct recurrent_model {
  std::vector<slot_state> slots;
  int32_t most_running = 0;
  explicit recurrent_model(int32_t n)
      : slots(static_cast<size_t>(n)) {}
  std::vector<sampled_token> run(const batch& b) {
    std::vector<sampled_token> out;
    std::map<int32_t, int64_t> in_step;
    for (const auto& s : b.seqs) {
      EXPECT_GE(s.state_slot, 0);
      EXPECT_LT(s.state_slot, static_cast<int32_t>(slots.size()));
      if (s.state_slot < 0 || s.state_slot >= static_cast<int32_t>(slots.size())) continue;
      EXPECT_TRUE(in_step.emplace(s.state_slot, s.seq_id).second) << "slot shared in a step";
      slot_state& st = slots[static_cast<size_t>(s.state_slot)];
      if (s.pos0 == 0) {
        st = {s.seq_id, 0, 1469598103934665603ull};
      } else {
        EXPECT_EQ(st.owner, s.seq_id) << "sequence " << s.seq_id << " continues another's state";
        EXPECT_EQ(st.pos, s.pos0) << "sequence " << s.seq_id << " state at " << st.pos;
      }
      for (int32_t i = 0; i < s.count; ++i)
        st.h = (st.h ^ static_cast<uint64_t>(b.tokens[s.begin + i] + 7)) * 1099511628211ull;
      st.pos = s.pos0 + s.count;
      if (!s.logits) continue;
      int32_t tok = static_cast<int32_t>((st.h ^ s.sampling.seed * 0x9e3779b97f4a7c15ull) % V);
      if (tok == 0) tok = 1;
      out.push_back({s.seq_id, tok, 0.0f, {}});
    }
    int32_t owners = 0;
    for (const auto& st : slots) owners += st.owner >= 0;
    most_running = std::max(most_running, owners);
    return out;
  }
};

struct result {
  std::map<int64_t, std::vector<int32_t>> tokens;
  scheduler_stats stats;
  int32_t free_after = 0, total = 0;
};

// fail_every > 0: every fail_every-th step fails after the model ran it (a later stage died)
result run_all(const std::vector<request>& reqs, int32_t blocks, int32_t budget, int32_t slots,
               int max_inflight = 1, int fail_every = 0) {
  kv_block_pool pool(blocks, P);
  scheduler_config cfg;
  cfg.max_batch_tokens = budget;
  cfg.max_context = 512;
  cfg.prefix_caching = true; // must be turned off by the state slots
  cfg.eos_ids = {0};
  cfg.state_slots = slots;
  scheduler s(pool, cfg);
  for (const auto& r : reqs) EXPECT_TRUE(s.add(r));
  recurrent_model m(slots);
  result out;
  std::deque<step_plan> inflight;
  int steps = 0;
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
    if (fail_every > 0 && ++steps % fail_every == 0) {
      s.fail(p.step_id);
      continue;
    }
    for (const auto& e : s.complete(p.step_id, res))
      if (e.has_token) out.tokens[e.seq_id].push_back(e.token.token);
  }
  EXPECT_TRUE(s.idle());
  EXPECT_LE(m.most_running, slots);
  out.stats = s.stats();
  out.free_after = pool.free_count();
  out.total = pool.total();
  return out;
}

request make(int64_t id, int len, int max_tokens, int n = 1) {
  request r;
  r.id = id;
  std::mt19937 rng(static_cast<uint32_t>(id * 31));
  for (int i = 0; i < len; ++i) r.prompt.push_back(1 + static_cast<int32_t>(rng() % (V - 1)));
  r.max_tokens = max_tokens;
  r.n = n;
  return r;
}

} // namespace

TEST(SchedulerState, AtMostAsManyRunningAsSlotsAndOutputsAsAlone) {
  std::vector<request> reqs;
  for (int i = 0; i < 24; ++i) reqs.push_back(make(100 * (i + 1), 1 + (i * 7) % 30, 1 + i % 9));
  std::map<int64_t, std::vector<int32_t>> solo;
  for (const auto& r : reqs) solo[r.id] = run_all({r}, 64, 512, 1).tokens[r.id];
  const auto batched = run_all(reqs, 400, 16, 3, 2); // chunked prefill, two steps in flight
  for (const auto& r : reqs) EXPECT_EQ(batched.tokens.at(r.id), solo[r.id]) << "request " << r.id;
  EXPECT_EQ(batched.free_after, batched.total);
}

TEST(SchedulerState, SharedPrefixesAndParallelCompletionsComputeTheirOwnState) {
  // the same prompt twice (a prefix cache would hand the second its blocks) and n = 3 (a
  // leader would share its prompt): every sequence feeds its whole prompt into its own state
  request a = make(100, 13, 4), b = make(100, 13, 4), c = make(300, 9, 3, 3);
  b.id = 200;
  const auto r = run_all({a, b, c}, 200, 64, 4);
  EXPECT_EQ(r.stats.prefix_hit_blocks, 0);
  EXPECT_EQ(r.tokens.at(100), r.tokens.at(200));
  for (int i = 0; i < 3; ++i) { // completion i samples with seed i
    request one = make(300, 9, 3);
    one.sampling.seed = static_cast<uint64_t>(i);
    EXPECT_EQ(r.tokens.at(300 + i), run_all({one}, 200, 64, 1).tokens.at(300))
        << "completion " << i;
  }
}

TEST(SchedulerState, AFailedStepIsRecomputedFromTheStart) {
  std::vector<request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(make(100 * (i + 1), 5 + i * 3, 6));
  std::map<int64_t, std::vector<int32_t>> solo;
  for (const auto& r : reqs) solo[r.id] = run_all({r}, 64, 512, 1).tokens[r.id];
  const auto failing = run_all(reqs, 200, 16, 2, 1, 5);
  for (const auto& r : reqs) EXPECT_EQ(failing.tokens.at(r.id), solo[r.id]) << "request " << r.id;
  EXPECT_GT(failing.stats.recomputes, 0);
  EXPECT_EQ(failing.free_after, failing.total);
}

TEST(SchedulerState, TooFewBlocksPreemptsAndRecomputes) {
  std::vector<request> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(make(100 * (i + 1), 10 + i, 12));
  std::map<int64_t, std::vector<int32_t>> solo;
  for (const auto& r : reqs) solo[r.id] = run_all({r}, 64, 512, 1).tokens[r.id];
  const auto tight = run_all(reqs, 16, 32, 4); // 15 blocks of 4 for up to 4 sequences of ~22
  for (const auto& r : reqs) EXPECT_EQ(tight.tokens.at(r.id), solo[r.id]) << "request " << r.id;
  EXPECT_GT(tight.stats.preemptions, 0);
}
