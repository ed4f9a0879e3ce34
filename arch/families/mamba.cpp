// mamba.cpp (arch/families): Mamba-2's mixer as the families that use it configure it, and
// Mamba2ForCausalLM itself (Mamba-Codestral): a stack of pre-norm blocks, each the mixer alone
// (in_proj to z, x, B, C and dt; a causal conv1d with bias and SiLU over x, B and C; the
// selective scan; an RMS norm over each group's heads of y silu(z); out_proj), backbone.* names,
// the final norm norm_f. The mixer's keys go by other names in the hybrids (Granite 4.0-H's and
// Bamba's mamba_n_heads ...: granite.cpp), which read them through read_mamba_mixer.
// GGUF: llama.cpp's mamba2 (ssm.* keys, A stored as -exp(A_log), the norm's weight as [G, Di / G]).
// Tests: tests/exec/forward_test.cpp (SyntheticArch / GgufArch mamba2, granite4_h), op cases
// (ssm_scan).
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// ssm.dt_b_c_rms: a bool (the converter's), or absent
bool dt_b_c_rms(const gguf_cfg& g) {
  const gguf_value* v = g.g.get(g.key("ssm.dt_b_c_rms"));
  return v && (v->type == gguf_type::boolean || v->is_integer()) && v->i != 0;
}

} // namespace

namespace {

// Mamba-1's mixer keys, by the names a family gives them
struct mamba1_keys {
  const char *state, *expand, *conv, *rank, *conv_bias, *proj_bias;
};

status read_mamba1_mixer(hf_cfg& j, model_config& c, const mamba1_keys& k) {
  TROUPE_TRY_ASSIGN(state, j.i(k.state, 16));
  TROUPE_TRY_ASSIGN(expand, j.i(k.expand, 2));
  TROUPE_TRY_ASSIGN(conv, j.i(k.conv, 4));
  int64_t rank = (c.C + 15) / 16; // "auto"
  if (const json& r = j.raw(k.rank); !r.is_null() && r != "auto")
    TROUPE_TRY_SET(rank, j.req(k.rank));
  if (state <= 0 || expand <= 0 || conv < 1 || rank <= 0)
    return j.bad(fmt::format("Mamba mixer: '{}' {}, '{}' {}, '{}' {}, '{}' {}", k.state, state,
                             k.expand, expand, k.conv, conv, k.rank, rank));
  c.mamba = true;
  c.ssm_dt_rank = rank;
  c.lin_v_heads = expand * c.C, c.lin_v_dim = 1, c.lin_k_heads = 1, c.lin_k_dim = state;
  c.lin_conv = conv;
  c.ssm_conv_bias = j.b(k.conv_bias, true);
  c.ssm_proj_bias = c.ssm_out_bias = j.b(k.proj_bias, false);
  c.ssm_norm = model_config::ssm_norm_kind::none;
  return {};
}

} // namespace

status read_mamba_mixer(hf_cfg& j, model_config& c, const mamba_keys& k) {
  TROUPE_TRY_ASSIGN(heads, j.req(k.heads));
  TROUPE_TRY_ASSIGN(state, j.req(k.state));
  TROUPE_TRY_ASSIGN(groups, j.req(k.groups));
  TROUPE_TRY_ASSIGN(conv, j.req(k.conv));
  int64_t expand = 0; // (no expand key: the heads alone give the inner width)
  if (k.expand) TROUPE_TRY_SET(expand, j.req(k.expand));
  if (heads <= 0 || state <= 0 || groups <= 0 || conv < 1 || (k.expand && expand <= 0) ||
      heads % groups)
    return j.bad(fmt::format("Mamba-2 mixer: '{}' {} in '{}' {}, '{}' {}, '{}' {}{} (heads a "
                             "multiple of the groups, all positive)",
                             k.heads, heads, k.groups, groups, k.state, state, k.conv, conv,
                             k.expand ? fmt::format(", '{}' {}", k.expand, expand) : ""));
  int64_t inner = expand * c.C;
  if (k.inner && !j.raw(k.inner).is_null()) TROUPE_TRY_SET(inner, j.req(k.inner));
  int64_t head_dim = k.expand ? inner / heads : 0;
  if (const json& hd = j.raw(k.head_dim); !k.expand || (!hd.is_null() && hd != "auto")) {
    TROUPE_TRY_ASSIGN(v, j.req(k.head_dim));
    head_dim = v;
  }
  if (head_dim <= 0 || (k.expand && head_dim * heads != inner))
    return j.bad(fmt::format("Mamba-2 mixer: '{}' {} of '{}' {} is not the inner width {} "
                             "('{}' {} x hidden_size {})",
                             k.heads, heads, k.head_dim, head_dim, inner, k.expand, expand, c.C));
  c.mamba = true;
  c.lin_v_heads = heads, c.lin_v_dim = head_dim, c.lin_k_heads = groups, c.lin_k_dim = state;
  c.lin_conv = conv;
  c.ssm_conv_bias = j.b(k.conv_bias, true);
  c.ssm_proj_bias = c.ssm_out_bias = j.b(k.proj_bias, false);
  // the scan's chunking is how a kernel computes it, not what; the initialisation's range of dt
  for (const char* key : {k.chunk, "time_step_min", "time_step_max", "time_step_floor",
                          "time_step_rank", "residual_in_fp32", "rescale_prenorm_residual"})
    j.mark(key);
  // dt is clamped to time_step_limit; transformers' default (0, inf) clamps nothing (dt is a
  // softplus), and another limit is not implemented
  if (const json& lim = j.raw(k.dt_limit); !lim.is_null()) {
    const auto lo = lim.is_array() && lim.size() == 2 ? config_number(lim[0]) : std::nullopt;
    const auto hi = lim.is_array() && lim.size() == 2 ? config_number(lim[1]) : std::nullopt;
    const bool none = lo && hi && *lo <= 0 && std::isinf(*hi) && *hi > 0;
    if (!none) return j.unsupported(fmt::format("'{}' {}", k.dt_limit, lim.dump()));
  }
  return {};
}

