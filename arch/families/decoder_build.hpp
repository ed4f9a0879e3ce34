// decoder_build.hpp (arch/families, internal): the decoder builder's class, shared by
// decoder.cpp (the layer, attention, FFN and experts), decoder_mixers.cpp (the recurrent mixers:
// gated DeltaNet, short convolution, Mamba-2, Mamba-1, KDA, lightning) and decoder_mla.cpp (latent
// attention and DeepSeek Sparse Attention's indexer), decoder_hc.cpp and decoder_altup.cpp (the
// multi-stream residuals). Only those include it.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arch/families/decoder.hpp"

namespace troupe::arch::detail {

/// An element-wise program (expr.hpp) over `vars`, read in that order as its sources.
expected<std::shared_ptr<kernels::ew_program>> ew_program_of(const std::string& text,
                                                             const std::vector<std::string>& vars);
/// The clamped SwiGLU over (g, u) at limit L: silu(min(g, L)) (DeepSeek-V4) or, with
/// `after_act`, min(silu(g), L) (Step 3.7, Ling 3), times clamp(u, -L, L).
expected<std::shared_ptr<kernels::ew_program>> clamped_swiglu(double L, bool after_act);

using namespace graph;
using kernels::op;

inline std::string at(const std::string& pattern, int l) {
  return weight_names::layer(pattern, l);
}

/// A weight taking rows [first, first + count) of its tensor (one part of a fused projection).
inline weight_ref row_range(int64_t first, int64_t count) {
  weight_ref r;
  r.segments = {{first, count}};
  return r;
}

/// The gate (or up) rows of a fused gate / up tensor of `groups` matrices [2 F, K] (experts),
/// for groups [g0, g0 + n): each matrix's first F rows then its last F, or (interleaved) its rows
/// alternating gate, up (a strided view).
inline weight_ref gate_up_rows(bool interleaved, bool up, int64_t F, int64_t g0 = 0,
                               int64_t n = 1) {
  weight_ref r;
  if (interleaved) {
    r.row_step = 2, r.row_phase = up ? 1 : 0;
    r.segments = {{g0 * F, n * F}};
    return r;
  }
  for (int64_t e = g0; e < g0 + n; ++e) r.segments.emplace_back(2 * e * F + (up ? F : 0), F);
  return r;
}

class decoder {
 public:
  decoder(const model_source& m, const decoder_names& n, graph::graph& g)
      : m_(m)
      , c_(m.config)
      , n_(n)
      , g_(g)
      , w_(m, g) {}

  status build();

 private:
  // an optional tensor by name (empty name: absent)
  expected<vid> opt(const std::string& name, int l, std::vector<int64_t> dims, cut cu = cut::none,
                    axis ax = axis::none, int64_t unit = 1, weight_ref ref = {}) {
    if (name.empty()) {
      const vid v = graph::add_weight(g_, "(none)", ref, dtype::f32, dims, l);
      g_[v].empty = true;
      return v;
    }
    return w_.get(l >= 0 && l < g_.n_layer ? layer_name(name, l) : name, l, std::move(dims), cu, ax,
                  unit, n_.optional_biases, ref);
  }
  expected<vid> req(const std::string& name, int l, std::vector<int64_t> dims, cut cu = cut::none,
                    axis ax = axis::none, int64_t unit = 1, weight_ref ref = {}) {
    if (name.empty())
      return make_error(errc::internal, "{}: the family names no tensor here", m_.path);
    return w_.get(l >= 0 && l < g_.n_layer ? layer_name(name, l) : name, l, std::move(dims), cu, ax,
                  unit, false, ref);
  }

  // a tensor name of layer l: `pattern`'s "{}" the index of the layer whose weights it reads
  // (itself, or the first run of a weight-shared block)
  std::string layer_name(const std::string& pattern, int l) const {
    return at(pattern, static_cast<int>(c_.layer_weights(l)));
  }

