// hrm_text.cpp (arch/families): Sapient's HRM-Text (HrmTextForCausalLM): two stacks of Llama
// layers, L and H, each num_layers_per_stack layers, whose weights are run again and again: in
// each of H_cycles rounds the L stack runs L_cycles times over low + high (its output the new
// low), then the H stack once over high + low (the new high); the head reads high. Each run of a
// layer attends over its own KV cache (transformers' cycle_offset), so Troupe builds every run as
// a layer, num_layers_per_stack * H_cycles * (L_cycles + 1) of them (the num_hidden_layers
// transformers writes), each reading its stack's weights (model_config::weight_layer: the first
// run's; the executor loads one copy) and the two streams carried as one value
// (model_config::cycle_layers). The layers: weightless RMS norms (and one closing every run),
// multi-head attention whose output is gated per value by sigmoid(gate_proj x), a SwiGLU MLP;
// the embeddings times embedding_scale (1 / initializer_range by default), low starting at the
// learned z_L_init. prefix_lm: a prompt attends causally, as transformers runs text without
// token_type_ids (the OpenAI API has no way to mark a bidirectional prefix).
#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"

namespace troupe::arch {

status read_hrm_text_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  TROUPE_TRY_ASSIGN(rounds, j.i("H_cycles", 2));
  TROUPE_TRY_ASSIGN(lows, j.i("L_cycles", 3));
  if (rounds <= 0 || rounds > 64 || lows <= 0 || lows > 64)
    return j.bad(fmt::format("H_cycles {}, L_cycles {}", rounds, lows));
  // num_layers_per_stack as transformers writes it beside the runs' count in num_hidden_layers;
  // without it (the hub's first form) num_hidden_layers is the stack's
  const int64_t runs = rounds * (lows + 1);
  int64_t per = c.n_layer;
  if (j.has("num_layers_per_stack")) {
    TROUPE_TRY_SET(per, j.req("num_layers_per_stack"));
    if (per * runs != c.n_layer)
      return j.bad(fmt::format("num_hidden_layers {} is not num_layers_per_stack {} x {} runs",
                               c.n_layer, per, runs));
  }
  if (per * runs > max_layers)
    return j.bad(fmt::format("{} layers x {} runs (at most {})", per, runs, max_layers));
  c.n_layer = per * runs;
  c.cycle_layers = per, c.cycles_low = lows;
  c.weight_layer.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer;
       ++l) // the L stack's layer j is layer j, the H stack's L per + j
    c.weight_layer[static_cast<size_t>(l)] =
        static_cast<int32_t>(((l % (per * (lows + 1))) / per == lows ? lows * per : 0) + l % per);
  c.Hkv = c.H; // (a KV head per head, whatever num_key_value_heads says: transformers reads none)
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  // (biases: transformers has no way to read them from the published fused tensors)
  for (const char* k : {"attention_bias", "mlp_bias"})
    if (j.b(k, false)) return j.unsupported(fmt::format("{} true", k));
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  TROUPE_TRY_ASSIGN(init, j.f("initializer_range", 0.02));
  TROUPE_TRY_ASSIGN(scale, j.f("embedding_scale", init > 0 ? 1.0 / init : 0.0));
  if (!(scale > 0)) return j.bad(fmt::format("embedding_scale {}", scale));
  c.embed_scale = scale;
  c.norm_weight = false;
  c.attn_value_gate = true;
  for (const char* k : {"prefix_lm", "L_bp_cycles", "pretraining_tp"})
    j.mark(k); // (causal prompts, as transformers runs text; training only)
  return {};
}

namespace {

// rows [r0, r0 + n) of `w` as a tensor of their own named `name` (zero-copy: whole rows)
status add_rows(tensor_index& t, const tensor_info& w, int64_t r0, int64_t n,
                const std::string& name) {
  tensor_info part = w;
  part.name = name;
  const uint64_t rb = w.nbytes / static_cast<uint64_t>(w.dims[0]);
  part.data = w.data + static_cast<uint64_t>(r0) * rb;
  part.nbytes = static_cast<uint64_t>(n) * rb;
  part.dims.dims[0] = n;
  return t.add(part);
}

} // namespace

status prepare_hrm_text_hf(const model_config& c, tensor_index& t) {
  // model.L_module.layers.{j}.X read as layer j's, model.H_module.layers.{j}.X as layer
  // L_cycles per + j's (the first runs of each); as published, the attention's gate, q, k and v
  // in one attn.gqkv_proj (split into row views) and its o_proj under attn.
  const std::string low = "model.L_module.layers.", high = "model.H_module.layers.";
  for (const std::string& name : t.names()) {
    const bool h = name.starts_with(high);
    const auto lt = layer_of_name(name, h ? high : low);
    if (!lt) continue;
    const int64_t j = lt->layer;
    if (j >= c.cycle_layers)
      return make_error(errc::corrupt_file, "'{}': a layer past the stack's {}", name,
                        c.cycle_layers);
    const std::string to =
        fmt::format("model.layers.{}.", (h ? c.cycles_low * c.cycle_layers : 0) + j);
    std::string what = lt->rest;
    if (what == "attn.gqkv_proj.weight") {
      const tensor_info* w = t.find(name);
      const int64_t HD = c.H * c.D;
      if (!w || w->dims.rank != 2 || w->dims[0] != 4 * HD || w->dims[1] != c.C)
        return make_error(errc::shape_mismatch, "'{}' must be [{}, {}] (gate, q, k, v)", name,
                          4 * HD, c.C);
      const char* parts[4] = {"gate", "q", "k", "v"};
      for (int64_t p = 0; p < 4; ++p)
        TROUPE_TRY(
            add_rows(t, *w, p * HD, HD, fmt::format("{}self_attn.{}_proj.weight", to, parts[p])));
      t.mark_consumed(name);
      continue;
    }
    if (what.starts_with("attn.")) what = "self_attn." + what.substr(5);
    TROUPE_TRY(rename_tensor(t, name, to + what));
  }
  return {};
}

status build_hrm_text(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(false, false, false);
  n.attn_norm.clear(), n.ffn_norm.clear(), n.out_norm.clear();         // (weightless)
  if (m.tensors->contains("model.layers.0.mlp.gate_up_proj.weight")) { // (as published)
    n.w_gate.clear(), n.w_up.clear();
    n.w_gate_up = "model.layers.{}.mlp.gate_up_proj.weight";
  }
  n.mla_gate = "model.layers.{}.self_attn.gate_proj.weight";
  n.cycle_init = "model.z_L_init";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
