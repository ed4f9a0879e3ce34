// builder.hpp: the named helpers an architecture family builds its layers with, as
// llama.cpp's build_norm / build_attn / build_ffn: each adds nodes to a graph and returns the
// value it computed, named after what it is ("blk.3.ffn_out"). Weights are added by the
// family (it knows the checkpoint's names and shapes); the helpers take them as values.
// Conventions the passes rely on: a linear layer whose weight TP cuts by input features is
// followed directly by its bias add (the all-reduce goes between them); residual streams
// between layers are recorded (graph::residual) so a pipeline cut knows what crosses it.
// Tests: tests/graph/graph_test.cpp and every family's fixtures.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.hpp"

namespace troupe::graph {

class builder;

enum class norm_type : uint8_t { rms, layer };

/// What an attention block computes, beyond its weights.
struct attention_spec {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  axis kv_axis = axis::kv_heads; // how TP cuts the cache's heads
  float scale = 0;               // of the scores (1/sqrt(D) when 0)
  int64_t window = 0;            // sliding window (0: full)
  int64_t chunk = 0;             // a query sees its chunk's keys only (0: off; Llama 4)
  int64_t temp_floor = 0;        // the scores times 1 + temp_scale ln(1 + floor((p + temp_offset) /
  float temp_scale = 0;          // temp_floor)) for a query at position p (0: off; Llama 4's NoPE
  int64_t temp_offset = 0;       // layers: offset 1; Ministral 3's every layer: 0)
  float softcap = 0;             // scores = softcap * tanh(scores / softcap) when > 0 (Gemma 2)
  float alibi_max_bias = 0;      // ALiBi slopes from this (> 0: no RoPE, Bloom / MPT)
  bool rope = true;
  rope_spec rope_params;
  float clip_qkv = 0; // q, k, v clamped to [-clip, clip] when > 0 (OLMo, MPT)
  vid sinks = none;   // a sink logit per head [H] in each softmax's denominator (GPT-OSS)
  vid gate = none;    // [T, H * D] or [T, H]: the output times sigmoid(gate) before o_proj (a gate
                      // per value: Qwen3.5; per head, over its values: LFM3)
  bool gate_softplus = false;       // softplus(gate) instead (Laguna)
  vid q_norm = none, k_norm = none; // [D]: RMS norms of each rotated q / k head (Hunyuan)
  // an earlier layer's KV cache to attend over (Gemma 4's KV-sharing layers): no k, v or store
  vid k_cache = none, v_cache = none;
  float qk_norm_eps = 1e-5f;
  vid select =
      none; // i32 [T, Hkv K]: the positions each KV head's queries attend over (MiniMax M3)
  // [T, H, E]: a bias per query, head and distance < E added to the scores (Inkling's relative
  // logits; paged_attention's src7)
  vid rel = none;
  // what the attention's output [T, H D] becomes before o_proj, and the step of its rows where
  // it is rounded (BitNet's norm and rounding; none: not rounded)
  std::function<std::pair<vid, vid>(builder&, vid)> before_out;
};

/// How a mixture-of-experts block routes.
struct moe_spec {
  int64_t experts = 0, used = 0;       // E, and k chosen per token
  bool norm_topk = false;              // the chosen weights renormalised to sum to 1
  float scale = 1;                     // the chosen weights times this (routed_scaling_factor)
  bool sigmoid = false;                // sigmoid scores (DeepSeek-V3), else softmax
  float logit_softcap = 0;             // logits = c tanh(logits / c) first (0: off; Laguna)
  int64_t n_group = 0, topk_group = 0; // group-limited choice (0: off)
  bool group_max = false;              // a group scores its best expert (DeepSeek-V2)
  float router_eps = 1e-20f; // the sigmoid router's renormalisation: sum + eps (LFM2-MoE 1e-6)
  float swiglu_alpha = 0, swiglu_limit = 0; // GPT-OSS's clamped SwiGLU when limit > 0
  bool scale_input = false;   // the weight scales the chosen expert's input (Llama 4; used = 1)
  bool relu2 = false;         // ungated experts, down(relu(up x)^2) (Nemotron-H; w_gate = w_up)
  bool gelu = false;          // GeGLU experts, down(gelu_tanh(gate x) up x) (Gemma 4)
  vid router_in = none;       // the router's input where it is not the experts' (Gemma 4)
  vid expert_scales = none;   // [E]: the chosen weights times their expert's (Gemma 4)
  bool sqrt_softplus = false; // scores sqrt(softplus(logits)) (DeepSeek-V4)
  bool clamp = false;         // with swiglu_limit: silu(min(g, L)) clamp(u, -L, L) (DeepSeek-V4)
  bool clamp_after = false;   // and min(silu(g), L) clamp(u, -L, L) instead (Step 3.7, Ling 3)
  vid hash = none; // i32 [V, k]: each token's experts, by its id (DeepSeek-V4's hash routing)
  bool sparsemixer = false;    // PhiMoE's two choices (model_config::router_sparsemixer)
  bool bias_on_logits = false; // the choice by logits + router bias (Kolibri), else scores + bias
  float jitter = 0;            // and its relative threshold
  int64_t zero_experts = 0;    // the router's last ones: identity experts, w x (LongCat-Flash)
  int64_t null_experts = 0;    // or skip experts, which add nothing: ids no shard holds (ZAYA)
  vid post_norm = none;        // [E, C]: each expert's output RMS-normed times its row (Ergo)
  float post_norm_eps = 1e-6f;
  // the chosen weights [T, k] as the experts get them, from the router's (Inkling's: normalised
  // with its shared experts' scores); empty: as they come
  std::function<vid(builder&, vid)> reweight;
};

/// The optional biases of a mixture of experts (GPT-OSS): the router's logits [E], and each
/// expert's gate and up [E * F] and down [E * C] products.
struct moe_biases {
  vid router = none, gate = none, up = none, down = none;
};

/// Where the per-head norm weights go.
enum class head_norm : uint8_t {
  shared,   // one weight [D] for every head
  per_head, // a weight per head: [H * D] after the norm (applied as a broadcast product)
};

class builder {
 public:
  builder(graph& g, int layer)
      : g_(g)
      , layer_(layer) {}
  graph& g() { return g_; }
  int layer() const { return layer_; }
  /// "blk.3.name", or the bare name outside the layers.
  std::string name(const std::string& what) const;

