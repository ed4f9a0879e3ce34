// graph.hpp: a model as data: values (activations, weights, step inputs, KV-cache state) and
// the nodes that compute them, each a registry op (kernels/op.hpp) or one of the graph's own
// (a view that reinterprets a value's shape, an all-reduce or an all-gather over the shard's
// communication group). An architecture family (arch/families/) builds the whole model's
// graph with named intermediates ("blk.3.attn_norm"); passes (passes.hpp) cut it for one
// shard (pipeline stage, tensor rank), drop dead nodes and fuse; the executor (exec/) runs
// what is left on a backend. Activation shapes are per row: a value of rows::tokens has one
// row of `dims` per token of the step, so one graph serves every step size. Weights carry
// where they come from in the checkpoint and how tensor parallelism cuts them. Plain data,
// copyable; not thread-safe. Tests: tests/graph/graph_test.cpp
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/expr.hpp"
#include "kernels/op.hpp"

namespace troupe::graph {

using vid = int32_t; // a value's index; -1: none
inline constexpr vid none = -1;

/// How a value's first dimension scales with the step.
enum class rows : uint8_t {
  fixed,  // weights, constants: `dims` is the whole shape
  tokens, // one row of `dims` per token of the step  [T, dims...]
  logits, // one row per row the last stage needs logits for  [N, dims...]
  seqs,   // one row per sequence of the step (the attention table)  [S, dims...]
};

enum class value_kind : uint8_t {
  activation, // computed by a node, lives in the executor's arena
  weight,     // read from the checkpoint (weight_ref), immutable
  input,      // filled by the executor from the step (input_kind)
  state,      // the KV cache of one layer, or a recurrent state (state_kind), owned by the executor
};

/// The step inputs an executor provides.
enum class input_kind : uint8_t {
  tokens,       // i32 [T] the step's token ids
  tokens_local, // i32 [T] ids minus this shard's first vocabulary row, -1 outside its slice
  positions,    // i32 [T]
  slots,        // i32 [T] KV slot of each token (block * P + offset)
  seq_table,    // i32 [S, 3 + blocks]: token begin, count, first position, block ids
  logit_rows,   // i32 [N] which token rows need logits (their order in the output)
  hidden,       // f32 [T, C] the previous stage's output (a stage that does not embed)
  state_table,  // i32 [S, 4]: token begin, count, first position, state slot (recurrent ops)
};
inline constexpr int input_kind_count = 8;

/// The caches ([NB, P, Hkv, D]: rows of `dims` per KV slot, in the kv dtype) and the recurrent
/// states ([NS, dims...]: one f32 row of `dims` per state slot, a sequence's for its life).
enum class state_kind : uint8_t {
  k_cache,
  v_cache,
  conv,  // a short convolution's last inputs [Hc, K - 1, Dc] (causal_conv)
  delta, // the gated delta rule's memory [Hv, Dk, Dv] (gated_delta)
  ssm    // a selective state space's [H, P, N] (ssm_scan: Mamba-2)
};
inline bool recurrent(state_kind k) {
  return k == state_kind::conv || k == state_kind::delta || k == state_kind::ssm;
}

/// The model dimension a tensor-parallel cut follows.
/// lin_k_heads / lin_v_heads: a linear attention's key and value heads (gated DeltaNet).
// kv_heads_full: the KV heads of the full-attention layers where they differ (Gemma 4)
enum class axis : uint8_t {
  none,
  heads,
  kv_heads,
  ffn,
  vocab,
  lin_k_heads,
  lin_v_heads,
  kv_heads_full,
  heads_half,   // each half of the heads, cut alike: a rank's share of [0, H / 2) (DiffLlama)
  kv_heads_half // and of the KV heads' halves
};

/// How tensor parallelism cuts a weight: `out` takes rows of W [N, K] (output features: the
/// shard computes part of the outputs), `in` takes columns (input features: the shard
/// computes a partial sum, which an all-reduce completes), along `along`.
enum class cut : uint8_t { none, out, in };

/// Where a weight comes from.
struct weight_ref {
  std::string name; // the checkpoint tensor ("blk.0.attn_q.weight")
  // or several, each [rows, K] of one dtype, whose rows are concatenated (HF's per-expert
  // tensors stacked into one [E * rows, K]); `name` is then the first
  std::vector<std::string> parts;
  // rows of the logical [N, K] matrix (the stored one, transposed first when `transposed`)
  // taken, concatenated (fused tensors: q of a qkv, one head of an interleaved layout);
  // empty: all rows
  std::vector<std::pair<int64_t, int64_t>> segments; // (first row, count)
  bool transposed = false;     // stored [K, N] (GPT-2's Conv1D): transposed when loaded
  int64_t col0 = 0, cols = -1; // columns taken (after the rows and the transpose); -1: all
  // a strided view of the stored rows (of the concatenation, for parts): the logical matrix's
  // row r is stored row r * row_step + row_phase (Inkling's published w13 tensors, whose gate
  // and up rows alternate); segments and tensor-parallel cuts index the logical rows
  int64_t row_step = 1, row_phase = 0;
  float add = 0;         // added to every element when loaded (Gemma stores norm w - 1)
  bool optional = false; // absent from the checkpoint: the value is empty (no bias)
  bool constant = false; // not in the checkpoint: every element is `fill` (a norm's ones)
  float fill = 0;
};

struct value {
  std::string name;
  value_kind kind = value_kind::activation;
  dtype type = dtype::f32;
  rows r = rows::tokens;
  std::vector<int64_t> dims; // per row (tokens, logits, seqs) or the whole shape (fixed)
  int layer = -1;            // -1: before the layers; n_layer: after them
  weight_ref w;              // weights
  cut split = cut::none;     // weights: how TP cuts them
  axis along = axis::none;
  int64_t unit = 1;    // the cut's granularity in rows (out) or columns (in): D for heads
  int64_t groups = 1;  // weights: matrices stacked by rows (experts); a cut takes each one's
                       // slice, the same rows of every one
  input_kind input{};  // inputs
  state_kind state{};  // states
  bool empty = false;  // an optional weight the checkpoint lacks
  vid alias = none;    // set by views: shares this value's storage
  bool output = false; // the graph's result (kept by dead-code removal)

