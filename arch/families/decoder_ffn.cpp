// decoder_ffn.cpp: the decoder builder's FFN side (decoder_build.hpp): a layer's dense MLP
// (gated or not, biases, an activation or element-wise program, Step 3.7's clip by layer, the
// Gaussian top-k's sparse form in decoder_altup.cpp), its mixture of experts (the router's
// options, the experts' stacked weights cut by TP or EP, shared experts, zero-computation and
// per-expert-normed experts) and Gemma 4's MLP beside its experts.
#include "arch/families/decoder_build.hpp"

#include <cmath>

namespace troupe::arch::detail {

std::vector<std::string> decoder::expert_tensors(const std::string& pattern, int l) const {
  const size_t at_e = pattern.find("{e}");
  if (at_e == std::string::npos) return {layer_name(pattern, l)};
  std::vector<std::string> out;
  for (int64_t e = 0; e < c_.n_expert; ++e) {
    std::string s = pattern;
    s.replace(at_e, 3, std::to_string(e));
    out.push_back(layer_name(s, l));
  }
  return out;
}

expected<vid> decoder::moe(int l, vid h, vid router_in) {
  builder b(g_, l);
  const int64_t C = c_.C, E = c_.n_expert, F = c_.F_expert;
  // (LongCat's identity experts, ZAYA's skip experts: router rows past E)
  const int64_t routed = E + c_.zero_experts + c_.null_experts;
  const int64_t Cr = c_.router_dim > 0 ? c_.router_dim : C; // (ZAYA: the router's own MLP width)
  if (n_.moe_router.empty() || (n_.moe_gate.empty() && n_.moe_gate_up.empty() && !c_.expert_relu2))
    return make_error(errc::internal, "{}: the family names no expert tensors", m_.path);
  // (Inkling: the router's rows past the routed experts' score the shared ones)
  TROUPE_TRY_ASSIGN(wr, req(n_.moe_router, l, {routed, Cr}, cut::none, axis::none, 1,
                            c_.sink_shared > 0 ? row_range(0, routed) : weight_ref{}));
  auto stack = [&](const std::string& pattern, std::vector<int64_t> each, cut cu) {
    // "experts.*.w1" for per-expert tensors (built, not replace()d: GCC 12 warns falsely
    // of an overlapping memcpy inside basic_string::replace here, -Wrestrict)
    std::string label = pattern;
    if (const size_t e = label.find("{e}"); e != std::string::npos)
      label = pattern.substr(0, e) + "*" + pattern.substr(e + 3);
    return w_.stacked(expert_tensors(pattern, l), layer_name(label, l), l, E, std::move(each), cu,
                      axis::ffn);
  };
  vid wg = none, wu = none;
  if (c_.expert_relu2) { // ungated: up alone, in both of the op's slots
    TROUPE_TRY_SET(wu, stack(n_.moe_up, {F, C}, cut::out));
    wg = wu;
  } else if (!n_.moe_gate_up.empty()) { // packed: expert e's gate rows [2eF, 2eF + F), then its up
    const weight_ref rg = gate_up_rows(n_.gate_up_interleaved, false, F, 0, E),
                     ru = gate_up_rows(n_.gate_up_interleaved, true, F, 0, E);
    TROUPE_TRY_SET(wg, req(n_.moe_gate_up, l, {E * F, C}, cut::out, axis::ffn, 1, rg));
    TROUPE_TRY_SET(wu, req(n_.moe_gate_up, l, {E * F, C}, cut::out, axis::ffn, 1, ru));
    g_[wg].groups = g_[wu].groups = E; // TP and EP cut each expert alike
  } else {
    TROUPE_TRY_SET(wg, stack(n_.moe_gate, {F, C}, cut::out));
    TROUPE_TRY_SET(wu, stack(n_.moe_up, {F, C}, cut::out));
  }
  TROUPE_TRY_ASSIGN(wd, stack(n_.moe_down, {C, F}, cut::in));
  moe_spec s;
  s.experts = E;
  s.used = c_.n_expert_used;
  s.norm_topk = c_.norm_topk;
  s.scale = static_cast<float>(c_.expert_scale);
  s.sigmoid = c_.router_sigmoid;
  s.logit_softcap = static_cast<float>(c_.router_softcap);
  s.n_group = c_.n_group;
  s.topk_group = c_.topk_group;
  s.group_max = c_.group_max;
  s.router_eps = static_cast<float>(c_.router_eps);
  s.swiglu_alpha = static_cast<float>(c_.swiglu_alpha);
  const auto at_layer = [l](const std::vector<double>& v, double fallback) {
    return l < static_cast<int>(v.size()) ? v[static_cast<size_t>(l)] : fallback;
  };
  s.swiglu_limit = static_cast<float>(at_layer(c_.swiglu_limits, c_.swiglu_limit));
  s.scale_input = c_.expert_input_scaled;
  s.relu2 = c_.expert_relu2;
  s.gelu = c_.act == act_kind::gelu_tanh && !c_.expert_relu2; // GeGLU experts (Gemma 4)
  if (c_.act == act_kind::gelu_erf && !c_.expert_relu2)
    return make_error(errc::unsupported, "{}: experts gated by the erf GELU", m_.path);
  s.router_in = router_in;
  s.sqrt_softplus = c_.router_sqrt_softplus;
  s.sparsemixer = c_.router_sparsemixer;
  s.bias_on_logits = c_.router_bias_logits;
  s.jitter = static_cast<float>(c_.router_jitter);
  s.clamp = c_.swiglu_clamp;
  s.clamp_after = c_.swiglu_after_act;
  s.zero_experts = c_.zero_experts;
  s.null_experts = c_.null_experts;
  const bool hashed =
      l < static_cast<int>(c_.hash_layers.size()) && c_.hash_layers[static_cast<size_t>(l)];
  if (hashed) TROUPE_TRY_SET(s.hash, req(n_.moe_hash, l, {c_.V, c_.n_expert_used}));
  if (!n_.moe_expert_scale.empty())
    TROUPE_TRY_SET(s.expert_scales, req(n_.moe_expert_scale, l, {E}));
  if (c_.expert_post_norm) { // (Ergo: whole on every rank, indexed by the global expert)
    TROUPE_TRY_SET(s.post_norm, req(n_.moe_post_norm, l, {E, C}));
    s.post_norm_eps = static_cast<float>(c_.norm_eps);
  }
  vid rb = none;
  if (c_.router_bias && !hashed) TROUPE_TRY_SET(rb, req(n_.moe_router_bias, l, {routed}));
  moe_biases mb;
  if (c_.router_linear_bias) TROUPE_TRY_SET(mb.router, req(n_.moe_router_b, l, {routed}));
  if (c_.expert_bias) {
    // stacked like the matrices (value::groups): TP takes each expert's slice of the gate and
    // up biases; the down bias is whole on every rank (the first adds it), EP cuts experts
    TROUPE_TRY_SET(mb.gate, req(n_.moe_gate_b, l, {E * F}, cut::out, axis::ffn));
    TROUPE_TRY_SET(mb.up, req(n_.moe_up_b, l, {E * F}, cut::out, axis::ffn));
    TROUPE_TRY_SET(mb.down, req(n_.moe_down_b, l, {E * C}));
    for (vid v : {mb.gate, mb.up, mb.down}) g_[v].groups = E;
  }
  vid gammas = none; // (Inkling: the shared experts' weights [T, S], made by reweight)
  if (c_.sink_shared > 0) {
    // the chosen experts' sigmoid scores and the shared experts' normalised together, times
    // route_scale and the router's learned scalar
    const int64_t S = c_.sink_shared;
    TROUPE_TRY_ASSIGN(
        ws, req(n_.moe_router, l, {S, C}, cut::none, axis::none, 1, row_range(routed, S)));
    TROUPE_TRY_ASSIGN(gs, req(n_.inkling_router_scale, l, {1}));
    s.norm_topk = false, s.scale = 1;
    s.reweight = [&gammas, h, ws, gs, k = static_cast<float>(c_.expert_scale)](builder& bb, vid w) {
      const vid sig = bb.unary(op::sigmoid, bb.op(op::matmul, {h, ws, none}, "ffn_shared_logits"),
                               "ffn_shared_scores");
      const vid denom = bb.add(bb.op(op::sum_rows, {w}, "ffn_chosen_sum"),
                               bb.op(op::sum_rows, {sig}, "ffn_shared_sum"), "ffn_scores_sum");
      const vid r =
          bb.scale(bb.mul(bb.unary(op::recip, denom, "ffn_scores_inv"), gs, "ffn_scores_global"), k,
                   "ffn_scores_scale");
      gammas = bb.mul(sig, r, "ffn_shared_weights");
      return bb.mul(w, r, "ffn_expert_weights_sink");
    };
  }
  vid y = b.moe(h, s, wr, wg, wu, wd, rb, mb);
  if (c_.sink_shared > 0) { // each shared expert's MLP times its weight
    const int64_t S = c_.sink_shared;
    const bool packed = !n_.shexp_gate_up.empty(); // (published: one w13 tensor [S, 2 F, C])
    for (int64_t j = 0; j < S; ++j) {
      const bool il = n_.gate_up_interleaved;
      TROUPE_TRY_ASSIGN(sg, req(packed ? n_.shexp_gate_up : n_.shexp_gate, l, {F, C}, cut::out,
                                axis::ffn, 1,
                                packed ? gate_up_rows(il, false, F, j) : row_range(j * F, F)));
      TROUPE_TRY_ASSIGN(su,
                        req(packed ? n_.shexp_gate_up : n_.shexp_up, l, {F, C}, cut::out, axis::ffn,
                            1, packed ? gate_up_rows(il, true, F, j) : row_range(j * F, F)));
      TROUPE_TRY_ASSIGN(sd,
                        req(n_.shexp_down, l, {C, F}, cut::in, axis::ffn, 1, row_range(j * C, C)));
      const std::string what = fmt::format("ffn_shexp{}", j);
      const vid gj = columns(b, gammas, j, 1, what + "_weight");
      const vid sh = b.ffn(h, sg, su, sd, none, none, none, act_op(), act_expr_, what);
      y = b.add(y, b.mul(sh, gj, what + "_weighted"), what + "_sum");
    }
    return y;
  }
  if (c_.F_shared > 0 && c_.expert_relu2) { // ungated: down(act(up x))
    const int64_t Fs = c_.F_shared;
    TROUPE_TRY_ASSIGN(su, req(n_.shexp_up, l, {Fs, C}, cut::out, axis::ffn));
    TROUPE_TRY_ASSIGN(sd, req(n_.shexp_down, l, {C, Fs}, cut::in, axis::ffn));
    vid sh = b.ffn(h, none, su, sd, none, none, none, op::silu, act_expr_, "ffn_shexp");
    if (!n_.shexp_norm.empty()) // (Ergo: the shared expert's output normed)
      TROUPE_TRY_SET(sh, norm(sh, l, n_.shexp_norm, "", C, c_.norm, "ffn_shexp_norm"));
    y = b.add(y, sh, "ffn_moe_out");
  } else if (c_.F_shared > 0) {
    const int64_t Fs = c_.F_shared;
    const bool packed = !n_.shexp_gate_up.empty(); // gate rows, then up rows
    weight_ref rg, ru;
    if (packed)
      rg = gate_up_rows(n_.gate_up_interleaved, false, Fs),
      ru = gate_up_rows(n_.gate_up_interleaved, true, Fs);
    TROUPE_TRY_ASSIGN(
        sg, req(packed ? n_.shexp_gate_up : n_.shexp_gate, l, {Fs, C}, cut::out, axis::ffn, 1, rg));
    TROUPE_TRY_ASSIGN(
        su, req(packed ? n_.shexp_gate_up : n_.shexp_up, l, {Fs, C}, cut::out, axis::ffn, 1, ru));
    TROUPE_TRY_ASSIGN(sd, req(n_.shexp_down, l, {C, Fs}, cut::in, axis::ffn));
    std::shared_ptr<kernels::ew_program> clip =
        c_.swiglu_clamp || c_.swiglu_dense ? clamp_expr_ : nullptr;
    if (const double L = at_layer(c_.swiglu_limits_shared, 0); L > 0) // (Ling 3: per layer)
      TROUPE_TRY_SET(clip, clamped_swiglu(L, c_.swiglu_after_act));
    vid sh = b.ffn(h, sg, su, sd, none, none, none, op::silu, clip, "ffn_shexp");
    if (c_.shared_scale != 1)
      sh = b.scale(sh, static_cast<float>(c_.shared_scale), "ffn_shexp_scaled");
    if (c_.shared_gate) {
      TROUPE_TRY_ASSIGN(gw, req(n_.shexp_gate_inp, l, {1, C}));
      const vid logit = b.op(op::matmul, {h, gw, none}, "ffn_shexp_gate_inp");
      sh = b.mul(sh, b.unary(op::sigmoid, logit, "ffn_shexp_scale"), "ffn_shexp_gated");
    }
    y = b.add(y, sh, "ffn_moe_out");
  }
  return y;
}

expected<vid> decoder::mlp_and_experts(int l, vid x) {
  builder b(g_, l);
  const int64_t C = c_.C;
  TROUPE_TRY_ASSIGN(h1, norm(x, l, n_.ffn_norm, "", C, c_.norm, "ffn_norm"));
  TROUPE_TRY_ASSIGN(m, ffn(l, h1));
  TROUPE_TRY_ASSIGN(m1, norm(m, l, n_.post_ffn_norm_1, "", C, c_.norm, "ffn_post_norm_1"));
  // the router's input: x RMS-normed (no weight), times its scale and 1/sqrt(C)
  const vid ones = w_.constant(b.name("ffn_router_norm") + ".ones", l, {C}, 1.0f);
  const vid rn =
      b.norm(x, norm_type::rms, ones, none, static_cast<float>(c_.norm_eps), "ffn_router_norm");
  TROUPE_TRY_ASSIGN(rs, req(n_.moe_router_scale, l, {C}));
  const vid ri =
      b.scale(b.mul(rn, rs, "ffn_router_in_scaled"),
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(C))), "ffn_router_in");
  TROUPE_TRY_ASSIGN(h2, norm(x, l, n_.ffn_norm_2, "", C, c_.norm, "ffn_norm_2"));
  TROUPE_TRY_ASSIGN(e, moe(l, h2, ri));
  TROUPE_TRY_ASSIGN(e2, norm(e, l, n_.post_ffn_norm_2, "", C, c_.norm, "ffn_post_norm_2"));
  return b.add(m1, e2, "ffn_mlp_experts");
}

