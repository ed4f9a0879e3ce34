// zaya.cpp (arch/families): Zyphra's ZAYA1 (ZayaForCausalLM; the decoder's zaya layers,
// decoder_zaya.cpp; model_config::zaya). Compressed convolutional attention: q and k each
// through a causal depthwise convolution (cca_time0 = 2 taps) and then a per-head one (cca_time1 =
// 2 taps, a D x D map a tap), plus residuals (q's: (q + its KV head's k) / 2; k's: the mean of
// those over the KV head's query heads), the values half this token's projection and half the
// previous token's; q and k L2-normed to sqrt(head_dim), k times a learned scale per KV head, RoPE
// on part of each head (a base per layer type); an affine scaling on the embedding and on both
// terms of every residual add; every layer a mixture of experts whose router is an MLP (down_proj
// to router_hidden_size, plus the previous layer's router state times a learned scale, an RMS norm,
// two GELU layers, out_proj) over the experts and a skip expert (the last: it adds nothing), one
// chosen a token by its softmax score plus a balancing bias. At load the convolutions' taps are
// rearranged (a tap per derived tensor, the depthwise taps as two convolutions of three: this
// token's output and the previous token's), and the mean of q_proj's rows over each KV head's
// query heads derived (k's residual). HF only (llama.cpp writes no ZAYA GGUF).
#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

namespace {
const std::string layer_prefix = "model.layers.{}.";
const std::string cca = layer_prefix + "self_attn.qkv_proj.";
constexpr const char* v_taps = "zaya.v_taps";

// a stored float tensor's values (the convolutions' and q_proj's, which the load rearranges)
expected<std::vector<float>> as_f32(const tensor_info& t, const std::string& name) {
  if (t.type != dtype::f32 && t.type != dtype::f16 && t.type != dtype::bf16)
    return make_error(errc::unsupported,
                      "{}: tensor '{}' is {}; ZAYA's load rearranges it from "
                      "f32, f16 or bf16 only",
                      t.file ? t.file->path() : name, name, troupe::name(t.type));
  std::vector<float> out(static_cast<size_t>(t.dims.numel()));
  to_f32(t.type, t.data, out.data(), t.dims.numel());
  return out;
}

} // namespace

status read_zaya_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.lm_head_bias = j.b("lm_head_bias", false);
  if (j.b("attention_bias", false))
    return j.unsupported("attention_bias true (the delayed values' first token would be the "
                         "bias's projection of zeros)");
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY_ASSIGN(t0, j.i("cca_time0", 2));
  TROUPE_TRY_ASSIGN(t1, j.i("cca_time1", 2));
  if (t0 != 2 || t1 != 2)
    return j.unsupported(
        fmt::format("cca_time0 {} / cca_time1 {} (2 and 2, as published, are)", t0, t1));
  // the layer types (all "hybrid" by default; "hybrid_sliding" windowed), a RoPE each
  std::vector<uint8_t> sliding(static_cast<size_t>(c.n_layer), 0);
  TROUPE_TRY_ASSIGN(
      listed, // (absent: every layer "hybrid")
      read_layer_kinds(j, "layer_types", c.n_layer, "hybrid_sliding", "hybrid", sliding));
  (void)listed;
  const bool any_sliding = std::find(sliding.begin(), sliding.end(), 1) != sliding.end();
  if (const json& sw = j.raw("sliding_window"); any_sliding) {
    if (sw.is_null()) return j.bad("hybrid_sliding layers without a sliding_window");
    TROUPE_TRY_ASSIGN(w, j.req("sliding_window"));
    if (w <= 0) return j.bad(fmt::format("sliding_window {}", w));
    c.sliding_window = w;
    c.windowed = sliding;
  } else {
    j.mark("sliding_window");
  }
  json full{{"rope_type", "default"}, {"rope_theta", 5000000.0}, {"partial_rotary_factor", 0.5}};
  json local{{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
  if (const json& rp = j.raw("rope_parameters"); !rp.is_null()) {
    if (!rp.is_object()) return j.bad("'rope_parameters' must be an object");
    for (auto& [k, v] : rp.items()) {
      if (k == "hybrid")
        full = v;
      else if (k == "hybrid_sliding")
        local = v;
      else if (k != "rope_type") // (the hub's config also has a top-level rope_type, ignored
                                 // by transformers)
        return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
    }
  }
  TROUPE_TRY(read_rope_dict(full, c, c.rope, 5e6, j.where()));
  TROUPE_TRY(read_rope_dict(local, c, c.rope_local, 1e4, j.where()));
  c.has_rope_local = true;
  // the experts: top-1 (transformers refuses more) of num_experts and the skip expert
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  if (c.n_expert_used != 1)
    return j.unsupported(
        fmt::format("num_experts_per_tok {} (ZAYA chooses one expert a token)", c.n_expert_used));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 2048));
  TROUPE_TRY_ASSIGN(R, j.i("router_hidden_size", 256));
  if (fe <= 0 || R <= 0)
    return j.bad(fmt::format("moe_intermediate_size {}, router_hidden_size {}", fe, R));
  c.F_expert = fe;
  c.router_dim = R;
  c.null_experts = 1;
  c.router_bias = true; // (the balancing biases: the choice by softmax score + bias)
  c.zaya = true;
  for (const char* key : {"attention_dropout", "initializer_range", "use_cache"}) j.mark(key);
  return {};
}

