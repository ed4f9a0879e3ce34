// llama4.cpp (arch/families): Llama 4 (Llama4ForCausalLM; as Meta publishes Scout and
// Maverick, Llama4ForConditionalGeneration, whose language model under language_model. is what
// runs). Llama's pre-norm decoder with:
//   - RoPE on interleaved pairs (the complex form), llama3-scaled, left out of every fourth
//     layer (no_rope_layers: 1 where a layer rotates); those NoPE layers attend globally;
//   - on the rotating layers a weightless RMS norm of each q and k head (use_qk_norm; after
//     RoPE in transformers, the same before it: a rotation of pairs keeps the sum of squares);
//   - mixture-of-experts layers (moe_layers, or every interleave_moe_layer_step-th) with a
//     top-1 router whose sigmoid weight scales the chosen expert's input (not its output),
//     plus an always-on shared expert; the dense layers are intermediate_size_mlp wide, the
//     experts and the shared expert intermediate_size.
// The experts are stored as the model multiplies them (experts.gate_up_proj [E, C, 2F]: gate
// columns then up columns; experts.down_proj [E, F, C]); prepare_hf transposes them into the
// [E, F, C] / [E, C, F] rows the moe op reads, in their own dtype.
//   - chunked attention on the rotating layers (layer_types, else those): a query sees the
//     keys of its attention_chunk_size-long chunk only; the NoPE layers see every key, with the
//     attention temperature tuning (attn_temperature_tuning): a query at position p scaled by
//     1 + attn_scale ln(1 + floor((p + 1) / floor_scale)), folded into the scores' scale.
// More than one expert per token (each chosen expert's input scaled by its own weight) refuses.
// From GGUF as llama.cpp's llama4 reads it (read_llama4_gguf).
// Tests: tests/exec/forward_test.cpp (SyntheticArch llama4, Llama4.*), pipeline_test FamilyCuts.
#include <algorithm>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

const std::string hf_layer = "model.layers.{}.";

// per-layer 0 / 1 flags from the list under `key`
expected<std::vector<uint8_t>> layer_flags(hf_cfg& j, const char* key, int64_t L) {
  const json& v = j.raw(key);
  if (!v.is_array() || static_cast<int64_t>(v.size()) != L)
    return j.bad(fmt::format("'{}' must list {} layers", key, L));
  std::vector<uint8_t> out;
  for (const auto& x : v) {
    if (!x.is_number_integer() || (x != 0 && x != 1))
      return j.bad(fmt::format("'{}' must hold 0 or 1 per layer", key));
    out.push_back(x == 1);
  }
  return out;
}

} // namespace

status read_llama4_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  // the dense layers' width is intermediate_size_mlp; intermediate_size is the experts'
  TROUPE_TRY_ASSIGN(F_mlp, j.req("intermediate_size_mlp"));
  c.F_expert = c.F_shared = c.F;
  c.F = F_mlp;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 500000.0, 1.0));
  c.rope.layout = rope_layout::interleaved; // q and k rotate as complex pairs
  // NoPE layers: no_rope_layers, or (absent or empty, as Scout publishes it) every
  // no_rope_layer_interval-th layer
  std::vector<uint8_t> rope(static_cast<size_t>(c.n_layer), 1);
  TROUPE_TRY_ASSIGN(interval, j.i("no_rope_layer_interval", 4));
  if (const json& nr = j.raw("no_rope_layers"); !nr.is_null() && !nr.empty()) {
    TROUPE_TRY_SET(rope, layer_flags(j, "no_rope_layers", c.n_layer));
  } else {
    if (interval <= 0) return j.bad("'no_rope_layer_interval' must be positive");
    for (int64_t l = interval - 1; l < c.n_layer; l += interval) rope[static_cast<size_t>(l)] = 0;
  }
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.nope_layers[static_cast<size_t>(l)] = rope[static_cast<size_t>(l)] == 0;
  if (j.b("use_qk_norm", true)) {
    c.qk_norm = qk_norm_kind::head_plain;
    c.qk_norm_rope_layers = true;
  }
  // experts
  TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
  j.mark("router_jitter_noise"); // training only
  if (c.n_expert_used != 1)
    return j.unsupported(fmt::format(
        "'num_experts_per_tok' {}: Llama 4's router scales each chosen expert's input by its own "
        "weight, implemented for one expert per token (as published)",
        c.n_expert_used));
  c.router_sigmoid = true;
  c.expert_input_scaled = true;
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  if (const json& ml = j.raw("moe_layers"); !ml.is_null()) {
    if (!ml.is_array()) return j.bad("'moe_layers' must be a list of layer indices");
    for (const auto& v : ml) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.n_layer)
        return j.bad("'moe_layers' must be a list of layer indices");
      c.moe_layers[v.get<size_t>()] = 1;
    }
    j.mark("interleave_moe_layer_step");
  } else {
    TROUPE_TRY_ASSIGN(step, j.i("interleave_moe_layer_step", 1));
    if (step <= 0) return j.bad("'interleave_moe_layer_step' must be positive");
    for (int64_t l = step - 1; l < c.n_layer; l += step) c.moe_layers[static_cast<size_t>(l)] = 1;
  }
  // chunked attention: on the layers layer_types names, else on the rotating ones (as
  // Llama4TextConfig derives them); absent: Llama4TextConfig's 8192, null: no chunks
  TROUPE_TRY_ASSIGN(chunk,
                    j.i("attention_chunk_size", j.present("attention_chunk_size") ? 0 : 8192));
  if (chunk < 0) return j.bad("'attention_chunk_size' must not be negative");
  c.attn_chunk = chunk;
  c.chunked.assign(static_cast<size_t>(c.n_layer), 0);
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer)
      return j.bad(fmt::format("'layer_types' must list {} layers", c.n_layer));
    for (size_t l = 0; l < lt.size(); ++l) {
      const bool chunked = lt[l] == "chunked_attention";
      if (!chunked && lt[l] != "full_attention")
        return j.unsupported(fmt::format("layer_types[{}] {}", l, lt[l].dump()));
      if (chunked && chunk == 0)
        return j.bad("'layer_types' names chunked_attention without an attention_chunk_size");
      c.chunked[l] = chunked;
    }
  } else if (chunk > 0) {
    for (int64_t l = 0; l < c.n_layer; ++l) c.chunked[static_cast<size_t>(l)] = c.layer_rope(l);
  }
  // temperature tuning on the NoPE layers
  if (j.b("attn_temperature_tuning", true)) {
    TROUPE_TRY_ASSIGN(floor_scale, j.i("floor_scale", 8192));
    if (floor_scale <= 0) return j.bad("'floor_scale' must be positive");
    TROUPE_TRY_ASSIGN(scale, j.f("attn_scale", 0.1));
    c.attn_temp_floor = floor_scale;
    c.attn_temp_scale = scale;
    c.attn_temp_offset = 1; // (p + 1) / floor_scale
    c.tempered = c.nope_layers;
  } else {
    j.mark("floor_scale");
    j.mark("attn_scale");
  }
  return {};
}

