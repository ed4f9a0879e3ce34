// minimax01.cpp (arch/families): MiniMax-Text-01 and MiniMax-M1 as transformers runs them
// (MiniMaxForCausalLM): layers alternating (layer_types; full attention on the even ones by
// default) between Mixtral's attention (GQA, RoPE over whole heads) and lightning attention, a
// linear attention with a fixed decay per head: q, k, v = silu(qkv_proj x) ([q | k | v] per head),
// S = exp(-s_h) S + k^T v, out = q S, then an RMS norm over every head, times sigmoid(output_gate
// x), out_proj. The decay s_h = (2^(-8 / H))^(h + 1) (1 - l / (L - 1 + 1e-5) + 1e-5) of layer l of
// L is a buffer transformers saves (slope_rate [H, 1, 1], with the chunked forms of its decays,
// query_decay, key_decay, diagonal_decay, which transformers' chunks read: the same decay);
// prepare_minimax_hf reads -s from slope_rate, or derives it where a checkpoint leaves the buffers
// out (transformers recomputes them then). The lightning layers run as
// Mamba-2's scan with a unit step (arch/families/decoder_mixers.cpp, decoder::lightning). Each
// sublayer's residual is its normed input (model_config::normed_residual): x = n1(h); h = alpha x +
// beta attn(x); x = n2(h); h = alpha' x + beta' moe(x), the factors by layer kind from the config.
// Mixtral's experts (softmax top k, renormalised) on every layer, named as published
// (block_sparse_moe.experts.{e}.w1 / w3 / w2).
#include "arch/families/decoder.hpp"

#include <cmath>

#include "core/convert.hpp"

namespace troupe::arch {

namespace {
const std::string slope_name = "model.layers.{}.self_attn.slope";
} // namespace

status read_minimax_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  // (the lightning layers' activation too: Troupe's runs silu there)
  const std::string act = j.s("hidden_act", "silu");
  if (act != "silu") return j.unsupported(fmt::format("hidden_act '{}' (silu is)", act));
  TROUPE_TRY(read_activation(act, c, j.where()));
  TROUPE_TRY(read_rope(j, c, 1e6, 1.0));
  if (c.rope.rot_dim != c.D) return j.unsupported("partial_rotary_factor other than 1");
  if (const json& sw = j.raw("sliding_window"); !sw.is_null())
    return j.unsupported("'sliding_window' (a window on the full attention layers)");
  j.mark("block_size"); // the lightning attention's chunks in transformers: the same math
  j.mark("router_jitter_noise");
  TROUPE_TRY_ASSIGN(listed, read_layer_kinds(j, "layer_types", c.n_layer, "linear_attention",
                                             "full_attention", c.linear_layers));
  if (!listed) { // (full attention on the even layers)
    c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 0; l < c.n_layer; ++l) c.linear_layers[static_cast<size_t>(l)] = l % 2;
  }
  c.lightning = true;
  c.lin_k_heads = c.lin_v_heads = c.H;
  c.lin_k_dim = c.lin_v_dim = c.D;
  c.lin_conv = 1;
  c.normed_residual = true;
  TROUPE_TRY_ASSIGN(fa, j.f("full_attn_alpha_factor", 1.0));
  TROUPE_TRY_ASSIGN(fb, j.f("full_attn_beta_factor", 1.0));
  TROUPE_TRY_ASSIGN(la, j.f("linear_attn_alpha_factor", 1.0));
  TROUPE_TRY_ASSIGN(lb, j.f("linear_attn_beta_factor", 1.0));
  TROUPE_TRY_ASSIGN(ma, j.f("mlp_alpha_factor", 1.0));
  TROUPE_TRY_ASSIGN(mb, j.f("mlp_beta_factor", 1.0));
  c.full_alpha = fa, c.full_beta = fb, c.lin_alpha = la, c.lin_beta = lb;
  c.ffn_alpha = ma, c.ffn_beta = mb;
  TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
  c.F_expert = c.F;
  c.norm_topk = true; // (Mixtral's router renormalises the top k)
  return {};
}

status prepare_minimax_hf(const model_config& c, tensor_index& t) {
  const double base = 1.0 / std::pow(2.0, 8.0 / static_cast<double>(c.H));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (!c.layer_linear(l)) continue;
    std::vector<uint8_t> bytes(static_cast<size_t>(c.H) * sizeof(float));
    auto* out = reinterpret_cast<float*>(bytes.data());
    const std::string a = fmt::format("model.layers.{}.self_attn.", l);
    if (t.find(a + "slope_rate")) { // as saved
      TROUPE_TRY_ASSIGN(s, take_tensor(t, a + "slope_rate", {c.H, 1, 1}));
      if (!s->supported || is_quantized(s->type))
        return make_error(errc::unsupported, "{}slope_rate: f32, f16 or bf16 only", a);
      to_f32(s->type, s->data, out, c.H);
      for (int64_t h = 0; h < c.H; ++h) out[h] = -out[h];
      for (const char* d : {"query_decay", "key_decay", "diagonal_decay"}) t.mark_consumed(a + d);
    } else { // transformers' formula, as it recomputes the buffers
      const double factor =
          1.0 - static_cast<double>(l) / (static_cast<double>(c.n_layer - 1) + 1e-5) + 1e-5;
      for (int64_t h = 0; h < c.H; ++h)
        out[h] = -static_cast<float>(std::pow(base, static_cast<double>(h + 1)) * factor);
    }
    TROUPE_TRY(add_derived_tensor(t, weight_names::layer(slope_name, static_cast<int>(l)),
                                  dtype::f32, shape{c.H}, "F32", std::move(bytes),
                                  "MiniMax's lightning decay (derived)"));
  }
  return {};
}

status build_minimax(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: MiniMax is read from HF checkpoints only", m.path);
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string a = "model.layers.{}.self_attn.";
  n.lin_qkv = a + "qkv_proj.weight";
  n.lin_z = a + "output_gate.weight";
  n.lin_norm = a + "norm.weight";
  n.lin_out = a + "out_proj.weight";
  n.lin_A_log = slope_name;
  expert_names(m, n, false); // (Mixtral's)
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