void mamba_names(const model_source& m, decoder_names& n, const std::string& hf_prefix) {
  const bool mamba1 = m.config.ssm_dt_rank > 0; // x_proj, dt_proj (its bias dt's), dt / B / C norms
  if (m.format != "hf") {
    const std::string b = "blk.{}.";
    n.ssm_in = b + "ssm_in.weight", n.ssm_in_b = b + "ssm_in.bias";
    n.lin_conv = b + "ssm_conv1d.weight", n.ssm_conv_b = b + "ssm_conv1d.bias";
    n.lin_dt_bias = b + "ssm_dt.bias", n.lin_A_log = b + "ssm_a", n.ssm_D = b + "ssm_d";
    n.lin_norm = b + "ssm_norm.weight";
    n.lin_out = b + "ssm_out.weight", n.ssm_out_b = b + "ssm_out.bias";
    if (mamba1) {
      n.ssm_x = b + "ssm_x.weight", n.ssm_dt_w = b + "ssm_dt.weight";
      n.ssm_dt_norm = b + "ssm_dt_norm.weight", n.ssm_b_norm = b + "ssm_b_norm.weight";
      n.ssm_c_norm = b + "ssm_c_norm.weight";
    }
    return;
  }
  const std::string& p = hf_prefix;
  n.ssm_in = p + "in_proj.weight", n.ssm_in_b = p + "in_proj.bias";
  n.lin_conv = p + "conv1d.weight", n.ssm_conv_b = p + "conv1d.bias";
  n.lin_dt_bias = p + (mamba1 ? "dt_proj.bias" : "dt_bias"), n.lin_A_log = p + "A_log";
  n.ssm_D = p + "D";
  n.lin_norm = p + "norm.weight";
  n.lin_out = p + "out_proj.weight", n.ssm_out_b = p + "out_proj.bias";
  if (mamba1) {
    n.ssm_x = p + "x_proj.weight", n.ssm_dt_w = p + "dt_proj.weight";
    n.ssm_dt_norm = p + "dt_layernorm.weight", n.ssm_b_norm = p + "b_layernorm.weight";
    n.ssm_c_norm = p + "c_layernorm.weight";
  }
}

decoder_names feed_forward_layout(const model_source& m) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
  const std::string f = "model.layers.{}.feed_forward.";
  n.ffn_norm = "model.layers.{}.pre_ff_layernorm.weight";
  n.out_norm = "model.final_layernorm.weight";
  n.w_gate = f + "gate_proj.weight", n.w_up = f + "up_proj.weight";
  n.w_down = f + "down_proj.weight";
  if (c.mlp_bias)
    n.b_gate = f + "gate_proj.bias", n.b_up = f + "up_proj.bias", n.b_down = f + "down_proj.bias";
  mamba_names(m, n, "model.layers.{}.mamba.");
  return n;
}

