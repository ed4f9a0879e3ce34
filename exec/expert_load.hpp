// expert_load.hpp: how many tokens each expert of each MoE layer received, process-wide (what
// operators watch for load balance; /metrics exports it as troupe_expert_tokens_total). The
// executor of a stage's first tensor rank adds each step's router choices (every rank of a
// stage sees the same choices, so one counts them). Counts are kept per (layer, expert) in
// fixed tables sized at first use; add() is lock-free after that. Thread-safe.
// Tests: tests/exec/expert_load_test.cpp
#pragma once

#include <cstdint>
#include <span>
#include <vector>

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

} // namespace troupe::exec