  // a norm over the last dim of width `C`: its weight (+ norm_add) or ones, its bias or none
  expected<vid> norm(vid x, int l, const std::string& wname, const std::string& bname, int64_t C,
                     norm_kind kind, const std::string& what, cut cu = cut::none,
                     axis ax = axis::none, int64_t unit = 1) {
    builder b(g_, l);
    vid wt;
    if (c_.norm_weight && !wname.empty()) {
      weight_ref ref;
      ref.add = static_cast<float>(c_.norm_add);
      TROUPE_TRY_ASSIGN(v, req(wname, l, {C}, cu, ax, unit, ref));
      wt = v;
    } else {
      wt = w_.constant(what + ".ones", l, {C}, 1.0f, cu, ax, unit);
    }
    vid bias = none;
    if (kind == norm_kind::layer && !bname.empty()) {
      TROUPE_TRY_ASSIGN(v, opt(bname, l, {C}, cu, ax, unit));
      bias = v;
    }
    return b.norm(x, kind == norm_kind::rms ? norm_type::rms : norm_type::layer, wt, bias,
                  static_cast<float>(c_.norm_eps), what);
  }

  status make_act();
  // BitNet's activation rounding (model_config::act_quant): x -> clamp(round(x s), -128, 127) / s
  // per token, s = 127 / max |x| over the whole row (split: the ranks' maxima all-reduced), and
  // the step 1 / s of each row (the matmuls' src3); (x, none) without act_quant
  std::pair<vid, vid> act_quant(builder& b, vid x, bool split, const std::string& what);

  expected<vid> embed();

  // q / k / v weights and biases, separate or from the fused tensor
  struct proj {
    vid wq, wk, wv, bq, bk, bv;
    vid wgate = none; // attn_output_gate: the gate's rows of q_proj
  };
  expected<proj> projections(int l);
  // DiffLlama's differential attention (model_config::diff_attn)
  expected<vid> diff_attention(int l, vid h);

  // q or k norm, by the config's kind
  expected<vid> qk_norm(builder& b, int l, vid x, int64_t heads, axis ax, bool is_q);

  // rows of each head's block of `per` rows: [h * per + first, + count) for every head
  weight_ref head_rows(int64_t per, int64_t first, int64_t count) const {
    weight_ref r;
    for (int64_t hd = 0; hd < c_.H; ++hd) r.segments.emplace_back(hd * per + first, count);
    return r;
  }
  // x / rms(x) over its whole row of `width` values, whatever TP shard holds which part: each
  // rank's sum of squares all-reduced (intermediates named what_sq, _ss, _ss_all, _var, _rsqrt,
  // and the result what_plain)
  static vid rms_across_ranks(builder& b, vid x, int64_t width, float eps,
                              const std::string& what) {
    const vid ss = b.op(kernels::op::sum_rows, {b.mul(x, x, what + "_sq")}, what + "_ss");
    const vid var =
        b.scale(b.all_reduce(ss, what + "_ss_all"),
                static_cast<float>(1.0 / static_cast<double>(width)), what + "_var", eps);
    return b.mul(x, b.unary(kernels::op::rsqrt, var, what + "_rsqrt"), what + "_plain");
  }
  // every head's D rows with their halves swapped: [h D + D / 2, + D / 2), then [h D, + D / 2)
  static std::vector<std::pair<int64_t, int64_t>> swapped_halves(int64_t heads, int64_t D) {
    std::vector<std::pair<int64_t, int64_t>> s;
    for (int64_t h = 0; h < heads; ++h) s.insert(s.end(), {{h * D + D / 2, D / 2}, {h * D, D / 2}});
    return s;
  }

  // DeepSeek's latent attention, absorbed: the cache holds each token's latent c (kv_lora)
  // and its rotated k_pe (qk_rope); a head's query q_nope meets c through W_kb(h)^T (so the
  // keys are never expanded), the attention is multi-query over [c; k_pe] with the values c
  // (the cache read twice as K and V; the product's last qk_rope values are unused), and
  // W_vb(h) turns each head's weighted latent into its values.
  expected<vid> mla(int l, vid h);
  // DeepSeek Sparse Attention's lightning indexer: the positions [T, dsa_topk] each query of
  // layer l attends over, from the layer's input h and the q bottleneck's normed output
  expected<vid> dsa_indexer(int l, vid h, vid q_resid);
  // the model's rotation, with LeRoPE's learned factors where the family has them (Mistral
  // Large 4: exp of the checkpoint's alpha per frequency)
  expected<rope_spec> model_rope();
  std::optional<rope_spec> model_rope_; // (built once: every layer's rotation is the same)
  // a layer's cache state ("k_cache", "v_cache") of layer `layer`, or none
  vid layer_state(int64_t layer, const char* what) const;
  // Mistral Large 4's softmax scaling: q [T, heads, D] times scale ln(p + 1) + bias per head
  expected<vid> pos_scaled(builder& b, int l, vid q, int64_t heads, const std::string& scale,
                           const std::string& bias, bool cut_heads, const char* what);

