// doge.cpp (arch/families): SmallDoge's Doge (DogeForCausalLM, the dense models; the decoder's
// doge layers, decoder_doge.cpp; model_config::doge). Llama's pre-norm decoder with weighted q / k
// RMS norms per head, biases where attention_bias / mlp_bias say, each residual times a learned
// vector before its add, and dynamic mask attention: every key's score raised by exp(A
// softplus(dt_proj(the values of all KV heads at its position))), one per KV head. transformers
// keeps only the keep_window_size best-scored keys of a longer context: Troupe serves contexts up
// to keep_window_size (model_config::ctx), where the two are the same model. At load the mask's
// constants are derived (the queries' extra values, the keys' map, each head's first D values).
// Refused: is_moe (CDMoE, whose routing mixes the prompt's tokens in transformers). HF only.
#include <cmath>

#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"

namespace troupe::arch {

namespace {
constexpr const char* q_extra = "doge.q_extra";
constexpr const char* k_map = "doge.k_map";
constexpr const char* select = "doge.select";
constexpr int64_t extra = model_config::doge_extra;
} // namespace

status read_doge_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  c.qk_norm = qk_norm_kind::head;
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (j.b("is_moe", false))
    return j.unsupported("is_moe true (Doge's CDMoE: transformers' routing mixes the prompt's "
                         "tokens)");
  for (const char* key : {"num_experts", "num_experts_per_tok", "norm_topk_prob",
                          "output_router_logits", "router_aux_loss_coef", "hidden_dropout",
                          "attention_dropout", "initializer_range", "use_cache"})
    j.mark(key); // (the MoE's, unused when is_moe is false; training)
  if (const json& sw = j.raw("sliding_window"); !sw.is_null()) {
    TROUPE_TRY_ASSIGN(w, j.req("sliding_window"));
    if (w <= 0) return j.bad(fmt::format("sliding_window {}", w));
    c.sliding_window = w;
    c.windowed.assign(static_cast<size_t>(c.n_layer), 1);
  }
  // past keep_window_size keys transformers keeps the best-scored ones only: a context up to it
  TROUPE_TRY_ASSIGN(keep, j.i("keep_window_size", 2048));
  if (keep <= 0) return j.bad(fmt::format("keep_window_size {}", keep));
  c.ctx = std::min(c.ctx, keep);
  if (c.H % c.Hkv) return j.bad(fmt::format("{} heads over {} KV heads", c.H, c.Hkv));
  c.doge = true;
  return {};
}

status prepare_doge_hf(const model_config& c, tensor_index& t) {
  const int64_t H = c.H, Hkv = c.Hkv, D = c.D;
  // the queries' extra values: a 1, then zeros; the keys': the mask score (over the scale the
  // attention multiplies by: sqrt(D)), then zeros; each head's first D values of D + 8
  std::vector<float> q(static_cast<size_t>(H * extra), 0.0f);
  for (int64_t h = 0; h < H; ++h) q[static_cast<size_t>(h * extra)] = 1.0f;
  std::vector<float> k(static_cast<size_t>(Hkv * extra * Hkv), 0.0f);
  for (int64_t h = 0; h < Hkv; ++h)
    k[static_cast<size_t>(h * extra * Hkv + h)] =
        static_cast<float>(std::sqrt(static_cast<double>(D)));
  std::vector<float> s(static_cast<size_t>(D * (D + extra)), 0.0f);
  for (int64_t d = 0; d < D; ++d) s[static_cast<size_t>(d * (D + extra) + d)] = 1.0f;
  TROUPE_TRY(add_derived_tensor(t, q_extra, dtype::f32, shape{H * extra}, "F32", f32_bytes(q),
                                "the queries' extra values (derived)"));
  TROUPE_TRY(add_derived_tensor(t, k_map, dtype::f32, shape{Hkv * extra, Hkv}, "F32", f32_bytes(k),
                                "the keys' map from the mask scores (derived)"));
  return add_derived_tensor(t, select, dtype::f32, shape{D, D + extra}, "F32", f32_bytes(s),
                            "each head's first values (derived)");
}

status build_doge(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
  const std::string a = "model.layers.{}.self_attn.";
  n.doge_a = a + "A", n.doge_dt = a + "dt_proj.weight";
  if (c.o_bias) n.doge_dt_b = a + "dt_proj.bias";
  n.doge_res_attn = "model.layers.{}.input_residual";
  n.doge_res_ffn = "model.layers.{}.post_attention_residual";
  n.doge_q_extra = q_extra, n.doge_k_map = k_map, n.doge_select = select;
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
