// model_config.cpp: model_config from Hugging Face config.json or GGUF metadata
// (model_config.hpp): the architecture picks a family (arch/families/table.cpp, or a
// registered spec file), whose readers fill the config; keys the family never read are
// recorded for the load to list.
#include "arch/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "arch/families/families.hpp"
#include "arch/spec.hpp"
#include "formats/gguf.hpp"

namespace troupe {

std::string weight_names::layer(const std::string& pattern, int index) {
  std::string s = pattern;
  auto pos = s.find("{}");
  if (pos != std::string::npos) s.replace(pos, 2, std::to_string(index));
  return s;
}

int64_t model_config::layer_window(int64_t layer) const {
  if (sliding_window <= 0) return 0;
  if (windowed.empty()) return sliding_window;
  return layer >= 0 && layer < static_cast<int64_t>(windowed.size()) && windowed[layer]
             ? sliding_window
             : 0;
}

int64_t model_config::layer_chunk(int64_t layer) const {
  if (attn_chunk <= 0 || layer < 0 || layer >= static_cast<int64_t>(chunked.size())) return 0;
  return chunked[static_cast<size_t>(layer)] ? attn_chunk : 0;
}

bool model_config::layer_tempered(int64_t layer) const {
  if (attn_temp_floor <= 0) return false;
  if (tempered.empty()) return true;
  return layer >= 0 && layer < static_cast<int64_t>(tempered.size()) &&
         tempered[static_cast<size_t>(layer)];
}

bool model_config::layer_rope(int64_t layer) const {
  if (!rope_enabled) return false;
  return nope_layers.empty() || layer < 0 || layer >= static_cast<int64_t>(nope_layers.size()) ||
         !nope_layers[static_cast<size_t>(layer)];
}

int64_t model_config::layer_qk_rope(int64_t layer) const {
  const bool merged = layer >= 0 && layer < static_cast<int64_t>(nope_layers.size()) &&
                      nope_layers[static_cast<size_t>(layer)];
  return merged ? 0 : qk_rope;
}

int64_t model_config::kv_horizon() const {
  if (sliding_window <= 0) return 0;
  for (int64_t l = 0; l < n_layer; ++l) // compressed entries sit in the sequence's first blocks
    if (layer_compress(l) > 0) return 0;
  for (int64_t l = 0; l < n_layer; ++l)
    if (layer_window(l) == 0) return 0;
  return sliding_window;
}

double model_config::attention_scale() const {
  return attn_scale > 0 ? attn_scale : 1.0 / std::sqrt(static_cast<double>(D));
}

bool model_config::layer_linear(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(linear_layers.size()) && linear_layers[layer];
}

bool model_config::layer_has_ffn(int64_t layer) const {
  return layer < 0 || layer >= static_cast<int64_t>(layer_blocks.size()) ||
         (layer_blocks[layer] != 1 && layer_blocks[layer] != 3);
}

bool model_config::layer_has_mixer(int64_t layer) const {
  return layer < 0 || layer >= static_cast<int64_t>(layer_blocks.size()) ||
         (layer_blocks[layer] != 2 && layer_blocks[layer] != 3);
}

bool model_config::layer_linear_attn(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(linear_blocks.size()) &&
         (linear_blocks[static_cast<size_t>(layer)] & 1);
}

bool model_config::layer_linear_ffn(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(linear_blocks.size()) &&
         (linear_blocks[static_cast<size_t>(layer)] & 2);
}

bool model_config::has_recurrent_state() const {
  return ssm_parallel || zamba || inkling || zaya ||
         std::find(linear_layers.begin(), linear_layers.end(), 1) != linear_layers.end();
}

int64_t model_config::state_values_per_seq(int64_t begin, int64_t end, int tp) const {
  const int64_t t = std::max(tp, 1);
  // the convolutions' last inputs (q and k, or Mamba's B and C, whole on every rank where their
  // groups do not divide among the ranks), and the memory: [Hv, Dk, Dv], or Mamba's [H, P, N]
  const int64_t keys = ssm_dt_rank > 0 ? 0 : 2 * lin_k_heads * lin_k_dim; // (Mamba-1: x alone)
  const int64_t conv =
      (lin_conv - 1) * ((lin_k_heads % t ? keys * t : keys) + lin_v_heads * lin_v_dim);
  const int64_t delta =
      short_conv ? 0
      : mlstm // (the memory with the normaliser's column and the stabiliser's row)
          ? lin_v_heads * (lin_k_dim + 1) * (lin_v_dim + 1)
          : lin_v_heads * lin_k_dim * lin_v_dim;
  int64_t n = 0;
  for (int64_t l = begin; l < end; ++l)
    if (layer_linear(l) || ssm_parallel || zamba) n += (conv + delta) / t;
  if (zaya) // the q and k convolutions' last two inputs (twice each), the values' last input
    for (int64_t l = begin; l < end; ++l) {
      const int64_t kv = Hkv >= t ? Hkv / t : 1;
      n += 4 * (H / t + kv) * D + kv * D;
    }
  if (inkling) // k's and v's convolutions (a shard's KV heads), the two outputs' (whole)
    for (int64_t l = begin; l < end; ++l) {
      const int64_t kv = layer_kv_heads(l);
      n += (sconv - 1) * (2 * (kv >= t ? kv / t : 1) * layer_head_dim(l) + 2 * C);
    }
  return n;
}

bool model_config::layer_moe(int64_t layer) const {
  if (n_expert <= 0) return false;
  if (moe_layers.empty()) return true;
  return layer >= 0 && layer < static_cast<int64_t>(moe_layers.size()) && moe_layers[layer];
}

int64_t model_config::layer_weights(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(weight_layer.size())) return layer;
  return weight_layer[static_cast<size_t>(layer)];
}

