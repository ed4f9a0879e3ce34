// starcoder2.cpp (arch/families): StarCoder2 (Starcoder2ForCausalLM, 3B / 7B / 15B): Llama's
// layout with LayerNorms (weight and bias), biases on every projection (use_bias), an ungated MLP
// (c_fc, GELU with tanh, c_proj), one sliding window over every layer where sliding_window is
// shorter than the context, tied embeddings. GGUF: llama.cpp's starcoder2 (its converter writes no
// window: such a file attends over the whole context, as llama.cpp runs it).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_starcoder2_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "norm_epsilon", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  if (j.b("use_bias", true)) c.qkv_bias = c.o_bias = c.mlp_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_act", "gelu_pytorch_tanh"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
  c.sliding_window = sw > 0 && sw < c.ctx ? sw : 0;
  return {};
}

status read_starcoder2_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.act = act_kind::gelu_tanh;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.rope.layout = rope_layout::neox;
  return {};
}

status build_starcoder2(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(true, true, false);
    const std::string l = "model.layers.{}.";
    n.attn_norm_b = l + "input_layernorm.bias", n.ffn_norm_b = l + "post_attention_layernorm.bias";
    n.out_norm_b = "model.norm.bias";
    n.w_gate.clear();
    n.w_up = l + "mlp.c_fc.weight", n.b_up = l + "mlp.c_fc.bias";
    n.w_down = l + "mlp.c_proj.weight", n.b_down = l + "mlp.c_proj.bias";
  } else {
    n = gguf_layout(m);
    n.w_gate.clear(), n.b_gate.clear();
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