  int64_t row_elems() const; // elements per row (tokens/logits/seqs) or in all (fixed)
};

enum class node_kind : uint8_t {
  op,         // a registry op: in = src0.. , out = dst (, dst2)
  view,       // out aliases in[0] with another shape (no work)
  all_reduce, // sums out = in[0] (in place) over the tensor-parallel group
  all_gather, // out[N, V] = the ranks' in[0][N, Vs] side by side (vocabulary-parallel logits)
};

struct node {
  node_kind kind = node_kind::op;
  kernels::op op = kernels::op::add;
  std::vector<vid> in;  // op sources in op_args order; none for an absent optional source
  std::vector<vid> out; // dst, then dst2
  kernels::op_params p;
  std::vector<int64_t> dims; // views: the per-row shape, one entry may be -1 (inferred)
  int layer = -1;
  std::string name;
  std::string note; // what a pass did ("fused add+rmsnorm")
};

class graph {
 public:
  std::vector<value> values;
  std::vector<node> nodes;
  int n_layer = 0;
  // residual[l]: the stream entering layer l; residual[n_layer]: after the last layer (what a
  // pipeline cut passes on). Recorded by the family.
  std::vector<vid> residual;
  vid logits = none; // [N, V]: the last stage's result
  // element-wise programs the graph's `elementwise` nodes point at (op_params::program)
  std::vector<std::shared_ptr<kernels::ew_program>> programs;

  vid add_value(value v);
  /// A new node; returns its index.
  size_t add_node(node n);
  value& operator[](vid v) { return values[static_cast<size_t>(v)]; }
  const value& operator[](vid v) const { return values[static_cast<size_t>(v)]; }
  /// The step input of this kind (created on first use).
  vid input(input_kind k);
  /// The storage a value uses (follows view aliases).
  vid storage(vid v) const;
  /// Nodes reading each value (indices into `nodes`).
  std::vector<std::vector<size_t>> consumers() const;
  /// The node writing each value, or -1 (weights, inputs, states).
  std::vector<int64_t> producers() const;
  /// Checks that every node's operands exist and no value is written twice.
  status validate() const;
  /// One line per node: "blk.0.q = matmul(blk.0.attn_norm f32[T,64], blk.0.wq q8_0[64,64])".
  std::string to_string() const;
};

/// "f32[T, 4, 16]", "q8_0[512, 64]".
std::string describe(const value& v);
/// What identifies a weight's bytes as loaded: its tensor (or stacked parts), the rows and
/// columns taken, a transpose, an added constant. Two values of one identity hold the same
/// bytes (a layer's weights read twice, a weight-shared block): loaded and counted once. Empty
/// for a constant.
std::string weight_identity(const value& v);
std::string_view to_string(input_kind k);

} // namespace troupe::graph
