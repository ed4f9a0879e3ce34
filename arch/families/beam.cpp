// beam.cpp (arch/families): Beam (BeamForCausalLM). Qwen3-MoE's attention (q and k RMS-normed
// per head) on sliding layers with RoPE and full layers without (every sixth and the last, by
// default): on those, each query times (1 + (p + 1) / 2048) ^ 0.1 (a scalable softmax, as
// transformers computes it); the attention's output times sigmoid(gate_proj x + a bias per head),
// per value. Gemma's sandwich of norms, each residual add depth-scaled (the k-th: x sqrt((k - 1)
// / k) + y / sqrt(k)). Dense SwiGLU layers (the first three by default), then sigmoid experts with
// a correction bias chosen among the best topk_group of n_group groups, renormalised, times
// routed_scaling_factor. The logits soft-capped (final_logit_softcapping).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_beam_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_qk_normed_attention(j, c, 1e-6));
  if (c.act != act_kind::silu) return j.unsupported("hidden_act other than silu");
  c.norms = norm_place::sandwich;
  c.depth_scaled_residual = true;
  c.attn_value_gate = c.attn_gate_bias = true;
  // layer kinds: sliding ones with RoPE, full ones by rope_parameters' full_attention (null:
  // none, and the queries' scalable softmax)
  TROUPE_TRY_ASSIGN(sw,
                    j.raw("sliding_window").is_null() ? int64_t{0} : j.i("sliding_window", 512));
  const int64_t L = c.n_layer;
  TROUPE_TRY(read_layer_types(j, c, sw, [L](int64_t l) { return l != L - 1 && (l + 1) % 6 != 0; }));
  const json& rp = j.raw("rope_parameters");
  const json slide_default{{"rope_type", "default"}, {"rope_theta", 10000.0}};
  const bool nope_full = rp.is_null() || (rp.is_object() && rp.contains("full_attention") &&
                                          rp["full_attention"].is_null());
  if (nope_full) {
    const json slide = rp.is_object() && rp.contains("sliding_attention") ? rp["sliding_attention"]
                                                                          : slide_default;
    if (rp.is_object())
      for (auto& [k, v] : rp.items())
        if (k != "full_attention" && k != "sliding_attention")
          return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
    TROUPE_TRY(read_rope_dict(slide, c, c.rope, 10000.0, j.where()));
    rope_on_windowed_only(c);
    c.nope_q_base = 2048, c.nope_q_power = 0.1;
  } else {
    TROUPE_TRY(read_rope_by_layer_type(j, c, slide_default, slide_default));
  }
  // experts
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 2560));
  TROUPE_TRY_ASSIGN(ng, j.i("n_group", 1));
  TROUPE_TRY_ASSIGN(tg, j.i("topk_group", 1));
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 2.5));
  if (fe <= 0) return j.bad(fmt::format("moe_intermediate_size {}", fe));
  c.F_expert = fe, c.n_group = ng, c.topk_group = tg, c.expert_scale = scale;
  c.router_sigmoid = c.router_bias = true;
  c.norm_topk = j.b("norm_topk_prob", true);
  c.moe_layers.assign(static_cast<size_t>(L), 1);
  TROUPE_TRY_ASSIGN(listed,
                    read_layer_kinds(j, "mlp_layer_types", L, "sparse", "dense", c.moe_layers));
  if (!listed)
    for (int64_t l = 0; l < std::min<int64_t>(3, L); ++l) c.moe_layers[static_cast<size_t>(l)] = 0;
  TROUPE_TRY_ASSIGN(cap, j.f("final_logit_softcapping", 30.0));
  if (cap < 0) return j.bad(fmt::format("final_logit_softcapping {}", cap));
  c.final_softcap = cap;
  if (j.b("mlp_bias", false)) return j.unsupported("mlp_bias true");
  return {};
}

status build_beam(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = gemma_sandwich_hf(c);
  const std::string a = "model.layers.{}.self_attn.", f = "model.layers.{}.mlp.";
  n.mla_gate = a + "gate_proj.weight";
  if (c.attn_gate_bias) n.attn_gate_bias = a + "gate_bias";
  n.moe_router = f + "gate.weight", n.moe_router_bias = f + "gate.e_score_correction_bias";
  hf_expert_names(n, f);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
