// afmoe.cpp (arch/families): Arcee's AFMoE (AfmoeForCausalLM: Trinity Nano, Mini, Large). Llama's
// attention with q / k RMS norms per head and a sigmoid gate on every value (gate_proj [H D, C],
// the decoder's attn_value_gate), sliding windows on three layers in four
// (global_attn_every_n_layers, or layer_types) with RoPE on the sliding layers only, RMS norms
// before and after each sublayer, and after num_dense_layers dense layers DeepSeek-V3-like
// experts: sigmoid scores, the choice by scores + expert_bias, the chosen scores always
// renormalised and times route_scale, shared experts beside them; muP's embedding scale sqrt(C)
// where mup_enabled. GGUF: llama.cpp's afmoe.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_afmoe_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true");
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.qk_norm = qk_norm_kind::head;
  c.norms = norm_place::sandwich;
  c.attn_value_gate = true;
  // windows (layer_types, else every global_attn_every_n_layers-th layer global), RoPE on the
  // sliding layers only
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 1024));
  TROUPE_TRY_ASSIGN(every, j.i("global_attn_every_n_layers", 4));
  if (sw <= 0 || every <= 0)
    return j.bad(fmt::format("sliding_window {}, global_attn_every_n_layers {}", sw, every));
  TROUPE_TRY(read_layer_types(j, c, sw, [every](int64_t l) { return (l + 1) % every != 0; }));
  rope_on_windowed_only(c);
  if (j.b("mup_enabled", false)) c.embed_scale = std::sqrt(static_cast<double>(c.C));
  // the experts
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 1408));
  TROUPE_TRY_ASSIGN(shared, j.i("num_shared_experts", 2));
  TROUPE_TRY_ASSIGN(scale, j.f("route_scale", 1.0));
  TROUPE_TRY_ASSIGN(dense, j.i("num_dense_layers", 1));
  if (fe <= 0 || shared < 0 || dense < 0)
    return j.bad(fmt::format("moe_intermediate_size {}, num_shared_experts {}, num_dense_layers {}",
                             fe, shared, dense));
  c.F_expert = fe, c.F_shared = shared * fe, c.expert_scale = scale;
  c.router_sigmoid = c.router_bias = c.norm_topk = true;
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = dense; l < c.n_layer; ++l) c.moe_layers[static_cast<size_t>(l)] = 1;
  j.mark("output_router_logits");
  return {};
}

// llama.cpp's afmoe: the same from its keys, with what its graph takes for granted (one global
// layer in four, RoPE on the others, muP's embedding scale) read as it runs them; the router's
// gating and renormalisation by expert_gating_func / expert_weights_norm (sigmoid where absent,
// transformers' router)
status read_afmoe_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.qk_norm = qk_norm_kind::head;
  c.norms = norm_place::sandwich;
  c.attn_value_gate = true;
  c.rope.layout = rope_layout::neox;
  if (g.has("attention.sliding_window_pattern"))
    return g.unsupported("attention.sliding_window_pattern (llama.cpp's afmoe takes one global "
                         "layer in four)");
  TROUPE_TRY(read_gguf_windows(g, c, 0, 4));
  if (c.sliding_window <= 0) return g.unsupported("afmoe without attention.sliding_window");
  rope_on_windowed_only(c);
  c.embed_scale = std::sqrt(static_cast<double>(c.C));
  return read_routed_experts_gguf(g, c);
}

status build_afmoe(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    n.mla_gate = "blk.{}.attn_gate.weight";
    routed_expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string l = "model.layers.{}.", f = l + "mlp.";
  n.mla_gate = l + "self_attn.gate_proj.weight";
  n.post_attn_norm = l + "post_attention_layernorm.weight";
  n.ffn_norm = l + "pre_mlp_layernorm.weight", n.post_ffn_norm = l + "post_mlp_layernorm.weight";
  n.moe_router = f + "router.gate.weight", n.moe_router_bias = f + "expert_bias";
  hf_expert_names(n, f);
  hf_shared_expert_names(n, f);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
