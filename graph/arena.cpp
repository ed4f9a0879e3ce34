// arena.cpp: the activation arena's layout (arena.hpp).
#include "graph/arena.hpp"

#include <algorithm>
#include <utility>

namespace troupe::graph {

namespace {

int64_t round_up(int64_t n) {
  return (n + arena_align - 1) / arena_align * arena_align;
}

} // namespace

arena_layout plan_arena(const graph& g) {
  const size_t nv = g.values.size();
  std::vector<int64_t> first(nv, -1), last(nv, -1), size(nv, 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto touch = [&](vid v) {
      if (v == none) return;
      const vid root = g.storage(v);
      if (g[root].kind != value_kind::activation) return;
      const auto r = static_cast<size_t>(root);
      if (first[r] < 0) first[r] = static_cast<int64_t>(i);
      last[r] = static_cast<int64_t>(i);
    };
    for (vid v : g.nodes[i].out) touch(v);
    for (vid v : g.nodes[i].in) touch(v);
  }
  for (size_t v = 0; v < nv; ++v) // the graph's result lives past the last node
    if (g.values[v].output && g.values[v].kind == value_kind::activation)
      last[static_cast<size_t>(g.storage(static_cast<vid>(v)))] =
          static_cast<int64_t>(g.nodes.size());
  arena_layout out;
  std::vector<size_t> order;
  int64_t widest = 0;
  for (size_t v = 0; v < nv; ++v) {
    if (first[v] < 0) continue;
    size[v] = round_up(troupe::row_bytes(g.values[v].type, g.values[v].row_elems()));
    widest = std::max(widest, troupe::row_bytes(dtype::f32, g.values[v].row_elems()));
    order.push_back(v);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return size[a] > size[b]; });
  out.offset.assign(nv, -1);
  std::vector<size_t> placed;
  for (size_t v : order) {
    std::vector<std::pair<int64_t, int64_t>> busy; // [begin, end) of overlapping lives
    for (size_t o : placed)
      if (!(last[o] < first[v] || last[v] < first[o]))
        busy.emplace_back(out.offset[o], out.offset[o] + size[o]);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (auto [b0, b1] : busy) {
      if (at + size[v] <= b0) break;
      at = std::max(at, b1);
    }
    out.offset[v] = at;
    out.row_bytes = std::max(out.row_bytes, at + size[v]);
    placed.push_back(v);
  }
  // composites take at most a few rows of their widest operand as temporaries; the experts
  // composite per token: k gathered rows, hidden rows (two without a fused matmul_swiglu)
  // and outputs, its grouping, and counters per expert (kernels' compose_moe.cpp)
  out.scratch_row_bytes = 4 * round_up(widest) + arena_align;
  for (const node& n : g.nodes) {
    if (n.kind != node_kind::op || n.op != kernels::op::moe || n.in.size() < 6) continue;
    const int64_t C = g[n.in[0]].dims.back(), k = g[n.in[1]].dims.back();
    const int64_t F = g[n.in[5]].dims.back(), E = g[n.in[3]].dims[0] / std::max<int64_t>(F, 1);
    out.scratch_row_bytes = std::max(out.scratch_row_bytes,
                                     4 * k * (2 * C + 2 * F + 1) + 16 * (E + 1) + 8 * arena_align);
  }
  return out;
}

} // namespace troupe::graph