status read_mamba_gguf_mixer(const gguf_cfg& g, model_config& c) {
  const int64_t inner = g.i("ssm.inner_size", 0), heads = g.i("ssm.time_step_rank", 0);
  const int64_t state = g.i("ssm.state_size", 0), groups = g.i("ssm.group_count", 1);
  const int64_t conv = g.i("ssm.conv_kernel", 0);
  if (inner <= 0 || heads <= 0 || state <= 0 || groups <= 0 || conv < 1 || inner % heads ||
      heads % groups)
    return g.unsupported(fmt::format("Mamba-2 mixer: inner size {}, {} heads in {} groups, state "
                                     "{}, {} taps",
                                     inner, heads, groups, state, conv));
  // (Mamba-1's B / C / dt norms: another model)
  if (dt_b_c_rms(g)) return g.unsupported("ssm.dt_b_c_rms (Falcon Mamba's norms)");
  c.mamba = true;
  c.lin_v_heads = heads, c.lin_v_dim = inner / heads, c.lin_k_heads = groups, c.lin_k_dim = state;
  c.lin_conv = conv;
  c.lin_neg_a = true; // the converter stores A = -exp(A_log)
  c.ssm_conv_bias = g.has_tensor("blk.0.ssm_conv1d.bias");
  c.ssm_proj_bias = g.has_tensor("blk.0.ssm_in.bias");
  c.ssm_out_bias = g.has_tensor("blk.0.ssm_out.bias");
  return {};
}

namespace {

// Mamba2ForCausalLM has no attention and no FFN: the dimensions the rest of the runtime plans
// with (H, D, F) are the mixer's heads and inner width, which no weight of theirs uses
// the dimensions of a model of Mamba blocks alone: config.json's (the vocabulary and the final
// norm's epsilon; no positions: a context as long as the state is kept, as llama.cpp writes 2^20)
status read_mamba_only_hf(hf_cfg& j, model_config& c, bool tie_default) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size"));
  TROUPE_TRY_ASSIGN(L, j.req("num_hidden_layers"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  if (L > max_layers)
    return j.bad(fmt::format("'num_hidden_layers' {} (at most {})", L, max_layers));
  c.C = C, c.n_layer = L, c.V = V;
  TROUPE_TRY_ASSIGN(eps, j.f("layer_norm_epsilon", 1e-5));
  c.norm_eps = eps;
  c.ctx = 1 << 20;
  c.tie_embeddings = j.b("tie_word_embeddings", tie_default);
  if (j.s("hidden_act", "silu") != "silu")
    return j.unsupported(
        fmt::format("'hidden_act' {} (the convolution's SiLU)", j.raw("hidden_act").dump()));
  return {};
}

// the same from GGUF (feed_forward_length and attention.head_count are written 0, unused)
status read_mamba_only_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  if (L <= 0 || L > max_layers)
    return make_error(errc::corrupt_file, "{}: block_count {} (1 to {})", g.path(), L, max_layers);
  c.C = C, c.n_layer = L;
  for (const char* k : {"feed_forward_length", "attention.head_count"}) g.key(k);
  c.norm_eps = g.f("attention.layer_norm_rms_epsilon", 1e-5);
  c.tie_embeddings = !g.has_tensor("output.weight");
  return {};
}

void mamba_only(model_config& c) {
  c.linear_layers.assign(static_cast<size_t>(c.n_layer), 1);
  c.layer_blocks.assign(static_cast<size_t>(c.n_layer), 1);
  c.H = c.Hkv = c.lin_v_heads, c.D = c.lin_v_dim, c.F = c.lin_v_heads * c.lin_v_dim;
  c.rope_enabled = false;
}

} // namespace

status read_mamba2_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_mamba_only_hf(j, c, false));
  // transformers applies the gated norm whatever rms_norm says; a model published without it
  // (mamba_ssm's rmsnorm false) would be another model
  if (!j.b("rms_norm", true)) return j.unsupported("'rms_norm' false");
  const mamba_keys k{"num_heads", "head_dim",      "state_size", "n_groups",  "conv_kernel",
                     "expand",    "use_conv_bias", "use_bias",   "chunk_size"};
  TROUPE_TRY(read_mamba_mixer(j, c, k));
  mamba_only(c);
  return {};
}

status read_mamba2_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_mamba_only_gguf(g, c));
  TROUPE_TRY(read_mamba_gguf_mixer(g, c));
  TROUPE_TRY(read_gguf_common(g, c));
  mamba_only(c);
  return {};
}

