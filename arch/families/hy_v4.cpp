// hy_v4.cpp (arch/families): Tencent HY-V4 (HYV4ForCausalLM, Hy4-preview). GLM-5's latent
// attention (q and kv bottlenecks, RoPE on adjacent pairs) over the positions a lightning indexer
// picks (its RoPE on the last qk_rope dims of its heads; "shared" layers reuse the last full
// layer's pick), with a learned sink per head and a sigmoid gate on every value; independent
// hyper-connections over hc_mult streams (each sublayer reads the streams' mix by `pre` and adds
// its output times `post` to each stream, no mixing matrix); DeepSeek-V3's experts (sigmoid
// scores with a correction bias) whose routed experts' SwiGLU is clamped, after dense layers.
// config.json and tensor names as transformers 5 writes them (hc_pre.hc_attn_layer.hc_fn,
// self_attn.linear_gate, learnable_sink_param, the experts packed gate_up_proj / down_proj).
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_hy_v4_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5, false)); // (head_dim: the rotary dims)
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  for (const char* k : {"qk_head_dim", "num_key_value_heads", "router_aux_loss_coef",
                        "output_router_logits", "learnable_sink_init"})
    j.mark(k); // (derived, unused by MLA, training only, or an initial value)
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (c.act != act_kind::silu) return j.unsupported("hidden_act other than silu");
  TROUPE_TRY(read_mla_dims(j, c, {-1, -1, -1, -1, -1}));
  const int64_t rope = c.qk_rope;
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.rope.rot_dim = static_cast<int>(rope);
  c.rope.layout = rope_layout::interleaved; // (GLM-5's adjacent pairs)
  mla_attention_scale(c);
  c.attn_sinks = true;
  c.attn_value_gate = true;
  TROUPE_TRY_ASSIGN(topk, j.i("index_topk", 2048));
  TROUPE_TRY_ASSIGN(idim, j.i("index_head_dim", 128));
  TROUPE_TRY_ASSIGN(iheads, j.i("index_n_heads", 16));
  if (topk <= 0 || topk > (1 << 24) || idim < rope || idim > 4096 || iheads <= 0 || iheads > 4096)
    return j.bad(
        fmt::format("index_topk {}, index_head_dim {}, index_n_heads {}", topk, idim, iheads));
  c.dsa_topk = topk, c.dsa_dim = idim, c.dsa_heads = iheads;
  c.dsa_rope_interleaved = true;
  c.dsa_rope_last = true;      // (the indexer's heads rotate their last qk_rope dims)
  c.dsa_norm_eps = c.norm_eps; // (its keys' LayerNorm at rms_norm_eps)
  TROUPE_TRY(read_indexed_layers(j, c));
  TROUPE_TRY(read_indexer_types(j, c, {}));
  // experts after dense layers; only the routed ones clamped
  TROUPE_TRY(read_v3_experts(j, c, 2.827, 1));
  c.swiglu_clamp_experts_only = true;
  // independent hyper-connections
  c.hc_independent = true;
  TROUPE_TRY(read_hyper_connections(j, c));
  return {};
}

status build_hy_v4(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_mla_layout();
  const std::string L = "model.layers.{}.", a = L + "self_attn.", f = L + "mlp.";
  n.w_gate = f + "linear_gate.weight";
  n.dsa_wq = a + "indexer.wq_b.weight", n.dsa_wk = a + "indexer.wk.weight";
  n.dsa_k_norm = a + "indexer.k_norm.weight", n.dsa_k_norm_b = a + "indexer.k_norm.bias";
  n.dsa_w = a + "indexer.weights_proj.weight";
  n.attn_sinks = a + "learnable_sink_param";
  n.mla_gate = a + "linear_gate.weight";
  n.hc_attn_fn = L + "hc_pre.hc_attn_layer.hc_fn",
  n.hc_attn_base = L + "hc_pre.hc_attn_layer.hc_base";
  n.hc_attn_scale = L + "hc_pre.hc_attn_layer.hc_scale";
  n.hc_ffn_fn = L + "hc_pre.hc_mlp_layer.hc_fn", n.hc_ffn_base = L + "hc_pre.hc_mlp_layer.hc_base";
  n.hc_ffn_scale = L + "hc_pre.hc_mlp_layer.hc_scale";
  n.hc_head_fn = "model.hc_pre.hc_head.hc_head_fn",
  n.hc_head_base = "model.hc_pre.hc_head.hc_head_base";
  n.hc_head_scale = "model.hc_pre.hc_head.hc_head_scale";
  n.moe_router = f + "gate.weight", n.moe_router_bias = f + "gate.e_score_correction_bias";
  n.moe_gate_up = f + "experts.gate_up_proj", n.moe_down = f + "experts.down_proj";
  n.shexp_gate = f + "shared_experts.linear_gate.weight";
  n.shexp_up = f + "shared_experts.up_proj.weight";
  n.shexp_down = f + "shared_experts.down_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
