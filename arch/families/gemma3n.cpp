// gemma3n.cpp (arch/families): Gemma 3n (Gemma3nForConditionalGeneration as published, its text
// model Gemma3nForCausalLM; E2B / E4B). Gemma 3's attention (q / k norms by weight, v normed
// without one, scores unscaled, sliding layers with their own RoPE base) and Gemma 4 E2B's
// per-layer embeddings and KV sharing, around AltUp: altup_num_inputs residual streams, each
// layer run on the first as the streams predict it and its result spread back by a learned
// correction (decoder_altup.cpp), with Laurel's low-rank residual beside the attention; the first
// layers' FFN gates keep only values above mean + std icdf(activation_sparsity_pattern[l]) of
// their row. Norms scale by w (not 1 + w). The vision and audio towers are not read. GGUF:
// llama.cpp's gemma3n.
#include "arch/families/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace troupe::arch {

namespace {

// the KV-sharing layers' own k / v projections and k norm, which Google's release stores and
// neither transformers nor llama.cpp reads (llama.cpp requires them in the file): read as dropped
void unused_shared_kv(model_config& c, const std::string& prefix,
                      std::initializer_list<const char*> names) {
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (c.layer_kv_source(l) != l)
      for (const char* n : names)
        c.config_tensors.push_back(fmt::format(fmt::runtime(prefix), l) + n);
}

// the standard normal's quantile at p as torch's Normal(0, 1).icdf gives it in f32 (p rounded to
// f32 first): bisection on erfc(-z / sqrt(2)) / 2 to the last bit of a double, rounded to f32
double normal_quantile(double p) {
  const auto pf = static_cast<double>(static_cast<float>(p));
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < pf ? lo : hi) = mid;
  }
  return static_cast<float>(0.5 * (lo + hi));
}

} // namespace

status read_gemma3n_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6, true, true));
  const int64_t L = c.n_layer;
  c.names.output = "lm_head.weight";
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.embed_scale = std::sqrt(static_cast<double>(c.C));
  c.embed_scale_rounded = true; // a tensor cast to the weights' dtype in transformers
  c.norms = norm_place::sandwich;
  c.qk_norm = qk_norm_kind::head;
  c.v_norm = true;
  c.attn_scale = 1.0;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_activation", "gelu_pytorch_tanh"), c, j.where()));
  TROUPE_TRY_ASSIGN(fcap, j.f("final_logit_softcapping", 30.0));
  c.final_softcap = fcap;
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 512));
  TROUPE_TRY(read_layer_types(j, c, sw, [](int64_t l) { return (l + 1) % 5 != 0; }));
  TROUPE_TRY(read_gemma3_rope(j, c));
  TROUPE_TRY_ASSIGN(ple, j.i("hidden_size_per_layer_input", 256));
  TROUPE_TRY_ASSIGN(ple_vocab, j.i("vocab_size_per_layer_input", 262144));
  if (ple > 0) {
    if (ple_vocab <= 0) return j.bad("'vocab_size_per_layer_input' must be positive");
    c.ple_dim = ple, c.ple_vocab = ple_vocab;
  }
  TROUPE_TRY(read_kv_shared_layers(j, c));
  unused_shared_kv(c, "model.layers.{}.self_attn.",
                   {"k_proj.weight", "v_proj.weight", "k_norm.weight"});
  // AltUp: the streams, the active one (transformers adds the per-layer input to streams 1..
  // and matches the head's magnitudes to stream 0 whatever the index: only 0 is that model)
  TROUPE_TRY_ASSIGN(N, j.i("altup_num_inputs", 4));
  if (N < 2 || N > 64) return j.unsupported(fmt::format("'altup_num_inputs' {}", N));
  TROUPE_TRY_ASSIGN(active, j.i("altup_active_idx", 0));
  if (active != 0) return j.unsupported(fmt::format("'altup_active_idx' {}", active));
  c.altup = N;
  c.altup_correct_scale = j.b("altup_correct_scale", true);
  // (training only: the coefficients' clip, the learning-rate multiplier)
  for (const char* k : {"altup_coef_clip", "altup_lr_multiplier"}) j.mark(k);
  TROUPE_TRY_ASSIGN(r, j.i("laurel_rank", 64));
  if (r <= 0) return j.unsupported("'laurel_rank' 0 (a model without Laurel)");
  c.laurel_rank = r;
  // the Gaussian top-k: by default on the first 10 layers of a model of more than 10
  std::vector<double> sparsity(static_cast<size_t>(L), 0.0);
  if (const json& sp = j.raw("activation_sparsity_pattern"); sp.is_null()) {
    if (L > 10) std::fill_n(sparsity.begin(), 10, 0.95);
  } else {
    if (!sp.is_array() || static_cast<int64_t>(sp.size()) != L)
      return j.bad(fmt::format("'activation_sparsity_pattern' must list {} layers", L));
    for (size_t l = 0; l < sp.size(); ++l) {
      const std::optional<double> v = config_number(sp[l]);
      if (!v || !(*v >= 0 && *v < 1))
        return j.unsupported(fmt::format("activation_sparsity_pattern[{}] {}", l, sp[l].dump()));
      sparsity[l] = *v;
    }
  }
  c.act_sparsity_z.clear();
  for (const double s : sparsity) // (a sparsity of 0: none, transformers' test)
    c.act_sparsity_z.push_back(s > 0 ? normal_quantile(s) : -HUGE_VAL);
  return {};
}