// GGUF (llama4, as llama.cpp reads it): the same model with llama.cpp's constants, which the
// file does not carry: RoPE left out of every fourth layer, chunks of 8192 on the others,
// temperature tuning with floor 8192 and scale 0.1 on the NoPE ones, q/k norms unless the model
// has 128 experts (Maverick has none); a file with attention.sliding_window (llama.cpp's variant
// without chunks) refuses. The MoE
// step from interleave_moe_layer_step, the experts' width from expert_feed_forward_length
// (the shared expert's too), the dense layers' from feed_forward_length.
status read_llama4_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = rope_layout::interleaved; // the converter leaves q and k as published
  TROUPE_TRY(read_expert_counts(g, c));
  if (c.n_expert <= 0) return g.unsupported("llama4 without experts");
  if (c.n_expert_used != 1)
    return g.unsupported(
        fmt::format("expert_used_count {} (one expert per token is implemented)", c.n_expert_used));
  TROUPE_TRY_ASSIGN(fe, g.req("expert_feed_forward_length"));
  c.F_expert = c.F_shared = fe;
  TROUPE_TRY_ASSIGN(step, g.req("interleave_moe_layer_step"));
  if (step <= 0) return g.unsupported(fmt::format("interleave_moe_layer_step {}", step));
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = step - 1; l < c.n_layer; l += step) c.moe_layers[static_cast<size_t>(l)] = 1;
  c.router_sigmoid = true;
  c.expert_input_scaled = true;
  // llama.cpp reads an attention.sliding_window of 0 as another layout (no chunks, the last
  // layer without RoPE: MobileLLM's), which no fixture here checks
  if (g.g.get(g.key("attention.sliding_window")))
    return g.unsupported("attention.sliding_window (llama.cpp's llama4 variant without chunked "
                         "attention)");
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 3; l < c.n_layer; l += 4) c.nope_layers[static_cast<size_t>(l)] = 1;
  if (c.n_expert != 128) {
    c.qk_norm = qk_norm_kind::head_plain;
    c.qk_norm_rope_layers = true;
  }
  c.attn_chunk = 8192; // llama.cpp's n_attn_chunk
  c.chunked.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l) c.chunked[static_cast<size_t>(l)] = c.layer_rope(l);
  c.attn_temp_floor = 8192; // n_attn_temp_floor_scale, f_attn_temp_scale, f_attn_temp_offset
  c.attn_temp_scale = 0.1;
  c.attn_temp_offset = 1;
  c.tempered = c.nope_layers;
  return {};
}

// As published (Llama4ForConditionalGeneration): the language model's tensors under
// language_model., read as the text model's (the vision tower's and the projector's stay
// unread, listed at load); then the experts transposed into the moe op's rows.
status prepare_llama4_hf(const model_config& c, tensor_index& t) {
  TROUPE_TRY(prepare_language_model(c, t));
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (c.layer_moe(l))
      TROUPE_TRY(
          repack_packed_experts(t, fmt::format(fmt::runtime(hf_layer), l) + "feed_forward.experts.",
                                c.n_expert, c.C, c.F_expert));
  return {};
}

status build_llama4(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format == "gguf") {
    decoder_names n = gguf_layout(m);
    expert_names(m, n);
    n.shexp_gate_inp.clear();
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string f = hf_layer + "feed_forward.";
  n.w_gate = f + "gate_proj.weight", n.w_up = f + "up_proj.weight";
  n.w_down = f + "down_proj.weight";
  n.moe_router = f + "router.weight";
  n.moe_gate = f + "experts.gate", n.moe_up = f + "experts.up", n.moe_down = f + "experts.down";
  n.shexp_gate = f + "shared_expert.gate_proj.weight";
  n.shexp_up = f + "shared_expert.up_proj.weight";
  n.shexp_down = f + "shared_expert.down_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
