// bloom.cpp (arch/families): the ALiBi models. Bloom (BloomForCausalLM): a LayerNorm on the
// embeddings, LayerNorms and linear layers with biases, a fused per-head qkv ([H, 3, D]
// rows), ALiBi with a max bias of 8, a tanh-GELU MLP. MPT (MptForCausalLM): LayerNorms
// without biases, no linear biases, a fused qkv in blocks (q, k, v), ALiBi, optional clip_qkv
// and softmax_scale, an exact-GELU MLP of 4x the width. Both tie the embeddings; checkpoints
// name Bloom's tensors with or without the "transformer." prefix.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// MPT's attn_config, as transformers reads it; values that transformers would ignore but the
// published model means (alibi off, another max bias, q/k LayerNorms ...) are refused.
status read_mpt_attn(hf_cfg& j, model_config& c) {
  const json& a = j.raw("attn_config");
  if (a.is_null()) {
    c.alibi_max_bias = 8;
    return {};
  }
  if (!a.is_object()) return j.bad("'attn_config' must be an object");
  auto num = [&](const char* k, double fallback) -> expected<double> {
    auto it = a.find(k);
    if (it == a.end() || it->is_null()) return fallback;
    if (!it->is_number()) return j.bad(fmt::format("attn_config.{} must be a number", k));
    return it->get<double>();
  };
  auto flag = [&](const char* k, bool fallback) {
    auto it = a.find(k);
    return it != a.end() && it->is_boolean() ? it->get<bool>() : fallback;
  };
  if (!flag("alibi", true)) return j.unsupported("attn_config.alibi = false is not supported");
  TROUPE_TRY_ASSIGN(maxb, num("alibi_bias_max", 8));
  if (maxb != 8)
    return j.unsupported(
        fmt::format("attn_config.alibi_bias_max = {} is not supported (8 is)", maxb));
  if (flag("qk_ln", false)) return j.unsupported("attn_config.qk_ln is not supported");
  if (flag("prefix_lm", false)) return j.unsupported("attn_config.prefix_lm is not supported");
  if (a.contains("attn_type") && a["attn_type"] != "multihead_attention")
    return j.unsupported(
        fmt::format("attn_config.attn_type = {} is not supported", a["attn_type"].dump()));
  TROUPE_TRY_ASSIGN(clip, num("clip_qkv", 0));
  TROUPE_TRY_ASSIGN(scale, num("softmax_scale", 0));
  if (clip < 0 || scale < 0) return j.bad("attn_config.clip_qkv / softmax_scale must be >= 0");
  c.clip_qkv = clip;
  c.attn_scale = scale;
  c.alibi_max_bias = 8;
  return {};
}

} // namespace

