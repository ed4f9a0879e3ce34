// laguna.cpp (arch/families): Poolside's Laguna (LagunaForCausalLM: Laguna XS.2, M.1). Llama's
// pre-norm decoder with an RMS norm of every q and k head, each layer its own count of query
// heads (num_attention_heads_per_layer: XS.2's full layers 48, its sliding ones 64; the KV heads
// one count), and the attention's output times softplus(g_proj x) before o_proj: one gate per
// head over its values (`gating` true or "per-head": XS.2) or one per value (otherwise: M.1).
// Sliding windows by layer_types, each kind its own RoPE (XS.2: YaRN on half of each head of the
// full layers, plain on all of the sliding ones). Dense SwiGLU layers where mlp_layer_types says
// "dense" (the first by default), the others DeepSeek-V3-like experts without groups: the
// router's logits soft-capped (moe_router_logit_softcapping), sigmoid scores, the choice by
// scores + the correction bias, the chosen scores renormalised times moe_routed_scaling_factor,
// plus one shared expert shared_expert_intermediate_size wide. Tensor names as published (the
// experts one by one, mlp.shared_expert, the bias under mlp.experts).
#include <algorithm>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// num_attention_heads_per_layer: each layer's query heads; H becomes the largest
status read_heads_by_layer(hf_cfg& j, model_config& c) {
  const json& hl = j.raw("num_attention_heads_per_layer");
  if (hl.is_null()) return {};
  if (!hl.is_array() || static_cast<int64_t>(hl.size()) != c.n_layer)
    return j.bad(
        fmt::format("'num_attention_heads_per_layer' must list {} head counts", c.n_layer));
  c.heads_by_layer.clear();
  for (const json& h : hl) {
    if (!h.is_number_integer() || h.get<int64_t>() <= 0 || h.get<int64_t>() > 4096 ||
        h.get<int64_t>() % c.Hkv)
      return j.bad(fmt::format("'num_attention_heads_per_layer' holds {}", h.dump()));
    c.heads_by_layer.push_back(h.get<int64_t>());
  }
  c.H = *std::max_element(c.heads_by_layer.begin(), c.heads_by_layer.end());
  return {};
}

// gating: true / "per-head" one gate per head, anything else transformers runs (false,
// "per-element") one per value
status read_gating(hf_cfg& j, model_config& c) {
  const json& gt = j.raw("gating");
  const bool per_head = gt.is_null() || gt == true || gt == "per-head";
  if (!per_head && gt != false && gt != "per-element")
    return j.unsupported(
        fmt::format("gating {} (true, \"per-head\", \"per-element\" are)", gt.dump()));
  c.attn_gate_softplus = true;
  c.attn_head_gate = per_head;
  c.attn_value_gate = !per_head;
  return {};
}

} // namespace

