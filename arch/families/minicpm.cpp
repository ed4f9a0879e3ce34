// minicpm.cpp (arch/families): MiniCPM3 (MiniCPM3ForCausalLM, MiniCPM3-4B): DeepSeek-V2's latent
// attention (a q bottleneck, one latent of kv_lora plus qk_rope positional values per token; the
// decoder's mla(), absorbed) with RoPE rotating halves rather than pairs, under muP's scalings:
// the embeddings times scale_emb, each sublayer's output times scale_depth / sqrt(layers) before
// the residual add, the final hidden state divided by hidden_size / dim_model_base before the
// head (tied by default).
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

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
  if (!(emb > 0) || !(depth > 0) || !(base > 0))
    return j.bad(fmt::format("scale_emb {}, scale_depth {}, dim_model_base {}", emb, depth, base));
  c.embed_scale = emb;
  c.residual_scale = depth / std::sqrt(static_cast<double>(c.n_layer));
  c.logit_scale = base / static_cast<double>(c.C); // hidden / (hidden_size / dim_model_base)
  return {};
}

status build_minicpm3(const model_source& m, graph::graph& g) {
  decoder_names n = hf_mla_layout();
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