status prepare_zaya_hf(const model_config& c, tensor_index& t) {
  const int64_t H = c.H, Hkv = c.Hkv, D = c.D, G = H / Hkv, Ch = (H + Hkv) * D, C = c.C;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = weight_names::layer(cca, static_cast<int>(l));
    const mapped_file* from = nullptr;
    // the depthwise taps [Ch, 1, 2] as two causal convolutions over the last three inputs:
    // this token's output (0, w0, w1) and the previous token's (w0, w1, 0)
    {
      TROUPE_TRY_ASSIGN(dw, take_tensor(t, p + "conv_qk_depthwise.weight", {Ch, 1, 2}));
      from = dw->file;
      TROUPE_TRY_ASSIGN(w, as_f32(*dw, p + "conv_qk_depthwise.weight"));
      std::vector<float> now(static_cast<size_t>(Ch * 3), 0.0f), prev(now.size(), 0.0f);
      for (int64_t ch = 0; ch < Ch; ++ch) {
        const float w0 = w[static_cast<size_t>(2 * ch)], w1 = w[static_cast<size_t>(2 * ch + 1)];
        now[static_cast<size_t>(3 * ch + 1)] = w0, now[static_cast<size_t>(3 * ch + 2)] = w1;
        prev[static_cast<size_t>(3 * ch)] = w0, prev[static_cast<size_t>(3 * ch + 1)] = w1;
      }
      TROUPE_TRY(add_repacked_tensor(t, p + "conv_qk_depthwise.now", dtype::f32, shape{Ch, 3},
                                     f32_bytes(now), from));
      TROUPE_TRY(add_repacked_tensor(t, p + "conv_qk_depthwise.prev", dtype::f32, shape{Ch, 3},
                                     f32_bytes(prev), from));
    }
    // the per-head taps [Ch, D, 2] as one [Ch, D] a tap
    {
      TROUPE_TRY_ASSIGN(gw, take_tensor(t, p + "conv_qk_grouped.weight", {Ch, D, 2}));
      TROUPE_TRY_ASSIGN(w, as_f32(*gw, p + "conv_qk_grouped.weight"));
      for (int64_t tap = 0; tap < 2; ++tap) {
        std::vector<float> m(static_cast<size_t>(Ch * D));
        for (int64_t i = 0; i < Ch * D; ++i)
          m[static_cast<size_t>(i)] = w[static_cast<size_t>(2 * i + tap)];
        TROUPE_TRY(add_repacked_tensor(t, p + "conv_qk_grouped.tap" + std::to_string(tap),
                                       dtype::f32, shape{Ch, D}, f32_bytes(m), gw->file));
      }
    }
    // k's residual is the mean of q's over the KV head's query heads, (q_g + k) / 2: from the mean
    // of q_proj's rows over each group
    {
      const tensor_info* q = t.find(p + "q_proj.weight");
      if (!q || q->dims.rank != 2 || q->dims.dims[0] != H * D || q->dims.dims[1] != C)
        return make_error(errc::shape_mismatch, "{}q_proj.weight: missing or not [{}, {}]", p,
                          H * D, C);
      TROUPE_TRY_ASSIGN(w, as_f32(*q, p + "q_proj.weight"));
      std::vector<float> m(static_cast<size_t>(Hkv * D * C));
      for (int64_t j = 0; j < Hkv; ++j)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t k = 0; k < C; ++k) {
            double s = 0;
            for (int64_t g = 0; g < G; ++g)
              s += w[static_cast<size_t>(((j * G + g) * D + d) * C + k)];
            m[static_cast<size_t>((j * D + d) * C + k)] =
                static_cast<float>(s / static_cast<double>(G));
          }
      TROUPE_TRY(add_repacked_tensor(t, p + "q_proj.group_mean", dtype::f32, shape{Hkv * D, C},
                                     f32_bytes(m), q->file));
    }
  }
  // the values: this token's half as it is (taps 0, 1), the previous token's half (1, 0)
  std::vector<float> taps(static_cast<size_t>(Hkv * D * 2), 0.0f);
  for (int64_t ch = 0; ch < Hkv * D; ++ch)
    taps[static_cast<size_t>(2 * ch + (ch < Hkv * D / 2 ? 1 : 0))] = 1.0f;
  return add_derived_tensor(t, v_taps, dtype::f32, shape{Hkv * D, 2}, "F32", f32_bytes(taps),
                            "the values' taps: this token's half, the previous token's (derived)");
}