// llama.cpp's converter (gemma3n): Gemma 3's keys, FFN widths per layer, the swa pattern, the
// shared KV layers as a count, altup.num_inputs / active_idx, the per-layer input width, and
// activation_sparsity_scale (the quantile z per layer, -inf where none; a file without it has
// llama.cpp's fixed 10 layers at icdf(0.95), as Gemma 3n is published). The norms as they are
// (no + 1), the stream projections stacked [N - 1, C, C], the tables padded to the vocabulary.
status read_gemma3n_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  TROUPE_TRY_ASSIGN(H, g.req("attention.head_count"));
  if (L <= 0 || L > 4096 || C <= 0 || H <= 0)
    return make_error(errc::corrupt_file, "{}: block_count {}, embedding_length {}, heads {}",
                      g.path(), L, C, H);
  c.C = C, c.n_layer = L, c.H = H;
  TROUPE_TRY_ASSIGN(kv, gguf_per_layer(g, "attention.head_count_kv", L));
  if (std::adjacent_find(kv.begin(), kv.end(), std::not_equal_to<>()) != kv.end())
    return g.unsupported("attention.head_count_kv that differs between layers");
  c.Hkv = kv[0];
  c.D = g.i("attention.key_length", C / H);
  if (g.i("attention.value_length", c.D) != c.D)
    return g.unsupported("attention.value_length other than key_length");
  TROUPE_TRY_ASSIGN(ff, gguf_per_layer(g, "feed_forward_length", L));
  c.F = *std::max_element(ff.begin(), ff.end());
  c.ffn_widths = std::move(ff);
  c.norm_eps = g.f("attention.layer_norm_rms_epsilon", 1e-6);
  c.tie_embeddings = !g.has_tensor("output.weight");
  TROUPE_TRY(read_gguf_common(g, c));
  c.rope.layout = rope_layout::neox;
  TROUPE_TRY(read_gguf_windows(g, c, 0, 5));
  read_gguf_rope_swa(g, c, c.rope.rot_dim);
  c.final_softcap = g.f("final_logit_softcapping", 30.0);
  c.embed_scale = std::sqrt(static_cast<double>(C)); // llama.cpp scales in f32
  c.act = act_kind::gelu_tanh;
  c.norms = norm_place::sandwich;
  c.qk_norm = qk_norm_kind::head;
  c.v_norm = true;
  c.attn_scale = 1.0;
  if (const int64_t P = g.i("embedding_length_per_layer_input", 0); P > 0) {
    c.ple_dim = P;
    const tensor_info* t = g.g.tensors.find("per_layer_token_embd.weight");
    c.ple_vocab = t && t->dims.rank == 2 ? t->dims[0] : c.V;
  }
  const int64_t shared = g.i("attention.shared_kv_layers", 0);
  if (shared < 0 || shared >= L)
    return make_error(errc::corrupt_file, "{}: shared_kv_layers {} of {} layers", g.path(), shared,
                      L);
  if (const int64_t l = share_kv_layers(c, shared); l >= 0)
    return g.unsupported(
        fmt::format("shared_kv_layers {}: layer {} has no earlier layer of its type", shared, l));
  unused_shared_kv(c, "blk.{}.", {"attn_k.weight", "attn_v.weight", "attn_k_norm.weight"});
  const int64_t N = g.i("altup.num_inputs", 4), active = g.i("altup.active_idx", 0);
  if (N < 2 || N > 64) return g.unsupported(fmt::format("altup.num_inputs {}", N));
  if (active != 0) return g.unsupported(fmt::format("altup.active_idx {}", active));
  c.altup = N;
  c.altup_correct_scale = true;
  const tensor_info* lr = g.g.tensors.find("blk.0.laurel_l.weight");
  if (!lr || lr->dims.rank != 2)
    return make_error(errc::corrupt_file, "{}: no blk.0.laurel_l.weight [rank, C]", g.path());
  c.laurel_rank = lr->dims[0];
  c.act_sparsity_z.assign(static_cast<size_t>(L), -HUGE_VAL);
  if (const gguf_value* v = g.g.get(g.key("activation_sparsity_scale")); v) {
    if (v->type != gguf_type::array || static_cast<int64_t>(v->arr.size()) != L)
      return make_error(errc::corrupt_file, "{}: activation_sparsity_scale is not {} values",
                        g.path(), L);
    for (size_t l = 0; l < v->arr.size(); ++l) {
      if (!v->arr[l].is_float())
        return make_error(errc::corrupt_file, "{}: activation_sparsity_scale[{}] is no number",
                          g.path(), l);
      c.act_sparsity_z[l] = v->arr[l].f;
    }
  } else {
    for (int64_t l = 0; l < std::min<int64_t>(L, 10); ++l)
      c.act_sparsity_z[static_cast<size_t>(l)] = static_cast<float>(1.6448533535003662);
  }
  return {};
}

