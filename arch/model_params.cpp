// model_params.cpp: what a model_config implies for its parameters (model_config.hpp):
// parameters(), active_parameters() and prefill_flops_per_token(), a count over the config alone
// per family feature, which MemoryPlan.FixtureParameterCounts holds equal to the weights each
// family's graph reads.
#include <cmath>

#include "arch/model_config.hpp"

namespace troupe {

namespace {

// DeepSeek-V4: per layer the two hyper-connections, the attention (q bottleneck and its norm,
// the shared key-value projection and its norm, sinks, the grouped output), a compressed
// layer's compressor (kv and gate projections, ape, norm) and a sparse one's indexer (its
// compressor, q projection, head weights), the norms, the experts (the router's bias on all but
// the hash-routed layers; their token table is no parameter) and the shared expert; the head's
// hyper-connection
int64_t count_v4(const model_config& m, int64_t experts_counted) {
  const int64_t C = m.C, H = m.H, D = m.D, N = m.hc_mult, M = N * (N + 2), ql = m.q_lora;
  const int64_t Di = m.dsa_dim, Hi = m.dsa_heads, F = m.F_expert;
  int64_t total = 2 * m.V * C + C + N * N * C + N + 1;
  for (int64_t l = 0; l < m.n_layer; ++l) {
    const int64_t k = m.layer_compress(l);
    const bool sparse = m.layer_compress_sparse(l);
    const int64_t W = sparse ? 2 * D : D;
    const bool hashed =
        l < static_cast<int64_t>(m.hash_layers.size()) && m.hash_layers[static_cast<size_t>(l)];
    total += 2 * (M * N * C + M + 3) + 2 * C;
    total +=
        C * ql + ql + ql * H * D + C * D + D + H + m.o_rank * H * D + C * m.o_groups * m.o_rank;
    if (k > 0) total += 2 * W * C + k * W + D;
    if (sparse) total += 4 * Di * C + k * 2 * Di + Di + Hi * Di * ql + Hi * C;
    total += experts_counted * 3 * C * F + m.n_expert * C + (hashed ? 0 : m.n_expert) + 3 * C * F;
  }
  return total;
}

// (every_run: a layer that reads another's weights counts them again: what a token computes
// with, not what is stored)
int64_t count_parameters(const model_config& m, int64_t experts_counted, bool every_run = false) {
  if (m.hc_mult > 0 && m.kv_lora == 0) return count_v4(m, experts_counted);
  const int64_t C = m.C;
  const int64_t qk = m.qk_nope + m.qk_rope;
  // an attention layer, of its geometry (Gemma 4's full layers have theirs, and may take the
  // values from the keys' projection)
  auto attention = [&](int64_t l) {
    const int64_t D = m.layer_head_dim(l), Hq = m.layer_heads(l);
    // (a layer attending over an earlier one's cache has no k / v projections, no k norm)
    const bool own = m.layer_kv_source(l) == l;
    const int64_t Hkv = own ? m.layer_kv_heads(l) : 0;
    const int64_t kv = m.kv_shared_kv && m.layer_full_geometry(l) ? 1 : 2;
    // q / k norm weights: one per head dim (and a LayerNorm's bias), or per head (or over the
    // whole projection)
    const int64_t qk_norms =
        m.qk_norm == qk_norm_kind::none || m.qk_norm == qk_norm_kind::head_plain || !m.norm_weight
            ? 0
        : m.qk_norm == qk_norm_kind::head
            ? (own ? 2 : 1) * D * (m.qk_norm_type == norm_kind::layer && m.norm_bias ? 2 : 1)
            : (Hq + Hkv) * D;
    // DeepSeek-V3.2's indexer: wq_b, wk, its LayerNorm, the head weights (none on GLM-5's layers
    // that reuse another's selection)
    const bool indexer =
        m.dsa_topk > 0 && (m.dsa_source.empty() || m.dsa_source[static_cast<size_t>(l)] == l);
    // (Mistral Large 4's indexer: its queries from the input's LayerNorm, scaled per head)
    const int64_t dsa_in = m.dsa_q_from_input ? C : m.q_lora;
    const int64_t dsa = indexer ? m.dsa_heads * m.dsa_dim * dsa_in + m.dsa_dim * (C + 2) +
                                      m.dsa_heads * C +
                                      (m.dsa_pool > 0 ? m.dsa_dim * C + m.dsa_pool * m.dsa_dim
                                                      : 0) + // (pools' gate, ape)
                                      (m.dsa_q_from_input ? 2 * C : 0) +
                                      (m.attn_pos_scale ? 2 * m.dsa_heads : 0)
                                : 0;
    // (Mistral Large 4: a layer without RoPE has its positional dims in the nope part; one
    // reading another's latent cache has no kv_a and no latent norm)
    const int64_t rope_l = m.layer_qk_rope(l), nope_l = m.qk_nope + m.qk_rope - rope_l;
    return m.kv_lora > 0
               // (A.X K2's q_b: over the latent twice, its rows each head's q and value gate)
               ? (m.q_lora > 0 ? C * m.q_lora + (m.mla_q_gate ? 2 * m.q_lora * Hq * (qk + m.v_head)
                                                              : m.q_lora * Hq * qk)
                               : C * Hq * qk) +
                     (own ? C * (m.kv_lora + rope_l) + m.kv_lora : 0) +
                     m.kv_lora * Hq * (nope_l + m.v_head) + Hq * m.v_head * C + dsa +
                     m.q_lora + // (the q latent's norm)
                     (m.attn_pos_scale ? 2 * Hq : 0) + (m.attn_sinks ? Hq : 0) +
                     (m.attn_value_gate ? Hq * m.v_head * C : 0) + // HY-V4
                     (m.attn_head_gate ? Hq * C : 0)               // Ling 3
               : C * Hq * D * (m.attn_output_gate || m.attn_value_gate ? 2 : 1) + kv * C * Hkv * D +
                     Hq * D * C + (m.qkv_bias ? Hq * D + kv * Hkv * D : 0) + qk_norms +
                     (m.o_bias ? C : 0) +
                     // (MiMo-V2-Flash's sinks: on the windowed layers only)
                     (m.attn_sinks && (!m.sinks_windowed_only || m.layer_window(l) > 0) ? Hq : 0) +
                     (m.attn_head_gate ? Hq * C : 0) + // LFM3's gate per head
                     (m.attn_gate_bias ? Hq : 0) +     // Beam's gate bias per head
                     // MiniMax M3's indexer: q (a head per KV head) and k projections, norms
                     (m.layer_sparse_attn(l) ? (Hkv + 1) * m.sparse_dim * C + 2 * m.sparse_dim : 0);
  };
  // a gated DeltaNet layer: q, k, v, z, a, b projections, the convolution's taps, A and
  // dt_bias, the gated norm, out_proj
  const int64_t Kd = m.lin_k_heads * m.lin_k_dim, Vd = m.lin_v_heads * m.lin_v_dim;
  // or a gated short convolution: in_proj (B, C, x), the taps, out_proj
  // or Mamba-2: in_proj (z, x, B, C, dt), the convolution over x, B and C, A_log, D and
  // dt_bias, the gated norm over the inner width, out_proj (and their biases)
  const int64_t ssm_in = 2 * Vd + 2 * Kd + m.lin_v_heads, ssm_conv = Vd + 2 * Kd;
  // or Mamba-1: in_proj (x, z), the convolution over x, x_proj (dt, B, C), dt_proj and its bias,
  // A per state value, D, out_proj (and their biases, Jamba's dt / B / C norms)
  const int64_t R = m.ssm_dt_rank, N1 = m.lin_k_dim;
  // or KDA: its decay's input and its output gate each a low-rank pair (or one full map)
  const int64_t kda_map = m.kda_full_gates ? Vd * C : m.lin_v_dim * C + Vd * m.lin_v_dim;
  const int64_t mamba1 =
      2 * C * Vd + Vd * m.lin_conv + (m.ssm_conv_bias ? Vd : 0) + Vd * (R + 2 * N1) + R * Vd + Vd +
      Vd * N1 + Vd + Vd * C + (m.ssm_proj_bias ? 2 * Vd : 0) + (m.ssm_out_bias ? C : 0) +
      (m.ssm_bcdt_norm == model_config::ssm_bcdt_kind::weighted ? R + 2 * N1 : 0);
  const int64_t linear =
      // (lightning: qkv_proj, output_gate, out_proj, the norm, the decay per head)
      m.lightning ? 5 * C * Vd + Vd + m.lin_v_heads
      // (mLSTM: q, k, v, the output gate, the input and forget gates and their biases, the
      // per-head norm, out_proj)
      : m.mlstm ? 2 * C * Kd + 2 * C * Vd + 2 * (C + 1) * m.lin_v_heads + Vd + Vd * C
      // (Griffin: linear_x, linear_y, the conv, the two gates' blocks, the decay, linear_out; and
      // their biases)
      : m.rg_lru ? 2 * (C * Vd + Vd) + Vd * (m.lin_conv + 1) +
                       2 * (m.lin_v_heads * m.lin_v_dim * m.lin_v_dim + Vd) + Vd + Vd * C + C
      : m.ssm_dt_rank > 0 ? mamba1
      : m.mamba
          ? C * ssm_in + ssm_conv * m.lin_conv + (m.ssm_conv_bias ? ssm_conv : 0) +
                3 * m.lin_v_heads + (m.ssm_norm == model_config::ssm_norm_kind::none ? 0 : Vd) +
                Vd * C + (m.ssm_proj_bias ? ssm_in : 0) + (m.ssm_out_bias ? C : 0)
      : m.short_conv ? 3 * C * Vd + Vd * m.lin_conv + Vd * C
      // KDA: q, k, v and their taps; the decay's map (f_a, f_b or f_proj), dt_bias, A_log; b; the
      // gate's map (g_a, g_b or g_proj); the norm; o_proj
      : m.kda ? 3 * C * Vd + 3 * Vd * m.lin_conv + (kda_map + Vd + m.lin_v_heads) +
                    m.lin_v_heads * C + kda_map + m.lin_v_dim + Vd * C
              : C * (2 * Kd + 2 * Vd + 2 * m.lin_v_heads) + (2 * Kd + Vd) * m.lin_conv +
                    2 * m.lin_v_heads + m.lin_v_dim + Vd * C;
  if (m.zamba) {
    // Zamba2: every layer's mixer and its norm; the hybrid layers' linear maps and adapters (q, k,
    // v: [r, 2 C] and [2 C, r] each; gate_up: [r, C] and [2 F, r]); the shared blocks, each
    // once: its two norms, q, k, v (from 2 C), o_proj, gate_up, down (and their biases)
    const int64_t F = m.F, r = m.zamba_rank, D = m.D;
    int64_t hybrid = 0;
    for (int64_t l = 0; l < m.n_layer; ++l) hybrid += m.layer_linear(l) ? 0 : 1;
    const int64_t block = 2 * C + C + 2 * C * (m.H + 2 * m.Hkv) * D + C * m.H * D + 3 * C * F +
                          (m.mlp_bias ? 2 * F + C : 0);
    const int64_t adapters = r * C + 2 * F * r + (m.zamba_attn_adapters ? 3 * 4 * C * r : 0);
    // (transformers ties a block's uses only with tie_word_embeddings: else a copy a layer)
    const int64_t blocks = m.tie_embeddings ? std::min(hybrid, m.zamba_blocks) : hybrid;
    return m.V * C + (m.tie_embeddings ? 0 : m.V * C) + C + m.n_layer * (linear + C) +
           hybrid * (C * C + adapters) + blocks * block;
  }
  if (m.doge) {
    // Doge, a layer: q, k, v, o and their biases, q / k norms, A and dt_proj (and its bias), the
    // two residual vectors, two norms, the MLP; once: the embeddings, an untied head, the final
    // norm, and the dynamic mask's constants as loaded (the queries' extra values [H 8], the
    // keys' map [Hkv 8, Hkv], each head's first D of D + 8 [D, D + 8])
    const int64_t H = m.H, Hkv = m.Hkv, D = m.D;
    const int64_t layer = 2 * C * H * D + 2 * C * Hkv * D + (m.qkv_bias ? H * D + 2 * Hkv * D : 0) +
                          (m.o_bias ? C + Hkv : 0) + 2 * D + Hkv + Hkv * Hkv * D + 2 * C + 2 * C +
                          (m.gated_ffn ? 3 : 2) * C * m.F + (m.mlp_bias ? 2 * m.F + C : 0);
    return m.V * C + (m.tie_embeddings ? 0 : m.V * C) + C + H * 8 + Hkv * 8 * Hkv + D * (D + 8) +
           m.n_layer * layer;
  }
  if (m.zaya) {
    // ZAYA1, a layer: q, k (and k's rows again, as q's residual reads them), the group mean of
    // q's rows (k's residual, derived), the values' two halves, o_proj; the convolutions' taps as
    // loaded (depthwise: this token's and the previous one's [Ch, 3]; per head: two [Ch, D]) and
    // their biases; the keys' scale per KV head; two norms; four residual scalings; the router's
    // down_proj (and bias), the carried state's scale (not on the first layer), its norm, fc1, fc2
    // (and biases), out_proj over the experts and skip experts, the balancing biases; the experts.
    // Once: the embeddings (an untied head, its bias), the final norm, the embedding's scaling, the
    // values' taps.
    const int64_t H = m.H, Hkv = m.Hkv, D = m.D, R = m.router_dim,
                  routed = m.n_expert + m.null_experts, Ch = (H + Hkv) * D;
    const int64_t layer = 2 * C * H * D + 4 * C * Hkv * D + 2 * Ch * 3 + 2 * Ch * D + 2 * Ch + Hkv +
                          2 * C + 8 * C + (R * C + R) + R + 2 * (R * R + R) + routed * R + routed +
                          experts_counted * 3 * C * m.F_expert;
    return m.V * C + (m.tie_embeddings ? 0 : m.V * C) + (m.lm_head_bias ? m.V : 0) + C + 2 * C +
           2 * Hkv * D + m.n_layer * layer + (m.n_layer > 1 ? (m.n_layer - 1) * R : 0);
  }
  auto dense = [&](int64_t l) {
    const int64_t F = m.layer_ffn(l);
    return (m.gated_ffn ? 3 : 2) * C * F + (m.mlp_bias ? (m.gated_ffn ? 2 : 1) * F + C : 0);
  };
  const int64_t mats = m.expert_relu2 ? 2 : 3; // (ungated experts: up and down)
  const int64_t experts = experts_counted * mats * C * m.F_expert +
                          // the router (its identity experts' rows too), the choice bias
                          (m.n_expert + m.zero_experts) * (C + (m.router_bias ? 1 : 0)) +
                          mats * C * m.F_shared + (m.shared_gate ? C : 0) +
                          // Gemma 4: the dense MLP beside them, the router's scales, 3 norms
                          (m.moe_beside_mlp ? 3 * C * m.F + C + m.n_expert + 3 * C : 0) +
                          // Ergo: each expert's output norm, the shared expert's
                          (m.expert_post_norm ? m.n_expert * C + (m.F_shared > 0 ? C : 0) : 0) +
                          // GPT-OSS: the router's bias, each expert's gate, up and down biases
                          (m.router_linear_bias ? m.n_expert : 0) +
                          (m.expert_bias ? experts_counted * (2 * m.F_expert + C) : 0);
  // (the final norm's weight, and the embeddings' norm's where there is one; none where the
  // norms have no weights, as OLMo's and NanoChat's; a LayerNorm's bias beside its weight)
  const int64_t norm_w = m.norm_weight ? C : 0;
  const int64_t norm_p = norm_w * (m.norm == norm_kind::layer && m.norm_bias ? 2 : 1);
  const int64_t head_rows = m.output_vocab > 0 ? m.output_vocab : m.V; // (a pruned head's)
  int64_t total = m.V * C + (m.tie_embeddings ? 0 : head_rows * C) + norm_p +
                  (m.embed_norm ? norm_p : 0) + (m.lm_head_bias ? m.V : 0) +
                  (m.learned_positions ? m.ctx * C : 0); // (GPT-2's position table)
  if (m.hc_mult > 0 && !m.hc_head_mean)                  // the head's hyper-connection (HY-V4's)
    total += m.hc_mult * (m.hc_mult * C + 1) + 1;
  if (m.ple_dim > 0) // the per-layer embeddings' table, the model's projection and its norm
    total += (m.ple_vocab + C) * m.n_layer * m.ple_dim + m.ple_dim;
  const int64_t N = m.altup; // Gemma 3n: the streams' projections in and out
  if (N > 0) total += 2 * (N - 1) * C * C;
  // norms: before each sublayer, and after it too where they sandwich it (one for both sublayers
  // of a parallel block with one norm)
  const int64_t norms = (m.norms == norm_place::sandwich         ? 4
                         : m.residual == residual_kind::parallel ? 1
                                                                 : 2) *
                        norm_p;
  if (m.cycle_layers > 0) total += C; // HRM-Text: the low stream's initial value
  if (m.head_transform)               // (ModernBERT's prediction head)
    total += C * C + (m.head_dense_bias ? C : 0) + norm_p;
  if (m.first_attn_unnormed) total -= norm_p; // (and its first layer's missing norm)
  if (m.ngpt) total += head_rows;             // Dory: the logits' scale per token id
  if (m.logit_rows > 0) total += m.V; // (Inkling: the bias on the dropped logits, a weight here)
  for (int64_t l = 0; l < m.n_layer; ++l)
    if (every_run || m.layer_weights(l) == l) // (a layer reading another's weights adds none)
      total +=
          (!m.layer_has_mixer(l)    ? 0
           : m.layer_linear(l)      ? linear
           : m.layer_linear_attn(l) ? C * C // (DeciLM's linear map)
                                    : attention(l)) +
          (m.layer_scalar ? 1 : 0) +
          (m.ssm_parallel ? linear : 0) + // Falcon-H1: the mixer beside the attention
          (!m.layer_has_ffn(l)     ? 0
           : m.layer_moe(l)        ? experts
           : m.layer_linear_ffn(l) ? C * C
                                   : dense(l)) +
          (m.ple_dim > 0 ? 2 * C * m.ple_dim + C : 0) + // a layer's gate, projection, norm
          // Inkling: r_proj, the biases' profiles, the four convolutions; a dense MLP's scalar,
          // or the router's shared rows and scalar
          (m.inkling ? m.layer_heads(l) * m.rel_dim * C + m.rel_dim * m.layer_rel_extent(l) +
                           m.sconv * (2 * m.layer_kv_heads(l) * m.layer_head_dim(l) + 2 * C) +
                           (m.layer_moe(l) ? m.sink_shared * C + 1 : 1)
                     : 0) +
          // Dory: q's and the gate's scales, gate's and up's, the two interpolation rates
          (m.ngpt ? 2 * m.layer_heads(l) * m.layer_head_dim(l) + 2 * m.layer_ffn(l) + 2 * C : 0) +
          // Gemma 3n: AltUp's router norm and router, prediction and correction coefficients,
          // output scale; Laurel's two projections and norm
          (N > 0 ? C + N * C + N * N * N + N * N + C : 0) +
          (m.laurel_rank > 0 ? 2 * C * m.laurel_rank + C : 0) +
          // GLM-5.3, HY-V4: the hyper-connections' fn, base, scale (HY-V4's pre and post only)
          (m.hc_mult > 0
               ? 2 * (m.hc_independent ? 2 * m.hc_mult * (m.hc_mult * C + 1) + 2
                                       : m.hc_mult * (m.hc_mult + 2) * (m.hc_mult * C + 1) + 3)
               : 0) +
          (m.layer_has_ffn(l) && m.layer_has_mixer(l)   ? norms // one norm a block
           : m.layer_has_ffn(l) || m.layer_has_mixer(l) ? norms / 2
                                                        : 0) +
          (m.post_moe_norm && m.layer_has_ffn(l) && m.layer_moe(l) ? norm_w : 0) +
          (m.shortcut_moe && l % 2 == 0 ? experts : 0) + // (LongCat's, beside the MLP)
          // A.X K2's norm gates: before the attention, and before the experts
          (m.gated_norm_rank > 0 ? 2 * m.gated_norm_rank * C * (m.layer_moe(l) ? 2 : 1) : 0) +
          (m.residual_gates ? 2 * C : 0) + // (Ergo's two residual gates)
          // BitNet's subln: over the attention's output and the FFN's product
          (m.sub_norms ? m.layer_heads(l) * m.layer_head_dim(l) + m.layer_ffn(l) : 0) +
          (m.diff_attn ? 4 * m.layer_head_dim(l) : 0); // (DiffLlama's lambda vectors)
  return total;
}

} // namespace

int64_t model_config::active_parameters() const {
  return count_parameters(*this, n_expert_used);
}

double model_config::prefill_flops_per_token(int64_t prompt) const {
  const double P = static_cast<double>(prompt);
  const double head = static_cast<double>(V) * static_cast<double>(C);
  // (each run of a weight-shared layer computes with its weights again)
  const double layer_params = static_cast<double>(count_parameters(*this, n_expert_used, true)) -
                              head * (tie_embeddings ? 1 : 2);
  double head_dims = 0; // over the layers with attention over the prompt (not linear, not
                        // FFN-only), each its heads times its head dim
  for (int64_t l = 0; l < n_layer; ++l)
    if (layer_has_kv(l))
      head_dims += static_cast<double>(layer_head_dim(l)) * static_cast<double>(layer_heads(l));
  const double attn = 4.0 * head_dims * P * (P + 1) / 2;
  return (2.0 * P * layer_params + attn + 2.0 * head) / P;
}

int64_t model_config::parameters() const {
  return count_parameters(*this, n_expert);
}

} // namespace troupe
