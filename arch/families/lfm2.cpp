// lfm2.cpp (arch/families): Liquid AI's LFM2 (Lfm2ForCausalLM: LFM2-350M / 700M / 1.2B / 2.6B,
// LFM2.5). A pre-norm decoder whose layers mix tokens either by GQA attention (q / k RMS norms
// per head, RoPE) or, on the layers `layer_types` names "conv", by a gated short convolution
// (in_proj gives B, C and x; a depthwise causal convolution of conv_L_cache taps over B * x,
// without activation; C times its output; out_proj), each followed by a SwiGLU FFN; the final
// norm is named embedding_norm. The FFN's width is Lfm2MLP's: with block_auto_adjust_ff_dim,
// 2/3 of intermediate_size (or block_ff_dim), times block_ffn_dim_multiplier and rounded up to
// block_multiple_of where a multiplier is given. The convolution keeps the last taps - 1 inputs
// of a sequence as its state (model_config::short_conv; the runtime's recurrent state slots).
// LFM2-MoE (Lfm2MoeForCausalLM: LFM2-8B-A1B, LFM2-24B-A2B): the same layers, the first
// num_dense_layers with a SwiGLU of intermediate_size, the others a mixture of experts routed as
// DeepSeek-V3 routes (sigmoid scores, expert_bias for the choice only; renormalised, times
// routed_scaling_factor), without a shared expert.
// LFM3 (Lfm3ForCausalLM): see read_lfm3_hf. No GGUF yet (llama.cpp has no lfm3).
// GGUF: llama.cpp's lfm2 / lfm2moe (head_count_kv 0 on the convolution layers; shortconv.*).
// Tests: tests/exec/forward_test.cpp (SyntheticArch / GgufArch lfm2, lfm2_moe), pipeline_test.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// The published config.json's own copies of what transformers reads elsewhere (Lfm2Config
// ignores them): another value than the one read would be another model
status check_echoes(hf_cfg& j, const model_config& c) {
  const std::pair<const char*, int64_t> echoes[] = {
      {"block_dim", c.C}, {"conv_dim", c.C}, {"conv_dim_out", c.C}, {"num_heads", c.H}};
  for (auto [key, want] : echoes) {
    if (!j.present(key)) continue;
    TROUPE_TRY_ASSIGN(v, j.i(key, want));
    if (v != want)
      return j.unsupported(fmt::format("'{}' {} where transformers builds {}", key, v, want));
  }
  for (const char* key : {"use_pos_enc", "block_use_swiglu"})
    if (!j.b(key, true)) return j.unsupported(fmt::format("'{}' false", key));
  if (j.present("theta")) {
    TROUPE_TRY_ASSIGN(theta, j.f("theta", c.rope.theta));
    if (theta != c.rope.theta)
      return j.unsupported(fmt::format("'theta' {} beside a RoPE base of {}", theta, c.rope.theta));
  }
  // initialisation and training switches
  for (const char* key : {"block_mlp_init_scale", "block_out_init_scale", "block_use_xavier_init",
                          "conv_use_xavier_init", "block_norm_eps"})
    j.mark(key);
  return {};
}

// Lfm2MoeSparseMoeBlock on the layers from num_dense_layers on: sigmoid scores, the choice by
// scores + expert_bias (use_expert_bias), the chosen scores renormalised (norm_topk_prob: their
// sum + 1e-6) and times routed_scaling_factor; no shared expert
status read_lfm2_experts(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  if (c.n_expert < 2 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
    return j.bad(fmt::format("{} of {} experts per token", c.n_expert_used, c.n_expert));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  c.F_expert = fe;
  c.router_sigmoid = true;
  c.router_bias = j.b("use_expert_bias", true);
  c.norm_topk = j.b("norm_topk_prob", true);
  c.router_eps = 1e-6;
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 1.0));
  c.expert_scale = scale;
  TROUPE_TRY_ASSIGN(dense, j.i("num_dense_layers", 2));
  if (dense < 0) return j.bad("'num_dense_layers' must not be negative");
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = dense; l < c.n_layer; ++l) c.moe_layers[static_cast<size_t>(l)] = 1;
  return {};
}

// The convolution over the hidden channels, cut by TP in as many groups as there are heads
void set_short_conv(model_config& c, int64_t taps) {
  c.short_conv = true;
  c.lin_conv = taps, c.lin_v_heads = c.H, c.lin_v_dim = c.C / c.H;
}

// What LFM2's and LFM3's configs share: tie_embedding standing for tie_word_embeddings, the
// convolution's taps (conv_L_cache; conv_bias refuses)
status read_lfm_common(hf_cfg& j, model_config& c, int64_t default_taps) {
  c.tie_embeddings =
      j.present("tie_embedding") ? j.b("tie_embedding", true) : j.b("tie_word_embeddings", true);
  j.mark("tie_word_embeddings");
  if (j.b("conv_bias", false)) return j.unsupported("'conv_bias' true");
  TROUPE_TRY_ASSIGN(taps, j.i("conv_L_cache", default_taps));
  if (taps < 2) return j.bad(fmt::format("'conv_L_cache' {} (at least 2 taps)", taps));
  if (c.C % c.H) return j.bad("'hidden_size' must be a multiple of 'num_attention_heads'");
  set_short_conv(c, taps);
  return {};
}

