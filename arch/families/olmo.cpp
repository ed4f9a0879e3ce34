// olmo.cpp (arch/families): OLMo, OLMo 2 and OLMo 3. OLMo is Llama with non-parametric LayerNorms
// (no weight, no bias, eps 1e-5 fixed) and optional clipping of q, k and v (clip_qkv). OLMo 2
// puts its RMSNorms on the sublayers' outputs (x += norm(attn(x)); x += norm(mlp(x))) and
// normalises q and k over the whole projection (every head of the token at once), which a
// tensor-parallel shard computes with an all-reduce of its partial sums of squares. OLMo 3 is
// OLMo 2 with sliding windows on three layers of four (layer_types). EXAONE 4 has OLMo 2's post
// norms with q / k norms per head, and RoPE only on its sliding layers. OLMoE
// (OlmoeForCausalLM) keeps Llama's pre-norms with OLMo 2's whole-projection q / k norms, and
// every FFN a mixture of num_experts experts of intermediate_size (softmax, top-k, renormalised
// only with norm_topk_prob); its clip_qkv would clamp after the q / k norms, which is not
// implemented (published: none), so it refuses by name. GGUF: llama.cpp's olmoe. FlexOlmo
// (FlexOlmoForCausalLM) is OLMoE with OLMo 2's norms on the sublayers' outputs. K-EXAONE
// (ExaoneMoeForCausalLM): EXAONE 4's attention with pre-norms and DeepSeek's experts; GGUF
// llama.cpp's exaone-moe.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_olmoe_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  if (j.has("clip_qkv"))
    return j.unsupported("'clip_qkv' (OLMoE clamps after the q / k norms) is not supported");
  c.qk_norm = qk_norm_kind::full;
  if (c.family == "flex_olmo") c.norms = norm_place::post; // (OLMo 2's, on the outputs)
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  c.F_expert = c.F;
  c.norm_topk = j.b("norm_topk_prob", false);
  return {};
}

// llama.cpp's olmoe: the same, its experts merged; llama.cpp never renormalises them
status read_olmoe_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = rope_layout::neox;
  c.qk_norm = qk_norm_kind::full;
  TROUPE_TRY(read_expert_counts(g, c));
  if (c.n_expert <= 0) return g.unsupported("olmoe without experts");
  c.F_expert = g.i("expert_feed_forward_length", c.F);
  (void)g.key("expert_weights_norm");
  c.norm_topk = false;
  return {};
}

status build_olmoe(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n =
      m.format == "hf" ? hf_llama_layout(c.qkv_bias, c.o_bias, false) : gguf_layout(m);
  if (c.family == "flex_olmo") { // the norms on the sublayers' outputs
    n.attn_norm = "model.layers.{}.post_attention_layernorm.weight";
    n.ffn_norm = "model.layers.{}.post_feedforward_layernorm.weight";
  }
  expert_names(m, n, false);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

status read_olmo_hf(hf_cfg& j, model_config& c) {
  const bool v2 = c.family == "olmo2" || c.family == "olmo3" || c.family == "exaone4";
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, v2 ? "rms_norm_eps" : nullptr, 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  if (c.family == "olmo3") { // OLMo 3: sliding windows on the layers layer_types names
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    TROUPE_TRY(
        read_layer_types(j, c, sw < c.ctx ? sw : 0, [](int64_t l) { return (l + 1) % 4 != 0; }));
  }
  if (c.family == "exaone4") {
    // EXAONE 4: with a sliding_window, windows on the layers layer_types names (three of
    // sliding_window_pattern) and RoPE on those only; without one, every layer full with RoPE
    TROUPE_TRY(read_windows_rope_on_sliding(j, c));
  }
  if (v2) {
    c.norms = norm_place::post;
    c.qk_norm = c.family == "exaone4" ? qk_norm_kind::head : qk_norm_kind::full;
  } else {
    c.norm = norm_kind::layer;
    c.norm_weight = false;
    TROUPE_TRY_ASSIGN(clip, j.f("clip_qkv", 0.0));
    if (clip < 0) return j.bad("'clip_qkv' must not be negative");
    c.clip_qkv = clip;
  }
  return {};
}

// K-EXAONE (ExaoneMoeForCausalLM): EXAONE 4's attention (q / k norms per head, sliding windows
// by layer_types / sliding_window_pattern with RoPE on the sliding layers only) in a pre-norm
// decoder, over DeepSeek-V3's experts (sigmoid scores, the correction bias, groups, shared
// experts of num_shared_experts x moe_intermediate_size) on the layers mlp_layer_types names
status read_exaone_moe_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  TROUPE_TRY(read_windows_rope_on_sliding(j, c));
  c.qk_norm = qk_norm_kind::head;
  return read_routed_experts_hf(j, c);
}