  // the recurrent mixers a linear layer runs instead of attention (decoder_mixers.cpp): the
  // gated DeltaNet, LFM2's gated short convolution, Mamba-2's and Mamba-1's selective scans
  expected<vid> delta_net(int l, vid h);
  expected<vid> short_conv(int l, vid h);
  expected<vid> mamba(int l, vid h);
  // Griffin's recurrent block (model_config::rg_lru): gelu(W_y h) times the RG-LRU over the
  // depthwise convolution of W_x h
  expected<vid> rg_lru(int l, vid h);
  // MiniMax's lightning attention (model_config::lightning) as the scan with a unit step
  expected<vid> lightning(int l, vid h);
  expected<vid> mamba1(int l, vid h);
  expected<vid> kda(int l, vid h);
  expected<vid> mlstm(int l, vid h); // (decoder_xlstm.cpp)

  // layer l's attention as the kernel sees it: its geometry, the scores' scale, window, chunk,
  // temperature, caps and RoPE (the weights and caches are the caller's)
  attention_spec layer_spec(int l) const;
  // how TP cuts layer l's KV heads (the full-attention layers' own, where they differ)
  axis kv_axis_of(int l) const {
    return c_.layer_full_geometry(l) ? axis::kv_heads_full : axis::kv_heads;
  }
  // act(g) * u by the family's activation (an expression over the gate, or the whole gating over
  // g and u; else act_op()), named what_act / what_prod
  vid gated_product(builder& b, vid g, vid u, const std::string& what) const {
    if (act_expr_ && act_expr_->sources == 2)
      return b.elementwise(act_expr_, {g, u}, what + "_prod");
    const vid a = act_expr_ ? b.elementwise(act_expr_, {g}, what + "_act")
                            : b.unary(act_op(), g, what + "_act");
    return b.mul(a, u, what + "_prod");
  }
  // x / sqrt(sum x^2 + eps) over its whole row of `width` values, whatever TP shard holds which
  // part (nGPT's L2 norm of a split row: rms_across_ranks by eps / width, times 1 / sqrt(width))
  static vid l2_across_ranks(builder& b, vid x, int64_t width, float eps, const std::string& what) {
    const double w = static_cast<double>(width);
    return b.scale(rms_across_ranks(b, x, width, static_cast<float>(eps / w), what + "_sub"),
                   static_cast<float>(1.0 / std::sqrt(w)), what + "_sub_norm");
  }
  // the FFN's activation as an op
  op act_op() const { return act_op(c_.act); }
  static op act_op(act_kind k) {
    return k == act_kind::silu ? op::silu : k == act_kind::gelu_tanh ? op::gelu_tanh : op::gelu_erf;
  }
  // cap tanh(x / cap) (Gemma 2's logits, xLSTM's gates); x itself when cap <= 0
  static vid softcap(builder& b, vid x, float cap, const std::string& what) {
    if (cap <= 0) return x;
    const vid t = b.unary(op::tanh, b.scale(x, 1.0f / cap, what + "_div"), what + "_tanh");
    return b.scale(t, cap, what + "_capped");
  }

  expected<vid> attention(int l, vid h);

  // the names of expert `pattern`'s matrices: one per expert ("{e}"), or the merged tensor
  std::vector<std::string> expert_tensors(const std::string& pattern, int l) const;

  // router, the chosen experts, and the shared expert (gated) when there is one; the router
  // reads `router_in` where given (else h)
  expected<vid> moe(int l, vid h, vid router_in = none);

