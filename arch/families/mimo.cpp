// mimo.cpp (arch/families): Xiaomi MiMo-V2-Flash (MiMoV2FlashForCausalLM). Sliding-window
// attention layers (twice the full layers' KV heads, a sink per head, their own RoPE base)
// between full-attention layers; keys of head_dim and values of v_head_dim per head, partial RoPE,
// the values times attention_value_scale; DeepSeek-V3's sigmoid routing with its correction bias
// and groups, without shared experts, after dense layers. Values narrower than keys are widened
// at load: v_proj gets head_dim - v_head_dim zero rows per head (and the value scale folded in,
// in f32) and o_proj zero columns to match, so the attention is the usual one of head_dim (the
// cache holds the zeros: 1 + (head_dim - v_head_dim) / v_head_dim more bytes for values). config
// as transformers 5 writes it; the release's own keys (hybrid_layer_pattern, sliding_window_size,
// swa_*) are read as transformers reads them, and where they would say something transformers
// does not compute, refused by name.
#include <cmath>
#include <cstring>

#include "arch/families/decoder.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

status read_mimo_v2_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true");
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY_ASSIGN(vh, j.i("v_head_dim", 128));
  if (vh <= 0 || vh > c.D)
    return j.unsupported(fmt::format("v_head_dim {} (at most head_dim {})", vh, c.D));
  c.v_head = vh;
  TROUPE_TRY_ASSIGN(vs, j.f("attention_value_scale", 0.707));
  c.v_scale = vs;
  // sliding layers: twice the KV heads (transformers' port), sinks; full layers their own
  c.Hkv_full = c.Hkv;
  c.Hkv = 2 * c.Hkv;
  if (j.has("swa_num_key_value_heads")) {
    TROUPE_TRY_ASSIGN(swa_kv, j.i("swa_num_key_value_heads", c.Hkv));
    if (swa_kv != c.Hkv)
      return j.unsupported(fmt::format(
          "swa_num_key_value_heads {} (transformers computes twice num_key_value_heads, {})",
          swa_kv, c.Hkv));
  }
  for (const char* k : {"swa_num_attention_heads", "swa_head_dim", "swa_v_head_dim"}) {
    TROUPE_TRY_ASSIGN(v, j.i(k, -1));
    const int64_t want = k == std::string("swa_num_attention_heads") ? c.H
                         : k == std::string("swa_head_dim")          ? c.D
                                                                     : c.v_head;
    if (j.has(k) && v != want)
      return j.unsupported(fmt::format("{} {} (the full layers' {})", k, v, want));
  }
  if (j.b("add_full_attention_sink_bias", false))
    return j.unsupported("add_full_attention_sink_bias true (sinks on the full layers)");
  if (!j.b("add_swa_attention_sink_bias", true))
    return j.unsupported("add_swa_attention_sink_bias false");
  c.attn_sinks = true;
  c.sinks_windowed_only = true;
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 128));
  int64_t window = sw;
  if (j.has("sliding_window_size")) { // the release's name: transformers adds one
    TROUPE_TRY_ASSIGN(size, j.i("sliding_window_size", 128));
    window = size + 1;
  }
  c.sliding_window = window;
  c.windowed.assign(static_cast<size_t>(c.n_layer), 0);
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer)
      return j.bad(fmt::format("'layer_types' must list {} layers", c.n_layer));
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const json& t = lt[static_cast<size_t>(l)];
      if (t != "sliding_attention" && t != "full_attention")
        return j.unsupported(fmt::format("layer_types[{}] {}", l, t.dump()));
      c.windowed[static_cast<size_t>(l)] = t == "sliding_attention";
    }
  } else { // MiMoV2FlashConfig: full on layer 0 and every sixth
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.windowed[static_cast<size_t>(l)] = !(l == 0 || (l + 1) % 6 == 0);
  }
  if (const json& hp = j.raw("hybrid_layer_pattern");
      !hp.is_null()) { // (the release's; 1: sliding)
    bool same = hp.is_array() && static_cast<int64_t>(hp.size()) == c.n_layer;
    for (int64_t l = 0; same && l < c.n_layer; ++l)
      same = hp[static_cast<size_t>(l)] == static_cast<int>(c.windowed[static_cast<size_t>(l)]);
    if (!same)
      return j.unsupported("hybrid_layer_pattern other than the layers transformers computes");
  }
  // RoPE per layer type (partial: a third of each head)
  const json& rp = j.raw("rope_parameters");
  json full = {{"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.334}};
  json local = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.334}};
  if (rp.is_object()) {
    for (auto& [k, v] : rp.items())
      if (k != "full_attention" && k != "sliding_attention")
        return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
    if (rp.contains("full_attention")) full = rp["full_attention"];
    if (rp.contains("sliding_attention")) local = rp["sliding_attention"];
  }
  for (auto [key, dict] : {std::pair<const char*, const json*>{"rope_theta", &full},
                           {"swa_rope_theta", &local}}) { // the release's: as transformers uses
    TROUPE_TRY_ASSIGN(theta, j.f(key, dict->value("rope_theta", 0.0)));
    if (theta != dict->value("rope_theta", 0.0))
      return j.unsupported(
          fmt::format("{} {} (transformers uses {})", key, theta, dict->value("rope_theta", 0.0)));
  }
  j.mark("partial_rotary_factor"), j.mark("rope_scaling");
  TROUPE_TRY(read_rope_dict(full, c, c.rope, 5e6, j.where()));
  TROUPE_TRY(read_rope_dict(local, c, c.rope_local, 1e4, j.where()));
  c.has_rope_local = true;
  // experts: V3's routing, no shared expert, not clamped
  TROUPE_TRY(read_v3_experts(j, c, 1.0, 1, 0, 0.0));
  j.mark("n_shared_experts");
  return {};
}