status build_mamba2(const model_source& m, graph::graph& g) {
  decoder_names n;
  if (m.format == "hf") {
    const std::string b = "backbone.";
    n.tok_embd = b + "embeddings.weight";
    n.attn_norm = b + "layers.{}.norm.weight";
    n.out_norm = b + "norm_f.weight";
    n.lm_head = "lm_head.weight";
    mamba_names(m, n, b + "layers.{}.mixer.");
  } else {
    n = gguf_layout(m);
    mamba_names(m, n, "");
  }
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

// Mamba-1 (MambaForCausalLM: state-spaces' mamba-130m ... 2.8b; FalconMambaForCausalLM:
// Falcon-Mamba 7B, whose dt, B and C are RMS-normed without weights, mixer_rms_eps): blocks of
// the mixer alone, backbone.* names as Mamba2's. The inner width is expand x C (transformers
// recomputes intermediate_size so), dt's rank time_step_rank ("auto": C / 16 rounded up).
status read_mamba1_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_mamba_only_hf(j, c, true));
  TROUPE_TRY(read_mamba1_mixer(
      j, c,
      {"state_size", "expand", "conv_kernel", "time_step_rank", "use_conv_bias", "use_bias"}));
  if (c.family == "falcon_mamba") {
    c.ssm_bcdt_norm = model_config::ssm_bcdt_kind::plain;
    TROUPE_TRY_ASSIGN(me, j.f("mixer_rms_eps", 1e-6));
    c.ssm_bcdt_eps = me;
  }
  // initialisation, training and kernel switches
  for (const char* key :
       {"time_step_scale", "time_step_min", "time_step_max", "time_step_init_scheme",
        "time_step_floor", "rescale_prenorm_residual", "residual_in_fp32", "use_mambapy",
        "use_associative_scan", "use_falcon_mambapy"})
    j.mark(key);
  mamba_only(c);
  return {};
}

// Mamba-1's ssm.* keys (time_step_rank: dt's rank) and the biases the file has
status read_mamba1_gguf_mixer(const gguf_cfg& g, model_config& c) {
  const int64_t inner = g.i("ssm.inner_size", 0), state = g.i("ssm.state_size", 0);
  const int64_t conv = g.i("ssm.conv_kernel", 0), rank = g.i("ssm.time_step_rank", 0);
  if (inner <= 0 || state <= 0 || conv < 1 || rank <= 0)
    return g.unsupported(fmt::format("Mamba mixer: inner size {}, state {}, {} taps, dt rank {}",
                                     inner, state, conv, rank));
  c.mamba = true;
  c.ssm_dt_rank = rank;
  c.lin_v_heads = inner, c.lin_v_dim = 1, c.lin_k_heads = 1, c.lin_k_dim = state;
  c.lin_conv = conv;
  c.lin_neg_a = true;
  int64_t l0 = 0; // the first Mamba layer (Jamba's may follow attention)
  while (l0 + 1 < c.n_layer && !g.has_tensor(fmt::format("blk.{}.ssm_in.weight", l0))) ++l0;
  c.ssm_conv_bias = g.has_tensor(fmt::format("blk.{}.ssm_conv1d.bias", l0));
  c.ssm_proj_bias = g.has_tensor(fmt::format("blk.{}.ssm_in.bias", l0));
  c.ssm_out_bias = g.has_tensor(fmt::format("blk.{}.ssm_out.bias", l0));
  c.ssm_norm = model_config::ssm_norm_kind::none;
  if (dt_b_c_rms(g)) {
    c.ssm_bcdt_norm = model_config::ssm_bcdt_kind::plain;
    c.ssm_bcdt_eps = c.norm_eps;
  }
  return {};
}

// GGUF (llama.cpp's mamba: Mamba-1 and Falcon-Mamba): ssm.inner_size, state_size, conv_kernel,
// time_step_rank (dt's rank), ssm.dt_b_c_rms (Falcon-Mamba's norms, which llama.cpp takes with
// the layers' rms epsilon: the file carries no other); A stored as -exp(A_log)
status read_mamba1_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_mamba_only_gguf(g, c));
  TROUPE_TRY(read_mamba1_gguf_mixer(g, c));
  TROUPE_TRY(read_gguf_common(g, c));
  mamba_only(c);
  return {};
}