status build_zaya(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string l = layer_prefix, r = l + "mlp.gate.";
  n.wq = cca + "q_proj.weight", n.wk = cca + "k_proj.weight";
  n.zaya_v_now = cca + "v_proj_current.weight", n.zaya_v_prev = cca + "v_proj_delayed.weight";
  n.zaya_dw_now = cca + "conv_qk_depthwise.now", n.zaya_dw_prev = cca + "conv_qk_depthwise.prev";
  n.zaya_dw_b = cca + "conv_qk_depthwise.bias";
  n.zaya_pw_prev = cca + "conv_qk_grouped.tap0", n.zaya_pw_now = cca + "conv_qk_grouped.tap1";
  n.zaya_pw_b = cca + "conv_qk_grouped.bias";
  n.zaya_k_scale = l + "self_attn.qk_norm.temp";
  n.zaya_q_mean = cca + "q_proj.group_mean";
  n.zaya_v_taps = v_taps;
  n.zaya_in_scale = "model.input_hidden_states_scale";
  n.zaya_in_bias = "model.input_hidden_states_bias";
  n.zaya_res = l + "post_{s}_residual_scale.";
  n.zaya_router_down = r + "down_proj.weight", n.zaya_router_down_b = r + "down_proj.bias";
  n.zaya_router_carry = r + "router_states_scale";
  n.zaya_router_norm = r + "router_mlp.norm.weight";
  n.zaya_router_fc1 = r + "router_mlp.fc1.weight", n.zaya_router_fc1_b = r + "router_mlp.fc1.bias";
  n.zaya_router_fc2 = r + "router_mlp.fc2.weight", n.zaya_router_fc2_b = r + "router_mlp.fc2.bias";
  n.moe_router = r + "router_mlp.out_proj.weight", n.moe_router_bias = r + "balancing_biases";
  n.moe_gate_up = l + "mlp.experts.gate_up_proj", n.moe_down = l + "mlp.experts.down_proj";
  if (c.tie_embeddings) n.lm_head.clear();
  if (c.lm_head_bias) n.lm_head_b = "lm_head.bias";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