  // Gemma 4's MoE layer's FFN (model_config::moe_beside_mlp) from the layer's stream x: the
  // dense MLP and the experts, each normed, summed (before the FFN's output norm)
  expected<vid> mlp_and_experts(int l, vid x);

  // Gemma 4's per-layer embedding (model_config::ple_dim) gated by x, layer l's output (Gemma
  // 3n's corrected first stream): what the layer adds to its stream(s)
  expected<vid> per_layer_input(int l, vid x);

  // the attention of a layer over an earlier layer's KV cache (model_config::kv_source)
  expected<vid> shared_attention(int l, vid h, int64_t source);

  expected<vid> ffn(int l, vid h);
  // Gemma 3n's FFN with the Gaussian top-k (model_config::act_sparsity): the gate's values less
  // mean + std z over its whole row (every TP rank's part) cut before the activation
  expected<vid> sparse_ffn(int l, vid h, vid wg, vid wu, vid wd);

  expected<vid> layer(int l, vid x);
  // DeciLM (model_config::nas_blocks): the attention and the FFN, each under its own norm,
  // present, absent or a linear map
  expected<vid> nas_layer(int l, vid x);

  // DeepSeek-V4 (decoder_hc.cpp): the model over hc_mult residual streams; a layer, its
  // hyper-connection (the sublayer's input and the mix, from the streams), its attention (the
  // window of a shared key-value cache plus compressed entries), a compressor
  status build_hc();
  expected<vid> hc_layer(int l, vid x);
  struct hc_mix {
    vid in, mix;
  };
  expected<hc_mix> hyper(int l, vid x, const std::string& fn, const std::string& base,
                         const std::string& scale, const std::string& what);
  expected<vid> v4_attention(int l, vid h);
  // a compressor's entries cache from h: kv and gate projections (W each), their rows stored
  // per token, entries of m tokens (overlapping when W = 2 Dc) normed and rotated by `rs`
  expected<vid> compressor(int l, vid h, const std::string& wkv, const std::string& wgate,
                           const std::string& ape, const std::string& nw, int64_t Dc, int64_t m,
                           bool overlap, const rope_spec& rs, const std::string& what);

  // Gemma 3n (decoder_altup.cpp): the model over model_config::altup streams; a layer (AltUp's
  // prediction, the block on stream 0 with Laurel beside its attention, the correction, the
  // per-layer input into the other streams); the router's modalities from one stream; the head's
  // streams averaged back into one
  status build_altup();
  expected<vid> altup_layer(int l, vid x);
  struct altup_router {
    vid norm, w; // the router's norm [C] and weight [N, C]
  };
  expected<altup_router> altup_router_of(int l);
  vid altup_modalities(int l, const altup_router& r, vid s, const std::string& what);
  expected<vid> altup_collapse(vid rows);
  vid stream_of(builder& b, vid x, int64_t k, const std::string& what) const;
  // columns [col0, col0 + cols) of each row of x (a slice)
  static vid columns(builder& b, vid x, int64_t col0, int64_t cols, const std::string& what);
  // the projection [C, C] of stream i >= 1: a tensor per stream ("{}" = i - 1) or rows of a
  // stack [N - 1, C, C]
  expected<vid> stream_weight(const std::string& pattern, int64_t i, int l);
  // x with its RMS matched to that of the rows whose sums of squares are `target_ss` [T, 1]
  expected<vid> rms_matched(builder& b, vid x, vid target_ss, const std::string& what);

  // LongCat-Flash (model_config::shortcut_moe): the stream and the even layers' experts'
  // output carried beside it ([T, 2 C]); layer() sets shortcut_ on an even layer and adds
  // carried_ on an odd one
  status build_shortcut();
  // HRM-Text (model_config::cycle_layers): the low and high streams ([T, 2 C]) through the rounds
  // of weight-shared passes
  status build_cycles();
  // A.X K2 (model_config::gated_norm_rank): a norm's output y times sigmoid(W_up silu(W_down y))
  expected<vid> norm_gate(int l, vid y, const std::string& down, const std::string& up,
                          const std::string& what);
  // MiniMax M3 (model_config::sparse_layers): each KV head's chosen positions [T, Hkv K b]
  expected<vid> block_indexer(int l, vid h, axis kv_axis);