// Jamba (JambaForCausalLM: Jamba 1.5 / 1.6 / 1.7 Mini and Large, Jamba Reasoning): Mamba-1
// layers (dt, B and C RMS-normed with weights) and attention layers without positions
// (attn_layer_period / offset), each followed by an FFN: SwiGLU, or on every expert_layer_period-th
// layer from expert_layer_offset a softmax top-k of num_experts SwiGLU experts whose weights are
// not renormalised. Norms input_layernorm / pre_ff_layernorm, the final one final_layernorm.
status read_jamba_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  c.rope_enabled = false; // no positions at all
  TROUPE_TRY_ASSIGN(ap, j.i("attn_layer_period", 8));
  TROUPE_TRY_ASSIGN(ao, j.i("attn_layer_offset", 4));
  TROUPE_TRY_ASSIGN(ep, j.i("expert_layer_period", 2));
  TROUPE_TRY_ASSIGN(eo, j.i("expert_layer_offset", 1));
  if (ap <= 0 || ep <= 0 || ao < 0 || eo < 0)
    return j.bad("attn_layer_period / expert_layer_period must be positive, the offsets not "
                 "negative");
  const size_t L = static_cast<size_t>(c.n_layer);
  c.linear_layers.assign(L, 1);
  c.moe_layers.assign(L, 0);
  for (size_t i = 0; i < L; ++i) {
    if (static_cast<int64_t>(i) % ap == ao) c.linear_layers[i] = 0;
    if (static_cast<int64_t>(i) % ep == eo) c.moe_layers[i] = 1;
  }
  j.mark("layers_block_type"), j.mark("layer_types");
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  if (c.n_expert > 0) {
    if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
      return j.bad(fmt::format("{} of {} experts per token", c.n_expert_used, c.n_expert));
    c.F_expert = c.F;
    c.norm_topk = false; // the chosen softmax weights as they are
  } else {
    c.moe_layers.clear();
  }
  TROUPE_TRY(read_mamba1_mixer(j, c,
                               {"mamba_d_state", "mamba_expand", "mamba_d_conv", "mamba_dt_rank",
                                "mamba_conv_bias", "mamba_proj_bias"}));
  c.ssm_bcdt_norm = model_config::ssm_bcdt_kind::weighted;
  c.ssm_bcdt_eps = c.norm_eps;
  for (const char* key :
       {"use_mamba_kernels", "use_mambapy", "use_associative_scan", "num_logits_to_keep"})
    j.mark(key);
  return {};
}

// GGUF (llama.cpp's jamba): head_count_kv per layer (0 on the Mamba layers), the Mamba-1 keys,
// the experts merged where ffn_gate_inp is; dt / B / C norms with weights (ssm_dt_norm ...),
// the experts' weights not renormalised (llama.cpp's jamba)
status read_jamba_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-6));
  c.linear_layers = g.no_kv;
  if (c.linear_layers.empty()) c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
  TROUPE_TRY(read_mamba1_gguf_mixer(g, c));
  bool normed = false;
  for (int64_t l = 0; l < c.n_layer; ++l)
    normed = normed || g.has_tensor(fmt::format("blk.{}.ssm_dt_norm.weight", l));
  if (normed) {
    c.ssm_bcdt_norm = model_config::ssm_bcdt_kind::weighted;
    c.ssm_bcdt_eps = c.norm_eps;
  }
  TROUPE_TRY(read_experts_gguf(g, c));
  c.norm_topk = false;
  c.rope_enabled = false;
  return {};
}

status build_jamba(const model_source& m, graph::graph& g) {
  decoder_names n;
  if (m.format != "hf") {
    n = gguf_layout(m);
    expert_names(m, n);
    mamba_names(m, n, "");
  } else {
    n = feed_forward_layout(m);
    const std::string f = "model.layers.{}.feed_forward.";
    n.moe_router = f + "router.weight";
    hf_expert_names(n, f);
  }
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

// Bamba (BambaForCausalLM): Mamba-2 layers and attention layers (attn_layer_indices; RoPE over
// half of each head, as BambaConfig hardcodes), each followed by a SwiGLU feed_forward; norms
// input_layernorm / pre_ff_layernorm, the final one final_layernorm.
status read_bamba_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 0.5));
  c.linear_layers.assign(static_cast<size_t>(c.n_layer), 1);
  if (const json& at = j.raw("attn_layer_indices"); !at.is_null()) {
    if (!at.is_array()) return j.bad("'attn_layer_indices' must list layers");
    for (const json& i : at) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.n_layer)
        return j.bad(fmt::format("'attn_layer_indices' holds {} ({} layers)", i.dump(), c.n_layer));
      c.linear_layers[static_cast<size_t>(i.get<int64_t>())] = 0;
    }
  }
  j.mark("layer_types"), j.mark("layers_block_type"); // (derived from attn_layer_indices)
  // training: the z-loss, how many logits the forward keeps
  for (const char* k : {"z_loss_coefficient", "num_logits_to_keep"}) j.mark(k);
  const mamba_keys k{"mamba_n_heads",   "mamba_d_head",    "mamba_d_state",
                     "mamba_n_groups",  "mamba_d_conv",    "mamba_expand",
                     "mamba_conv_bias", "mamba_proj_bias", "mamba_chunk_size"};
  return read_mamba_mixer(j, c, k);
}

