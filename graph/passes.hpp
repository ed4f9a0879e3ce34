// passes.hpp: what turns a whole model's graph into one shard's, and a slow graph into a
// fast one, as functions of a graph:
//   cut_pipeline   keeps the layers of one pipeline stage: the residual entering its first
//                  layer becomes the `hidden` input (unless it embeds), the one leaving its
//                  last layer the output (unless it computes logits);
//   cut_tensor     slices every weight TP cuts to this rank (rows for `out`, columns for `in`,
//                  in units of heads, KV heads, FFN rows or vocabulary rows) and inserts the
//                  collectives: an all-reduce after each node whose weight is cut by input
//                  features (and after a vocabulary-parallel embedding), an all-gather of
//                  vocabulary-parallel logits;
//   remove_dead    drops nodes nothing needs (no output, no cache write, no consumer);
//   fuse           replaces patterns by the fused ops of kernels/op.hpp where the backend
//                  has them: add + rmsnorm -> add_rmsnorm; rmsnorm whose every consumer is a
//                  matmul taking int8 activations -> rmsnorm writing q8_0; gate / up matmuls
//                  + swiglu -> matmul_swiglu; rope + kv_store -> rope_kv_store, which then
//                  takes in the same layer's v store and q rope (the attention's prologue
//                  in one node, one angle table per token); the q, k and v matmuls of one
//                  input -> matmul_qkv;
//   expand_elementwise  composes element-wise programs the JIT could not build from primitives;
//   infer_shapes   recomputes every activation's shape from its operands.
// Each pass keeps node order a valid schedule and records what it did in node::note, which
// `troupe explain` prints. Tests: tests/graph/graph_test.cpp
#pragma once

#include <array>
#include <functional>
#include <optional>

#include "graph/graph.hpp"

namespace troupe::graph {

/// One shard's place in the model.
struct shard_cut {
  int layer_begin = 0, layer_end = 0;
  bool first_stage = true, last_stage = true;
  int tp_rank = 0, tp_size = 1;
  // per axis (heads, kv_heads, ffn, vocab, lin_k_heads, lin_v_heads, kv_heads_full,
  // heads_half, kv_heads_half): this rank's first unit
  // and unit count (ffn: the dense FFN's; a weight along ffn is cut from its own width, evenly by
  // TP on boundaries of ffn_block elements, so experts and shared experts of other widths cut
  // alike)
  std::array<std::pair<int64_t, int64_t>, 10> range{};
  // heads by layer, where the model's head count varies by layer (Laguna): this rank's first
  // head and count on each (empty: of(heads) on every layer)
  std::vector<std::pair<int64_t, int64_t>> layer_heads;
  // and KV heads by layer (DeciLM's), where the KV head count varies so
  std::vector<std::pair<int64_t, int64_t>> layer_kv_heads;
  int64_t ffn_block = 1;
  // expert parallelism: the experts [expert0, expert0 + experts) of every MoE layer, whole
  // (stacked expert weights lose no rows to the FFN cut); false: experts cut like an FFN
  bool expert_parallel = false;
  int64_t expert0 = 0, experts = 0;
  std::pair<int64_t, int64_t>& of(axis a) { return range[static_cast<size_t>(a)]; }
  const std::pair<int64_t, int64_t>& of(axis a) const { return range[static_cast<size_t>(a)]; }
};

status cut_pipeline(graph& g, const shard_cut& c);
status cut_tensor(graph& g, const shard_cut& c);
void remove_dead(graph& g);
status infer_shapes(graph& g);

/// Which fusions to try; `supported` says whether the backend has a native kernel for an
/// op over these arguments (a fusion is skipped otherwise: its composite would be no faster).
struct fuse_options {
  bool add_norm = true, norm_quant = true, gate_up = true, rope_store = true, qkv = true,
       prologue = true; // prologue: v's store and q's rope into rope_kv_store
  std::function<bool(const node& n, const graph& g)> supported;
};
/// Returns how many fusions were made.
int fuse(graph& g, const fuse_options& o);

/// Replaces every `elementwise` node whose program `compiled` says was not JIT-compiled by
/// the composition of primitive ops it denotes (expand.cpp); a program with an operation no
/// primitive expresses keeps its node (the reference kernel runs it). Returns how many.
int expand_elementwise(graph& g, const std::function<bool(const kernels::ew_program&)>& compiled);

} // namespace troupe::graph