// llama.cpp's exaone-moe: the same from its keys (the windows by sliding_window_pattern, RoPE on
// the sliding layers only; llama.cpp itself takes three sliding layers in four whatever the
// pattern says), the router sigmoid unless expert_gating_func says otherwise (llama.cpp requires
// the key; transformers' router is always sigmoid), its multi-token-prediction blocks after the
// trunk dropped
status read_exaone_moe_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  // (the pattern covers the trunk: the converter does not extend it over the MTP blocks)
  if (g.i("nextn_predict_layers", 0) > 0) TROUPE_TRY(drop_gguf_nextn(g, c));
  c.qk_norm = qk_norm_kind::head;
  c.rope.layout = rope_layout::neox;
  TROUPE_TRY(read_gguf_windows(g, c, 0, 4));
  if (c.sliding_window > 0) rope_on_windowed_only(c);
  TROUPE_TRY(read_routed_experts_gguf(g, c));
  if (const int64_t fs = g.i("expert_shared_feed_forward_length", c.F_shared); fs != c.F_shared)
    return g.unsupported(fmt::format("expert_shared_feed_forward_length {} (the shared experts' "
                                     "{})",
                                     fs, c.F_shared));
  return {};
}

status build_exaone_moe(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    routed_expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(false, false, false);
  routed_expert_names(m, n);
  n.moe_router_bias = "model.layers.{}.mlp.e_score_correction_bias"; // beside the router
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

// GGUF (llama.cpp's converter): OLMo's q and k are permuted for interleaved RoPE and its
// norms have no tensors; OLMo 2 keeps rotate_half, names its post norms post_attention_norm /
// post_ffw_norm, and its q/k norms span the whole projection.
status read_olmo_gguf(const gguf_cfg& g, model_config& c) {
  const bool v2 = c.family == "olmo2" || c.family == "exaone4";
  TROUPE_TRY(
      read_gguf_dims(g, c, v2 ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon",
                     v2 ? 1e-6 : 1e-5));
  if (v2) {
    c.norms = norm_place::post;
    c.qk_norm = c.family == "exaone4" ? qk_norm_kind::head : qk_norm_kind::full;
    c.rope.layout = rope_layout::neox;
    // OLMo 3 as the converter writes it (arch olmo2): a window on the layers the pattern marks,
    // and their own RoPE base when it differs
    TROUPE_TRY(read_gguf_windows(g, c, 0, 0));
    if (g.has("rope.freq_base_swa")) {
      const double swa = g.f("rope.freq_base_swa", c.rope.theta);
      if (swa != c.rope.theta) {
        c.has_rope_local = true;
        c.rope_local = c.rope;
        c.rope_local.theta = swa;
      }
    }
    if (c.family == "exaone4" && c.sliding_window > 0) rope_on_windowed_only(c);
    return {};
  }
  c.norm = norm_kind::layer;
  c.norm_weight = false;
  c.rope.layout = rope_layout::interleaved;
  c.clip_qkv = g.f("attention.clamp_kqv", 0.0);
  if (c.clip_qkv < 0) return g.unsupported("attention.clamp_kqv must not be negative");
  return {};
}

status build_olmo(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  const bool v2 = c.family == "olmo2" || c.family == "olmo3" || c.family == "exaone4";
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
    if (v2) {
      n.attn_norm = "model.layers.{}.post_attention_layernorm.weight";
      n.ffn_norm = "model.layers.{}.post_feedforward_layernorm.weight";
    }
  } else {
    n = gguf_layout(m);
    if (v2) n.attn_norm = n.post_attn_norm, n.ffn_norm = n.post_ffn_norm;
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