status build_bamba(const model_source& m, graph::graph& g) {
  decoder_names n;
  if (m.format == "hf") {
    n = feed_forward_layout(m);
  } else {
    n = gguf_layout(m);
    mamba_names(m, n, "");
  }
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

namespace {

// Nemotron 3's experts (NemotronHMoE): a sigmoid router whose choice adds e_score_correction_bias,
// among the topk_group best of n_group groups, the chosen scores renormalised (norm_topk_prob)
// and times routed_scaling_factor; n_routed_experts ungated experts of up, relu^2, down; one
// shared expert of that form, moe_shared_expert_intermediate_size wide. A latent projection
// around the experts (moe_latent_size: Nemotron 3 Super) is not implemented.
status read_nemotron_experts(hf_cfg& j, model_config& c) {
  if (const json& lat = j.raw("moe_latent_size"); !lat.is_null())
    return j.unsupported(
        fmt::format("'moe_latent_size' {} (the experts' latent projection)", lat.dump()));
  if (c.act_expr != "relu(x)^2")
    return j.unsupported("experts with another activation than relu2 ('mlp_hidden_act')");
  TROUPE_TRY(read_expert_counts(j, c, "n_routed_experts", "num_local_experts"));
  if (c.n_expert < 2 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
    return j.bad(fmt::format("{} of {} experts per token", c.n_expert_used, c.n_expert));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  c.F_expert = fe;
  TROUPE_TRY_ASSIGN(shared, j.i("n_shared_experts", 1));
  if (shared > 0) {
    TROUPE_TRY_ASSIGN(fs, j.req("moe_shared_expert_intermediate_size"));
    c.F_shared = fs;
  }
  c.expert_relu2 = true;
  c.router_sigmoid = c.router_bias = true;
  c.norm_topk = j.b("norm_topk_prob", true);
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 1.0));
  c.expert_scale = scale;
  TROUPE_TRY_ASSIGN(ng, j.i("n_group", 1));
  TROUPE_TRY_ASSIGN(tg, j.i("topk_group", 1));
  if (ng > 1) c.n_group = ng, c.topk_group = tg;
  return {};
}

} // namespace

