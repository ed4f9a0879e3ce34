// ergo.cpp (arch/families): Ergo (ErgoForCausalLM), read as its own checkpoints name and lay out
// the weights (tok_embeddings, layers.N.attention.wqkv, feed_forward.*; the router and the shared
// expert stored [in, out], the experts [E, in, out]: transposed at load into the moe op's rows).
// Sliding layers with RoPE on adjacent pairs, every global_attention_every_n_layers-th layer
// global without RoPE, its scores times global_attention_scale (transformers scales q and k by its
// root); q and k RMS-normed per head; sandwich norms, each residual add mixed by a learned vector
// w per dimension: sigmoid(w) y + sqrt(1 + sigmoid(w)) exp(-softplus(w) / 2) x (both vectors
// derived at load); dense relu^2 MLPs on the first num_dense_blocks layers, then sigmoid experts
// (choice by score + router_bias, renormalised, times moe_routed_scaling_factor) with ungated
// relu^2 experts whose outputs are each RMS-normed by their own weights, and a relu^2 shared
// expert whose output is normed. The experts' norms need each expert's whole output: TP spreads
// them by expert parallelism (a split by rows is refused).
#include <cmath>
#include <cstring>

#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

status read_ergo_hf(hf_cfg& j, model_config& c) {
  c.names.output = "output.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-12, false)); // (head_dim: C / H)
  TROUPE_TRY_ASSIGN(first_dense, j.i("first_dense_intermediate_size", 32768));
  c.F = first_dense;
  c.tie_embeddings = false; // (ErgoForCausalLM ties nothing)
  j.mark("tie_word_embeddings");
  c.qk_norm = qk_norm_kind::head;
  c.norms = norm_place::sandwich;
  c.residual_gates = true;
  c.gated_ffn = false;
  TROUPE_TRY(read_activation("relu2", c, j.where()));
  j.mark("hidden_act");
  // layer kinds: sliding with RoPE (adjacent pairs), global without
  TROUPE_TRY_ASSIGN(every, j.i("global_attention_every_n_layers", 4));
  if (every <= 0) return j.bad(fmt::format("global_attention_every_n_layers {}", every));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 512));
  TROUPE_TRY(read_layer_types(j, c, sw, [every](int64_t l) { return (l + 1) % every != 0; }));
  const json& rp = j.raw("rope_parameters");
  json slide{{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  if (rp.is_object()) {
    if (rp.contains("rope_type")) { // (one dict: the sliding layers', as ErgoConfig reads it)
      slide = rp;
    } else {
      for (auto& [k, v] : rp.items())
        if (k != "sliding_attention" && !(k == "full_attention" && v.is_null()))
          return j.unsupported(fmt::format("rope_parameters for '{}': {} (RoPE on the sliding "
                                           "layers only)",
                                           k, v.dump()));
      if (rp.contains("sliding_attention")) slide = rp["sliding_attention"];
    }
  } else if (!rp.is_null()) {
    return j.bad("'rope_parameters' must be an object");
  }
  TROUPE_TRY(read_rope_dict(slide, c, c.rope, 1000000.0, j.where()));
  c.rope.layout = rope_layout::interleaved;
  rope_on_windowed_only(c);
  const json& gas = j.raw("global_attention_scale");
  if (!gas.is_null()) {
    TROUPE_TRY_ASSIGN(s, j.f("global_attention_scale", 1.0));
    if (!(s > 0)) return j.bad(fmt::format("global_attention_scale {}", s));
    c.nope_scale_mult = s;
  }
  // experts
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 4096));
  TROUPE_TRY_ASSIGN(fs, j.i("shared_intermediate_size", 8192));
  TROUPE_TRY_ASSIGN(scale, j.f("moe_routed_scaling_factor", std::sqrt(8.0)));
  if (fe <= 0 || fs <= 0)
    return j.bad(fmt::format("moe_intermediate_size {}, shared_intermediate_size {}", fe, fs));
  c.F_expert = fe, c.F_shared = fs, c.expert_scale = scale;
  c.expert_relu2 = c.expert_post_norm = true;
  c.router_sigmoid = c.router_bias = c.norm_topk = true;
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 1);
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
  TROUPE_TRY_ASSIGN(dense, j.i("num_dense_blocks", 1));
  if (!listed)
    for (int64_t l = 0; l < std::min(dense, c.n_layer); ++l)
      c.moe_layers[static_cast<size_t>(l)] = 0;
  return {};
}

