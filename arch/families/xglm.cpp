// xglm.cpp (arch/families): XGLM (XGLMForCausalLM, facebook/xglm-564M ... 7.5B): GPT-2's
// pre-LayerNorm block with nn.Linear weights and biases everywhere, an exact-GELU MLP (fc1,
// fc2), the token embeddings times sqrt(d_model) (scale_embedding) plus a sinusoidal position
// table that no checkpoint stores: position p reads row p + 2 of [sin(p' f_i) | cos(p' f_i)],
// f_i = 10000^(-i / (d_model / 2 - 1)), the pad token's row zeroed (as transformers makes it,
// in f32). prepare_xglm_hf derives that table (from its third row) as a tensor of the index, so
// the graph reads it as a learned one. Tied embeddings by default.
#include "arch/families/decoder.hpp"

#include <cmath>

namespace troupe::arch {

namespace {
constexpr const char* position_table = "model.embed_positions.sinusoidal";
} // namespace

status read_xglm_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(C, j.req("d_model"));
  TROUPE_TRY_ASSIGN(L, j.req("num_layers"));
  TROUPE_TRY_ASSIGN(H, j.req("attention_heads"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(F, j.req("ffn_dim"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 2048));
  if (H <= 0 || L > max_layers || C % H || C < 4 || C % 2)
    return j.bad(fmt::format("d_model {}, attention_heads {}, num_layers {}", C, H, L));
  c.C = C, c.n_layer = L, c.H = c.Hkv = H, c.V = V, c.F = F, c.ctx = ctx;
  c.D = C / H;
  c.norm_eps = 1e-5; // (nn.LayerNorm's default: the config has no key)
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.rope_enabled = false;
  c.learned_positions = true;
  if (j.b("scale_embedding", true)) c.embed_scale = std::sqrt(static_cast<double>(C));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.names.output = "lm_head.weight";
  // the padding row of the sinusoidal table (its padding_idx, the pad token)
  if (const json& pad = j.raw("pad_token_id"); pad.is_number_integer())
    c.position_zero_row = pad.get<int64_t>();
  if (j.b("add_cross_attention", false))
    return j.unsupported("'add_cross_attention' (an encoder-decoder XGLM) is not supported");
  for (const char* k : {"dropout", "attention_dropout", "activation_dropout", "layerdrop",
                        "init_std", "decoder_start_token_id"})
    j.mark(k);
  return read_activation(j.s("activation_function", "gelu"), c, j.where());
}

status prepare_xglm_hf(const model_config& c, tensor_index& t) {
  const int64_t half = c.C / 2;
  std::vector<float> freq(static_cast<size_t>(half));
  const float step = static_cast<float>(std::log(10000.0) / static_cast<double>(half - 1));
  for (int64_t i = 0; i < half; ++i) freq[static_cast<size_t>(i)] = std::exp(-step * float(i));
  std::vector<uint8_t> bytes(static_cast<size_t>(c.ctx * c.C) * sizeof(float));
  auto* out = reinterpret_cast<float*>(bytes.data());
  for (int64_t p = 0; p < c.ctx; ++p) {
    const int64_t row = p + 2;
    float* o = out + p * c.C;
    if (row == c.position_zero_row) continue; // (the padding row: zeros)
    for (int64_t i = 0; i < half; ++i) {
      const float a = static_cast<float>(row) * freq[static_cast<size_t>(i)];
      o[i] = std::sin(a), o[half + i] = std::cos(a);
    }
  }
  return add_derived_tensor(t, position_table, dtype::f32, shape{c.ctx, c.C}, "F32",
                            std::move(bytes), "XGLM's sinusoidal positions (derived)");
}

status build_xglm(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: XGLM is read from HF checkpoints only", m.path);
  const std::string h = "model.layers.{}.", a = h + "self_attn.";
  decoder_names n;
  n.tok_embd = "model.embed_tokens.weight", n.pos_embd = position_table;
  n.attn_norm = h + "self_attn_layer_norm.weight", n.attn_norm_b = h + "self_attn_layer_norm.bias";
  n.wq = a + "q_proj.weight", n.wk = a + "k_proj.weight", n.wv = a + "v_proj.weight";
  n.bq = a + "q_proj.bias", n.bk = a + "k_proj.bias", n.bv = a + "v_proj.bias";
  n.wo = a + "out_proj.weight", n.bo = a + "out_proj.bias";
  n.ffn_norm = h + "final_layer_norm.weight", n.ffn_norm_b = h + "final_layer_norm.bias";
  n.w_up = h + "fc1.weight", n.b_up = h + "fc1.bias";
  n.w_down = h + "fc2.weight", n.b_down = h + "fc2.bias";
  n.out_norm = "model.layer_norm.weight", n.out_norm_b = "model.layer_norm.bias";
  n.lm_head = c.tie_embeddings ? "" : "lm_head.weight";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
