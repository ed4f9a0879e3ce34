// minimax.cpp (arch/families): MiniMax-M2 (MiniMaxM2ForCausalLM): a pre-norm decoder with GQA
// whose q and k are RMS-normed over the whole projection (every head together: qk_norm_type
// "per_layer"; a TP shard sums its squares with the others'), RoPE on the first rotary_dim
// dimensions of each head (rotate_half), and on every layer a mixture of experts with
// DeepSeek-V3's choice (sigmoid scores plus a correction bias, e_score_correction_bias, for the
// choice; the chosen scores renormalised) over Mixtral-named experts (block_sparse_moe.experts.
// {e}.w1 / w2 / w3). As published the weights are E4M3 in 128 x 128 tiles (quantization_config
// fp8), repacked at load as DeepSeek-V3's are. The published config still carries the remote
// code's switches; any that would make another model than transformers computes refuses by name
// (attn_type_list with a linear-attention layer, shared experts, another scoring function, the
// norm per head). The multi-token-prediction modules (use_mtp) are not used to generate.
// From GGUF as llama.cpp's minimax-m2 reads it (read_minimax_m2_gguf).
// Tests: tests/exec/forward_test.cpp (SyntheticArch minimax_m2*, MiniMaxM2.*), pipeline_test.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_minimax_m2_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  // the remote code's switches (transformers' model is what they say as published)
  if (!j.b("use_qk_norm", true)) return j.unsupported("'use_qk_norm': false is not supported");
  if (const std::string t = j.s("qk_norm_type", "per_layer"); t != "per_layer")
    return j.unsupported(fmt::format("'qk_norm_type' '{}' (per_layer is)", t));
  c.qk_norm = qk_norm_kind::full;
  if (const json& types = j.raw("attn_type_list"); !types.is_null()) {
    if (!types.is_array()) return j.bad("'attn_type_list' must be a list");
    for (const auto& t : types)
      if (t != 1)
        return j.unsupported("'attn_type_list' with a linear (lightning) attention layer: only "
                             "full attention (1) is");
  }
  if (const std::string f = j.s("scoring_func", "sigmoid"); f != "sigmoid")
    return j.unsupported(fmt::format("'scoring_func' '{}' (sigmoid is)", f));
  if (!j.b("use_routing_bias", true))
    return j.unsupported("'use_routing_bias': false is not supported");
  TROUPE_TRY_ASSIGN(shared, j.i("shared_intermediate_size", 0));
  if (shared != 0) return j.unsupported("'shared_intermediate_size' other than 0");
  for (const char* k : {"use_mtp", "num_mtp_modules", "mtp_transformer_layers"})
    j.mark(k); // multi-token prediction: not used to generate
  // rope: partial through the legacy rotary_dim (transformers' MiniMaxM2Config converts it)
  TROUPE_TRY_ASSIGN(rotary_dim, j.i("rotary_dim", 0));
  TROUPE_TRY(
      read_rope(j, c, 5000000.0, rotary_dim > 0 ? static_cast<double>(rotary_dim) / c.D : 1.0));
  if (const json& sw = j.raw("sliding_window"); !sw.is_null())
    return j.unsupported("'sliding_window' (MiniMax-M2 attends to the whole context)");
  // experts: every layer, DeepSeek-V3's choice without groups or shared experts
  TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "n_routed_experts"));
  j.mark("router_jitter_noise");
  c.F_expert = c.F;
  c.router_sigmoid = true;
  c.router_bias = true;
  c.norm_topk = true;
  return {};
}

// GGUF (minimax-m2, as llama.cpp reads it): q / k as published (NEOX RoPE over
// rope.dimension_count dims), their norms over the whole projection, the experts merged, sigmoid
// gating (expert_gating_func; sigmoid where absent), the exp_probs_b correction bias, and the
// chosen weights renormalised as llama.cpp's graph for this architecture always does.
status read_minimax_m2_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope.layout = rope_layout::neox;
  c.qk_norm = qk_norm_kind::full;
  TROUPE_TRY(read_expert_counts(g, c));
  if (c.n_expert <= 0) return g.unsupported("minimax-m2 without experts");
  TROUPE_TRY_ASSIGN(fe, g.req("expert_feed_forward_length"));
  c.F_expert = fe;
  if (g.i("expert_gating_func", 2) != 2) // llama.cpp's 2: sigmoid
    return g.unsupported("expert_gating_func other than sigmoid");
  (void)g.key("expert_weights_norm"); // renormalised whatever it says, as llama.cpp does
  c.router_sigmoid = true;
  c.router_bias = g.has_tensor("blk.0.exp_probs_b.bias");
  c.norm_topk = true;
  return {};
}

status build_minimax_m2(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format == "gguf") {
    decoder_names n = gguf_layout(m);
    routed_expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  expert_names(m, n, false); // (Mixtral's)
  n.moe_router_bias = "model.layers.{}.block_sparse_moe.e_score_correction_bias";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