namespace {

decoder_names gguf_names(const model_source& m) { // llama.cpp's
  decoder_names n = gguf_layout(m);
  gemma_ple_names(n, false);
  n.altup_proj = "altup_proj.weight"; // (stacked: [N - 1, C, C])
  n.altup_unembd = "altup_unembd_proj.weight";
  const std::string b = "blk.{}.";
  n.altup_router_norm = b + "altup_router_norm.weight";
  n.altup_router = b + "altup_router.weight";
  n.altup_predict = b + "altup_predict_coef.weight";
  n.altup_correct = b + "altup_correct_coef.weight";
  n.altup_scale = b + "altup_correct_scale.weight";
  n.laurel_l = b + "laurel_l.weight";
  n.laurel_r = b + "laurel_r.weight";
  n.laurel_norm = b + "laurel_post_norm.weight";
  return n;
}

decoder_names hf_names(const model_config& c) {
  decoder_names n = gemma_sandwich_hf(c);
  gemma_ple_names(n, true);
  const std::string p = "model.layers.{}.";
  n.altup_proj = "model.altup_projections.{}.weight";
  n.altup_unembd = "model.altup_unembed_projections.{}.weight";
  n.altup_router_norm = p + "altup.router_norm.weight";
  n.altup_router = p + "altup.modality_router.weight";
  n.altup_predict = p + "altup.prediction_coefs.weight";
  n.altup_correct = p + "altup.correction_coefs.weight";
  n.altup_scale = p + "altup.correct_output_scale";
  n.laurel_l = p + "laurel.linear_left.weight";
  n.laurel_r = p + "laurel.linear_right.weight";
  n.laurel_norm = p + "laurel.post_laurel_norm.weight";
  return n;
}

} // namespace

status build_gemma3n(const model_source& m, graph::graph& g) {
  decoder_names n = m.format == "hf" ? hf_names(m.config) : gguf_names(m);
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
