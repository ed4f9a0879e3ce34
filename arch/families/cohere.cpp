// cohere.cpp (arch/families): Command-R (CohereForCausalLM): a parallel block with one
// LayerNorm without bias (x += attn(h) + mlp(h)), RoPE on interleaved pairs (GPT-J style, as
// the checkpoint stores q and k), optional per-head q/k LayerNorms with a weight per head,
// tied embeddings and the logits times logit_scale. Command R7B / Command A (Cohere2ForCausalLM):
// the same block with sliding windows on three layers of four (layer_types) and RoPE on those
// only: the full-attention layers have no positional encoding at all. Cohere2-MoE
// (Cohere2MoeForCausalLM): that block with RMSNorms where rms_norm_eps is given, dense layers of
// prefix_dense_intermediate_size where mlp_layer_types says "dense" (with RoPE whatever their
// window when prefix_dense_sliding_window_pattern is 1), the others experts chosen by their top-k
// logits (softmax over those, or their sigmoids, renormalised with norm_topk_prob) with shared
// experts summed or averaged in.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// Cohere Compass (North): the layers layer_types names sliding attend over sliding_window; RoPE
// over whole heads, q / k halves paired (rotate_half), by layer type from rope_parameters, whose
// entry null leaves that type without RoPE (its M-RoPE sections turn text positions alike)
status read_compass_layers(hf_cfg& j, model_config& c) {
  // (the window kept even where it spans the context: it also says which RoPE a layer takes)
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 4096));
  std::vector<uint8_t> sliding;
  TROUPE_TRY_ASSIGN(listed, read_layer_kinds(j, "layer_types", c.n_layer, "sliding_attention",
                                             "full_attention", sliding));
  if (!listed) sliding.assign(static_cast<size_t>(c.n_layer), 0); // (every layer full)
  if (std::find(sliding.begin(), sliding.end(), 1) != sliding.end()) {
    if (sw <= 0) return j.bad("sliding layers without a positive 'sliding_window'");
    c.sliding_window = sw;
    c.windowed = sliding;
  }
  j.mark("pooling"); // (an embedding head's pooling: not the causal LM's)
  const json& rp = j.raw("rope_parameters");
  if (!rp.is_object() || rp.empty())
    return j.bad("'rope_parameters' must hold full_attention / sliding_attention entries");
  json by_type[2] = {nullptr, nullptr}; // full, sliding
  for (auto& [k, v] : rp.items()) {
    if (k != "full_attention" && k != "sliding_attention")
      return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
    if (!v.is_null() && (!v.is_object() || v.value("partial_rotary_factor", 1.0) != 1.0))
      return j.unsupported("rope_parameters with a partial_rotary_factor (Compass rotates whole "
                           "heads)");
    by_type[k == "sliding_attention" ? 1 : 0] = v;
  }
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.nope_layers[static_cast<size_t>(l)] = by_type[sliding[static_cast<size_t>(l)]].is_null();
  if (!by_type[0].is_null()) TROUPE_TRY(read_rope_dict(by_type[0], c, c.rope, 1e4, j.where()));
  if (!by_type[1].is_null()) {
    TROUPE_TRY(read_rope_dict(by_type[1], c, c.rope_local, 1e4, j.where()));
    c.has_rope_local = true;
    if (by_type[0].is_null()) c.rope = c.rope_local; // (only the sliding layers rotate)
  }
  return {};
}

} // namespace

status read_cohere_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "layer_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.norm = norm_kind::layer, c.norm_bias = false; // (LayerNorms without biases)
  c.residual = residual_kind::parallel;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  if (j.b("use_qk_norm", false)) {
    c.qk_norm = qk_norm_kind::head_weights;
    c.qk_norm_type = norm_kind::layer;
  }
  TROUPE_TRY_ASSIGN(ls, j.f("logit_scale", c.family == "cohere_compass" ? 1.0 : 0.0625));
  c.logit_scale = ls;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (c.family == "cohere_compass") return read_compass_layers(j, c);
  TROUPE_TRY(read_rope(j, c, 500000.0, 1.0));
  c.rope.layout = rope_layout::interleaved;
  if (c.family == "cohere2") {
    TROUPE_TRY_ASSIGN(windowed, read_windows_rope_on_sliding(j, c));
    if (!windowed) return j.unsupported("Cohere2 without a sliding_window");
  }
  return {};
}