// Nemotron-H (NemotronHForCausalLM: Nemotron-H 8B / 47B / 56B, Nemotron Nano 2): blocks of one
// mixer each under one pre-norm - Mamba-2 ("M"), attention without positions ("*"), or an MLP of
// up, relu2, down ("-") - named by hybrid_override_pattern or layers_block_type (whose count,
// not num_hidden_layers, is the model's, as transformers counts); the mixer's keys under either
// of their names (mamba_n_groups or n_groups ...); Nemotron 3's experts ("E":
// read_nemotron_experts).
status read_nemotron_h_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  std::vector<std::string> types;
  if (const json& lt = j.raw("layers_block_type"); !lt.is_null()) {
    if (!lt.is_array()) return j.bad("'layers_block_type' must list the layers' kinds");
    for (const json& t : lt) types.push_back(t.is_string() ? t.get<std::string>() : t.dump());
  } else if (const json& p = j.raw("hybrid_override_pattern"); p.is_string()) {
    for (char ch : p.get<std::string>())
      types.push_back(ch == 'M'   ? "mamba"
                      : ch == '*' ? "attention"
                      : ch == '-' ? "mlp"
                      : ch == 'E' ? "moe"
                                  : std::string(1, ch));
  } else {
    return j.bad("neither 'layers_block_type' nor 'hybrid_override_pattern'");
  }
  j.mark("layer_types");
  TROUPE_TRY(read_hf_dims(j, c, "layer_norm_epsilon", 1e-5));
  const int64_t L = static_cast<int64_t>(types.size());
  if (L <= 0 || L > max_layers) return j.bad(fmt::format("{} layers", L));
  c.n_layer = L;
  c.linear_layers.assign(static_cast<size_t>(L), 0);
  c.layer_blocks.assign(static_cast<size_t>(L), 1);
  bool experts = false;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& t = types[i];
    if (t == "mamba" || t == "linear_attention") {
      c.linear_layers[i] = 1;
    } else if (t == "mlp" || t == "moe") {
      c.layer_blocks[i] = 2;
      experts = experts || t == "moe";
    } else if (t != "attention" && t != "full_attention") {
      return j.unsupported(fmt::format("layer {} of kind '{}'", i, t));
    }
  }
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.rope_enabled = false; // the attention has no positions
  c.gated_ffn = false;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  TROUPE_TRY(read_activation(j.s("mlp_hidden_act", "relu2"), c, j.where()));
  if (experts) { // Nemotron 3: DeepSeek-V3's routing over ungated relu^2 experts, a shared one
    c.moe_layers.assign(static_cast<size_t>(L), 0);
    for (size_t i = 0; i < types.size(); ++i) c.moe_layers[i] = types[i] == "moe";
    TROUPE_TRY(read_nemotron_experts(j, c));
  }
  if (j.s("mamba_hidden_act", "silu") != "silu")
    return j.unsupported(fmt::format("'mamba_hidden_act' {}", j.raw("mamba_hidden_act").dump()));
  if (const json& sw = j.raw("sliding_window"); !sw.is_null())
    return j.unsupported(fmt::format("'sliding_window' {}", sw.dump()));
  // the mixer's keys, each under the name the file uses
  auto either = [&j](const char* a, const char* b) {
    const char* use = j.present(a) ? a : b;
    j.mark(use == a ? b : a);
    return use;
  };
  mamba_keys k{"mamba_num_heads",
               "mamba_head_dim",
               "ssm_state_size",
               either("mamba_n_groups", "n_groups"),
               either("mamba_d_conv", "conv_kernel"),
               nullptr, // the inner width is the heads' (expand is not read)
               either("mamba_conv_bias", "use_conv_bias"),
               "mamba_proj_bias",
               either("mamba_chunk_size", "chunk_size")};
  k.dt_limit = either("mamba_dt_limit", "time_step_limit");
  for (const char* key :
       {"expand", "mamba_expand", "mamba_dt_min", "mamba_dt_max", "mamba_dt_init_floor",
        "use_mamba_kernels", "mamba_ssm_cache_dtype", "num_logits_to_keep", "hidden_dropout",
        "residual_in_fp32", "rescale_prenorm_residual"})
    j.mark(key);
  // the published configs' older keys, which transformers 5 does not read: llama.cpp's converter
  // takes attention_head_dim for head_dim, so a disagreement would be two models
  if (const json& ahd = j.raw("attention_head_dim"); !ahd.is_null() && ahd != c.D)
    return j.unsupported(
        fmt::format("'attention_head_dim' {} beside a head_dim of {}", ahd.dump(), c.D));
  if (j.present("rms_norm_eps")) { // (llama.cpp's converter writes it as the norms' epsilon)
    TROUPE_TRY_ASSIGN(eps, j.f("rms_norm_eps", c.norm_eps));
    if (eps != c.norm_eps)
      return j.unsupported(
          fmt::format("'rms_norm_eps' {} beside a layer_norm_epsilon of {}", eps, c.norm_eps));
  }
  j.mark("hidden_act");
  // (use_bias: an older name of mamba_proj_bias, which transformers no longer reads)
  if (j.b("use_bias", false)) return j.unsupported("'use_bias' true");
  TROUPE_TRY(read_mamba_mixer(j, c, k));
  // (without "moe" layers the experts' keys describe none); multi-token prediction is not run
  for (const char* key :
       {"n_routed_experts", "n_shared_experts", "moe_intermediate_size",
        "moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap",
        "num_experts_per_tok", "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob",
        "output_router_logits", "num_nextn_predict_layers", "mtp_layers_block_type",
        "router_aux_loss_coef"})
    j.mark(key);
  return {};
}

