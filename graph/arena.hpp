// arena.hpp: where a graph's activations live during a step. Every activation a node
// touches gets an offset in one arena, per row of the step (activation shapes are per row,
// so one layout serves every step size): values by lifetime (first to last node that
// touches them), largest first, each at the lowest offset free for its whole life; and the
// scratch a composite kernel may take per row. The
// executor lays its arena out this way for each compiled plan; `troupe plan` uses it to
// say how much memory a step of N rows needs on each device. Pure arithmetic on the graph.
// Tests: tests/graph/graph_test.cpp
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace troupe::graph {

inline constexpr int64_t arena_align = 64; // bytes: every activation starts on these

struct arena_layout {
  std::vector<int64_t> offset;   // per value: arena bytes per row before it (-1: not there)
  int64_t row_bytes = 0;         // the arena's bytes per row of the step
  int64_t scratch_row_bytes = 0; // composites' temporaries per row
};

arena_layout plan_arena(const graph& g);

} // namespace troupe::graph
