// executor_impl.hpp: what executor.cpp (creation, forward) and executor_compile.cpp (the
// per-row-class plans, explain) share: a compiled plan and the arena's arithmetic. Internal to
// exec/; nothing outside it includes this.
#pragma once

#include "exec/executor.hpp"

namespace troupe::exec {

struct executor::plan {
  graph::graph g;
  std::vector<kernels::kernel> kernels; // per node (op nodes)
  // a device may record it as a graph: no node waits for the host (collectives through host
  // memory, the experts' error check)
  bool capturable = false;
  std::vector<int64_t> offset;   // per value: arena bytes per row before it (-1: none)
  int64_t arena_row_bytes = 0;   // arena bytes per row of the step
  int64_t scratch_row_bytes = 0; // composites' temporaries per row
};

namespace detail {

using graph::node;
using graph::node_kind;
using graph::value;
using graph::value_kind;
using graph::vid;

inline constexpr int64_t align = 64; // bytes: activations, weights and scratch start on these

inline int64_t round_up(int64_t n) {
  return (n + align - 1) / align * align;
}

inline int64_t rows_of(const value& v, int64_t T, int64_t N, int64_t S) {
  switch (v.r) {
  case graph::rows::tokens:
    return T;
  case graph::rows::logits:
    return N;
  case graph::rows::seqs:
    return S;
  case graph::rows::fixed:
    return 1;
  }
  return 1;
}

inline shape make_shape(int64_t rows, const std::vector<int64_t>& dims) {
  shape s;
  s.rank = static_cast<int>(dims.size()) + 1;
  s.dims[0] = rows;
  for (size_t i = 0; i < dims.size() && i + 1 < max_rank; ++i) s.dims[i + 1] = dims[i];
  return s;
}

inline shape fixed_shape(const std::vector<int64_t>& dims) {
  shape s;
  s.rank = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size() && i < max_rank; ++i) s.dims[i] = dims[i];
  return s;
}

} // namespace detail

} // namespace troupe::exec
