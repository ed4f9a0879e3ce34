// modernbert.cpp (arch/families): ModernBERT's decoder (ModernBertDecoderForCausalLM: the Ettin
// decoders). Embeddings LayerNorm-ed; pre-norm layers of LayerNorms (biases where norm_bias), the
// first without a norm before its attention; multi-head attention (q, k, v, Wo; biases where
// attention_bias), RoPE with one base on the full layers and another on the sliding ones, windows
// of local_attention / 2 on every layer but each global_attn_every_n_layers-th (or as layer_types
// says); a GeGLU MLP from one Wi [gate; up rows]; the final norm; then the prediction head
// (dense, classifier_activation, a LayerNorm) and the decoder (tied to the embeddings by default,
// with its bias). No GGUF form (llama.cpp has none).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// RoPE by layer type: transformers 5's rope_parameters {"full_attention", "sliding_attention"},
// or the older global_rope_theta / local_rope_theta with rope_scaling applied to both
status read_modernbert_rope(hf_cfg& j, model_config& c) {
  json full = json::object(), sliding = json::object();
  const json& rp = j.raw("rope_parameters");
  if (rp.is_object() && !rp.empty()) {
    for (auto& [k, v] : rp.items()) {
      if (k != "full_attention" && k != "sliding_attention")
        return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
      if (!v.is_null() && !v.is_object())
        return j.bad(fmt::format("rope_parameters '{}' must be an object", k));
    }
    if (rp.contains("full_attention") && rp["full_attention"].is_object())
      full = rp["full_attention"];
    if (rp.contains("sliding_attention") && rp["sliding_attention"].is_object())
      sliding = rp["sliding_attention"];
  } else if (!rp.is_null() && !rp.is_object()) {
    return j.bad("'rope_parameters' must be an object");
  }
  if (const json& rs = j.raw("rope_scaling"); rs.is_object()) full.update(rs), sliding.update(rs);
  TROUPE_TRY_ASSIGN(global_theta, j.f("global_rope_theta", 160000.0));
  TROUPE_TRY_ASSIGN(local_theta, j.f("local_rope_theta", 10000.0));
  if (!full.contains("rope_theta")) full["rope_theta"] = global_theta;
  if (!sliding.contains("rope_theta")) sliding["rope_theta"] = local_theta;
  TROUPE_TRY(read_rope_dict(full, c, c.rope, global_theta, j.where()));
  TROUPE_TRY(read_rope_dict(sliding, c, c.rope_local, local_theta, j.where()));
  c.has_rope_local = true;
  return {};
}

expected<act_kind> head_activation(hf_cfg& j) {
  const std::string a = j.s("classifier_activation", "gelu");
  if (a == "gelu") return act_kind::gelu_erf;
  if (a == "gelu_pytorch_tanh" || a == "gelu_new" || a == "gelu_fast") return act_kind::gelu_tanh;
  if (a == "silu" || a == "swish") return act_kind::silu;
  return j.unsupported(
      fmt::format("'classifier_activation' {}", j.raw("classifier_activation").dump()));
}

} // namespace

status read_modernbert_decoder_hf(hf_cfg& j, model_config& c) {
  c.names.output = "decoder.weight";
  TROUPE_TRY(read_hf_dims(j, c, "norm_eps", 1e-5));
  if (c.C % c.H) return j.bad("'hidden_size' must be a multiple of 'num_attention_heads'");
  c.D = c.C / c.H, c.Hkv = c.H; // (transformers' head_dim, whatever else the file says)
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.norm = norm_kind::layer;
  c.embed_norm = true;
  c.first_attn_unnormed = true;
  c.head_transform = true;
  TROUPE_TRY_ASSIGN(head_act, head_activation(j));
  c.head_act = head_act;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  // (the biases are read where the checkpoint has them; these keys say what parameters() counts)
  c.norm_bias = j.b("norm_bias", false);
  c.head_dense_bias = j.b("classifier_bias", false);
  c.lm_head_bias = j.b("decoder_bias", true);
  TROUPE_TRY(read_activation(j.s("hidden_activation", "gelu"), c, j.where()));
  c.gated_ffn = true;
  // windows of local_attention / 2 (transformers' sliding_window) on the sliding layers
  const json& la = j.raw("local_attention");
  if (la.is_null())
    return j.unsupported("'local_attention' null (transformers' sliding layers then have no "
                         "defined window)");
  TROUPE_TRY_ASSIGN(local, j.i("local_attention", 128));
  if (local < 2) return j.bad(fmt::format("'local_attention' {} (at least 2)", local));
  TROUPE_TRY_ASSIGN(every, j.i("global_attn_every_n_layers", 3));
  if (every <= 0) return j.bad(fmt::format("'global_attn_every_n_layers' {}", every));
  TROUPE_TRY(read_layer_types(j, c, local / 2, [every](int64_t l) { return l % every != 0; }));
  TROUPE_TRY(read_modernbert_rope(j, c));
  // (ids of the encoder's special tokens; dropout and initialisation; sliding_window, which
  // transformers derives from local_attention whatever the file says)
  for (const char* k : {"cls_token_id", "sep_token_id", "initializer_cutoff_factor",
                        "sliding_window", "classifier_dropout", "embedding_dropout", "mlp_dropout"})
    j.mark(k);
  return {};
}

status build_modernbert_decoder(const model_source& m, graph::graph& g) {
  if (m.format != "hf")
    return make_error(errc::unsupported,
                      "{}: ModernBERT's decoder is read from HF checkpoints only", m.path);
  const model_config& c = m.config;
  decoder_names n;
  const std::string e = "model.embeddings.", p = "model.layers.{}.", a = p + "attn.",
                    f = p + "mlp.";
  n.tok_embd = e + "tok_embeddings.weight";
  n.embd_norm = e + "norm.weight", n.embd_norm_b = e + "norm.bias";
  n.attn_norm = p + "attn_norm.weight", n.attn_norm_b = p + "attn_norm.bias";
  n.wq = a + "q_proj.weight", n.wk = a + "k_proj.weight", n.wv = a + "v_proj.weight";
  n.wo = a + "Wo.weight";
  if (c.qkv_bias) {
    n.bq = a + "q_proj.bias", n.bk = a + "k_proj.bias", n.bv = a + "v_proj.bias";
    n.bo = a + "Wo.bias";
  }
  n.ffn_norm = p + "mlp_norm.weight", n.ffn_norm_b = p + "mlp_norm.bias";
  n.w_gate_up = f + "Wi.weight", n.w_down = f + "Wo.weight";
  if (c.mlp_bias) n.b_gate_up = f + "Wi.bias", n.b_down = f + "Wo.bias";
  n.out_norm = "model.final_norm.weight", n.out_norm_b = "model.final_norm.bias";
  n.head_dense = "lm_head.dense.weight", n.head_dense_b = "lm_head.dense.bias";
  n.head_norm = "lm_head.norm.weight", n.head_norm_b = "lm_head.norm.bias";
  n.lm_head = "decoder.weight", n.lm_head_b = "decoder.bias";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