// layer_types: "conv" layers convolve, "full_attention" ones attend, and (where `sliding`)
// "sliding_attention" ones attend over the window
status read_conv_layer_types(hf_cfg& j, model_config& c, const json& lt, bool sliding) {
  const size_t L = static_cast<size_t>(c.n_layer);
  if (!lt.is_array() || lt.size() != L)
    return j.bad(fmt::format("'layer_types' must list {} layer types", L));
  c.linear_layers.assign(L, 0);
  if (sliding) c.windowed.assign(L, 0);
  for (size_t i = 0; i < L; ++i) {
    if (lt[i] == "conv")
      c.linear_layers[i] = 1;
    else if (sliding && lt[i] == "sliding_attention")
      c.windowed[i] = 1;
    else if (lt[i] != "full_attention")
      return j.unsupported(fmt::format("layer_types[{}] = {} is not supported", i, lt[i].dump()));
  }
  return {};
}

int64_t first_attention(const model_config& c) {
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (!c.layer_linear(l)) return l;
  return 0;
}

} // namespace

status read_lfm2_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "norm_eps", 1e-5));
  // Lfm2Config: block_ff_dim and tie_embedding, where given, stand for intermediate_size and
  // tie_word_embeddings
  if (j.present("block_ff_dim")) {
    TROUPE_TRY_ASSIGN(ff, j.req("block_ff_dim"));
    c.F = ff;
  }
  TROUPE_TRY(read_lfm_common(j, c, 3));
  if (c.family ==
      "lfm2_moe") { // Lfm2MoeMLP: intermediate_size as it is, on the num_dense_layers first layers
    TROUPE_TRY(read_lfm2_experts(j, c));
  } else if (j.b("block_auto_adjust_ff_dim", true)) { // Lfm2MLP's width
    int64_t f = static_cast<int64_t>(2.0 * static_cast<double>(c.F) / 3.0);
    if (const json& m = j.raw("block_ffn_dim_multiplier"); !m.is_null()) {
      if (!m.is_number()) return j.bad("'block_ffn_dim_multiplier' must be a number");
      f = static_cast<int64_t>(m.get<double>() * static_cast<double>(f));
      TROUPE_TRY_ASSIGN(mult, j.i("block_multiple_of", 256));
      if (mult <= 0) return j.bad("'block_multiple_of' must be positive");
      f = mult * ((f + mult - 1) / mult);
    } else {
      j.mark("block_multiple_of");
    }
    c.F = f;
  } else {
    j.mark("block_ffn_dim_multiplier"), j.mark("block_multiple_of");
  }
  if (c.F <= 0) return j.bad(fmt::format("an FFN width of {}", c.F));
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 1e6, 1.0));
  c.qk_norm = qk_norm_kind::head;
  c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    j.mark("full_attn_idxs");
    TROUPE_TRY(read_conv_layer_types(j, c, lt, false));
  } else if (const json& idx = j.raw("full_attn_idxs"); !idx.is_null()) {
    if (!idx.is_array()) return j.bad("'full_attn_idxs' must list layer indices");
    c.linear_layers.assign(static_cast<size_t>(c.n_layer), 1);
    for (const json& x : idx) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= c.n_layer)
        return j.bad(fmt::format("'full_attn_idxs' names layer {} of {}", x.dump(), c.n_layer));
      c.linear_layers[static_cast<size_t>(x.get<int64_t>())] = 0;
    }
  } // neither: every layer attention (Lfm2Config's default)
  return check_echoes(j, c);
}

// LFM3: LFM2's convolutions (7 taps by default) around two kinds of attention layer, full and
// sliding, each with its RoPE (transformers 5 nests them by layer type: by default the sliding
// layers' plain at 10^4, the full layers' proportional at 10^6 turning half of each head's
// pairs); Qwen3's attention (q / k norms, o_proj) with a sigmoid gate per head (g_proj,
// use_attention_gate); sandwich norms on both sublayers (use_sandwich_norm); SwiGLU FFNs of
// intermediate_size.
status read_lfm3_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "norm_eps", 1e-5));
  if (!j.present("head_dim")) c.D = 128; // Lfm3Config's default, not hidden / heads
  TROUPE_TRY(read_lfm_common(j, c, 7));
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  j.mark("attention_dropout");
  c.qk_norm = qk_norm_kind::head;
  c.norms = j.b("use_sandwich_norm", true) ? norm_place::sandwich : norm_place::pre;
  c.attn_head_gate = j.b("use_attention_gate", true);
  // layer types (Lfm3Config's default: full every fourth from 2, sliding every fourth from 4)
  const size_t L = static_cast<size_t>(c.n_layer);
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    TROUPE_TRY(read_conv_layer_types(j, c, lt, true));
  } else {
    c.linear_layers.assign(L, 0);
    c.windowed.assign(L, 0);
    for (size_t i = 0; i < L; ++i) {
      c.windowed[i] = i % 4 == 0 && i > 0;
      c.linear_layers[i] = i % 4 != 2 && !c.windowed[i];
    }
  }
  const json& sw = j.raw("sliding_window");
  if (!sw.is_null() && (!sw.is_number_integer() || sw.get<int64_t>() <= 0))
    return j.bad("'sliding_window' must be a positive integer or null");
  c.sliding_window = sw.is_null() ? (j.present("sliding_window") ? 0 : 256) : sw.get<int64_t>();
  if (c.sliding_window == 0) c.windowed.assign(L, 0); // null: the sliding layers see everything
  // RoPE per layer type; a dict that is not nested holds for both
  return read_rope_by_layer_type(
      j, c, {{"rope_type", "proportional"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.5}},
      {{"rope_type", "default"}, {"rope_theta", 1e4}});
}

