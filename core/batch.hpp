// batch.hpp: one forward step's work as plain data: the new tokens of several sequences,
// where each sequence's tokens sit in the step, their positions, the KV blocks that hold each
// sequence (logical block i of the sequence is physical block `blocks[i]`, the same id on
// every shard), and which sequences need logits (the last token's to sample and, for prompt
// scoring, the rows before it). Built by the scheduler, read by every stage.
// Serialisable (all vectors of integers). Tests: through tests/model/ and tests/engine/.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/sampler.hpp"

namespace troupe {

struct batch_seq {
  int64_t seq_id = 0;          // the engine's sequence id
  int32_t begin = 0;           // first token of this sequence in batch::tokens
  int32_t count = 0;           // tokens of this sequence in the step
  int32_t pos0 = 0;            // position of its first token in this step
  bool logits = false;         // produce logits for its last token
  std::vector<int32_t> blocks; // block table, covering positions [0, pos0 + count)
  int32_t state_slot = -1;     // its row of the recurrent states (models with linear attention)
  // sampling on the last stage (when logits is set)
  sampling_params sampling;
  uint64_t sample_step = 0;             // index of the token being generated (RNG draw)
  std::vector<int32_t> penalty_history; // tokens the penalties count (empty without penalties)
  std::vector<int32_t> suppress;        // tokens that may not be sampled now (min_tokens)
  std::vector<uint64_t> allow;          // non-empty: the only tokens that may be sampled now, a
                                        // bit per vocabulary id (a response_format's grammar)
  // prompt scoring (echo with logprobs): the first `score_rows` tokens of the chunk get the
  // log-probability of the token that follows each (the next in the chunk, or `score_next`
  // after the chunk's last) with `score_top` alternatives
  int32_t score_rows = 0;
  int32_t score_next = -1;
  int32_t score_top = 0;

  /// Rows of logits the last stage produces for this sequence: scored rows, then the
  /// sampling row.
  int32_t logit_rows() const { return score_rows + (logits ? 1 : 0); }
};

struct batch {
  std::vector<int32_t> tokens; // [T]
  std::vector<batch_seq> seqs;
  std::vector<std::pair<int32_t, int32_t>> copies; // KV blocks to copy (src, dst) before the step

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t n_logits() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.logit_rows();
    return n;
  }
};

} // namespace troupe