int64_t model_config::layer_kv_source(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(kv_source.size())) return layer;
  return kv_source[static_cast<size_t>(layer)];
}

int64_t model_config::layer_reads_from(int64_t layer) const {
  int64_t from = layer_kv_source(layer);
  if (layer >= 0 && layer < static_cast<int64_t>(dsa_source.size()))
    from = std::min<int64_t>(from, dsa_source[static_cast<size_t>(layer)]);
  return from;
}

int64_t model_config::layer_ffn(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(ffn_widths.size()))
    return ffn_widths[static_cast<size_t>(layer)];
  return ffn_wide_shared && layer_kv_source(layer) != layer ? 2 * F : F;
}

int64_t model_config::layer_heads(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(heads_by_layer.size()))
    return heads_by_layer[static_cast<size_t>(layer)];
  return H;
}

bool model_config::layer_full_geometry(int64_t layer) const {
  return (D_full > 0 || Hkv_full > 0) && layer >= 0 && layer_window(layer) == 0;
}

int64_t model_config::layer_head_dim(int64_t layer) const {
  return layer_full_geometry(layer) && D_full > 0 ? D_full : D;
}

int64_t model_config::layer_kv_heads(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(kv_heads_by_layer.size()))
    return kv_heads_by_layer[static_cast<size_t>(layer)];
  return layer_full_geometry(layer) && Hkv_full > 0 ? Hkv_full : Hkv;
}

int64_t model_config::kv_values_per_token(int tp, int64_t layer) const {
  if (hc_mult > 0 &&
      kv_lora == 0) { // DeepSeek-V4: the shared key-value row; a compressed layer's kv and gate
                      // rows and entries (one per position's slot), and its indexer's
    const int64_t m = layer_compress(layer);
    if (m <= 0) return D;
    const bool sparse = layer_compress_sparse(layer);
    const int64_t W = sparse ? 2 * D : D, Wi = 2 * dsa_dim;
    return D + 2 * W + D + (sparse ? 2 * Wi + dsa_dim : 0);
  }
  if (kv_lora > 0) { // the latent, and the indexer's key where the layer runs an indexer
    const bool indexer =
        dsa_topk > 0 && (layer < 0 || layer >= static_cast<int64_t>(dsa_source.size()) ||
                         dsa_source[static_cast<size_t>(layer)] == layer);
    // (a layer reading an earlier layer's latent caches only its indexer's keys)
    const bool latent = layer < 0 || layer_kv_source(layer) == layer;
    // (GLM-5.3's pooled indexer: each token's key and gate logits, and a pool's key per slot)
    return (latent ? kv_lora + layer_qk_rope(layer) : 0) +
           (indexer ? (dsa_pool > 0 ? 3 * dsa_dim : dsa_dim) : 0);
  }
  const int64_t kv = layer_kv_heads(layer);
  const int64_t hkv = kv >= tp ? kv / std::max(tp, 1) : 1;
  // (MiniMax M3's indexed layers: the indexer's key too, whole on every rank)
  const bool indexed = layer < 0 ? !sparse_layers.empty() : layer_sparse_attn(layer);
  // (Doge's heads carry 8 more values: each key's dynamic mask score)
  return 2 * hkv * (layer_head_dim(layer) + (doge ? doge_extra : 0)) + (indexed ? sparse_dim : 0);
}

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

