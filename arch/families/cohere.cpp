// cohere.cpp (arch/families): Command-R (CohereForCausalLM): a parallel block with one
// LayerNorm without bias (x += attn(h) + mlp(h)), RoPE on interleaved pairs (GPT-J style, as
// the checkpoint stores q and k), optional per-head q/k LayerNorms with a weight per head,
// tied embeddings and the logits times logit_scale. Command R7B / Command A (Cohere2ForCausalLM):
// the same block with sliding windows on three layers of four (layer_types) and RoPE on those
// only: the full-attention layers have no positional encoding at all.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_cohere_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "layer_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.norm = norm_kind::layer;
  c.residual = residual_kind::parallel;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  if (j.b("use_qk_norm", false)) {
    c.qk_norm = qk_norm_kind::head_weights;
    c.qk_norm_type = norm_kind::layer;
  }
  TROUPE_TRY_ASSIGN(ls, j.f("logit_scale", 0.0625));
  c.logit_scale = ls;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 500000.0, 1.0));
  c.rope.layout = rope_layout::interleaved;
  if (c.family == "cohere2") {
    TROUPE_TRY_ASSIGN(windowed, read_windows_rope_on_sliding(j, c));
    if (!windowed) return j.unsupported("Cohere2 without a sliding_window");
  }
  return {};
}

// GGUF (command-r, cohere2): Llama's names, q and k unpermuted (the rope is interleaved
// already), tied embeddings, logit_scale required; per-head q/k norms where the file has
// attn_q_norm; cohere2's window on three layers of four, as llama.cpp assumes.
status read_cohere_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer;
  c.residual = residual_kind::parallel;
  c.rope.layout = rope_layout::interleaved;
  TROUPE_TRY_ASSIGN(ls, g.g.get_float(g.key("logit_scale")));
  c.logit_scale = ls;
  if (g.has_tensor("blk.0.attn_q_norm.weight")) {
    c.qk_norm = qk_norm_kind::head_weights;
    c.qk_norm_type = norm_kind::layer;
  }
  if (c.family == "cohere2") { // llama.cpp's cohere2: three sliding layers in four (no key)
    TROUPE_TRY(read_gguf_windows(g, c, 0, 4));
    if (c.sliding_window <= 0) return g.unsupported("cohere2 without attention.sliding_window");
    rope_on_windowed_only(c);
  }
  return {};
}

status build_cohere(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n =
      m.format == "hf" ? hf_llama_layout(c.qkv_bias, c.o_bias, false) : gguf_layout(m);
  n.ffn_norm.clear();
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