  status head(vid x);

  // Dory (decoder_ngpt.cpp, model_config::ngpt): the model (its stream, and the recurrent
  // section's input beside it where it loops), a layer, its attention and MLP (the head is
  // head()'s, with an L2 norm and the logits' scale per token id); x /
  // sqrt(sum x^2 + eps) over the last dim of width n (an RMS norm by eps / n, times 1 / sqrt(n))
  // Zamba2 (decoder_zamba.cpp, model_config::zamba): the model (the stream and the embeddings
  // beside it), and hybrid layer l's run of its shared block (stored under layer `owner`, its
  // adapters the use-th of their lists) over the stream s and the embeddings e
  // Inkling (decoder_inkling.cpp, model_config::inkling): the model, a layer, its attention; x +
  // a causal depthwise convolution of x (its taps `taps` [heads width, K], a state per sequence
  // [heads, K - 1, width] cut along `ax`; axis::none: whole on every rank)
  status build_inkling();
  expected<vid> inkling_layer(int l, vid x);
  expected<vid> inkling_attention(int l, vid h);
  expected<vid> short_conv_residual(builder& b, int l, vid x, const std::string& taps,
                                    int64_t heads, int64_t width, axis ax, const std::string& what);
  // Doge (decoder_doge.cpp, model_config::doge): the model, a layer, its attention
  status build_doge();
  expected<vid> doge_layer(int l, vid x);
  expected<vid> doge_attention(int l, vid h);
  // ZAYA1 (decoder_zaya.cpp, model_config::zaya): the model (the stream carrying the router's
  // state: [T, C + R]), a layer, its attention (compressed convolutional), q's or k's side of it
  // (x projected by w, its two convolutions, plus the residual `res`), its router's input
  status build_zaya();
  expected<vid> zaya_layer(int l, vid x);
  expected<vid> zaya_attention(int l, vid h);
  expected<vid> zaya_conv(builder& b, int l, vid x, int64_t heads, int64_t row0, axis ax,
                          const std::string& what);
  expected<vid> zaya_scaled_sum(builder& b, int l, vid y, vid x, const std::string& which);
  status build_zamba();
  expected<vid> zamba_shared(int l, vid s, vid e, int64_t owner, int64_t use);
  // Zamba's multi-head Mamba-1 (zamba with ssm_dt_rank > 0)
  expected<vid> mamba_heads(int l, vid h);
  status build_ngpt();
  expected<vid> ngpt_layer(int l, vid h);
  expected<vid> ngpt_attention(int l, vid h);
  expected<vid> ngpt_mlp(int l, vid h);
  vid l2_norm(builder& b, vid x, int64_t n, const std::string& what);
  // a stored per-channel vector [n] through `expr` (over x: its scaling, as HF computes it from
  // the parameter every step; a node over n values)
  expected<vid> ngpt_scale(builder& b, const std::string& name, int l, int64_t n,
                           const std::string& expr, cut cu, axis ax, int64_t unit,
                           const std::string& what);

  const model_source& m_;
  const model_config& c_;
  const decoder_names& n_;
  graph::graph& g_;
  weights w_;
  vid tok_ = none;
  vid ple_norm_ = none; // the per-layer embeddings' projection norm, shared by the layers
  vid dsa_sel_ = none;  // the last sparse-attention selection (GLM-5's shared layers reuse it)
  vid shortcut_ = none, carried_ = none; // LongCat: the experts' output made, and read
  std::shared_ptr<kernels::ew_program> act_expr_;
  std::shared_ptr<kernels::ew_program> act_quant_;  // (over x and its row's max |x|, m)
  std::shared_ptr<kernels::ew_program> act_step_;   // (over m)
  std::shared_ptr<kernels::ew_program> clamp_expr_; // DeepSeek-V4's shared expert's activation
  std::vector<std::shared_ptr<kernels::ew_program>> layer_act_; // per layer, when named
};

} // namespace troupe::arch::detail