status read_bloom_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.rope_enabled = false;
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  TROUPE_TRY_ASSIGN(eps, j.f("layer_norm_epsilon", 1e-5));
  c.norm_eps = eps;
  if (c.family == "bloom") {
    TROUPE_TRY_ASSIGN(C, j.req("hidden_size", "n_embed"));
    TROUPE_TRY_ASSIGN(L, j.req("n_layer"));
    TROUPE_TRY_ASSIGN(H, j.req("n_head"));
    TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
    TROUPE_TRY_ASSIGN(ctx, j.i("seq_length", 2048));
    c.C = C, c.n_layer = L, c.H = H, c.Hkv = H, c.V = V, c.ctx = ctx, c.F = 4 * C, c.D = C / H;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.embed_norm = true;
    c.act = act_kind::gelu_tanh; // bloom_gelu_forward: the tanh approximation
    c.alibi_max_bias = 8;
    if (j.b("apply_residual_connection_post_layernorm", false))
      return j.unsupported("'apply_residual_connection_post_layernorm' is not supported");
    j.mark("slow_but_exact"); // the same math, summed in another order
    j.mark("pretraining_tp");
    return {};
  }
  TROUPE_TRY_ASSIGN(C, j.req("d_model"));
  TROUPE_TRY_ASSIGN(L, j.req("n_layers"));
  TROUPE_TRY_ASSIGN(H, j.req("n_heads"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_seq_len", 2048));
  TROUPE_TRY_ASSIGN(ratio, j.i("expansion_ratio", 4));
  if (ratio != 4)
    return j.unsupported(fmt::format("'expansion_ratio' = {} is not supported (4 is)", ratio));
  c.C = C, c.n_layer = L, c.H = H, c.Hkv = H, c.V = V, c.ctx = ctx, c.F = 4 * C, c.D = C / H;
  c.act = act_kind::gelu_erf;
  if (!j.b("no_bias", true)) return j.unsupported("'no_bias' = false is not supported");
  c.norm_bias = false; // (no_bias: the LayerNorms' too)
  if (const json& ls = j.raw("logit_scale"); !ls.is_null())
    return j.unsupported("'logit_scale' is not supported");
  const std::string nt = j.s("norm_type", "low_precision_layernorm");
  if (nt != "low_precision_layernorm" && nt != "layernorm")
    return j.unsupported(fmt::format("'norm_type' = '{}' is not supported", nt));
  j.mark("learned_pos_emb"); // with ALiBi no position table is built (or stored)
  j.mark("embedding_fraction");
  return read_mpt_attn(j, c);
}

// GGUF: Bloom's per-head qkv reordered to [q; k; v] blocks, ALiBi with llama.cpp's fixed
// max bias of 8; MPT's max bias and clamp are keys (no ALiBi: a learned position table).
status read_bloom_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.rope_enabled = false;
  if (c.family == "bloom") {
    // the converter writes seq_length, or the hidden size when config.json has none (as
    // Bloom's never do); ALiBi has no position limit: the HF reader's default then
    if (c.ctx == c.C) c.ctx = 2048;
    c.embed_norm = true;
    c.act = act_kind::gelu_tanh;
    c.alibi_max_bias = 8;
    return {};
  }
  c.act = act_kind::gelu_erf;
  c.norm_bias = false; // (MPT's LayerNorms have none)
  c.clip_qkv = g.f("attention.clamp_kqv", 0.0);
  c.alibi_max_bias = g.f("attention.max_alibi_bias", 8.0);
  if (c.clip_qkv < 0 || c.alibi_max_bias < 0)
    return g.unsupported("mpt.attention.clamp_kqv / max_alibi_bias must not be negative");
  if (c.alibi_max_bias == 0) {
    if (!g.has_tensor("position_embd.weight"))
      return g.unsupported("an MPT without ALiBi needs position_embd.weight");
    c.learned_positions = true;
  }
  if (g.has_tensor("blk.0.attn_q_norm.weight"))
    return g.unsupported("MPT's q/k LayerNorms (attn_q_norm) are not supported");
  return {};
}

status build_bloom(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format != "hf") {
    n = gguf_layout(m);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  if (c.family == "bloom") {
    const std::string p =
        m.tensors->contains("transformer.word_embeddings.weight") ? "transformer." : "";
    const std::string h = p + "h.{}.";
    n.tok_embd = p + "word_embeddings.weight";
    n.embd_norm = p + "word_embeddings_layernorm.weight";
    n.embd_norm_b = p + "word_embeddings_layernorm.bias";
    n.attn_norm = h + "input_layernorm.weight", n.attn_norm_b = h + "input_layernorm.bias";
    n.ffn_norm = h + "post_attention_layernorm.weight";
    n.ffn_norm_b = h + "post_attention_layernorm.bias";
    n.wqkv = h + "self_attention.query_key_value.weight";
    n.bqkv = h + "self_attention.query_key_value.bias";
    n.layout = qkv_layout::per_head;
    n.wo = h + "self_attention.dense.weight", n.bo = h + "self_attention.dense.bias";
    n.w_up = h + "mlp.dense_h_to_4h.weight", n.b_up = h + "mlp.dense_h_to_4h.bias";
    n.w_down = h + "mlp.dense_4h_to_h.weight", n.b_down = h + "mlp.dense_4h_to_h.bias";
    n.out_norm = p + "ln_f.weight", n.out_norm_b = p + "ln_f.bias";
  } else {
    const std::string h = "transformer.blocks.{}.";
    n.tok_embd = "transformer.wte.weight";
    n.attn_norm = h + "norm_1.weight";
    n.ffn_norm = h + "norm_2.weight";
    n.wqkv = h + "attn.Wqkv.weight";
    n.layout = qkv_layout::blocks;
    n.wo = h + "attn.out_proj.weight";
    n.w_up = h + "ffn.up_proj.weight", n.w_down = h + "ffn.down_proj.weight";
    n.out_norm = "transformer.norm_f.weight";
  }
  n.lm_head = c.tie_embeddings ? "" : "lm_head.weight";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