status model_config::validate() const {
  auto bad = [this](std::string_view what) {
    return make_error(errc::corrupt_file, "model config ({}): {}", arch, what);
  };
  if (n_layer <= 0 || C <= 0 || F <= 0 || H <= 0 || Hkv <= 0 || D <= 0 || V <= 0)
    return bad(
        fmt::format("dimensions must be positive (layers {}, C {}, F {}, H {}, Hkv {}, D {}, V {})",
                    n_layer, C, F, H, Hkv, D, V));
  // before anything derived from them (a rotary dimension of 10^12 / 32 overflowed an int)
  if (n_layer > 100000 || C > (1 << 20) || F > (1 << 22) || H > 4096 || Hkv > 4096 || D > 4096 ||
      V > (1 << 24) || F_expert > (1 << 22) || F_shared > (1 << 22))
    return bad(fmt::format("a dimension is implausibly large (layers {}, C {}, F {}, H {}, Hkv {}, "
                           "D {}, V {}, expert F {}, shared expert F {})",
                           n_layer, C, F, H, Hkv, D, V, F_expert, F_shared));
  if (H % Hkv) return bad(fmt::format("{} heads is not a multiple of {} KV heads", H, Hkv));
  if (!heads_by_layer.empty()) {
    if (static_cast<int64_t>(heads_by_layer.size()) != n_layer)
      return bad(fmt::format("heads given for {} of {} layers", heads_by_layer.size(), n_layer));
    for (size_t l = 0; l < heads_by_layer.size(); ++l)
      if (heads_by_layer[l] <= 0 || heads_by_layer[l] > H || heads_by_layer[l] % Hkv)
        return bad(fmt::format("layer {}: {} heads (a multiple of the {} KV heads, at most {})", l,
                               heads_by_layer[l], Hkv, H));
  }
  if (!kv_heads_by_layer.empty()) {
    if (static_cast<int64_t>(kv_heads_by_layer.size()) != n_layer)
      return bad(
          fmt::format("KV heads given for {} of {} layers", kv_heads_by_layer.size(), n_layer));
    for (size_t l = 0; l < kv_heads_by_layer.size(); ++l)
      if (kv_heads_by_layer[l] <= 0 || kv_heads_by_layer[l] > H || H % kv_heads_by_layer[l])
        return bad(fmt::format("layer {}: {} KV heads (a divisor of the {} heads)", l,
                               kv_heads_by_layer[l], H));
  }
  if (!linear_blocks.empty() && static_cast<int64_t>(linear_blocks.size()) != n_layer)
    return bad(
        fmt::format("{} per-layer linear maps for {} layers", linear_blocks.size(), n_layer));
  if (!(router_softcap >= 0) || !std::isfinite(router_softcap))
    return bad(fmt::format("router logit soft-capping {}", router_softcap));
  if (D_full < 0 || D_full > 4096 || Hkv_full < 0 || Hkv_full > 4096 ||
      (Hkv_full > 0 && H % Hkv_full))
    return bad(fmt::format("the full-attention layers' head dim {} and {} KV heads (of {} heads)",
                           D_full, Hkv_full, H));
  if (ple_dim < 0 || ple_dim > 65536 || ple_vocab < 0 || ple_vocab > (1 << 24) ||
      (ple_dim > 0 && ple_vocab <= 0))
    return bad(fmt::format("per-layer embeddings of {} values over a vocabulary of {}", ple_dim,
                           ple_vocab));
  if (!kv_source.empty() && static_cast<int64_t>(kv_source.size()) != n_layer)
    return bad(fmt::format("{} KV sources for {} layers", kv_source.size(), n_layer));
  for (size_t l = 0; l < kv_source.size(); ++l) // an earlier layer's (or its own), of its kind
    if (kv_source[l] < 0 || kv_source[l] > static_cast<int64_t>(l) ||
        layer_window(kv_source[l]) != layer_window(static_cast<int64_t>(l)) ||
        layer_kv_source(kv_source[l]) != kv_source[l])
      return bad(fmt::format("layer {} shares the KV cache of layer {}", l, kv_source[l]));
  if (!dsa_source.empty() && static_cast<int64_t>(dsa_source.size()) != n_layer)
    return bad(
        fmt::format("{} sparse-attention sources for {} layers", dsa_source.size(), n_layer));
  for (size_t l = 0; l < dsa_source.size(); ++l) // an earlier layer running its own indexer
    if (dsa_source[l] < 0 || dsa_source[l] > static_cast<int64_t>(l) ||
        dsa_source[static_cast<size_t>(dsa_source[l])] != dsa_source[l])
      return bad(fmt::format("layer {} reuses the selection of layer {}", l, dsa_source[l]));
  const int64_t Dmax = std::max(D, D_full); // (the full layers' rope rotates theirs)
  if (rope_enabled && (rope.rot_dim <= 0 || rope.rot_dim > Dmax || rope.rot_dim % 2))
    return bad(fmt::format("rotary dimension {} must be even and at most the head dim {}",
                           rope.rot_dim, Dmax));
  for (const rope_spec* r : {&rope, &rope_local})
    if (r->turning < 0 || r->turning > r->rot_dim / 2)
      return bad(fmt::format("{} of {} rotary pairs turning", r->turning, r->rot_dim / 2));
  if (!(norm_eps > 0) || norm_eps > 1)
    return bad(fmt::format("norm epsilon {} out of range", norm_eps));
  if (rope_enabled && !(rope.theta > 0)) return bad("rope theta must be positive");
  if (sliding_window < 0) return bad("sliding window must not be negative");
  if (n_expert > 0) {
    if (n_expert > (1 << 16)) // the largest published has 384; a bound keeps a hostile config cheap
      return bad(fmt::format("{} experts is more than Troupe accepts (65536)", n_expert));
    if (zero_experts < 0 || zero_experts > (1 << 16))
      return bad(fmt::format("{} zero-computation experts", zero_experts));
    if (n_expert_used <= 0 || n_expert_used > n_expert + zero_experts)
      return bad(
          fmt::format("{} experts used per token of {}", n_expert_used, n_expert + zero_experts));
    if (F_expert <= 0) return bad(fmt::format("expert FFN size {} must be positive", F_expert));
    if (F_shared < 0) return bad("shared expert FFN size must not be negative");
    if (n_group > 1 && (n_expert % n_group || topk_group <= 0 || topk_group > n_group ||
                        n_expert_used > topk_group * (n_expert / n_group)))
      return bad(fmt::format("expert groups {} / {} cannot route {} of {} experts", n_group,
                             topk_group, n_expert_used, n_expert));
    if (!moe_layers.empty() && static_cast<int64_t>(moe_layers.size()) != n_layer)
      return bad(
          fmt::format("{} per-layer expert flags for {} layers", moe_layers.size(), n_layer));
  }
  if (!weight_layer.empty()) {
    if (static_cast<int64_t>(weight_layer.size()) != n_layer)
      return bad(
          fmt::format("{} per-layer weight sources for {} layers", weight_layer.size(), n_layer));
    for (int64_t l = 0; l < n_layer; ++l) {
      const int64_t s = weight_layer[static_cast<size_t>(l)];
      if (s < 0 || s > l || layer_weights(s) != s)
        return bad(fmt::format("layer {} reads the weights of layer {}", l, s));
    }
  }
  if (loop_layers < 0 || loops < 0 || loop_begin < 0 || (loop_layers > 0) != (loops > 0) ||
      loop_begin + loop_layers * loops > n_layer)
    return bad(fmt::format("{} runs of {} layers from layer {} in {} layers", loops, loop_layers,
                           loop_begin, n_layer));
  if (kv_source_writes && !ngpt) return bad("layers that write another layer's KV cache");
  if (inkling && (sconv < 2 || rel_dim < 1 || rel_extent < 1 || sink_shared < 0))
    return bad(fmt::format("short convolutions of {} taps, relative states {} over {}", sconv,
                           rel_dim, rel_extent));
  if (zamba && (zamba_blocks < 1 || zamba_rank < 0 || !mamba))
    return bad(fmt::format("{} shared blocks with adapters of rank {}", zamba_blocks, zamba_rank));
  if (cycle_layers < 0 || cycles_low < 0 ||
      (cycle_layers > 0 && n_layer % (cycle_layers * (cycles_low + 1)) != 0))
    return bad(fmt::format("{} layers are not rounds of {} passes of {} layers", n_layer,
                           cycles_low + 1, cycle_layers));
  if (!sparse_layers.empty()) {
    if (static_cast<int64_t>(sparse_layers.size()) != n_layer)
      return bad(
          fmt::format("{} per-layer sparse flags for {} layers", sparse_layers.size(), n_layer));
    if (sparse_dim <= 0 || sparse_dim > 4096 || sparse_block <= 0 || sparse_block > (1 << 20) ||
        sparse_topk <= 0 || sparse_topk > (1 << 20) || sparse_local < 0 ||
        sparse_local > sparse_topk || sparse_topk * sparse_block > (1 << 24))
      return bad(fmt::format("block-sparse attention: index dim {}, blocks of {}, top {}, local {}",
                             sparse_dim, sparse_block, sparse_topk, sparse_local));
  }
  if (shortcut_moe && (n_expert <= 0 || n_layer % 2))
    return bad(fmt::format("the experts' shortcut pairs layers: {} layers, {} experts", n_layer,
                           n_expert));
  if (zero_experts > 0 && n_expert <= 0) return bad("zero-computation experts without experts");
  if (null_experts < 0 || (null_experts > 0 && (n_expert <= 0 || zero_experts > 0)))
    return bad(fmt::format("{} skip experts beside {} experts and {} identity ones", null_experts,
                           n_expert, zero_experts));
  if (zaya && (router_dim <= 0 || router_dim > (1 << 16) || n_expert <= 0 || (Hkv * D) % 2))
    return bad(fmt::format("ZAYA: router width {}, {} experts, {} KV heads of {} (the values "
                           "split in halves)",
                           router_dim, n_expert, Hkv, D));
  if (!(latent_scale > 0) || !std::isfinite(latent_scale))
    return bad(fmt::format("latent scale {}", latent_scale));
  if (!layer_blocks.empty() && static_cast<int64_t>(layer_blocks.size()) != n_layer)
    return bad(fmt::format("{} per-layer block kinds for {} layers", layer_blocks.size(), n_layer));
  if (has_recurrent_state() &&
      (ssm_parallel || zamba ||
       std::find(linear_layers.begin(), linear_layers.end(), 1) != linear_layers.end())) {
    // (the mixers' widths: the readers check what they read; this bounds what any leaves)
    // (widths and states far past any published model's, small enough that a state per
    // sequence over every layer stays a 64-bit count)
    if (lin_v_heads <= 0 || lin_v_dim <= 0 || lin_conv < 1 || lin_v_heads > 65536 ||
        lin_v_dim > 65536 || lin_k_heads > 65536 || lin_k_dim > 65536 || lin_conv > 64 ||
        lin_v_heads * lin_v_dim > (int64_t{1} << 22) || lin_k_heads * lin_k_dim > (1 << 20) ||
        lin_k_dim > 4096 || ssm_dt_rank < 0 || ssm_dt_rank > (1 << 16))
      return bad(fmt::format("linear attention dimensions out of range (heads {} / {}, dims {} / "
                             "{}, taps {}, dt rank {})",
                             lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, lin_conv,
                             ssm_dt_rank));
    if (mamba && (lin_k_heads <= 0 || lin_k_dim <= 0 || lin_v_heads % lin_k_heads))
      return bad(fmt::format("Mamba-2: {} heads in {} groups of {} state values", lin_v_heads,
                             lin_k_heads, lin_k_dim));
  }
  if (!nope_layers.empty() && static_cast<int64_t>(nope_layers.size()) != n_layer)
    return bad(fmt::format("{} per-layer rope flags for {} layers", nope_layers.size(), n_layer));
  if (!windowed.empty() && static_cast<int64_t>(windowed.size()) != n_layer)
    return bad(fmt::format("{} per-layer window flags for {} layers", windowed.size(), n_layer));
  if (attn_chunk < 0) return bad("attention chunk must not be negative");
  if (!chunked.empty() && static_cast<int64_t>(chunked.size()) != n_layer)
    return bad(fmt::format("{} per-layer chunk flags for {} layers", chunked.size(), n_layer));
  if (attn_temp_floor < 0 || attn_temp_offset < 0)
    return bad("attention temperature floor and offset must not be negative");
  if (!tempered.empty() && static_cast<int64_t>(tempered.size()) != n_layer)
    return bad(
        fmt::format("{} per-layer temperature flags for {} layers", tempered.size(), n_layer));
  return {};
}

