// bailing_hybrid.cpp (arch/families): inclusionAI's Ling 3 (BailingHybridForCausalLM:
// Ling-3.0-Flash). Kimi-Linear's shape: Kimi Delta Attention layers, the last of every
// layer_group_size layers DeepSeek-V3's latent attention instead. What differs: the KDA's decay
// input and output gate are one full-rank projection each (f_proj, g_proj, not Kimi's low-rank
// pairs), its decay is the bounded "safe gate" (kda_lower_bound sigmoid(exp(A_log) x), as
// GLM-5.3's), the latent attention has RoPE (interleaved pairs), no q LoRA by default, and each
// head's output times sigmoid(g_proj x); after first_k_dense_replace dense layers, DeepSeek-V3's
// group-limited sigmoid experts and a shared expert, their SwiGLU clipped after the activation at a
// limit per layer (min(silu(g), L) clamp(u, -L, L): expert_swiglu_limit_list for the routed
// experts, share_expert_swiglu_limit_list for the shared one; 0 none; the dense layers never).
// Tensor names as published (word_embeddings, attention.dense, mlp.gate.expert_bias, the experts
// one by one); the multi-token-prediction layers past num_hidden_layers are not run.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_bailing_hybrid_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6, false)); // (head_dim: the KDA's, below)
  TROUPE_TRY_ASSIGN(ctx, j.i("model_max_length", 262144));
  c.ctx = ctx;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  for (const char* k :
       {"pretraining_tp", "qk_head_dim", "num_key_value_heads", "num_nextn_predict_layers",
        "mtp_loss_scaling_factor", "router_aux_loss_coef", "output_router_logits"})
    j.mark(k); // (derived, unused by MLA, the MTP layers not run, or training only)
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (c.act != act_kind::silu) return j.unsupported("hidden_act other than silu");
  // latent attention with interleaved RoPE and a gate per head
  TROUPE_TRY(read_mla_dims(j, c, {0, 512, 128, 64, 128}));
  TROUPE_TRY(read_rope(j, c, 6000000.0, 1.0));
  c.rope.rot_dim = static_cast<int>(c.qk_rope);
  c.rope.layout = rope_layout::interleaved;
  mla_attention_scale(c);
  c.attn_head_gate = true;
  // the KDA layers: linear_* where given, else head_dim, the heads, short_conv_kernel_size (as
  // the config class derives them)
  TROUPE_TRY_ASSIGN(hd, j.i("head_dim", 128));
  TROUPE_TRY_ASSIGN(conv, j.i("short_conv_kernel_size", 4));
  TROUPE_TRY(read_kda_dims(j, c, c.H));
  if (!j.has("linear_head_dim")) c.lin_k_dim = c.lin_v_dim = hd;
  if (!j.has("linear_conv_kernel_dim")) c.lin_conv = conv;
  if (c.lin_v_dim <= 0 || c.lin_v_dim > 1024 || c.lin_conv < 2 || c.lin_conv > 64)
    return j.bad(fmt::format("KDA heads of {} with a convolution of {}", c.lin_v_dim, c.lin_conv));
  c.kda_full_gates = true;
  if (j.b("kda_safe_gate", true)) {
    TROUPE_TRY_ASSIGN(bound, j.f("kda_lower_bound", -5.0));
    if (!(bound < 0))
      return j.unsupported(fmt::format("kda_lower_bound {} (a negative bound is)", bound));
    c.kda_bound = bound;
  } else {
    j.mark("kda_lower_bound"); // (the unbounded decay: -exp(A_log) softplus(x))
  }
  const int64_t L = c.n_layer;
  c.linear_layers.assign(static_cast<size_t>(L), 0);
  TROUPE_TRY_ASSIGN(typed, read_layer_kinds(j, "layer_types", L, "linear_attention",
                                            "full_attention", c.linear_layers));
  TROUPE_TRY_ASSIGN(group, j.i("layer_group_size", 6));
  if (typed) {
    j.mark("layer_group_size");
  } else {
    if (group <= 0) return j.bad(fmt::format("layer_group_size {}", group));
    for (int64_t l = 0; l < L; ++l) c.linear_layers[static_cast<size_t>(l)] = (l + 1) % group != 0;
  }
  // DeepSeek-V3's experts (the config's own key names: the class's attribute_map)
  TROUPE_TRY_ASSIGN(E, j.i("num_experts", 512));
  TROUPE_TRY_ASSIGN(k, j.i("num_experts_per_token", 8));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 768));
  TROUPE_TRY_ASSIGN(shared, j.i("num_shared_experts", 1));
  TROUPE_TRY_ASSIGN(ng, j.i("num_expert_group", 8));
  TROUPE_TRY_ASSIGN(tg, j.i("topk_group", 4));
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 2.5));
  if (fe <= 0 || shared < 0)
    return j.bad(fmt::format("moe_intermediate_size {}, num_shared_experts {}", fe, shared));
  c.n_expert = E, c.n_expert_used = k, c.F_expert = fe, c.F_shared = shared * fe;
  c.n_group = ng, c.topk_group = tg, c.expert_scale = scale;
  c.norm_topk = j.b("moe_renormalize", true);
  c.router_sigmoid = c.router_bias = true;
  TROUPE_TRY(read_dense_then_sparse(j, c, 2));
  TROUPE_TRY(read_layer_limits(j, "expert_swiglu_limit_list", L, 0, false, c.swiglu_limits));
  TROUPE_TRY(
      read_layer_limits(j, "share_expert_swiglu_limit_list", L, 0, false, c.swiglu_limits_shared));
  c.swiglu_clamp = c.swiglu_after_act = true; // (a layer's 0: no clip)
  return {};
}

status build_bailing_hybrid(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  const std::string a = "model.layers.{}.attention.", f = "model.layers.{}.mlp.";
  decoder_names n = hf_mla_layout(a);
  n.tok_embd = "model.word_embeddings.weight";
  n.wo = a + "dense.weight";
  n.attn_head_gate = a + "g_proj.weight";
  n.kda_q = a + "q_proj.weight", n.kda_k = a + "k_proj.weight", n.kda_v = a + "v_proj.weight";
  n.kda_conv_q = a + "q_conv1d.weight", n.kda_conv_k = a + "k_conv1d.weight";
  n.kda_conv_v = a + "v_conv1d.weight";
  n.kda_f = a + "f_proj.weight", n.kda_g = a + "g_proj.weight";
  n.lin_dt_bias = a + "dt_bias", n.lin_A_log = a + "A_log", n.lin_b = a + "b_proj.weight";
  n.lin_norm = a + "o_norm.weight", n.lin_out = a + "dense.weight";
  n.moe_router = f + "gate.weight", n.moe_router_bias = f + "gate.expert_bias";
  hf_expert_names(n, f);
  hf_shared_expert_names(n, f);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
