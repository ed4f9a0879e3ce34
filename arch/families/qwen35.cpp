// qwen35.cpp (arch/families): Qwen3.5 (text), Qwen3.5-MoE and Qwen3-Next - a hybrid of gated
// DeltaNet layers (linear attention: a short causal convolution over q, k and v, then the gated
// delta rule over a recurrent memory per sequence; three layers of four by default, `layer_types`)
// and full attention layers whose q projection also gives a sigmoid gate per output value, with q /
// k norms per head and RoPE over part of each head; every RMSNorm scales by (1 + w) but the
// DeltaNet's gated one. Text positions are one number per token, so the M-RoPE sections of
// the published rope_parameters (mrope_section, mrope_interleaved) all rotate by it: plain RoPE.
// Qwen3.5-MoE and Qwen3-Next route every FFN (but mlp_only_layers) to experts as Qwen2-MoE does
// (softmax, top k renormalised, a shared expert behind a sigmoid gate); Qwen3-Next stores q, k,
// v and z of each key head's group together (in_proj_qkvz), and b and a likewise (in_proj_ba).
// Lara Mini (LaraMiniForCausalLM, translated/Lara-4-Mini): the same DeltaNet layers (published with
// their four input projections in one in_proj, rows [q | k | v | z | b | a], and the gated norm as
// out_norm) beside Qwen3 attention layers (no output gate) that slide (window sliding_window, with
// RoPE over the whole head) or attend globally without RoPE, by layer_types (linear, sliding,
// linear, full, sliding, repeated, by default); plain-weight RMS norms; every FFN experts (softmax,
// top k renormalised) plus a shared SwiGLU expert added without a gate.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// Lara Mini's layers (linear, sliding or full attention) and experts
status read_lara_layers(hf_cfg& j, model_config& c) {
  static const char* pattern[] = {"linear_attention", "sliding_attention", "linear_attention",
                                  "full_attention", "sliding_attention"};
  const json& lt = j.raw("layer_types");
  if (!lt.is_null() && (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer))
    return j.bad(fmt::format("'layer_types' must list {} layer types", c.n_layer));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 512));
  if (sw <= 0) return j.bad("'sliding_window' must be positive");
  std::vector<uint8_t> windowed(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const size_t i = static_cast<size_t>(l);
    const json type = lt.is_null() ? json(pattern[l % 5]) : lt[i];
    if (type == "linear_attention")
      c.linear_layers[i] = 1;
    else if (type == "sliding_attention")
      windowed[i] = 1;
    else if (type != "full_attention")
      return j.unsupported(fmt::format("layer_types[{}] = {} is not supported", l, type.dump()));
  }
  c.sliding_window = sw;
  c.windowed = std::move(windowed);
  // RoPE on the sliding layers only (the full ones attend without positions)
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.nope_layers[static_cast<size_t>(l)] = !c.windowed[static_cast<size_t>(l)];
  if (sw >= c.ctx) c.sliding_window = 0; // (a window as long as the context: RoPE stays as read)
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  TROUPE_TRY_ASSIGN(fs, j.i("shared_expert_intermediate_size", 512));
  c.F_expert = fe, c.F_shared = fs;
  c.norm_topk = j.b("norm_topk_prob", true);
  return {};
}

} // namespace