expected<model_config> config_from_hf_json(const std::string& config_text,
                                           const std::string& gen_text, const std::string& where) {
  arch::json j = arch::json::parse(config_text, nullptr, false);
  if (j.is_discarded()) // Python's json.dumps writes Infinity and NaN bare (time_step_limit)
    j = arch::json::parse(arch::quote_nonfinite(config_text), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::corrupt_file, "{}: not a JSON object", where);
  model_config c;
  std::string name;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    name = j["architectures"][0].get<std::string>();
  const arch_spec* spec = find_arch_spec(name);
  const arch::family_entry* entry = nullptr;
  if (spec) {
    entry = arch::find_family(spec->family);
  } else {
    // a wrapper around a text model of another family (Mistral3ForConditionalGeneration around
    // Mistral 4's), or a class that runs another model type (transformers saves EXAONE 3 as
    // LlamaForCausalLM of model_type exaone), is listed as "architecture/model_type"; else the
    // architecture's own family; else, as transformers' auto classes pick by model type, a
    // family listed as "*/model_type" (InternLM3's remote-code class, run as Llama)
    const arch::json* typed = &j;
    if (const auto tc = j.find("text_config"); tc != j.end() && tc->is_object()) typed = &*tc;
    std::string type;
    if (typed->contains("model_type") && (*typed)["model_type"].is_string())
      type = (*typed)["model_type"].get<std::string>();
    if (!type.empty()) entry = arch::find_family_hf(name + "/" + type);
    if (!entry) entry = arch::find_family_hf(name);
    if (!entry && !type.empty()) entry = arch::find_family_hf("*/" + type);
  }
  if (!entry)
    return make_error(errc::unsupported,
                      "{}: architecture '{}' is not supported (supported: {}; an --arch-spec file "
                      "can define it from existing ops)",
                      where, name.empty() ? "(none)" : name, arch::known_architectures(false));
  c.arch = name;
  c.family = entry->name;
  // a multimodal checkpoint (...ForConditionalGeneration) nests its language model's keys
  // under text_config: those are the model Troupe runs (text in, text out); the wrapper's own
  // keys (vision_config, image token ids ...) are listed as unread
  if (name.ends_with("ForConditionalGeneration") && j.contains("text_config") &&
      j["text_config"].is_object()) {
    arch::json text = j["text_config"];
    for (auto& [k, v] : j.items())
      if (k != "text_config" && !text.contains(k)) text[k] = v;
    // the wrapper's tie_word_embeddings is the one transformers ties by (Mistral 3's text_config
    // may say otherwise)
    if (j.contains("tie_word_embeddings")) text["tie_word_embeddings"] = j["tie_word_embeddings"];
    j = std::move(text);
  }
  if (entry->hf_aliases) { // the config class's attribute_map
    const arch::json aliases = arch::json::parse(entry->hf_aliases, nullptr, false);
    if (!aliases.is_object())
      return make_error(errc::internal, "{}: family {}'s aliases are not a JSON object", where,
                        entry->name);
    for (auto& [from, to] : aliases.items())
      if (j.contains(from) && to.is_string() && !j.contains(to.get<std::string>())) {
        j[to.get<std::string>()] = j[from];
        j.erase(from);
      }
  }
  if (entry->hf_defaults) { // transformers' config class fills what the file leaves out
    const arch::json defaults = arch::json::parse(entry->hf_defaults, nullptr, false);
    if (!defaults.is_object())
      return make_error(errc::internal, "{}: family {}'s defaults are not a JSON object", where,
                        entry->name);
    for (auto& [k, v] : defaults.items())
      if (!j.contains(k)) j[k] = v;
  }
  arch::hf_cfg cfg(j, where);
  TROUPE_TRY(arch::read_common(cfg, c));
  TROUPE_TRY(entry->read_hf(cfg, c));
  arch::read_special_ids(cfg, gen_text, c);
  c.ignored_keys = cfg.unread();
  TROUPE_TRY(c.validate());
  return c;
}

