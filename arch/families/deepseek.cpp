// deepseek.cpp (arch/families): DeepSeek-V3 (and Kimi K2 and Moonlight, which publish the same
// DeepseekV3ForCausalLM) and DeepSeek-V2 (V2, V2-Lite, V2.5: softmax scores, top-k by
// topk_method greedy or group_limited_greedy, no renormalisation): latent attention (MLA: an
// optional q bottleneck, one latent of kv_lora values plus qk_rope shared positional values per
// token, which is what the KV cache holds; the decoder's mla() builds it absorbed), and mixtures of
// experts with sigmoid scores, a correction bias for the choice, group-limited top-k (n_group,
// topk_group), norm_topk_prob, routed_scaling_factor and shared experts, after
// first_k_dense_replace dense layers. GGUF (llama.cpp's deepseek2, with kv_b split into attn_k_b /
// attn_v_b) is not read yet; such a file is refused as an unknown architecture.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_deepseek_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  j.mark("pretraining_tp");
  j.mark("num_nextn_predict_layers"); // multi-token prediction heads: not used to generate
  j.mark("qk_head_dim");              // derived: qk_nope_head_dim + qk_rope_head_dim
  j.mark("num_key_value_heads");      // MLA: every head reads the one latent
  TROUPE_TRY_ASSIGN(ql, j.i("q_lora_rank", 0));
  TROUPE_TRY_ASSIGN(kvl, j.req("kv_lora_rank"));
  TROUPE_TRY_ASSIGN(nope, j.req("qk_nope_head_dim"));
  TROUPE_TRY_ASSIGN(rope, j.req("qk_rope_head_dim"));
  TROUPE_TRY_ASSIGN(vh, j.req("v_head_dim"));
  c.q_lora = ql, c.kv_lora = kvl, c.qk_nope = nope, c.qk_rope = rope, c.v_head = vh;
  c.Hkv = 1;
  c.D = kvl + rope; // the cached row: latent and positional part
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.rope.rot_dim = rope;
  // V3: interleaved pairs unless rope_interleave is false; V2 rotates pairs (complex) always
  c.rope.layout = c.family == "deepseek_v2" || j.b("rope_interleave", true)
                      ? rope_layout::interleaved
                      : rope_layout::neox;
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(nope + rope));
  // YaRN with mscale_all_dim also scales the softmax by mscale(factor, mscale_all_dim)^2
  // (transformers' yarn_apply_mscale; the rotation's own attention factor is the rope's)
  if (c.rope.scaling == rope_scaling::yarn && c.rope.mscale_all_dim != 0 && c.rope.factor > 1) {
    const double m = 0.1 * c.rope.mscale_all_dim * std::log(c.rope.factor) + 1.0;
    c.attn_scale *= m * m;
  }
  // experts
  j.mark("router_aux_loss_coef");
  j.mark("output_router_logits");
  TROUPE_TRY_ASSIGN(e, j.has("n_routed_experts") ? j.req("n_routed_experts")
                                                 : j.req("num_local_experts"));
  c.n_expert = e;
  TROUPE_TRY_ASSIGN(k, j.req("num_experts_per_tok"));
  c.n_expert_used = k;
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  c.F_expert = fe;
  TROUPE_TRY_ASSIGN(shared, j.i("n_shared_experts", 0));
  c.F_shared = shared * fe;
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 1.0));
  c.expert_scale = scale;
  TROUPE_TRY_ASSIGN(ng, j.i("n_group", 1));
  TROUPE_TRY_ASSIGN(tg, j.i("topk_group", 1));
  c.n_group = ng, c.topk_group = tg;
  j.mark("scoring_func");
  if (c.family == "deepseek_v3") {
    // transformers' DeepseekV3TopkRouter: sigmoid scores, the correction bias, groups by their
    // two best, whatever scoring_func / topk_method say
    c.norm_topk = j.b("norm_topk_prob", true);
    c.router_sigmoid = true;
    c.router_bias = true;
    j.mark("topk_method");
  } else { // DeepseekV2TopkRouter: softmax, no renormalisation (norm_topk_prob unread)
    j.mark("norm_topk_prob");
    if (j.b("mlp_bias", false)) return j.unsupported("mlp_bias true");
    const std::string method = j.s("topk_method", "greedy");
    if (method == "greedy") {
      c.n_group = 0, c.topk_group = 0;
    } else if (method == "group_limited_greedy") {
      c.group_max = true;
    } else {
      return j.unsupported(
          fmt::format("topk_method '{}' (greedy, group_limited_greedy are)", method));
    }
    j.mark("rope_interleave");
  }
  if (c.n_group > 1 && (e % ng || tg <= 0 || tg > ng || k > tg * (e / ng)))
    return j.bad(
        fmt::format("n_group {} / topk_group {} cannot route {} of {} experts", ng, tg, k, e));
  TROUPE_TRY_ASSIGN(dense, j.i("first_k_dense_replace", 0));
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = dense; l < c.n_layer; ++l) c.moe_layers[static_cast<size_t>(l)] = 1;
  return {};
}

status build_deepseek(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string a = "model.layers.{}.self_attn.", p = "model.layers.{}.mlp.";
  n.wq.clear(), n.wk.clear(), n.wv.clear();
  n.mla_q = a + "q_proj.weight", n.mla_q_a = a + "q_a_proj.weight";
  n.mla_q_a_norm = a + "q_a_layernorm.weight", n.mla_q_b = a + "q_b_proj.weight";
  n.mla_kv_a = a + "kv_a_proj_with_mqa.weight", n.mla_kv_a_norm = a + "kv_a_layernorm.weight";
  n.mla_kv_b = a + "kv_b_proj.weight";
  n.moe_router = p + "gate.weight", n.moe_router_bias = p + "gate.e_score_correction_bias";
  n.moe_gate = p + "experts.{e}.gate_proj.weight", n.moe_up = p + "experts.{e}.up_proj.weight";
  n.moe_down = p + "experts.{e}.down_proj.weight";
  n.shexp_gate = p + "shared_experts.gate_proj.weight";
  n.shexp_up = p + "shared_experts.up_proj.weight";
  n.shexp_down = p + "shared_experts.down_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