  /// A registry op over `in` writing one new activation named `what`.
  vid op(kernels::op o, std::vector<vid> in, const std::string& what, kernels::op_params p = {});
  /// An op writing an existing value (a KV cache store).
  void op_into(kernels::op o, std::vector<vid> in, vid out, const std::string& what,
               kernels::op_params p = {});
  vid view(vid x, std::vector<int64_t> dims, const std::string& what);
  /// Sums x over the tensor-parallel group, in place (nothing at TP 1); with `max`, the
  /// largest value of each element over the group instead.
  vid all_reduce(vid x, const std::string& what, bool max = false);

  vid norm(vid x, norm_type t, vid w, vid b, float eps, const std::string& what);
  /// x W^T (+ b). A weight cut by input features gets its bias added after the all-reduce.
  /// `step` (optional, [T, 1]): x's values are integer multiples of it (the matmul's src3).
  vid linear(vid x, vid w, vid b, const std::string& what, vid step = none);
  vid add(vid a, vid b, const std::string& what);
  vid mul(vid a, vid b, const std::string& what);
  vid scale(vid x, float s, const std::string& what, float bias = 0);
  vid unary(kernels::op o, vid x, const std::string& what);
  /// Element-wise clamp to [-c, c].
  vid clamp(vid x, float c, const std::string& what);
  /// An element-wise program over `in` (expr.hpp): one kernel where the JIT is present, a
  /// composition of primitives where not (expand_elementwise).
  vid elementwise(std::shared_ptr<kernels::ew_program> program, std::vector<vid> in,
                  const std::string& what);

  /// The gated or plain feed-forward: down(act(gate(x)) * up(x)) or down(act(up(x))).
  /// `expr` (optional) replaces the activation: over x (the gate, or up when not gated), or
  /// over g and u (the whole gating).
  /// Values are named `what`_gate, _up, _act, _out.
  /// `before_down` (optional) transforms the activated product before w_down (and gives its
  /// rows' step, or none); `step`: h's (linear's).
  vid ffn(vid h, vid w_gate, vid w_up, vid w_down, vid b_gate, vid b_up, vid b_down,
          kernels::op act, std::shared_ptr<kernels::ew_program> expr = nullptr,
          const std::string& what = "ffn",
          const std::function<std::pair<vid, vid>(vid)>& before_down = {}, vid step = none);
  /// A mixture of experts: the router (w_router [E, C]: softmax over the experts, the top
  /// s.used, optionally renormalised and scaled), then the chosen experts' SwiGLU FFNs,
  /// weighted and summed (op `moe`; w_gate, w_up [E * F, C], w_down [E * C, F]).
  /// Sigmoid scores, groups or a choice bias (`router_bias`, [E]) route through one
  /// moe_router op instead.
  vid moe(vid h, const moe_spec& s, vid w_router, vid w_gate, vid w_up, vid w_down,
          vid router_bias = none, const moe_biases& biases = {});
  /// Self-attention over the paged KV cache: projections, optional q/k norms, RoPE, the
  /// cache writes, attention, the output projection. q_norm / k_norm: per-head weights [D]
  /// (or none).
  vid attention(vid h, const attention_spec& s, vid wq, vid wk, vid wv, vid wo, vid bq, vid bk,
                vid bv, vid bo, vid q_norm = none, vid k_norm = none,
                norm_type qk_norm = norm_type::rms, float qk_eps = 1e-6f);
  /// The parts of attention(), for families that put something between them.
  struct qkv {
    vid q, k, v; // [T, H, D] / [T, Hkv, D]
  };
  vid attend(const attention_spec& s, qkv x, vid wo, vid bo);

 private:
  graph& g_;
  int layer_;
};

/// A weight value (the family supplies its stored shape and dtype).
vid add_weight(graph& g, const std::string& name, weight_ref ref, dtype t,
               std::vector<int64_t> dims, int layer, cut split = cut::none, axis along = axis::none,
               int64_t unit = 1);
/// The KV cache of one layer: [NB, P, kv_heads, head_dim] (NB, P: the executor's), its heads
/// cut by TP along `along`.
vid add_kv_state(graph& g, state_kind k, int layer, int64_t kv_heads, int64_t head_dim,
                 axis along = axis::kv_heads);
/// A recurrent state of one layer: [NS, dims...] (NS: the executor's state slots), dims[0]
/// heads along `along` (what TP cuts); `what` names it ("blk.3.what").
vid add_recurrent_state(graph& g, state_kind k, int layer, std::vector<int64_t> dims, axis along,
                        const std::string& what);

} // namespace troupe::graph
