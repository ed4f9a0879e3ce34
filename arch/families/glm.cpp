// glm.cpp (arch/families): GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): a Llama-style decoder with
// grouped-query attention whose q / k / v projections have biases (attention_bias), RoPE over
// the first partial_rotary_factor of each head (0.5 by default; rotate_half pairs), optional
// q / k RMSNorm over each head before it (use_qk_norm), and DeepSeek-V3's mixture of experts
// (sigmoid scores with a correction bias, groups, shared experts, routed_scaling_factor) after
// first_k_dense_replace dense layers. The multi-token-prediction layers a published checkpoint
// carries past num_hidden_layers are not used to generate (their tensors are left unread), from
// HF safetensors or llama.cpp's glm4moe GGUF.
// GLM-4 (Glm4ForCausalLM: GLM-4-0414, GLM-Z1): dense, with sandwich norms (input_layernorm and
// post_self_attn_layernorm around attention, post_attention_layernorm and post_mlp_layernorm
// around the MLP), one fused gate_up_proj, and RoPE on interleaved pairs of half of each head.
// GLM-4-9B as transformers ships it (GlmForCausalLM, glm-4-9b-chat-hf): the same without the
// sandwich norms; GGUF: llama.cpp's chatglm (its converter takes GlmForCausalLM there).
// Sarvam-30B (SarvamMoEForCausalLM) and Param2 (Param2MoEForCausalLM): GLM-4.5's model, as
// transformers runs both, under their own names (word_embeddings; one query_key_value [q; k; v];
// attention.dense; query_ / key_layernorm per head; the router's correction bias gate.expert_bias)
// and their config classes' defaults (RoPE over the whole head, q / k norms on).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_glm4_moe_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  const bool minicpm5 = c.family == "minicpm5_moe";
  if (minicpm5) {
    // MiniCPM5MoeAttention: Llama's, q_proj holding each head's q rows then its gate's (the
    // output times sigmoid(gate)); no q / k norm (use_qk_norm is not its config's)
    if (!j.b("use_gated_attention", true))
      return j.unsupported("'use_gated_attention' false (MiniCPM5-MoE's config refuses it)");
    if (j.b("attention_bias", false))
      return j.unsupported("'attention_bias' (biases on the gated q_proj and o_proj)");
    c.attn_output_gate = true;
  } else {
    c.qkv_bias = j.b("attention_bias", false);
    if (j.b("use_qk_norm", false)) c.qk_norm = qk_norm_kind::head;
    j.mark("num_nextn_predict_layers"); // multi-token prediction heads: not used to generate
  }
  j.mark("pretraining_tp");
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, minicpm5 ? 5e6 : 10000.0, minicpm5 ? 1.0 : 0.5));
  return read_routed_experts_hf(j, c);
}

// Upstage Solar Open (SolarOpenForCausalLM): Llama's attention (full RoPE, q / k / v biases with
// attention_bias, none on o_proj) over GLM-4.5's experts on every layer, built as GLM-4.5
status read_solar_open_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.qkv_bias = j.b("attention_bias", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 1e6, 1.0));
  return read_routed_experts_hf(j, c); // (no first_k_dense_replace: every layer's experts)
}

// GGUF (glm4moe): q / k as published (rotate_half pairs, over rope.dimension_count dims), the
// experts from llama.cpp's keys; block_count counts the multi-token-prediction blocks after the
// trunk (nextn_predict_layers), which are not run (their tensors unread).
status read_glm4_moe_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  TROUPE_TRY(drop_gguf_nextn(g, c));
  c.rope.layout = rope_layout::neox;
  if (g.has_tensor("blk.0.attn_q_norm.weight")) c.qk_norm = qk_norm_kind::head;
  return read_routed_experts_gguf(g, c);
}

status read_glm4_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.qkv_bias = j.b("attention_bias", true);
  if (c.family == "glm4") c.norms = norm_place::sandwich; // (GlmForCausalLM: pre-norms only)
  j.mark("pretraining_tp");
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 0.5));
  c.rope.layout = rope_layout::interleaved; // GLM-4 pairs neighbours (repeat_interleave)
  return {};
}

// GGUF (glm4, as llama.cpp's converter writes a text GLM-4: q / k as published, so the rotated
// half still pairs neighbours; the fused gate_up as ffn_up [2F, C]; the sandwich norms as
// attn_norm, post_attention_norm, ffn_norm, post_ffw_norm; the rotated dims as
// rope.dimension_count).
status read_glm4_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  if (c.family == "glm4") c.norms = norm_place::sandwich; // (chatglm: pre-norms only)
  c.rope.layout = rope_layout::interleaved;
  if (g.has("rope.dimension_sections")) // M-RoPE (GLM-4V): q / k permuted for it
    return g.unsupported("rope.dimension_sections (GLM-4V's M-RoPE)");
  return {};
}

status build_glm4(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    n.w_gate.clear(), n.w_up.clear(), n.b_gate.clear(), n.b_up.clear();
    n.w_gate_up = "blk.{}.ffn_up.weight";               // gate rows, then up rows
    if (m.tensors->contains("blk.0.attn_qkv.weight")) { // (ChatGLM's own checkpoints, fused)
      n.wq.clear(), n.wk.clear(), n.wv.clear(), n.bq.clear(), n.bk.clear(), n.bv.clear();
      n.wqkv = "blk.{}.attn_qkv.weight", n.bqkv = "blk.{}.attn_qkv.bias";
    }
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(c.qkv_bias, false, false);
  const std::string l = "model.layers.{}.";
  n.q_norm.clear(), n.k_norm.clear();
  if (c.family == "glm4") {
    n.post_attn_norm = l + "post_self_attn_layernorm.weight";
    n.ffn_norm = l + "post_attention_layernorm.weight";
    n.post_ffn_norm = l + "post_mlp_layernorm.weight";
  }
  n.w_gate.clear(), n.w_up.clear();
  n.w_gate_up = l + "mlp.gate_up_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

status build_glm4_moe(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    n.ffn_norm = "blk.{}.post_attention_norm.weight"; // llama.cpp's glm4moe names it so
    routed_expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(c.qkv_bias, false, false);
  routed_expert_names(m, n);
  if (c.family == "sarvam_moe" || c.family == "param2moe") {
    const std::string a = "model.layers.{}.attention.";
    n.tok_embd = "model.word_embeddings.weight";
    n.wq.clear(), n.wk.clear(), n.wv.clear(), n.bq.clear(), n.bk.clear(), n.bv.clear();
    n.wqkv = a + "query_key_value.weight";
    if (c.qkv_bias) n.bqkv = a + "query_key_value.bias";
    n.wo = a + "dense.weight";
    n.q_norm = a + "query_layernorm.weight", n.k_norm = a + "key_layernorm.weight";
    n.moe_router_bias = "model.layers.{}.mlp.gate.expert_bias";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
