// minicpm.cpp (arch/families): MiniCPM3 (MiniCPM3ForCausalLM, MiniCPM3-4B): DeepSeek-V2's latent
// attention (a q bottleneck, one latent of kv_lora plus qk_rope positional values per token; the
// decoder's mla(), absorbed) with RoPE rotating halves rather than pairs, under muP's scalings:
// the embeddings times scale_emb, each sublayer's output times scale_depth / sqrt(layers) before
// the residual add, the final hidden state divided by hidden_size / dim_model_base before the
// head (tied by default). GGUF: llama.cpp's minicpm3 (MiniCPM3-4B's scalings, which it assumes).
// MiniCPM 1 / 2 (MiniCPMForCausalLM, remote code): Llama under the same muP scalings (read by
// read_llama_hf for the rest, built by build_llama); MiniCPM4's sparse_config (InfLLM v2 sparse
// attention past dense_len) is refused. GGUF: llama.cpp's minicpm, the scalings as
// embedding_scale, residual_scale and logit_scale (hidden_size / dim_model_base).
// Youtu-LLM (YoutuForCausalLM) is the same latent attention (DeepSeek-V3's, RoPE on interleaved
// pairs unless rope_interleave is false) with a dense SwiGLU MLP on every layer and no scalings.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// muP's scalings: the embeddings times scale_emb, each sublayer's output times scale_depth /
// sqrt(layers), the logits' input divided by hidden_size / dim_model_base
status mup_scales(hf_cfg& j, model_config& c, double emb, double depth, double base) {
  if (!(emb > 0) || !(depth > 0) || !(base > 0))
    return j.bad(fmt::format("scale_emb {}, scale_depth {}, dim_model_base {}", emb, depth, base));
  c.embed_scale = emb;
  c.residual_scale = depth / std::sqrt(static_cast<double>(c.n_layer));
  c.logit_scale = base / static_cast<double>(c.C); // hidden / (hidden_size / dim_model_base)
  return {};
}

} // namespace

status read_minicpm3_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  if (j.b("mlp_bias", false)) return j.unsupported("mlp_bias true");
  for (const char* k : {"pretraining_tp", "qk_head_dim", "num_key_value_heads", "head_dim"})
    j.mark(k); // (derived, or unused by latent attention)
  // v_head_dim: the config class's hidden_size / heads where null
  TROUPE_TRY(read_mla_dims(j, c, {0, -1, -1, -1, c.C / c.H}));
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.rope.rot_dim = static_cast<int>(c.qk_rope);
  c.rope.layout = rope_layout::neox; // (apply_rotary_pos_emb: halves, as Llama)
  mla_attention_scale(c);
  TROUPE_TRY_ASSIGN(emb, j.f("scale_emb", 12.0));
  TROUPE_TRY_ASSIGN(depth, j.f("scale_depth", std::sqrt(static_cast<double>(c.n_layer))));
  TROUPE_TRY_ASSIGN(base, j.f("dim_model_base", static_cast<double>(c.C)));
  return mup_scales(j, c, emb, depth, base);
}

status read_minicpm_hf(hf_cfg& j, model_config& c) {
  if (!j.raw("sparse_config").is_null())
    return j.unsupported("'sparse_config' (MiniCPM4's InfLLM v2 sparse attention)");
  TROUPE_TRY(read_llama_hf(j, c));
  // (the config class's defaults of 1 are no published model's: the keys must be there)
  for (const char* k : {"scale_emb", "scale_depth", "dim_model_base"})
    if (!j.has(k)) return j.bad(fmt::format("'{}' is missing", k));
  TROUPE_TRY_ASSIGN(emb, j.f("scale_emb", 1.0));
  TROUPE_TRY_ASSIGN(depth, j.f("scale_depth", 1.0));
  TROUPE_TRY_ASSIGN(base, j.f("dim_model_base", 1.0));
  return mup_scales(j, c, emb, depth, base);
}

status read_minicpm_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_llama_gguf(g, c));
  TROUPE_TRY_ASSIGN(emb, g.g.get_float(g.key("embedding_scale")));
  TROUPE_TRY_ASSIGN(res, g.g.get_float(g.key("residual_scale")));
  TROUPE_TRY_ASSIGN(logit, g.g.get_float(g.key("logit_scale")));
  if (!(emb > 0) || !(res > 0) || !(logit > 0))
    return g.unsupported(fmt::format("minicpm scales {}, {}, {} must be > 0", emb, res, logit));
  c.embed_scale = emb, c.residual_scale = res, c.logit_scale = 1.0 / logit;
  return {};
}

// llama.cpp's minicpm3: the latent attention's keys (q / kv lora ranks, key_length = nope + rope,
// the rope dimension count; kv_b whole), values of hidden_size / heads, and MiniCPM3-4B's
// scalings, which its graph takes as constants (scale_emb 12, scale_depth 1.4, dim_model_base
// 256) and its converter does not write
status read_minicpm3_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  TROUPE_TRY_ASSIGN(kvl, g.req("attention.kv_lora_rank"));
  TROUPE_TRY_ASSIGN(ql, g.req("attention.q_lora_rank"));
  const int64_t kl = c.D, rope = c.rope.rot_dim;
  if (ql <= 0 || kvl <= 0 || rope <= 0 || kl <= rope || c.C % c.H)
    return g.unsupported(
        fmt::format("q_lora_rank {}, kv_lora_rank {}, key_length {}, rope {}", ql, kvl, kl, rope));
  c.q_lora = ql, c.kv_lora = kvl, c.qk_rope = rope, c.qk_nope = kl - rope;
  c.v_head = g.i("attention.value_length", c.C / c.H);
  c.Hkv = 1;
  c.D = kvl + rope; // the cached row: latent and positional part
  c.rope.layout = rope_layout::neox;
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(kl));
  c.embed_scale = 12.0;
  c.residual_scale = 1.4 / std::sqrt(static_cast<double>(c.n_layer));
  c.logit_scale = 256.0 / static_cast<double>(c.C);
  return {};
}

status read_youtu_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  for (const char* k :
       {"qk_head_dim", "num_key_value_heads", "head_dim", "embedding_initializer_range"})
    j.mark(k); // (derived, unused by latent attention, or the initialiser's)
  TROUPE_TRY(read_mla_dims(j, c, {0, -1, -1, -1, -1}));
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.rope.rot_dim = static_cast<int>(c.qk_rope);
  c.rope.layout = j.b("rope_interleave", true) ? rope_layout::interleaved : rope_layout::neox;
  mla_attention_scale(c);
  return {};
}

status build_minicpm3(const model_source& m, graph::graph& g) {
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    n.wq.clear(), n.wk.clear(), n.wv.clear();
    gguf_mla_names(n);
    n.mla_k_b.clear(), n.mla_v_b.clear();
    n.mla_kv_b = "blk.{}.attn_kv_b.weight"; // (whole, as in HF)
    if (m.config.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_mla_layout();
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