// GGUF (command-r, cohere2): Llama's names, q and k unpermuted (the rope is interleaved
// already), tied embeddings, logit_scale required; per-head q/k norms where the file has
// attn_q_norm; cohere2's window on three layers of four, as llama.cpp assumes.
status read_cohere_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer, c.norm_bias = false; // (LayerNorms without biases)
  c.residual = residual_kind::parallel;
  c.rope.layout = rope_layout::interleaved;
  TROUPE_TRY_ASSIGN(ls, g.g.get_float(g.key("logit_scale")));
  c.logit_scale = ls;
  if (g.has_tensor("blk.0.attn_q_norm.weight")) {
    c.qk_norm = qk_norm_kind::head_weights;
    c.qk_norm_type = norm_kind::layer;
  }
  if (c.family == "cohere2") { // llama.cpp's cohere2: three sliding layers in four (no key)
    TROUPE_TRY(read_gguf_windows(g, c, 0, 4));
    if (c.sliding_window <= 0) return g.unsupported("cohere2 without attention.sliding_window");
    rope_on_windowed_only(c);
  }
  return {};
}

status read_cohere2_moe_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY_ASSIGN(Fe, j.req("intermediate_size"));
  TROUPE_TRY_ASSIGN(Fd, j.i("prefix_dense_intermediate_size", Fe));
  TROUPE_TRY(read_hf_dims(j, c, nullptr, 1e-5));
  c.F = Fd; // the dense layers' width (the experts' is intermediate_size)
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  const json& rms = j.raw("rms_norm_eps");
  if (!rms.is_null()) {
    if (!rms.is_number()) return j.bad("'rms_norm_eps' must be a number or null");
    c.norm = norm_kind::rms, c.norm_eps = rms.get<double>();
    j.mark("layer_norm_eps");
  } else {
    c.norm = norm_kind::layer, c.norm_bias = false; // (LayerNorms without biases)
    TROUPE_TRY_ASSIGN(eps, j.f("layer_norm_eps", 1e-5));
    c.norm_eps = eps;
  }
  c.residual = residual_kind::parallel;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  TROUPE_TRY_ASSIGN(ls, j.f("logit_scale", 0.0625));
  c.logit_scale = ls;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.rope.layout = rope_layout::interleaved;
  // layers: windows by layer_types (the config class writes them), experts by mlp_layer_types
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 4096));
  TROUPE_TRY_ASSIGN(pattern, j.i("sliding_window_pattern", 4));
  if (pattern <= 0) return j.bad("'sliding_window_pattern' must be positive");
  TROUPE_TRY(read_layer_types(j, c, sw, [pattern](int64_t l) { return (l + 1) % pattern != 0; }));
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
  if (!listed) c.moe_layers.assign(static_cast<size_t>(c.n_layer), 1);
  TROUPE_TRY_ASSIGN(prefix, j.i("prefix_dense_sliding_window_pattern", 1));
  // RoPE on the sliding layers, and on the dense ones where the prefix pattern is 1
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.nope_layers[static_cast<size_t>(l)] =
        c.layer_window(l) == 0 && !(prefix == 1 && !c.moe_layers[static_cast<size_t>(l)]);
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  c.F_expert = Fe;
  TROUPE_TRY_ASSIGN(shared, j.i("num_shared_experts", 0));
  c.F_shared = shared * Fe;
  const std::string fn = j.s("expert_selection_fn", "softmax");
  if (fn == "softmax") {
    c.norm_topk = true; // (a softmax over the top-k logits)
    j.mark("norm_topk_prob");
  } else if (fn == "sigmoid") {
    c.router_sigmoid = true; // (the top-k by logit is the top-k by sigmoid)
    c.norm_topk = j.b("norm_topk_prob", true);
  } else {
    return j.unsupported(fmt::format("expert_selection_fn '{}' (softmax, sigmoid are)", fn));
  }
  const std::string comb = j.s("shared_expert_combination_strategy", "average");
  if (comb == "average" && c.F_shared > 0) {
    c.expert_scale = 0.5, c.shared_scale = 0.5;
  } else if (comb != "sum" && comb != "average") {
    return j.unsupported(
        fmt::format("shared_expert_combination_strategy '{}' (sum, average are)", comb));
  }
  return {};
}

status build_cohere(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n =
      m.format == "hf" ? hf_llama_layout(c.qkv_bias, c.o_bias, false) : gguf_layout(m);
  n.ffn_norm.clear();
  if (c.n_expert > 0) { // Cohere2-MoE's experts, one by one, and its shared experts
    const std::string p = "model.layers.{}.mlp.";
    n.moe_router = p + "gate.weight";
    hf_expert_names(n, p);
    hf_shared_expert_names(n, p);
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
