// phi.cpp (arch/families): Phi-2 (PhiForCausalLM) and Phi-3 (Phi3ForCausalLM). Phi-2 is a
// parallel block (h = LayerNorm(x); x += attn(h) + mlp(h)) with partial rotary embeddings,
// biases everywhere (lm_head too), a GELU MLP and optional q/k LayerNorms; Phi-3 is Llama with
// fused qkv and gate_up tensors, LongRoPE scaling and an optional sliding window.
// Phi-4-multimodal's language model is Phi-3's: as transformers holds it
// (Phi4MultimodalForCausalLM) and as Microsoft publishes it (Phi4MMForCausalLM: the projections
// under base_layer., LoRA adapters unread).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_phi_hf(hf_cfg& j, model_config& c) {
  if (c.family == "phi3" || c.family == "phi4_multimodal" || c.family == "phi4mm") {
    // (Phi-4-multimodal: its language model is Phi-3's; the image and audio encoders, which
    // text never reaches, stay unread, as do the published form's LoRA adapters, which its code
    // turns on for images and audio only)
    if (c.family == "phi4_multimodal")
      for (const char* k : {"vision_config", "audio_config"}) j.mark(k);
    if (c.family == "phi4mm") {
      for (const char* k : {"embd_layer", "img_processor", "audio_processor", "vision_lora",
                            "speech_lora", "embd_pdrop", "resid_pdrop"})
        j.mark(k);
      if (j.b("lm_head_bias", false)) return j.unsupported("'lm_head_bias' true");
      if (j.b("attention_bias", false)) return j.unsupported("'attention_bias' true");
      if (j.b("mlp_bias", false)) return j.unsupported("'mlp_bias' true");
      for (const char* k : {"full_attn_mod", "interpolate_factor"}) {
        TROUPE_TRY_ASSIGN(v, j.i(k, 1));
        if (v != 1) return j.unsupported(fmt::format("'{}' {} (1 in every published model)", k, v));
      }
    }
    c.names.output = "lm_head.weight";
    TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
    c.tie_embeddings = j.b("tie_word_embeddings", false);
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    c.sliding_window = sw >= c.ctx ? 0 : sw; // every layer (Phi3's sliding mask)
    TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
    TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
    return {};
  }
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "layer_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.norm = norm_kind::layer;
  c.residual = residual_kind::parallel;
  c.gated_ffn = false;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.lm_head_bias = true; // (PhiForCausalLM's lm_head: nn.Linear with its bias)
  if (j.b("qk_layernorm", false)) {
    c.qk_norm = qk_norm_kind::head;
    c.qk_norm_type = norm_kind::layer;
  }
  TROUPE_TRY(read_activation(j.s("hidden_act", "gelu_new"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 0.5));
  return {};
}

// GGUF (llama.cpp's converter): Phi-3 keeps qkv fused (attn_qkv) and gate_up fused as
// ffn_up (gate rows first); LongRoPE comes as rope_factors_long / _short tensors. Phi-2 has
// separate or fused q/k/v with biases, one LayerNorm per block, and output.bias. llama.cpp
// disables Phi-3's sliding window; Troupe keeps it (the published model has it).
status read_phi_gguf(const gguf_cfg& g, model_config& c) {
  if (c.family == "phi3") {
    TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
    c.rope.layout = rope_layout::neox;
    const int64_t sw = g.i("attention.sliding_window", 0);
    c.sliding_window = sw >= c.ctx ? 0 : sw;
    return {};
  }
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.rope.layout = rope_layout::neox;
  c.norm = norm_kind::layer;
  c.residual = residual_kind::parallel;
  c.gated_ffn = false;
  c.act = act_kind::gelu_tanh; // gelu_new, as llama.cpp runs it
  c.lm_head_bias = true;
  if (g.has_tensor("blk.0.attn_q_norm.weight")) {
    c.qk_norm = qk_norm_kind::head;
    c.qk_norm_type = norm_kind::layer;
  }
  return {};
}

status build_phi(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    if (c.family == "phi3") {
      if (!m.tensors->contains("blk.0.ffn_gate.weight")) {
        n.w_gate.clear(), n.w_up.clear();
        n.w_gate_up = "blk.{}.ffn_up.weight";
      }
    } else {
      n.ffn_norm.clear(), n.ffn_norm_b.clear(); // one norm feeds both sublayers
    }
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string a = "model.layers.{}.self_attn.", f = "model.layers.{}.mlp.";
  if (c.family == "phi3" || c.family == "phi4_multimodal" || c.family == "phi4mm") {
    // (Phi4MMForCausalLM as published: the projections' weights under base_layer., LoRA-wrapped)
    const std::string w = c.family == "phi4mm" ? ".base_layer.weight" : ".weight";
    n.wq = n.wk = n.wv = "";
    n.wqkv = a + "qkv_proj" + w;
    n.wo = a + "o_proj" + w;
    n.layout = qkv_layout::blocks;
    n.w_gate = n.w_up = "";
    n.w_gate_up = f + "gate_up_proj" + w;
    n.w_down = f + "down_proj" + w;
  } else {
    n.attn_norm_b = "model.layers.{}.input_layernorm.bias";
    n.ffn_norm = "";
    n.wo = a + "dense.weight", n.bo = a + "dense.bias";
    n.q_norm = a + "q_layernorm.weight", n.q_norm_b = a + "q_layernorm.bias";
    n.k_norm = a + "k_layernorm.weight", n.k_norm_b = a + "k_layernorm.bias";
    n.w_gate = "";
    n.w_up = f + "fc1.weight", n.b_up = f + "fc1.bias";
    n.w_down = f + "fc2.weight", n.b_down = f + "fc2.bias";
    n.out_norm = "model.final_layernorm.weight", n.out_norm_b = "model.final_layernorm.bias";
    n.lm_head_b = "lm_head.bias";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