namespace {
std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
} // namespace

expected<model_config> config_from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::exists(cfg)) return make_error(errc::not_found, "{}: no config.json", dir);
  const fs::path gen = fs::path(dir) / "generation_config.json";
  return config_from_hf_json(read_text(cfg), fs::exists(gen) ? read_text(gen) : "", cfg.string());
}

expected<model_config> config_from_gguf(const gguf_file& g) {
  model_config c;
  TROUPE_TRY_ASSIGN(name, g.get_string("general.architecture"));
  const arch::family_entry* entry = arch::find_family_gguf(name);
  if (!entry)
    return make_error(errc::unsupported, "{}: architecture '{}' is not supported (supported: {})",
                      g.file->path(), name, arch::known_architectures(true));
  c.arch = std::string(name);
  c.family = entry->name;
  arch::gguf_cfg cfg{g, std::string(name)};
  TROUPE_TRY(entry->read_gguf(cfg, c));
  if (!cfg.mistyped.empty())
    return make_error(errc::corrupt_file, "{}: {}.{} is not a number", g.file->path(), cfg.arch,
                      *cfg.mistyped.begin());
  for (size_t l = 0; l < cfg.no_kv.size(); ++l)
    if (cfg.no_kv[l] && !c.layer_linear(static_cast<int64_t>(l)))
      return make_error(errc::unsupported,
                        "{}: {}.attention.head_count_kv is 0 on layer {}, which {} builds with "
                        "attention",
                        g.file->path(), cfg.arch, l, c.family);
  // keys of the architecture the family never read: those known to change the math refuse
  // the load (a different model), the rest are listed once at load
  static constexpr std::string_view math_keys[] = {"attention.max_alibi_bias",
                                                   "attn_logit_softcapping",
                                                   "final_logit_softcapping",
                                                   "attention.clamp_kqv",
                                                   "attention.scale",
                                                   "attention.temperature_scale",
                                                   "attention.temperature_length",
                                                   "embedding_scale",
                                                   "residual_scale",
                                                   "logit_scale",
                                                   "expert_count",
                                                   "expert_used_count",
                                                   "expert_shared_count",
                                                   "attention.sliding_window",
                                                   "attention.sliding_window_pattern",
                                                   "rope.freq_base_swa",
                                                   "attention.q_lora_rank",
                                                   "attention.kv_lora_rank",
                                                   "use_parallel_residual",
                                                   "rope.dimension_sections",
                                                   "full_attention_interval"};
  for (const std::string& k : cfg.unread()) {
    bool math = k.starts_with("rope.scaling.") || k.starts_with("ssm.") || k.starts_with("kda.") ||
                k.starts_with("expert_") || k.starts_with("moe_");
    for (std::string_view m : math_keys) math = math || k == m;
    const gguf_value* v = g.get(cfg.arch + "." + k);
    const bool zero = v && (v->is_integer() || v->is_float()) && v->f == 0;
    if (math && !zero)
      return make_error(errc::unsupported,
                        "{}: {}.{} changes the model and is not supported for '{}'", g.file->path(),
                        cfg.arch, k, cfg.arch);
    if (!math) c.ignored_keys.push_back(cfg.arch + "." + k);
  }
  TROUPE_TRY(c.validate());
  return c;
}

} // namespace troupe
