// falcon.cpp (arch/families): Falcon (FalconForCausalLM). A fused query_key_value in one of
// three layouts: multi-query (7B: all query heads, then one key and one value head), grouped
// (the new decoder architecture of 40B / 180B / Falcon 2: per KV group its query heads, key
// and value) or per head ([H, 3, D]); LayerNorms with biases; a parallel block with one norm
// (7B, Falcon 2) or two (40B), or sequential; an exact-GELU MLP; optional linear biases.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_falcon_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size", "n_embed"));
  TROUPE_TRY_ASSIGN(L, j.req("num_hidden_layers"));
  TROUPE_TRY_ASSIGN(H, j.req("num_attention_heads"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 2048));
  TROUPE_TRY_ASSIGN(kv, j.i("num_kv_heads", H));
  TROUPE_TRY_ASSIGN(F, j.i("ffn_hidden_size", 4 * C));
  TROUPE_TRY_ASSIGN(eps, j.f("layer_norm_epsilon", 1e-5));
  c.C = C, c.n_layer = L, c.H = H, c.V = V, c.ctx = ctx, c.F = F ? F : 4 * C, c.D = C / H;
  c.norm_eps = eps;
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  const bool new_arch = j.b("new_decoder_architecture", false);
  const bool mq = j.b("multi_query", true);
  const bool parallel = j.b("parallel_attn", true);
  TROUPE_TRY_ASSIGN(n_ln, j.i("num_ln_in_parallel_attn", new_arch ? 2 : 1));
  if (j.b("alibi", false))
    return j.unsupported("'alibi' (Falcon-RW's ALiBi, scaled with the scores) is not supported");
  if (new_arch && !parallel)
    return j.bad("'new_decoder_architecture' needs 'parallel_attn' (transformers fails too)");
  c.Hkv = new_arch || !mq ? (kv ? kv : H) : 1;
  if (j.b("bias", false)) c.qkv_bias = c.o_bias = c.mlp_bias = true;
  if (!parallel)
    c.residual = residual_kind::sequential;
  else if (new_arch && n_ln == 2)
    c.residual = residual_kind::parallel_two_norms;
  else
    c.residual = residual_kind::parallel;
  TROUPE_TRY(read_activation(j.s("activation", "gelu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  return {};
}

// GGUF: the converter regroups query_key_value into [q; k; v] blocks ("jploski" layout);
// the new decoder architecture's two norms are attn_norm_2 (attention) and attn_norm (MLP).
// llama.cpp's Falcon is always the parallel block.
status read_falcon_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.act = act_kind::gelu_erf;
  c.rope.layout = rope_layout::neox;
  if (auto layout = g.g.get_string(g.key("tensor_data_layout")); layout && *layout != "jploski")
    return g.unsupported(fmt::format("tensor data layout '{}' is not supported", *layout));
  c.residual = g.has_tensor("blk.0.attn_norm_2.weight") ? residual_kind::parallel_two_norms
                                                        : residual_kind::parallel;
  return {};
}

status build_falcon(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    if (c.residual == residual_kind::parallel_two_norms) {
      n.ffn_norm = n.attn_norm, n.ffn_norm_b = n.attn_norm_b;
      n.attn_norm = "blk.{}.attn_norm_2.weight", n.attn_norm_b = "blk.{}.attn_norm_2.bias";
    }
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  const std::string h = "transformer.h.{}.";
  decoder_names n;
  n.tok_embd = "transformer.word_embeddings.weight";
  if (c.residual == residual_kind::parallel_two_norms) {
    n.attn_norm = h + "ln_attn.weight", n.attn_norm_b = h + "ln_attn.bias";
    n.ffn_norm = h + "ln_mlp.weight", n.ffn_norm_b = h + "ln_mlp.bias";
  } else {
    n.attn_norm = h + "input_layernorm.weight", n.attn_norm_b = h + "input_layernorm.bias";
    n.ffn_norm = h + "post_attention_layernorm.weight";
    n.ffn_norm_b = h + "post_attention_layernorm.bias";
  }
  n.wqkv = h + "self_attention.query_key_value.weight";
  n.wo = h + "self_attention.dense.weight";
  n.w_up = h + "mlp.dense_h_to_4h.weight", n.w_down = h + "mlp.dense_4h_to_h.weight";
  if (c.qkv_bias) {
    n.bqkv = h + "self_attention.query_key_value.bias", n.bo = h + "self_attention.dense.bias";
    n.b_up = h + "mlp.dense_h_to_4h.bias", n.b_down = h + "mlp.dense_4h_to_h.bias";
  }
  // all three layouts are [Hkv, G + 2, D]: multi-query has one group (all queries, k, v), the
  // old per-head layout G = 1 (q, k, v of each head)
  n.layout = qkv_layout::grouped;
  n.out_norm = "transformer.ln_f.weight", n.out_norm_b = "transformer.ln_f.bias";
  n.lm_head = c.tie_embeddings ? "" : "lm_head.weight";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