expected<vid> decoder::ffn(int l, vid h) {
  if (c_.layer_moe(l) && !c_.moe_beside_mlp) return moe(l, h);
  builder b(g_, l);
  const int64_t C = c_.C, F = c_.layer_ffn(l);
  weight_ref tr;
  tr.transposed = n_.transposed;
  vid wg = none, wu, bg = none, bu;
  if (!n_.w_gate_up.empty()) {
    weight_ref g = gate_up_rows(n_.gate_up_interleaved, false, F),
               u = gate_up_rows(n_.gate_up_interleaved, true, F);
    g.transposed = u.transposed = tr.transposed;
    TROUPE_TRY_ASSIGN(a, req(n_.w_gate_up, l, {F, C}, cut::out, axis::ffn, 1, g));
    TROUPE_TRY_ASSIGN(a2, req(n_.w_gate_up, l, {F, C}, cut::out, axis::ffn, 1, u));
    wg = a, wu = a2;
    if (n_.b_gate_up.empty()) {
      TROUPE_TRY_ASSIGN(e, opt("", l, {F}));
      bu = e;
    } else { // (its bias's gate and up halves, as the rows)
      TROUPE_TRY_ASSIGN(e, opt(n_.b_gate_up, l, {F}, cut::out, axis::ffn, 1, g));
      TROUPE_TRY_ASSIGN(e2, opt(n_.b_gate_up, l, {F}, cut::out, axis::ffn, 1, u));
      bg = e, bu = e2;
    }
  } else {
    if (c_.gated_ffn) {
      TROUPE_TRY_ASSIGN(a, req(n_.w_gate, l, {F, C}, cut::out, axis::ffn, 1, tr));
      wg = a;
      TROUPE_TRY_ASSIGN(a2, opt(n_.b_gate, l, {F}, cut::out, axis::ffn));
      bg = a2;
    }
    TROUPE_TRY_ASSIGN(u, req(n_.w_up, l, {F, C}, cut::out, axis::ffn, 1, tr));
    wu = u;
    TROUPE_TRY_ASSIGN(u2, opt(n_.b_up, l, {F}, cut::out, axis::ffn));
    bu = u2;
  }
  TROUPE_TRY_ASSIGN(wd, req(n_.w_down, l, {C, F}, cut::in, axis::ffn, 1, tr));
  TROUPE_TRY_ASSIGN(bd, opt(n_.b_down, l, {C}));
  if (c_.layer_sparse(l)) {
    auto biased = [&](vid v) { return v != none && !g_[v].empty; };
    if (wg == none || biased(bg) || biased(bu) || biased(bd))
      return make_error(errc::internal, "{}: the Gaussian top-k needs a gated FFN without biases",
                        m_.path);
    return sparse_ffn(l, h, wg, wu, wd);
  }
  const op act = act_op();
  std::shared_ptr<kernels::ew_program> prog = clamp_expr_ ? clamp_expr_ // (GLM-5.3's)
                                              : layer_act_.empty()
                                                  ? act_expr_
                                                  : layer_act_[static_cast<size_t>(l)];
  if (c_.dense_clip_shared && l < static_cast<int>(c_.swiglu_limits_shared.size()))
    if (const double L = c_.swiglu_limits_shared[static_cast<size_t>(l)]; L > 0) // (Step 3.7)
      TROUPE_TRY_SET(prog, clamped_swiglu(L, c_.swiglu_after_act));
  std::function<std::pair<vid, vid>(vid)> before_down;
  if (c_.sub_norms || c_.act_quant) { // (BitNet: over the whole product, each rank holding some)
    vid ws = none;
    if (c_.sub_norms) TROUPE_TRY_SET(ws, req(n_.ffn_sub_norm, l, {F}, cut::out, axis::ffn));
    const auto eps = static_cast<float>(c_.norm_eps);
    before_down = [this, &b, ws, eps, F](vid y) {
      if (ws != none) y = b.mul(rms_across_ranks(b, y, F, eps, "ffn_sub"), ws, "ffn_sub_norm");
      return act_quant(b, y, true, "ffn_down_q");
    };
  }
  const auto [hq, step] = act_quant(b, h, false, "ffn_in_q");
  return b.ffn(hq, wg, wu, wd, bg, bu, bd, act, prog, "ffn", before_down, step);
}

} // namespace troupe::arch::detail