namespace {

// a stored [K, M] matrix (x W) as the [M, K] rows a matmul reads, added as `to`
status transpose_into(tensor_index& t, const std::string& from, const std::string& to, int64_t K,
                      int64_t M) {
  TROUPE_TRY_ASSIGN(w, take_tensor(t, from, {K, M}));
  TROUPE_TRY_ASSIGN(bytes, transpose_experts(*w, 1, K, M, 0, 1, M));
  return add_repacked_tensor(t, to, w->type, shape{M, K}, std::move(bytes), w->file);
}

// a residual gate's weight w [C] as the branch's sigmoid(w), f32 (the stream's sqrt(1 +
// sigmoid(w)) exp(-softplus(w) / 2) is sqrt(1 - sigmoid(w)^2): the graph makes it)
status residual_gate(tensor_index& t, const std::string& from, const std::string& to, int64_t C) {
  TROUPE_TRY_ASSIGN(w, take_tensor(t, from, {C}));
  if (is_quantized(w->type))
    return make_error(errc::unsupported, "'{}': a quantized residual gate", from);
  std::vector<float> v(static_cast<size_t>(C));
  to_f32(w->type, w->data, v.data(), C);
  std::vector<uint8_t> branch(static_cast<size_t>(C) * 4);
  for (int64_t i = 0; i < C; ++i) {
    const auto b =
        static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v[static_cast<size_t>(i)]))));
    std::memcpy(branch.data() + i * 4, &b, 4);
  }
  return add_repacked_tensor(t, to + ".branch", dtype::f32, shape{C}, std::move(branch), w->file);
}

} // namespace

status prepare_ergo_hf(const model_config& c, tensor_index& t) {
  const int64_t C = c.C, E = c.n_expert, F = c.F_expert, Fs = c.F_shared;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("layers.{}.", l), f = p + "feed_forward.";
    TROUPE_TRY(residual_gate(t, p + "post_attention_residual.scale", p + "attn_gate", C));
    TROUPE_TRY(residual_gate(t, p + "post_ffn_residual.scale", p + "ffn_gate", C));
    if (!c.layer_moe(l)) continue;
    TROUPE_TRY(transpose_into(t, f + "gate_kernel", f + "router", C, E));
    TROUPE_TRY(transpose_into(t, f + "shared_up_proj", f + "shared_up", C, Fs));
    TROUPE_TRY(transpose_into(t, f + "shared_down_proj", f + "shared_down", Fs, C));
    // the experts [E, C, F] and [E, F, C] as the moe op's rows [E, F, C] and [E, C, F]
    TROUPE_TRY_ASSIGN(up, take_tensor(t, f + "up_proj", {E, C, F}));
    TROUPE_TRY_ASSIGN(ub, transpose_experts(*up, E, C, F, 0, 1, F));
    TROUPE_TRY(add_repacked_tensor(t, f + "experts_up", up->type, shape{E, F, C}, std::move(ub),
                                   up->file));
    TROUPE_TRY_ASSIGN(down, take_tensor(t, f + "down_proj", {E, F, C}));
    TROUPE_TRY_ASSIGN(db, transpose_experts(*down, E, F, C, 0, 1, C));
    TROUPE_TRY(add_repacked_tensor(t, f + "experts_down", down->type, shape{E, C, F}, std::move(db),
                                   down->file));
  }
  return {};
}

status build_ergo(const model_source& m, graph::graph& g) {
  decoder_names n;
  const std::string l = "layers.{}.", a = l + "attention.", f = l + "feed_forward.";
  n.tok_embd = "tok_embeddings.weight";
  n.out_norm = "norm.weight";
  n.lm_head = "output.weight";
  n.attn_norm = l + "attention_norm.weight", n.post_attn_norm = l + "post_attention_norm.weight";
  n.ffn_norm = l + "ffn_norm.weight", n.post_ffn_norm = l + "post_ffn_norm.weight";
  n.wqkv = a + "wqkv.weight", n.layout = qkv_layout::blocks;
  n.wo = a + "wo.weight";
  n.q_norm = a + "q_norm.weight", n.k_norm = a + "k_norm.weight";
  n.w_up = f + "up.weight", n.w_down = f + "down.weight";
  n.moe_router = f + "router", n.moe_router_bias = f + "router_bias";
  n.moe_up = f + "experts_up", n.moe_down = f + "experts_down";
  n.moe_post_norm = f + "expert_output_norm.scale";
  n.shexp_up = f + "shared_up", n.shexp_down = f + "shared_down";
  n.shexp_norm = f + "shared_expert_output_norm.scale";
  n.attn_res_branch = l + "attn_gate.branch", n.ffn_res_branch = l + "ffn_gate.branch";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