status read_qwen35_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("'attention_bias' true");
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  const bool lara = c.family == "lara_mini";
  TROUPE_TRY(read_rope(j, c, 1e7, lara ? 1.0 : 0.25));
  c.qk_norm = qk_norm_kind::head;
  if (lara) {
    // (its attention rotates whole heads: another rotary fraction is not a model transformers runs)
    if (c.rope.rot_dim != c.D) return j.unsupported("partial_rotary_factor other than 1");
    j.mark("attn_output_gate"); // (Qwen3's attention: no gate, whatever the key says)
  } else {
    c.norm_add = 1;
    c.attn_output_gate = j.b("attn_output_gate", true);
  }
  TROUPE_TRY_ASSIGN(kh, j.req("linear_num_key_heads"));
  TROUPE_TRY_ASSIGN(vh, j.req("linear_num_value_heads"));
  TROUPE_TRY_ASSIGN(kd, j.req("linear_key_head_dim"));
  TROUPE_TRY_ASSIGN(vd, j.req("linear_value_head_dim"));
  TROUPE_TRY_ASSIGN(taps, j.req("linear_conv_kernel_dim"));
  if (vh % kh)
    return j.bad("'linear_num_value_heads' must be a multiple of 'linear_num_key_heads'");
  c.lin_k_heads = kh, c.lin_v_heads = vh, c.lin_k_dim = kd, c.lin_v_dim = vd, c.lin_conv = taps;
  c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
  if (lara) return read_lara_layers(j, c);
  TROUPE_TRY_ASSIGN(listed, read_layer_kinds(j, "layer_types", c.n_layer, "linear_attention",
                                             "full_attention", c.linear_layers));
  if (listed) {
    j.mark("full_attention_interval");
  } else {
    TROUPE_TRY_ASSIGN(every, j.i("full_attention_interval", 4));
    if (every <= 0) return j.bad("'full_attention_interval' must be positive");
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.linear_layers[static_cast<size_t>(l)] = (l + 1) % every != 0;
  }
  if (c.family != "qwen3_5") TROUPE_TRY(read_experts_hf(j, c)); // Qwen3-Next, Qwen3.5-MoE
  return {};
}

// GGUF as llama.cpp's converter writes qwen35 / qwen35moe / qwen3next: the norms' (1 + w)
// folded into the weights (the gated norm's kept), A stored as -exp(A_log), the recurrent
// layers listed (attention.recurrent_layers) or every full_attention_interval-th one full, and
// for qwen35 / qwen35moe the value heads reordered from grouped by key head to tiled (head h
// reads key head h % key heads). Qwen3-Next's q, k, v come unfused (attn_qkv, attn_gate), its b
// and a still grouped (ssm_ba). Text positions: the M-RoPE sections all rotate alike.
status read_qwen35_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-6));
  TROUPE_TRY(drop_gguf_nextn(g, c));
  c.rope.layout = rope_layout::neox;
  g.key("rope.dimension_sections"); // text: every section's position is the token's
  c.qk_norm = qk_norm_kind::head;
  c.attn_output_gate = true;
  TROUPE_TRY_ASSIGN(taps, g.req("ssm.conv_kernel"));
  TROUPE_TRY_ASSIGN(dk, g.req("ssm.state_size"));
  TROUPE_TRY_ASSIGN(hk, g.req("ssm.group_count"));
  TROUPE_TRY_ASSIGN(hv, g.req("ssm.time_step_rank"));
  TROUPE_TRY_ASSIGN(inner, g.req("ssm.inner_size"));
  if (hk <= 0 || hv % hk || inner % hv)
    return g.unsupported(
        fmt::format("{} key heads, {} value heads and an inner size of {}", hk, hv, inner));
  c.lin_k_heads = hk, c.lin_v_heads = hv, c.lin_k_dim = dk, c.lin_v_dim = inner / hv;
  c.lin_conv = taps;
  c.lin_tiled = g.arch != "qwen3next" && hk != hv;
  c.lin_neg_a = true;
  c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
  const int64_t every = g.i("full_attention_interval", 4);
  if (const gguf_value* v = g.g.get(g.key("attention.recurrent_layers")); v) {
    if (v->type != gguf_type::array || static_cast<int64_t>(v->arr.size()) < c.n_layer)
      return g.unsupported("attention.recurrent_layers that is not a flag per layer");
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.linear_layers[static_cast<size_t>(l)] = v->arr[static_cast<size_t>(l)].i != 0;
  } else {
    if (every <= 0) return g.unsupported("full_attention_interval 0");
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.linear_layers[static_cast<size_t>(l)] = (l + 1) % every != 0;
  }
  return read_experts_gguf(g, c);
}

// As published (Qwen3_5ForConditionalGeneration): the text model's tensors under
// model.language_model., read as the text-only model's model. names (the vision tower's
// model.visual. and the multi-token-prediction head's mtp. stay unread, listed at load).
status prepare_qwen35_hf(const model_config& c, tensor_index& t) {
  return prepare_language_model(c, t);
}

