// recurrent_gemma.cpp (arch/families): RecurrentGemma (Griffin; RecurrentGemmaForCausalLM, 2B /
// 9B). Layers of block_types cycled (recurrent, recurrent, attention by default), each a
// pre-norm temporal block and a pre-norm gated-GELU MLP (intermediate_size / 2 wide, biased),
// norms scaling by 1 + w. The recurrent block (decoder::rg_lru) is gelu(W_y h) times the RG-LRU
// of a biased depthwise convolution of W_x h: per channel h_t = a_t h_t-1 + sqrt(1 - a_t^2) i_t
// x_t (i_t x_t at position 0), a_t = exp(-8 r_t softplus(recurrent_param)), the input and
// recurrence gates i, r sigmoids of block-diagonal maps per head; -8 softplus(recurrent_param)
// is derived at load (prepare_recurrent_gemma_hf). The attention layers: multi-query, RoPE on
// half of each head, a window of attention_window_size, an o_proj bias. The embedding times
// sqrt(hidden) rounded to bf16 (transformers' normalizer buffer, whatever the weights' dtype),
// logits soft-capped at logits_soft_cap. llama.cpp has no form of it (HF only).
#include "arch/families/decoder.hpp"

#include <cmath>

#include "core/convert.hpp"

namespace troupe::arch {

namespace {
const std::string log_a_name = "model.layers.{}.temporal_block.rg_lru.log_a";
} // namespace

status read_recurrent_gemma_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  // (head_dim is hidden_size / num_attention_heads: transformers derives and saves it)
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6, false));
  // (its config has no max_position_embeddings: local attention and a recurrence know no
  // limit; the length it was trained at serves unless the file says otherwise)
  if (!j.has("max_position_embeddings")) c.ctx = 8192;
  if (c.C % c.H) return j.bad("'hidden_size' must be a multiple of 'num_attention_heads'");
  c.F /= 2; // (the MLP is intermediate_size / 2 wide)
  if (c.F <= 0) return j.bad("'intermediate_size' must be at least 2");
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.norm_add = 1;
  c.embed_scale = round_to(dtype::bf16, std::sqrt(static_cast<double>(c.C)));
  c.o_bias = true;
  c.mlp_bias = true;
  if (j.b("attention_bias", false)) c.qkv_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_activation", "gelu_pytorch_tanh"), c, j.where()));
  TROUPE_TRY_ASSIGN(cap, j.f("logits_soft_cap", 30.0));
  c.final_softcap = cap;
  TROUPE_TRY(read_rope(j, c, 10000.0, 0.5));
  c.rope.layout = rope_layout::neox;
  TROUPE_TRY_ASSIGN(window, j.i("attention_window_size", 2048));
  c.sliding_window = window; // (every attention layer: local attention)
  // the blocks: block_types cycled over the layers
  std::vector<std::string> types = {"recurrent", "recurrent", "attention"};
  if (const json& bt = j.raw("block_types"); !bt.is_null()) {
    if (!bt.is_array() || bt.empty()) return j.bad("'block_types' must be a list");
    types.clear();
    for (const json& t : bt) {
      if (t != "recurrent" && t != "attention")
        return j.unsupported(fmt::format("block_types entry {}", t.dump()));
      types.push_back(t.get<std::string>());
    }
  }
  c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.linear_layers[static_cast<size_t>(l)] =
        types[static_cast<size_t>(l) % types.size()] == "recurrent";
  TROUPE_TRY_ASSIGN(W, j.i("lru_width", c.C));
  if (W <= 0 || W % c.H) return j.unsupported(fmt::format("lru_width {} over {} heads", W, c.H));
  TROUPE_TRY_ASSIGN(K, j.i("conv1d_width", 4));
  if (K < 1 || K > 64) return j.unsupported(fmt::format("conv1d_width {}", K));
  c.rg_lru = true;
  c.lin_v_heads = c.H, c.lin_v_dim = W / c.H, c.lin_k_dim = 1, c.lin_k_heads = 0;
  c.lin_conv = K;
  // (initialisation only)
  for (const char* k : {"w_init_variance_scale", "final_w_init_variance_scale"}) j.mark(k);
  return {};
}

// -8 softplus(recurrent_param) per channel, as the RG-LRU's decay log per unit gate
status prepare_recurrent_gemma_hf(const model_config& c, tensor_index& t) {
  const int64_t W = c.lin_v_heads * c.lin_v_dim;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (!c.layer_linear(l)) continue;
    const std::string name =
        fmt::format("model.layers.{}.temporal_block.rg_lru.recurrent_param", l);
    TROUPE_TRY_ASSIGN(p, take_tensor(t, name, {W}));
    if (!p->supported || is_quantized(p->type))
      return make_error(errc::unsupported, "{}: f32, f16 or bf16 only", name);
    std::vector<uint8_t> bytes(static_cast<size_t>(W) * sizeof(float));
    auto* out = reinterpret_cast<float*>(bytes.data());
    to_f32(p->type, p->data, out, W);
    for (int64_t i = 0; i < W; ++i) { // softplus as torch's: x past 20 as it is
      const double x = out[i];
      out[i] = static_cast<float>(-8.0 * (x > 20 ? x : std::log1p(std::exp(x))));
    }
    TROUPE_TRY(add_derived_tensor(t, weight_names::layer(log_a_name, static_cast<int>(l)),
                                  dtype::f32, shape{W}, "F32", std::move(bytes),
                                  "RecurrentGemma's decay log (derived)"));
  }
  return {};
}

status build_recurrent_gemma(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: RecurrentGemma is read from HF checkpoints only",
                      m.path);
  decoder_names n = hf_llama_layout(c.qkv_bias, true, true);
  const std::string p = "model.layers.{}.", a = p + "temporal_block.", r = a + "rg_lru.";
  n.out_norm = "model.final_norm.weight";
  n.attn_norm = p + "temporal_pre_norm.weight";
  n.ffn_norm = p + "channel_pre_norm.weight";
  for (std::string* s : {&n.wq, &n.wk, &n.wv, &n.wo, &n.bq, &n.bk, &n.bv, &n.bo})
    if (!s->empty()) s->replace(s->find("self_attn."), 10, "temporal_block.");
  for (std::string* s : {&n.w_gate, &n.w_up, &n.w_down, &n.b_gate, &n.b_up, &n.b_down})
    s->replace(s->find("mlp."), 4, "mlp_block.");
  n.lru_x = a + "linear_x.weight", n.lru_x_b = a + "linear_x.bias";
  n.lru_y = a + "linear_y.weight", n.lru_y_b = a + "linear_y.bias";
  n.lin_conv = a + "conv_1d.weight", n.ssm_conv_b = a + "conv_1d.bias";
  n.lin_out = a + "linear_out.weight", n.ssm_out_b = a + "linear_out.bias";
  n.lru_gate_i = r + "input_gate_weight", n.lru_gate_i_b = r + "input_gate_bias";
  n.lru_gate_a = r + "recurrent_gate_weight", n.lru_gate_a_b = r + "recurrent_gate_bias";
  n.lru_log_a = log_a_name;
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
