// olmo_hybrid.cpp (arch/families): OLMo hybrid (OlmoHybridForCausalLM): gated DeltaNet layers
// (three of four by default, layer_types) and OLMo 3 attention layers. The attention layers are
// OLMo 2's: RMS norms on the sublayers' outputs (x += N(attn(x)); x += N(mlp(x))), q and k
// RMS-normed over the whole projection, RoPE where rope_parameters gives a base (none where its
// rope_theta is null). The linear layers are Llama's pre-norm blocks around Qwen3-Next's gated
// delta rule with q, k, v, a, b and the output gate g in their own projections, the short
// convolution over q, k and v with SiLU, beta times 2 (linear_allow_neg_eigval, the default: the
// memory may take negative eigenvalues), a gated RMS norm per value head of eps 1e-5, o_proj.
// As published the linear layers' norms are attention_layer_norm / feedforward_layer_norm and
// their convolution three tensors (q_conv1d, k_conv1d, v_conv1d): prepare_olmo_hybrid_hf reads
// them as transformers does (input_layernorm, post_attention_layernorm, one conv1d).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_olmo_hybrid_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  // (the convolution's activation too: Troupe's is SiLU)
  const std::string act = j.s("hidden_act", "silu");
  if (act != "silu") return j.unsupported(fmt::format("hidden_act '{}' (silu is)", act));
  TROUPE_TRY(read_activation(act, c, j.where()));
  if (const json& rp = j.raw("rope_parameters");
      rp.is_object() && rp.contains("rope_theta") && rp["rope_theta"].is_null())
    c.rope_enabled = false; // (NoPE: transformers builds no rotary embedding)
  else
    TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.norms = norm_place::post;
  c.qk_norm = qk_norm_kind::full;
  c.linear_pre_norm = true;
  c.lin_norm_eps = 1e-5;
  c.delta_beta_scale = j.b("linear_allow_neg_eigval", true) ? 2.0 : 0.0;
  TROUPE_TRY_ASSIGN(kh, j.i("linear_num_key_heads", c.H));
  TROUPE_TRY_ASSIGN(vh, j.i("linear_num_value_heads", c.H));
  if (kh <= 0 || vh <= 0 || vh % kh)
    return j.bad("'linear_num_value_heads' must be a positive multiple of 'linear_num_key_heads'");
  TROUPE_TRY_ASSIGN(kd, j.i("linear_key_head_dim", static_cast<int64_t>(0.75 * c.C / kh)));
  TROUPE_TRY_ASSIGN(vd, j.i("linear_value_head_dim", 2 * kd));
  TROUPE_TRY_ASSIGN(taps, j.i("linear_conv_kernel_dim", 4));
  c.lin_k_heads = kh, c.lin_v_heads = vh, c.lin_k_dim = kd, c.lin_v_dim = vd, c.lin_conv = taps;
  for (const char* k : {"linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max",
                        "linear_dt_init_floor"})
    j.mark(k); // (initialisation only)
  // layer_types: linear_attention or full_attention; by default every fourth layer full (the
  // last one where none is)
  TROUPE_TRY_ASSIGN(listed, read_layer_kinds(j, "layer_types", c.n_layer, "linear_attention",
                                             "full_attention", c.linear_layers));
  if (!listed) {
    c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 0; l < c.n_layer; ++l) c.linear_layers[static_cast<size_t>(l)] = l % 4 != 3;
    if (c.n_layer > 0 &&
        std::find(c.linear_layers.begin(), c.linear_layers.end(), 0) == c.linear_layers.end())
      c.linear_layers.back() = 0;
  }
  const auto linear = std::count(c.linear_layers.begin(), c.linear_layers.end(), 1);
  if (linear == 0 || linear == c.n_layer)
    return j.bad("'layer_types' must hold both linear and full attention layers");
  return {};
}

status prepare_olmo_hybrid_hf(const model_config& c, tensor_index& t) {
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    for (const auto& [from, to] : {std::pair{"attention_layer_norm", "input_layernorm"},
                                   std::pair{"feedforward_layer_norm", "post_attention_layernorm"}})
      if (t.find(p + from + ".weight") && !t.find(p + to + ".weight"))
        TROUPE_TRY(rename_tensor(t, p + from + ".weight", p + to + ".weight"));
    // the convolution's q, k, v taps in one [2 Kd + Vd, 1, taps] tensor (however they were cut)
    const std::string a = p + "linear_attn.";
    if (!c.layer_linear(l) || t.find(a + "conv1d.weight") || !t.find(a + "q_conv1d.weight"))
      continue;
    const int64_t rows = 2 * c.lin_k_heads * c.lin_k_dim + c.lin_v_heads * c.lin_v_dim;
    std::vector<uint8_t> bytes;
    int64_t have = 0;
    const tensor_info* first = nullptr;
    for (const char* part : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"}) {
      const tensor_info* w = t.find(a + part);
      if (!w) return make_error(errc::not_found, "{}{}: missing", a, part);
      if (!w->supported || is_quantized(w->type) || w->dims.rank != 3 || w->dims[1] != 1 ||
          w->dims[2] != c.lin_conv || (first && w->type != first->type))
        return make_error(errc::shape_mismatch, "{}{}: must be float [n, 1, {}] (is {} {})", a,
                          part, c.lin_conv, w->raw_type, w->dims.to_string());
      if (w->nbytes != static_cast<uint64_t>(row_bytes(w->type, w->dims[0] * c.lin_conv)))
        return make_error(errc::corrupt_file, "{}{}: {} bytes", a, part, w->nbytes);
      bytes.insert(bytes.end(), w->data, w->data + w->nbytes);
      have += w->dims[0];
      first = first ? first : w;
      t.mark_consumed(a + part);
    }
    if (have != rows)
      return make_error(errc::shape_mismatch, "{}: q / k / v conv1d rows {} (the config's {})", a,
                        have, rows);
    TROUPE_TRY(add_repacked_tensor(t, a + "conv1d.weight", first->type, shape{rows, 1, c.lin_conv},
                                   std::move(bytes), first->file));
  }
  return {};
}

status build_olmo_hybrid(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: OLMo hybrid is read from HF checkpoints only",
                      m.path);
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string l = "model.layers.{}.", p = l + "linear_attn.";
  n.q_norm = l + "self_attn.q_norm.weight", n.k_norm = l + "self_attn.k_norm.weight";
  // the attention layers' norms on their sublayers' outputs; the linear layers' before them
  n.attn_norm = l + "post_attention_layernorm.weight";
  n.ffn_norm = l + "post_feedforward_layernorm.weight";
  n.lin_attn_norm = l + "input_layernorm.weight";
  n.lin_ffn_norm = l + "post_attention_layernorm.weight";
  n.lin_q = p + "q_proj.weight", n.lin_k = p + "k_proj.weight", n.lin_v = p + "v_proj.weight";
  n.lin_z = p + "g_proj.weight";
  n.lin_a = p + "a_proj.weight", n.lin_b = p + "b_proj.weight";
  n.lin_conv = p + "conv1d.weight";
  n.lin_dt_bias = p + "dt_bias";
  n.lin_A_log = p + "A_log";
  n.lin_norm = p + "o_norm.weight";
  n.lin_out = p + "o_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
