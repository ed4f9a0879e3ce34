// nemotron.cpp (arch/families): Nemotron-4 and Minitron (NemotronForCausalLM: Nemotron-4 15B /
// 340B, Minitron 4B / 8B, Nemotron-Mini 4B): Llama's layout with "LayerNorm1P" norms (weight + 1,
// and a bias), an ungated MLP with squared ReLU (up, down), RoPE on partial_rotary_factor of each
// head (halves), optional attention and MLP biases. GGUF: llama.cpp's nemotron (its converter folds
// the
// + 1 into the norm weights and counts the rotated dims as partial_rotary_factor x hidden / heads).
// Jais 2 (Jais2ForCausalLM) is the same without the + 1 and with biases by default, RoPE on
// whole heads (GGUF: llama.cpp's jais2).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_nemotron_hf(hf_cfg& j, model_config& c) {
  const bool jais2 = c.family == "jais2";
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, jais2 ? "layer_norm_eps" : "norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.norm = norm_kind::layer;
  if (!jais2) c.norm_add = 1.0; // LayerNorm1P: x normalised times (1 + w), plus b
  c.gated_ffn = false;
  if (j.b("attention_bias", jais2)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", jais2);
  TROUPE_TRY(read_activation(j.s("hidden_act", "relu2"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, jais2 ? 1.0 : 0.5));
  return {};
}

status read_nemotron_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer; // (the + 1 is in the weights)
  c.gated_ffn = false;
  c.act_expr = "relu(x)^2"; // (llama.cpp's graph: squared ReLU, whatever the config said)
  c.rope.layout = rope_layout::neox;
  return {};
}

status build_nemotron(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
    const std::string l = "model.layers.{}.";
    n.attn_norm_b = l + "input_layernorm.bias", n.ffn_norm_b = l + "post_attention_layernorm.bias";
    n.out_norm_b = "model.norm.bias";
  } else {
    n = gguf_layout(m);
    n.optional_biases = true;
  }
  n.w_gate.clear(), n.b_gate.clear();
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
