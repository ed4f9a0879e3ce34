// falcon_h1.cpp (arch/families): Falcon-H1 (FalconH1ForCausalLM: 0.5B - 34B, Falcon-H1R): every
// layer runs GQA attention (RoPE) and a Mamba-2 mixer side by side on one normed input and adds
// both to the residual stream, then a SwiGLU FFN under its own norm (model_config::ssm_parallel).
// Its muP multipliers are read, none folded: the embeddings' and the logits' (embed_scale,
// logit_scale), the attention's input and output and the mixer's, the keys' (key_multiplier,
// exact in the scores' scale since keys meet nothing else), in_proj's five parts (z, x, B, C,
// dt: ssm_multipliers, transformers' non-persistent mup vector), the FFN gate's (inside the
// SiLU: an activation expression) and its output's. The mixer's inner width is mamba_d_ssm
// (or expand x C); its norm: none (mamba_rms_norm false), or per group before or after the
// gate (mamba_norm_before_gate); out_proj's bias is projectors_bias.
// GGUF: see read_falcon_h1_gguf.
// Tests: tests/exec/forward_test.cpp (SyntheticArch falcon_h1), pipeline_test.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// a list of `n` numbers under `key` (absent or null: ones)
status read_multipliers(hf_cfg& j, const char* key, size_t n, double* out) {
  const json& v = j.raw(key);
  if (v.is_null()) return {};
  if (!v.is_array() || v.size() != n)
    return j.bad(fmt::format("'{}' must list {} multipliers", key, n));
  for (size_t i = 0; i < n; ++i) {
    if (!v[i].is_number()) return j.bad(fmt::format("'{}' must list numbers", key));
    out[i] = v[i].get<double>();
  }
  return {};
}

} // namespace

status read_falcon_h1_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  const mamba_keys k{"mamba_n_heads",    "mamba_d_head",    "mamba_d_state",   "mamba_n_groups",
                     "mamba_d_conv",     "mamba_expand",    "mamba_conv_bias", "mamba_proj_bias",
                     "mamba_chunk_size", "time_step_limit", "mamba_d_ssm"};
  TROUPE_TRY(read_mamba_mixer(j, c, k));
  c.ssm_out_bias = j.b("projectors_bias", false);
  using nk = model_config::ssm_norm_kind;
  c.ssm_norm = !j.b("mamba_rms_norm", false)         ? nk::none
               : j.b("mamba_norm_before_gate", true) ? nk::before_gate
                                                     : nk::after_gate;
  if (c.ssm_norm == nk::none) j.mark("mamba_norm_before_gate");
  c.ssm_parallel = true;
  // the multipliers
  TROUPE_TRY_ASSIGN(em, j.f("embedding_multiplier", 1.0));
  TROUPE_TRY_ASSIGN(lm, j.f("lm_head_multiplier", 1.0));
  TROUPE_TRY_ASSIGN(km, j.f("key_multiplier", 1.0));
  TROUPE_TRY_ASSIGN(ai, j.f("attention_in_multiplier", 1.0));
  TROUPE_TRY_ASSIGN(ao, j.f("attention_out_multiplier", 1.0));
  TROUPE_TRY_ASSIGN(si, j.f("ssm_in_multiplier", 1.0));
  TROUPE_TRY_ASSIGN(so, j.f("ssm_out_multiplier", 1.0));
  c.embed_scale = em == 1 ? 0 : em;
  c.logit_scale = lm;
  c.attn_scale = km / std::sqrt(static_cast<double>(c.D)); // q . (k km) = km (q . k)
  c.attn_in_scale = ai, c.attn_out_scale = ao, c.ssm_in_scale = si, c.ssm_out_scale = so;
  TROUPE_TRY(read_multipliers(j, "ssm_multipliers", 5, c.ssm_mup));
  double mlp[2] = {1, 1};
  TROUPE_TRY(read_multipliers(j, "mlp_multipliers", 2, mlp));
  c.ffn_down_scale = mlp[1];
  const std::string act = j.s("hidden_act", "silu");
  if (act != "silu")
    return j.unsupported(fmt::format("'hidden_act' {}", j.raw("hidden_act").dump()));
  if (mlp[0] != 1) // silu(gate x g): the gate's multiplier inside the activation
    c.act_expr = fmt::format("({0} * x) * sigmoid({0} * x)", mlp[0]);
  j.mark("num_logits_to_keep");
  return {};
}

// GGUF (llama.cpp's falcon-h1): the converter folds every multiplier into the weights, so the
// file's model has none; ssm.* keys for the mixer (its inner width the file's), the attention's
// keys, NEOX RoPE (q / k as published); the mixer's norm, where the file has one, after the gate
// (llama.cpp's)
status read_falcon_h1_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  TROUPE_TRY(read_mamba_gguf_mixer(g, c));
  c.ssm_parallel = true;
  c.ssm_norm = g.has_tensor("blk.0.ssm_norm.weight") ? model_config::ssm_norm_kind::after_gate
                                                     : model_config::ssm_norm_kind::none;
  c.rope.layout = rope_layout::neox;
  return {};
}

status build_falcon_h1(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    n.ffn_norm = "blk.{}.ffn_norm"; // (as gguf-py maps pre_ff_layernorm.weight: without .weight)
    mamba_names(m, n, "");
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = feed_forward_layout(m);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
