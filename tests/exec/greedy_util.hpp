// greedy_util.hpp: greedy decoding for the exec tests: through a generator (made here), or through
// a pipeline of shard executors made here (stage by stage, the hidden rows passed on, the last
// stage's logits argmaxed), so tests compare pipelines token for token.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "core/batch.hpp"
#include "exec/executor.hpp"
#include "exec/generator.hpp"

namespace troupe::test {

/// Layers [begin, end) of `m` as one shard (rank `tp_rank` of `tp`), or null with a failure.
inline std::unique_ptr<exec::executor> shard_executor(std::shared_ptr<const model_source> m,
                                                      int begin, int end, exec::exec_options o,
                                                      int tp_rank = 0, int tp = 1,
                                                      collective* comm = nullptr) {
  shard_spec s;
  s.layer_begin = begin;
  s.layer_end = end;
  s.first_stage = begin == 0;
  s.last_stage = end == m->config.n_layer;
  s.tp_rank = tp_rank;
  s.tp_size = tp;
  auto e = exec::executor::create(std::move(m), s, o, comm);
  EXPECT_TRUE(e) << (e ? "" : e.error().to_string());
  return e ? std::move(*e) : nullptr;
}

/// A generator over `m` with `o`, or null with a failure.
inline std::unique_ptr<exec::generator> generator_of(std::shared_ptr<const model_source> m,
                                                     const exec::exec_options& o) {
  auto g = exec::generator::create(std::move(m), o);
  EXPECT_TRUE(g) << (g ? "" : g.error().to_string());
  return g ? std::move(*g) : nullptr;
}

/// n greedy tokens of a generator after `prompt` (EOS does not stop it).
inline exec::generation greedy(exec::generator& g, const std::vector<int32_t>& prompt, int n) {
  exec::generate_options o;
  o.max_tokens = n;
  o.stop_at_eos = false;
  auto r = g.run(prompt, o);
  EXPECT_TRUE(r) << (r ? "" : r.error().to_string());
  return r ? *r : exec::generation{};
}

/// A step of one sequence (id 1, KV blocks 1-15) over `prompt`, its last position's logits asked.
inline batch one_sequence(const std::vector<int32_t>& prompt) {
  batch b;
  b.tokens = prompt;
  batch_seq sq;
  sq.seq_id = 1;
  sq.count = static_cast<int32_t>(prompt.size());
  sq.logits = true;
  for (int32_t blk = 1; blk < 16; ++blk) sq.blocks.push_back(blk);
  b.seqs = {sq};
  return b;
}

/// n greedy tokens of a pipeline of shards (one sequence in KV blocks 1-15; V: the vocabulary
/// the last stage's logits must have).
inline std::vector<int32_t> greedy_through(std::vector<exec::executor*> stages,
                                           std::vector<int32_t> prompt, int n, int64_t V) {
  batch b = one_sequence(prompt);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> x, logits;
    for (auto* s : stages) {
      auto st = s->forward(b, x, &logits);
      EXPECT_TRUE(st) << (st ? "" : st.error().to_string());
      if (!st) return out;
    }
    EXPECT_EQ(static_cast<int64_t>(logits.size()), V);
    const auto next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    b.seqs[0].pos0 += b.seqs[0].count;
    b.seqs[0].count = 1;
    b.tokens = {next};
  }
  return out;
}

} // namespace troupe::test
