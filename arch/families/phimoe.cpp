// phimoe.cpp (arch/families): PhiMoE (Phi-3.5-MoE; PhimoeForCausalLM, as published
// PhiMoEForCausalLM). Mixtral's shape (GQA, 16 SwiGLU experts per layer under Mixtral's tensor
// names) with LayerNorms (weight and bias, eps rms_norm_eps), biases on q, k, v, o and the
// lm_head, a sliding window on every layer, LongRoPE whose cos and sin are scaled by
// short_mscale / long_mscale, and the sparsemixer router: two choices, each the best logit left,
// weighted by the softmax over the logits within a relative 2 router_jitter_noise of it (at
// inference: no sampling). GGUF: llama.cpp's phimoe (Phi-3's converter), read as the published
// model: the router's threshold is the published 0.01, and a LongRoPE file is refused (the
// converter writes its own attention factor, not the model's mscale).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {
// what both forms share: LayerNorms, the experts, the sparsemixer (top 2)
status phimoe_common(model_config& c, double jitter, const std::string& where) {
  c.norm = norm_kind::layer;
  c.F_expert = c.F;
  if (c.n_expert < 2 || c.n_expert_used != 2)
    return make_error(errc::unsupported,
                      "{}: PhiMoE's sparsemixer chooses 2 experts (num_experts_per_tok {} of {})",
                      where, c.n_expert_used, c.n_expert);
  if (!(jitter >= 0))
    return make_error(errc::corrupt_file, "{}: router_jitter_noise {} must not be negative", where,
                      jitter);
  c.router_sparsemixer = true;
  c.router_jitter = jitter;
  return {};
}
} // namespace

status read_phimoe_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.lm_head_bias = j.b("lm_head_bias", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
  c.sliding_window = sw >= c.ctx ? 0 : sw; // every layer
  TROUPE_TRY(read_rope(j, c, 1e6, 1.0));
  if (c.rope.scaling != rope_scaling::none && c.rope.scaling != rope_scaling::longrope)
    return j.unsupported("PhiMoE's RoPE other than default or longrope (its short / long mscale "
                         "replace the scaling's attention factor)");
  j.mark("input_jitter_noise"); // (the experts' input jitter acts in training only)
  TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
  TROUPE_TRY_ASSIGN(jitter, j.f("router_jitter_noise", 0.01));
  return phimoe_common(c, jitter, j.where());
}

status read_phimoe_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = rope_layout::neox;
  if (c.rope.scaling == rope_scaling::longrope)
    return g.unsupported("LongRoPE: the converter writes the attention factor sqrt(1 + ln s / ln "
                         "n) and drops PhiMoE's short_mscale / long_mscale, which the model "
                         "scales by (use the safetensors checkpoint)");
  const int64_t sw = g.i("attention.sliding_window", 0);
  c.sliding_window = sw >= c.ctx ? 0 : sw;
  TROUPE_TRY(read_expert_counts(g, c));
  return phimoe_common(c, 0.01, g.path()); // (the published router_jitter_noise)
}

status build_phimoe(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format != "hf") {
    n = gguf_layout(m);
  } else {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
    n.q_norm.clear(), n.k_norm.clear();
    n.attn_norm_b = "model.layers.{}.input_layernorm.bias";
    n.ffn_norm_b = "model.layers.{}.post_attention_layernorm.bias";
    n.out_norm_b = "model.norm.bias";
    if (c.lm_head_bias) n.lm_head_b = "lm_head.bias";
  }
  expert_names(m, n, false);
  if (c.tie_embeddings) n.lm_head.clear(), n.lm_head_b.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