// GGUF (llama.cpp's nemotron_h): head_count_kv per layer (0 but on attention layers),
// feed_forward_length per layer (0 but on MLP layers), key_length the attention's head size; no
// RoPE; A stored as -exp(A_log)
status read_nemotron_h_gguf(const gguf_cfg& g, model_config& c) {
  const gguf_value* ff = g.g.get(g.key("feed_forward_length"));
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  if (L <= 0 || L > max_layers)
    return make_error(errc::corrupt_file, "{}: block_count {} (1 to {})", g.path(), L, max_layers);
  c.C = C, c.n_layer = L;
  TROUPE_TRY_ASSIGN(H, g.req("attention.head_count"));
  c.H = H;
  const gguf_value* kv = g.g.get(g.key("attention.head_count_kv"));
  if (!ff || ff->type != gguf_type::array || !kv || kv->type != gguf_type::array ||
      static_cast<int64_t>(ff->arr.size()) != L || static_cast<int64_t>(kv->arr.size()) != L)
    return g.unsupported("feed_forward_length and attention.head_count_kv must be given per layer");
  c.linear_layers.assign(static_cast<size_t>(L), 0);
  c.layer_blocks.assign(static_cast<size_t>(L), 1);
  c.F = 0, c.Hkv = 0;
  for (size_t l = 0; l < static_cast<size_t>(L); ++l) {
    const int64_t f = ff->arr[l].i, k = kv->arr[l].i;
    if (f > 0 && k > 0) return g.unsupported(fmt::format("layer {}: both attention and an MLP", l));
    if ((f > 0 && c.F > 0 && f != c.F) || (k > 0 && c.Hkv > 0 && k != c.Hkv))
      return g.unsupported("MLP widths or KV head counts that differ between layers");
    if (f > 0) c.F = f, c.layer_blocks[l] = 2;
    if (k > 0) c.Hkv = k;
    if (f == 0 && k == 0) c.linear_layers[l] = 1; // Mamba-2
  }
  if (c.F == 0) c.F = C; // (no MLP layer: a width nothing reads)
  if (c.Hkv == 0) c.Hkv = H;
  c.D = g.i("attention.key_length", H > 0 ? C / H : 0);
  if (g.i("attention.value_length", c.D) != c.D)
    return g.unsupported("attention.value_length other than key_length is not supported");
  c.norm_eps = g.f("attention.layer_norm_rms_epsilon", 1e-5);
  c.qkv_bias = g.has_tensor("blk.0.attn_q.bias");
  c.tie_embeddings = !g.has_tensor("output.weight");
  c.gated_ffn = false;
  c.act_expr = "relu(x)^2";         // llama.cpp's nemotron_h MLP
  if (g.arch == "nemotron_h_moe") { // Nemotron 3: the "MLP" layers with a router are experts
    c.moe_layers.assign(static_cast<size_t>(L), 0);
    for (int64_t l = 0; l < L; ++l)
      c.moe_layers[static_cast<size_t>(l)] =
          g.has_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", l));
    TROUPE_TRY(read_expert_counts(g, c));
    if (c.n_expert <= 0) return g.unsupported("nemotron_h_moe without expert_count");
    c.F_expert = g.i("expert_feed_forward_length", c.F);
    if (g.i("expert_shared_count", 1) > 0) c.F_shared = g.i("expert_shared_feed_forward_length", 0);
    const gguf_value* norm = g.g.get(g.key("expert_weights_norm"));
    c.norm_topk = !norm || norm->i != 0;
    const double scale = g.f("expert_weights_scale", 0);
    c.expert_scale = scale == 0 ? 1 : scale;
    const int64_t used = g.i("expert_group_used_count", 0); // (written with one group too)
    if (const int64_t ng = g.i("expert_group_count", 1); ng > 1) {
      if (used <= 0) return g.unsupported(fmt::format("{} expert groups without a count used", ng));
      c.n_group = ng, c.topk_group = used;
    }
    c.expert_relu2 = c.router_sigmoid = true;
    c.router_bias = g.has_tensor(weight_names::layer(
        "blk.{}.exp_probs_b.bias",
        static_cast<int>(std::find(c.moe_layers.begin(), c.moe_layers.end(), 1) -
                         c.moe_layers.begin())));
  }
  TROUPE_TRY(read_mamba_gguf_mixer(g, c));
  TROUPE_TRY(read_gguf_common(g, c));
  c.rope_enabled = false;
  return {};
}

status build_nemotron_h(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf") {
    const std::string b = "backbone.", x = "backbone.layers.{}.mixer.";
    n.tok_embd = b + "embeddings.weight";
    n.attn_norm = b + "layers.{}.norm.weight";
    n.out_norm = b + "norm_f.weight";
    n.lm_head = "lm_head.weight";
    n.wq = x + "q_proj.weight", n.wk = x + "k_proj.weight", n.wv = x + "v_proj.weight";
    n.wo = x + "o_proj.weight";
    if (c.qkv_bias) n.bq = x + "q_proj.bias", n.bk = x + "k_proj.bias", n.bv = x + "v_proj.bias";
    if (c.o_bias) n.bo = x + "o_proj.bias";
    n.w_up = x + "up_proj.weight", n.w_down = x + "down_proj.weight";
    if (c.mlp_bias) n.b_up = x + "up_proj.bias", n.b_down = x + "down_proj.bias";
    n.moe_router = x + "gate.weight", n.moe_router_bias = x + "gate.e_score_correction_bias";
    n.moe_up = x + "experts.{e}.up_proj.weight", n.moe_down = x + "experts.{e}.down_proj.weight";
    n.shexp_up = x + "shared_experts.up_proj.weight";
    n.shexp_down = x + "shared_experts.down_proj.weight";
    mamba_names(m, n, x);
  } else {
    n = gguf_layout(m);
    mamba_names(m, n, "");
    if (c.n_expert > 0) routed_expert_names(m, n);
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
