// expert_load.hpp: how many tokens each expert of each MoE layer received, process-wide (what
// operators watch for load balance; /metrics exports it as troupe_expert_tokens_total). The
// executor of a stage's first tensor rank adds each step's router choices (every rank of a
// stage sees the same choices, so one counts them). Counts are kept per (layer, expert) in
// fixed tables sized at first use; add() is lock-free after that. Thread-safe. With worker
// processes each process counts its own stages; the coordinator asks every worker for its
// counts (flattened to (layer, expert, tokens) triples on the wire) and merges them.
// Tests: tests/exec/forward_test.cpp (counting), tests/exec/expert_load_test.cpp (the rest)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/expected.hpp"

namespace troupe::exec {

struct expert_count {
  int layer = 0, expert = 0;
  int64_t tokens = 0;
};

/// Adds one step's choices of `layer` (expert ids in [0, n_expert); others are ignored).
void count_experts(int layer, int n_expert, std::span<const int32_t> ids);
/// Every (layer, expert) counted so far, by layer then expert; experts never chosen included
/// for the layers seen.
std::vector<expert_count> expert_counts();

/// Counts as (layer, expert, tokens) triples, to send to another process.
std::vector<int64_t> flatten(const std::vector<expert_count>& counts);
/// Triples from another process, checked: a multiple of three values, layers and experts in
/// [0, 2^20), tokens >= 0; anything else is a protocol error naming what was wrong.
expected<std::vector<expert_count>> unflatten(std::span<const int64_t> triples);
/// a and b summed by (layer, expert), ordered by layer then expert.
std::vector<expert_count> merge_counts(std::vector<expert_count> a,
                                       const std::vector<expert_count>& b);

} // namespace troupe::exec