// llama.cpp's lfm2: head_count_kv 0 marks the convolution layers; q / k as published (NEOX
// RoPE); the FFN width as the converter computed it
status read_lfm2_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = rope_layout::neox;
  c.qk_norm = qk_norm_kind::head;
  TROUPE_TRY_ASSIGN(taps, g.req("shortconv.l_cache"));
  if (taps < 2) return g.unsupported(fmt::format("shortconv.l_cache {}", taps));
  if (c.H <= 0 || c.C % c.H) return g.unsupported("an embedding not a multiple of the heads");
  set_short_conv(c, taps);
  c.linear_layers = g.no_kv;
  c.linear_layers.resize(static_cast<size_t>(c.n_layer), 0);
  g.key("vocab_size"); // the token table's rows
  if (c.family != "lfm2_moe") return {};
  // lfm2moe: DeepSeek's keys (sigmoid gating, exp_probs_b, leading dense blocks); llama.cpp
  // renormalises the chosen weights whatever the file says (the converter writes no key)
  const bool norm_key = g.has("expert_weights_norm");
  TROUPE_TRY(read_routed_experts_gguf(g, c));
  if (!norm_key) c.norm_topk = true;
  c.router_eps = 1e-6;
  if (c.F_shared > 0) return g.unsupported("expert_shared_count (LFM2-MoE has no shared expert)");
  return {};
}

status build_lfm2(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
    const std::string p = "model.layers.{}.";
    n.attn_norm = p + "operator_norm.weight";
    n.ffn_norm = p + "ffn_norm.weight";
    n.w_gate = p + "feed_forward.w1.weight";
    n.w_up = p + "feed_forward.w3.weight";
    n.w_down = p + "feed_forward.w2.weight";
    n.lin_bcx = p + "conv.in_proj.weight";
    n.lin_conv = p + "conv.conv.weight";
    n.lin_out = p + "conv.out_proj.weight";
    n.out_norm = "model.embedding_norm.weight";
    if (c.family == "lfm3") { // Qwen3's attention names, the per-head gate, the sandwich norms
      n.post_attn_norm = p + "post_operator_norm.weight";
      n.post_ffn_norm = p + "post_ffn_norm.weight";
      n.q_norm = p + "self_attn.q_norm.weight";
      n.k_norm = p + "self_attn.k_norm.weight";
      // (g_proj in transformers' module, gate_proj in the checkpoint it writes)
      if (c.attn_head_gate)
        n.attn_head_gate = m.tensors->contains(fmt::format(
                               "model.layers.{}.self_attn.g_proj.weight", first_attention(c)))
                               ? p + "self_attn.g_proj.weight"
                               : p + "self_attn.gate_proj.weight";
    } else {
      n.wo = p + "self_attn.out_proj.weight";
      n.q_norm = p + "self_attn.q_layernorm.weight";
      n.k_norm = p + "self_attn.k_layernorm.weight";
    }
  } else {
    n = gguf_layout(m);
    n.lin_bcx = "blk.{}.shortconv.in_proj.weight";
    n.lin_conv = "blk.{}.shortconv.conv.weight";
    n.lin_out = "blk.{}.shortconv.out_proj.weight";
    // the converter's name for embedding_norm, which comes last (no norm after the embedding)
    n.out_norm = "token_embd_norm.weight";
    n.embd_norm.clear(), n.embd_norm_b.clear();
  }
  if (c.n_expert > 0) {
    if (m.format == "hf") {
      const std::string p = "model.layers.{}.feed_forward.";
      n.moe_router = p + "gate.weight";
      n.moe_router_bias = p + "expert_bias";
      n.moe_gate = p + "experts.{e}.w1.weight";
      n.moe_up = p + "experts.{e}.w3.weight";
      n.moe_down = p + "experts.{e}.w2.weight";
    } else {
      expert_names(m, n);
      n.moe_router_bias = "blk.{}.exp_probs_b.bias";
    }
    n.shexp_gate.clear(), n.shexp_up.clear(), n.shexp_down.clear(), n.shexp_gate_inp.clear();
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