// v_proj widened to head_dim per KV head (zero rows; the value scale folded in) and o_proj to
// head_dim per head (zero columns), in f32
status prepare_mimo_v2_hf(const model_config& c, tensor_index& t) {
  const int64_t Dk = c.D, Dv = c.v_head, H = c.H, C = c.C;
  if (Dv == Dk && c.v_scale == 1) return {};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const int64_t hkv = c.layer_kv_heads(l);
    const std::string a = fmt::format("model.layers.{}.self_attn.", l);
    auto find = [&](const std::string& name, int64_t rows,
                    int64_t cols) -> expected<const tensor_info*> {
      const tensor_info* w = t.find(name);
      if (!w) return make_error(errc::not_found, "missing tensor '{}'", name);
      if (!w->supported || is_quantized(w->type) || w->dims.rank != 2 || w->dims[0] != rows ||
          w->dims[1] != cols)
        return make_error(
            errc::shape_mismatch, "{}: '{}' must be a float matrix [{}, {}] (is {} {})",
            w->file ? w->file->path() : name, name, rows, cols, w->raw_type, w->dims.to_string());
      return w;
    };
    TROUPE_TRY_ASSIGN(v, find(a + "v_proj.weight", hkv * Dv, C));
    TROUPE_TRY_ASSIGN(o, find(a + "o_proj.weight", C, H * Dv));
    std::vector<float> vf(static_cast<size_t>(hkv * Dv * C)), of(static_cast<size_t>(C * H * Dv));
    to_f32(v->type, v->data, vf.data(), hkv * Dv * C);
    to_f32(o->type, o->data, of.data(), C * H * Dv);
    std::vector<float> vp(static_cast<size_t>(hkv * Dk * C), 0.0f),
        op(static_cast<size_t>(C * H * Dk), 0.0f);
    for (int64_t h = 0; h < hkv; ++h)
      for (int64_t d = 0; d < Dv; ++d)
        for (int64_t k = 0; k < C; ++k)
          vp[static_cast<size_t>((h * Dk + d) * C + k)] =
              static_cast<float>(c.v_scale * vf[static_cast<size_t>((h * Dv + d) * C + k)]);
    for (int64_t r = 0; r < C; ++r)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dv; ++d)
          op[static_cast<size_t>(r * H * Dk + h * Dk + d)] =
              of[static_cast<size_t>(r * H * Dv + h * Dv + d)];
    auto bytes = [](const std::vector<float>& x) {
      std::vector<uint8_t> b(x.size() * sizeof(float));
      std::memcpy(b.data(), x.data(), b.size());
      return b;
    };
    const std::string vname = v->name, oname = o->name; // (replaced below)
    TROUPE_TRY(add_derived_tensor(t, vname, dtype::f32, shape{hkv * Dk, C}, "F32", bytes(vp),
                                  vname + " (widened to head_dim, times attention_value_scale)",
                                  true));
    TROUPE_TRY(add_derived_tensor(t, oname, dtype::f32, shape{C, H * Dk}, "F32", bytes(op),
                                  oname + " (widened to head_dim)", true));
  }
  return {};
}

status build_mimo_v2(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string a = "model.layers.{}.self_attn.", f = "model.layers.{}.mlp.";
  n.attn_sinks = a + "attention_sink_bias";
  n.moe_router = f + "gate.weight", n.moe_router_bias = f + "gate.e_score_correction_bias";
  hf_expert_names(n, f);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