status read_laguna_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_qk_normed_attention(j, c, 1e-6));
  TROUPE_TRY(read_heads_by_layer(j, c));
  TROUPE_TRY(read_gating(j, c));
  // windows: layer_types (all full by default, as M.1 publishes); a sliding layer needs a window
  TROUPE_TRY_ASSIGN(sw,
                    j.raw("sliding_window").is_null() ? int64_t{0} : j.i("sliding_window", 512));
  TROUPE_TRY(read_layer_types(j, c, sw, [](int64_t) { return false; }));
  if (const json& lt = j.raw("layer_types");
      c.sliding_window <= 0 && lt.is_array() &&
      std::find(lt.begin(), lt.end(), json("sliding_attention")) != lt.end())
    return j.bad(fmt::format("sliding_attention layers with a sliding_window of {}", sw));
  // each layer kind its RoPE (LagunaConfig's defaults: YaRN-less 5e5 on half of each full head)
  TROUPE_TRY(read_rope_by_layer_type(
      j, c,
      json{{"rope_type", "default"}, {"rope_theta", 500000.0}, {"partial_rotary_factor", 0.5}},
      json{{"rope_type", "default"}, {"rope_theta", 10000.0}}));
  // the experts
  if (j.b("moe_apply_router_weight_on_input", false))
    return j.unsupported("moe_apply_router_weight_on_input true (transformers refuses it too)");
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 512));
  TROUPE_TRY_ASSIGN(fs, j.i("shared_expert_intermediate_size", 512));
  TROUPE_TRY_ASSIGN(scale, j.f("moe_routed_scaling_factor", 1.0));
  TROUPE_TRY_ASSIGN(cap, j.f("moe_router_logit_softcapping", 0.0));
  if (fe <= 0 || fs <= 0 || cap < 0)
    return j.bad(fmt::format("moe_intermediate_size {}, shared_expert_intermediate_size {}, "
                             "moe_router_logit_softcapping {}",
                             fe, fs, cap));
  c.F_expert = fe, c.F_shared = fs, c.expert_scale = scale, c.router_softcap = cap;
  c.router_sigmoid = c.router_bias = c.norm_topk = true;
  j.mark(
      "norm_topk_prob"); // (published, but LagunaConfig drops it: the weights always renormalise)
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
  if (!listed) { // the config class's default: the first layer dense (older keys it drops)
    if (j.has("mlp_only_layers") || j.has("decoder_sparse_step"))
      return j.unsupported("mlp_only_layers / decoder_sparse_step without mlp_layer_types "
                           "(transformers' Laguna ignores them: the first layer dense)");
    c.moe_layers.assign(static_cast<size_t>(c.n_layer), 1);
    if (c.n_layer > 0) c.moe_layers[0] = 0;
  } else {
    j.mark("mlp_only_layers"), j.mark("decoder_sparse_step"); // (mlp_layer_types wins)
  }
  return {};
}

// llama.cpp's laguna: the head count per layer, the window's pattern, each layer kind's rotary
// dims and base (YaRN on the full layers only), the gate's kind by its tensor's width, the
// router's soft-capping where the file gives it (llama.cpp's laguna reads none)
status read_laguna_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-6, true));
  c.qk_norm = qk_norm_kind::head;
  c.rope.layout = rope_layout::neox;
  TROUPE_TRY(read_gguf_windows(g, c, 0, 0));
  read_gguf_rope_swa(g, c, g.i("rope.dimension_count_swa", c.D));
  const tensor_info* gate = g.g.tensors.find("blk.0.attn_gate.weight"); // [rows, C]
  const int64_t h0 = c.layer_heads(0);
  if (!gate || gate->dims.rank != 2 || (gate->dims[0] != h0 && gate->dims[0] != h0 * c.D))
    return g.unsupported(
        fmt::format("blk.0.attn_gate.weight not [{} or {}, {}] (a gate per head or "
                    "per value)",
                    h0, h0 * c.D, c.C));
  c.attn_gate_softplus = true;
  c.attn_head_gate = gate->dims[0] == h0;
  c.attn_value_gate = !c.attn_head_gate;
  c.router_softcap = g.f("router_logit_softcapping", 0.0);
  TROUPE_TRY(read_routed_experts_gguf(g, c));
  c.F_shared = g.i("expert_shared_feed_forward_length", c.F_shared);
  return {};
}

status build_laguna(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    (c.attn_head_gate ? n.attn_head_gate : n.mla_gate) = "blk.{}.attn_gate.weight";
    routed_expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string l = "model.layers.{}.", p = l + "mlp.";
  (c.attn_head_gate ? n.attn_head_gate : n.mla_gate) = l + "self_attn.g_proj.weight";
  n.moe_router = p + "gate.weight", n.moe_router_bias = p + "experts.e_score_correction_bias";
  hf_expert_names(n, p);
  n.shexp_gate = p + "shared_expert.gate_proj.weight",
  n.shexp_up = p + "shared_expert.up_proj.weight";
  n.shexp_down = p + "shared_expert.down_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
