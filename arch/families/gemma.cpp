// gemma.cpp (arch/families): Gemma, Gemma 2 and Gemma 3 (text). Llama-shaped, with the
// embeddings scaled by sqrt(hidden) (rounded to the weights' dtype, as transformers does),
// RMSNorms that scale by (1 + w), GeGLU; Gemma 2 / 3 add sandwich norms (on each sublayer's
// input and output), alternating sliding-window layers and query_pre_attn_scalar; Gemma 2
// soft-caps attention scores and logits; Gemma 3 normalises q and k per head and gives its
// sliding layers their own RoPE base. VaultGemma (VaultGemmaForCausalLM) is Gemma 2 without the
// norms on the sublayers' outputs. GGUF files (llama.cpp's converter) store the norms with the 1
// already added.
#include "arch/families/decoder.hpp"

#include <cmath>

namespace troupe::arch {

// Gemma 3 (and 3n): one rope for full layers, one for sliding layers; transformers 5 nests them by
// layer type, older configs give rope_theta, rope_local_base_freq and rope_scaling (which
// applies to the full layers only).
status read_gemma3_rope(hf_cfg& j, model_config& c) {
  const json& rp = j.raw("rope_parameters");
  if (rp.is_object() && (rp.contains("full_attention") || rp.contains("sliding_attention"))) {
    for (auto& [k, v] : rp.items())
      if (k != "full_attention" && k != "sliding_attention")
        return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
    TROUPE_TRY(read_rope_dict(rp.value("full_attention", json()), c, c.rope, 1e6, j.where()));
    TROUPE_TRY(
        read_rope_dict(rp.value("sliding_attention", json()), c, c.rope_local, 1e4, j.where()));
  } else {
    TROUPE_TRY_ASSIGN(theta, j.f("rope_theta", 1e6));
    TROUPE_TRY_ASSIGN(local, j.f("rope_local_base_freq", 1e4));
    json global = rp.is_object() ? rp : json::object();
    if (const json& rs = j.raw("rope_scaling"); rs.is_object()) global.update(rs);
    if (!global.contains("rope_theta")) global["rope_theta"] = theta;
    TROUPE_TRY(read_rope_dict(global, c, c.rope, theta, j.where()));
    TROUPE_TRY(read_rope_dict(json::object(), c, c.rope_local, local, j.where()));
  }
  c.has_rope_local = true;
  return {};
}

status read_gemma_hf(hf_cfg& j, model_config& c) {
  const bool v1 = c.family == "gemma", v3 = c.family == "gemma3";
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.norm_add = 1;
  c.embed_scale = std::sqrt(static_cast<double>(c.C));
  c.embed_scale_rounded = true; // a tensor cast to the weights' dtype in transformers
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  if (j.b("use_bidirectional_attention", false))
    return j.unsupported("'use_bidirectional_attention' (an encoder, not a causal LM) is not "
                         "supported");
  if (v1) {
    // GemmaConfig rewrites "gelu" to the tanh approximation; hidden_activation is not read
    std::string act = j.s("hidden_act", "gelu_pytorch_tanh");
    TROUPE_TRY(read_activation(act == "gelu" ? "gelu_pytorch_tanh" : act, c, j.where()));
    TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
    return {};
  }
  c.norms = c.family == "vaultgemma" ? norm_place::pre : norm_place::sandwich;
  TROUPE_TRY(read_activation(j.s("hidden_activation", "gelu_pytorch_tanh"), c, j.where()));
  TROUPE_TRY_ASSIGN(qpas, j.f("query_pre_attn_scalar", 256));
  if (!(qpas > 0)) return j.bad("'query_pre_attn_scalar' must be positive");
  c.attn_scale = 1.0 / std::sqrt(qpas);
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 4096));
  TROUPE_TRY_ASSIGN(fcap, j.f("final_logit_softcapping", v3 ? 0.0 : 30.0));
  c.final_softcap = fcap;
  if (v3) {
    // stored by Gemma3TextConfig but never passed to the attention (transformers 5)
    j.mark("attn_logit_softcapping");
    TROUPE_TRY_ASSIGN(pattern, j.i("sliding_window_pattern", 6));
    j.mark("_sliding_window_pattern");
    const int64_t p = pattern > 0 ? pattern : 6;
    TROUPE_TRY(read_layer_types(j, c, sw, [p](int64_t l) { return (l + 1) % p != 0; }));
    c.qk_norm = qk_norm_kind::head;
    TROUPE_TRY(read_gemma3_rope(j, c));
  } else {
    TROUPE_TRY_ASSIGN(acap, j.f("attn_logit_softcapping", 50.0));
    c.attn_softcap = acap;
    TROUPE_TRY(read_layer_types(j, c, sw, [](int64_t l) { return (l + 1) % 2 != 0; }));
    TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  }
  return {};
}

status read_gemma_gguf(const gguf_cfg& g, model_config& c) {
  const bool v1 = c.family == "gemma", v3 = c.family == "gemma3";
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-6));
  const int64_t C = c.C, H = c.H, L = c.n_layer;
  c.rope.layout = rope_layout::neox;
  c.act = act_kind::gelu_tanh;
  c.embed_scale = std::sqrt(static_cast<double>(c.C)); // llama.cpp scales in f32
  if (v1) return {};
  c.norms = norm_place::sandwich;
  // llama.cpp's scale (the converter drops query_pre_attn_scalar): 1/sqrt(head_dim), except
  // for the 27B models (46 / 62 layers), whose query_pre_attn_scalar is hidden / heads. A
  // file that states attention.scale (1/sqrt(query_pre_attn_scalar)) gets that instead.
  const bool big = (!v3 && L == 46) || (v3 && L == 62);
  const double qpas = big ? static_cast<double>(C / H) : static_cast<double>(c.D);
  c.attn_scale = g.f("attention.scale", 1.0 / std::sqrt(qpas));
  TROUPE_TRY(read_gguf_windows(g, c, v3 ? 0 : 4096, v3 ? 6 : 2));
  if (v3) {
    c.final_softcap = g.f("final_logit_softcapping", 0.0);
    c.qk_norm = qk_norm_kind::head;
    read_gguf_rope_swa(g, c, c.rope.rot_dim);
  } else {
    c.attn_softcap = g.f("attn_logit_softcapping", 50.0);
    c.final_softcap = g.f("final_logit_softcapping", 30.0);
  }
  return {};
}

status build_gemma(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  const bool v1 = c.family == "gemma";
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
    if (!v1) {
      n.ffn_norm = "model.layers.{}.pre_feedforward_layernorm.weight";
      if (c.norms == norm_place::sandwich) {
        n.post_attn_norm = "model.layers.{}.post_attention_layernorm.weight";
        n.post_ffn_norm = "model.layers.{}.post_feedforward_layernorm.weight";
      }
    }
  } else {
    n = gguf_layout(m);
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
