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

namespace {

// a per-layer 0 / 1 list (the legacy sparse_attention_freq, moe_layer_freq)
status read_flags(hf_cfg& j, const json& v, const char* key, int64_t L, std::vector<uint8_t>& out) {
  if (!v.is_array() || static_cast<int64_t>(v.size()) != L)
    return j.bad(fmt::format("'{}' must list {} layers", key, L));
  out.assign(static_cast<size_t>(L), 0);
  for (size_t l = 0; l < v.size(); ++l) {
    if (!v[l].is_number_integer() && !v[l].is_boolean())
      return j.bad(fmt::format("'{}' holds {}", key, v[l].dump()));
    out[l] = v[l].is_boolean() ? v[l].get<bool>() : v[l].get<int64_t>() != 0;
  }
  return {};
}

} // namespace

status read_minimax_m3_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  const int64_t L = c.n_layer;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true");
  // Gemma's (1 + w) RMS norms everywhere, q and k normed per head
  c.norm_add = 1;
  c.qk_norm = qk_norm_kind::head;
  j.mark("hidden_act"); // ("swigluoai": the clamped SwiGLU below, as transformers computes it)
  c.act = act_kind::silu;
  // RoPE over rope_parameters' partial_rotary_factor of each head (transformers does not read
  // rotary_dim; where a config gives only rotary_dim, the two would disagree: refused)
  TROUPE_TRY_ASSIGN(rotary_dim, j.i("rotary_dim", 0));
  TROUPE_TRY(read_rope(j, c, 5000000.0, 1.0));
  if (rotary_dim > 0 && rotary_dim != c.rope.rot_dim)
    return j.unsupported(fmt::format("rotary_dim {} where rope_parameters rotate {} of {} dims "
                                     "(transformers reads partial_rotary_factor only)",
                                     rotary_dim, c.rope.rot_dim, c.D));
  // block-sparse attention on the layers layer_types (or the legacy sparse_attention_config)
  // marks
  const json& legacy = j.raw("sparse_attention_config");
  auto pick = [&](const char* flat, const char* old, int64_t fallback) -> expected<int64_t> {
    if (legacy.is_object() && legacy.contains(old) && !j.has(flat)) {
      const json& v = legacy[old];
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        return j.bad(fmt::format("sparse_attention_config.{} {}", old, v.dump()));
      return v.get<int64_t>();
    }
    return j.i(flat, fallback);
  };
  TROUPE_TRY_ASSIGN(heads, pick("index_n_heads", "sparse_num_index_heads", 4));
  TROUPE_TRY_ASSIGN(dim, pick("index_head_dim", "sparse_index_dim", 128));
  TROUPE_TRY_ASSIGN(block, pick("index_block_size", "sparse_block_size", 128));
  TROUPE_TRY_ASSIGN(topk, pick("index_topk_blocks", "sparse_topk_blocks", 16));
  TROUPE_TRY_ASSIGN(local, pick("index_local_blocks", "sparse_local_block", 1));
  c.sparse_layers.assign(static_cast<size_t>(L), 0);
  TROUPE_TRY_ASSIGN(typed, read_layer_kinds(j, "layer_types", L, "minimax_m3_sparse",
                                            "full_attention", c.sparse_layers));
  if (!typed && legacy.is_object() && legacy.contains("sparse_attention_freq"))
    TROUPE_TRY(read_flags(j, legacy["sparse_attention_freq"], "sparse_attention_freq", L,
                          c.sparse_layers));
  bool any = false;
  for (uint8_t s : c.sparse_layers) any = any || s;
  if (any) {
    if (heads != c.Hkv)
      return j.unsupported(fmt::format("index_n_heads {} (the indexer picks for each of the {} KV "
                                       "heads: as many)",
                                       heads, c.Hkv));
    c.sparse_dim = dim, c.sparse_block = block, c.sparse_topk = topk, c.sparse_local = local;
  } else {
    c.sparse_layers.clear();
  }
  // experts: sigmoid scores + correction bias, renormalised, times routed_scaling_factor; a
  // shared expert; dense layers where mlp_layer_types (or moe_layer_freq) says
  TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "n_routed_experts"));
  j.mark("router_jitter_noise");
  TROUPE_TRY_ASSIGN(dense, j.i("dense_intermediate_size", 12288));
  TROUPE_TRY_ASSIGN(shared, j.i("shared_intermediate_size", 3072));
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 2.0));
  c.F_expert = c.F, c.F = dense, c.F_shared = shared, c.expert_scale = scale;
  c.router_sigmoid = c.router_bias = c.norm_topk = true;
  c.moe_layers.assign(static_cast<size_t>(L), 1);
  TROUPE_TRY_ASSIGN(listed,
                    read_layer_kinds(j, "mlp_layer_types", L, "sparse", "dense", c.moe_layers));
  if (const json& freq = j.raw("moe_layer_freq"); !listed && !freq.is_null())
    TROUPE_TRY(read_flags(j, freq, "moe_layer_freq", L, c.moe_layers));
  // the SwiGLU of experts, shared experts and dense MLPs alike: GPT-OSS's clamp (gate and up
  // apart, not interleaved)
  TROUPE_TRY_ASSIGN(alpha, j.f("swiglu_alpha", 1.702));
  TROUPE_TRY_ASSIGN(limit, j.f("swiglu_limit", 7.0));
  if (!(limit > 0) || !(alpha > 0))
    return j.unsupported(
        fmt::format("swiglu_limit {}, swiglu_alpha {} (positive are)", limit, alpha));
  c.swiglu_alpha = alpha, c.swiglu_limit = limit, c.swiglu_dense = true;
  if (const json& sw = j.raw("sliding_window"); !sw.is_null())
    return j.unsupported("'sliding_window' (MiniMax M3 attends by blocks, not a window)");
  return {};
}

status build_minimax_m3(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  // (as published, the language model's tensors under language_model.: prepare_language_model)
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string a = "model.layers.{}.self_attn.", f = "model.layers.{}.block_sparse_moe.";
  expert_names(m, n, false); // (Mixtral's: block_sparse_moe.gate, experts.{e}.w1 / w3 / w2)
  n.moe_router_bias = f + "e_score_correction_bias";
  hf_shared_expert_names(n, f);
  n.sparse_q = a + "index_q_proj.weight", n.sparse_k = a + "index_k_proj.weight";
  n.sparse_q_norm = a + "index_q_norm.weight", n.sparse_k_norm = a + "index_k_norm.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
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