// Lara Mini's published in_proj [q | k | v | z | b | a] split into transformers' four inputs
status prepare_lara_mini_hf(const model_config& c, tensor_index& t) {
  const int64_t qkv = 2 * c.lin_k_heads * c.lin_k_dim + c.lin_v_heads * c.lin_v_dim;
  const int64_t z = c.lin_v_heads * c.lin_v_dim, ab = c.lin_v_heads;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.linear_attn.", l);
    if (!c.layer_linear(l) || !t.find(p + "in_proj.weight")) continue; // (or already split)
    TROUPE_TRY_ASSIGN(w, take_tensor(t, p + "in_proj.weight", {qkv + z + 2 * ab, c.C}));
    if (!w->supported || is_quantized(w->type))
      return make_error(errc::unsupported, "{}in_proj.weight: f32, f16 or bf16 only", p);
    const size_t row = row_bytes(w->type, c.C);
    int64_t first = 0;
    for (const auto& [name, rows] : {std::pair{"in_proj_qkv", qkv}, std::pair{"in_proj_z", z},
                                     std::pair{"in_proj_b", ab}, std::pair{"in_proj_a", ab}}) {
      std::vector<uint8_t> bytes(w->data + first * row, w->data + (first + rows) * row);
      TROUPE_TRY(add_repacked_tensor(t, p + name + ".weight", w->type, shape{rows, c.C},
                                     std::move(bytes), w->file));
      first += rows;
    }
  }
  return {};
}

status build_qwen35(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    n.wqkv.clear(), n.bqkv.clear(); // attn_qkv is a linear layer's; full ones have attn_q ...
    n.wq = "blk.{}.attn_q.weight", n.wk = "blk.{}.attn_k.weight", n.wv = "blk.{}.attn_v.weight";
    n.ffn_norm = "blk.{}.post_attention_norm.weight"; // the FFN's pre-norm, as llama.cpp names it
    n.lin_qkv = "blk.{}.attn_qkv.weight";
    n.lin_z = "blk.{}.attn_gate.weight";
    if (c.family == "qwen3_next") {
      n.lin_ba = "blk.{}.ssm_ba.weight";
    } else {
      n.lin_a = "blk.{}.ssm_alpha.weight";
      n.lin_b = "blk.{}.ssm_beta.weight";
    }
    n.lin_conv = "blk.{}.ssm_conv1d.weight";
    n.lin_dt_bias = "blk.{}.ssm_dt.bias";
    n.lin_A_log = "blk.{}.ssm_a";
    n.lin_norm = "blk.{}.ssm_norm.weight";
    n.lin_out = "blk.{}.ssm_out.weight";
    if (c.n_expert > 0) expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(false, false, false);
  n.q_norm = "model.layers.{}.self_attn.q_norm.weight";
  n.k_norm = "model.layers.{}.self_attn.k_norm.weight";
  const std::string p = "model.layers.{}.linear_attn.";
  if (c.family == "qwen3_next") { // q, k, v, z fused per key head group, and b, a
    n.lin_qkvz = p + "in_proj_qkvz.weight";
    n.lin_ba = p + "in_proj_ba.weight";
  } else {
    n.lin_qkv = p + "in_proj_qkv.weight";
    n.lin_z = p + "in_proj_z.weight";
    n.lin_a = p + "in_proj_a.weight";
    n.lin_b = p + "in_proj_b.weight";
  }
  if (c.n_expert > 0) {
    expert_names(m, n);
    // experts packed per layer (transformers 5's layout, later checkpoints as published)
    for (int64_t l = 0; l < c.n_layer; ++l)
      if (c.layer_moe(l) &&
          m.tensors->contains(fmt::format("model.layers.{}.mlp.experts.gate_up_proj", l))) {
        n.moe_gate_up = "model.layers.{}.mlp.experts.gate_up_proj";
        n.moe_down = "model.layers.{}.mlp.experts.down_proj";
        n.moe_gate.clear(), n.moe_up.clear();
        break;
      }
  }
  n.lin_conv = p + "conv1d.weight";
  n.lin_dt_bias = p + "dt_bias";
  n.lin_A_log = p + "A_log";
  n.lin_norm = p + "norm.weight";
  n.lin_out = p + "out_proj.weight";
  if (c.family == "lara_mini") {
    n.lin_norm = p + "out_norm.weight"; // (as published)
    n.shexp_gate_inp.clear();           // its shared expert is added without a gate
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
