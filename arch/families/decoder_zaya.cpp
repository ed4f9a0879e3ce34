// decoder_zaya.cpp: the decoder builder's ZAYA1 (model_config::zaya). The stream after the first
// layer carries the router's state beside it ([T, C + R]). A layer: attention over an RMS norm,
// the sum of its output and the stream each affinely scaled ((y + b) s), the same around the
// experts; the router's state down_proj(h) (+ the previous layer's times a learned scale) through
// an RMS norm and two GELU layers gives the router's input (out_proj: the experts and a skip
// expert, which no shard holds: it adds nothing). The attention (compressed convolutional): q and
// k projected, each through two causal depthwise convolutions over the last three inputs (the
// depthwise output for this token and for the previous one, each plus the depthwise bias), then a
// per-head map of each (head_matmul, a tap each) summed with the per-head bias, plus the residuals:
// q's (q + k's rows repeated per query head) / 2, k's the mean of q_proj's rows over the group
// (derived at load) and k, halved; L2 norms to sqrt(D) as RMS norms, k times its scale per KV
// head; the values one [Hkv D] projection of both halves through a causal convolution that keeps
// the first half and takes the previous token's second (taps 0 1 / 1 0); RoPE by layer type.
#include "arch/families/decoder_build.hpp"

namespace troupe::arch::detail {

status decoder::build_zaya() {
  TROUPE_TRY_ASSIGN(e, embed());
  const int64_t C = c_.C;
  builder b(g_, -1);
  TROUPE_TRY_ASSIGN(is, req(n_.zaya_in_scale, -1, {C}));
  TROUPE_TRY_ASSIGN(ib, req(n_.zaya_in_bias, -1, {C}));
  vid x = b.mul(b.add(e, ib, "embd_shifted"), is, "embd_scaled");
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    TROUPE_TRY_ASSIGN(y, zaya_layer(l, x));
    x = y;
    g_.residual.push_back(x);
  }
  return head(x); // (the stream's columns: head() drops the router's state)
}

expected<vid> decoder::zaya_scaled_sum(builder& b, int l, vid y, vid x, const std::string& which) {
  const int64_t C = c_.C;
  std::string p = n_.zaya_res;
  p.replace(p.find("{s}"), 3, which);
  TROUPE_TRY_ASSIGN(hs, req(p + "hidden_states_scale", l, {C}));
  TROUPE_TRY_ASSIGN(hb, req(p + "hidden_states_bias", l, {C}));
  TROUPE_TRY_ASSIGN(rs, req(p + "residual_scale", l, {C}));
  TROUPE_TRY_ASSIGN(rb, req(p + "residual_bias", l, {C}));
  const vid ys = b.mul(b.add(y, hb, which + "_out_shifted"), hs, which + "_out_scaled");
  const vid xs = b.mul(b.add(x, rb, which + "_res_shifted"), rs, which + "_res_scaled");
  return b.add(ys, xs, which + "_residual");
}

expected<vid> decoder::zaya_layer(int l, vid x) {
  builder b(g_, l);
  const int64_t C = c_.C, R = c_.router_dim;
  vid s = x, carried = none;
  if (l > 0) { // the stream and the previous layer's router state
    s = stream_of(b, x, 0, "stream");
    carried = columns(b, x, C, R, "router_carried");
  }
  TROUPE_TRY_ASSIGN(h, norm(s, l, n_.attn_norm, "", C, norm_kind::rms, "attn_norm"));
  TROUPE_TRY_ASSIGN(a, zaya_attention(l, h));
  TROUPE_TRY_ASSIGN(s2, zaya_scaled_sum(b, l, a, s, "attention"));
  TROUPE_TRY_ASSIGN(h2, norm(s2, l, n_.ffn_norm, "", C, norm_kind::rms, "ffn_norm"));
  // the router's state, and its MLP's output (the router's input)
  TROUPE_TRY_ASSIGN(wd, req(n_.zaya_router_down, l, {R, C}));
  TROUPE_TRY_ASSIGN(bd, req(n_.zaya_router_down_b, l, {R}));
  vid rs = b.linear(h2, wd, bd, "router_state");
  if (carried != none) {
    TROUPE_TRY_ASSIGN(cs, req(n_.zaya_router_carry, l, {R}));
    rs = b.add(rs, b.mul(carried, cs, "router_carried_scaled"), "router_state_sum");
  }
  TROUPE_TRY_ASSIGN(rn, norm(rs, l, n_.zaya_router_norm, "", R, norm_kind::rms, "router_norm"));
  TROUPE_TRY_ASSIGN(w1, req(n_.zaya_router_fc1, l, {R, R}));
  TROUPE_TRY_ASSIGN(b1, req(n_.zaya_router_fc1_b, l, {R}));
  TROUPE_TRY_ASSIGN(w2, req(n_.zaya_router_fc2, l, {R, R}));
  TROUPE_TRY_ASSIGN(b2, req(n_.zaya_router_fc2_b, l, {R}));
  const vid a1 = b.unary(op::gelu_erf, b.linear(rn, w1, b1, "router_fc1"), "router_act1");
  const vid a2 = b.unary(op::gelu_erf, b.linear(a1, w2, b2, "router_fc2"), "router_act2");
  TROUPE_TRY_ASSIGN(y, moe(l, h2, a2));
  TROUPE_TRY_ASSIGN(s3, zaya_scaled_sum(b, l, y, s2, "mlp"));
  return b.op(op::concat, {s3, rs}, "stream_carried");
}

expected<vid> decoder::zaya_conv(builder& b, int l, vid x, int64_t heads, int64_t row0, axis ax,
                                 const std::string& what) {
  const int64_t D = c_.D;
  weight_ref tr; // rows [row0, row0 + heads D) of the taps [Ch, 3] / [Ch, D] and biases [Ch]
  tr.segments = {{row0, heads * D}};
  TROUPE_TRY_ASSIGN(now, req(n_.zaya_dw_now, l, {heads * D, 3}, cut::out, ax, D, tr));
  TROUPE_TRY_ASSIGN(prev, req(n_.zaya_dw_prev, l, {heads * D, 3}, cut::out, ax, D, tr));
  TROUPE_TRY_ASSIGN(bias, req(n_.zaya_dw_b, l, {heads * D}, cut::out, ax, D, tr));
  TROUPE_TRY_ASSIGN(p_now, req(n_.zaya_pw_now, l, {heads * D, D}, cut::out, ax, D, tr));
  TROUPE_TRY_ASSIGN(p_prev, req(n_.zaya_pw_prev, l, {heads * D, D}, cut::out, ax, D, tr));
  TROUPE_TRY_ASSIGN(p_bias, req(n_.zaya_pw_b, l, {heads * D}, cut::out, ax, D, tr));
  kernels::op_params cp;
  cp.conv_plain = true;
  const vid in = b.view(x, {-1, D}, what + "_in");
  auto depthwise = [&](vid taps, const std::string& which) {
    const vid st = graph::add_recurrent_state(g_, state_kind::conv, l, {heads, 2, D}, ax,
                                              what + "_" + which + "_state");
    return b.op(op::causal_conv, {in, taps, st, g_.input(input_kind::state_table), bias},
                what + "_" + which, cp);
  };
  const vid d_now = depthwise(now, "now"), d_prev = depthwise(prev, "prev");
  const vid y = b.add(b.op(op::head_matmul, {d_prev, p_prev}, what + "_tap0"),
                      b.op(op::head_matmul, {d_now, p_now}, what + "_tap1"), what + "_taps");
  return b.add(b.view(y, {-1}, what + "_flat"), p_bias, what);
}

expected<vid> decoder::zaya_attention(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.H, Hkv = c_.Hkv, D = c_.D, G = H / Hkv;
  const axis kv_axis = kv_axis_of(l);
  TROUPE_TRY_ASSIGN(wq, req(n_.wq, l, {H * D, C}, cut::out, axis::heads, D));
  TROUPE_TRY_ASSIGN(wk, req(n_.wk, l, {Hkv * D, C}, cut::out, kv_axis, D));
  weight_ref rep; // k's rows, each KV head's repeated for its query heads
  for (int64_t hh = 0; hh < H; ++hh) rep.segments.emplace_back(hh / G * D, D);
  TROUPE_TRY_ASSIGN(wkr, req(n_.wk, l, {H * D, C}, cut::out, axis::heads, D, rep));
  TROUPE_TRY_ASSIGN(wqm, req(n_.zaya_q_mean, l, {Hkv * D, C}, cut::out, kv_axis, D));
  // the values: both halves' rows as one [Hkv D, C] (a rank's KV heads are its rows of it)
  TROUPE_TRY_ASSIGN(wv, w_.stacked({layer_name(n_.zaya_v_now, l), layer_name(n_.zaya_v_prev, l)},
                                   layer_name(n_.zaya_v_now, l) + "+delayed", l, 2,
                                   {Hkv * D / 2, C}, cut::out, kv_axis));
  g_[wv].groups = 1, g_[wv].unit = D;
  TROUPE_TRY_ASSIGN(vt, req(n_.zaya_v_taps, l, {Hkv * D, 2}, cut::out, kv_axis, D));
  TROUPE_TRY_ASSIGN(ks, req(n_.zaya_k_scale, l, {Hkv}, cut::out, kv_axis, 1));
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * D}, cut::in, axis::heads, D));
  const vid q0 = b.linear(h, wq, none, "q"), k0 = b.linear(h, wk, none, "k");
  // the residuals: (q + k repeated) / 2, and (the group's mean of q + k) / 2
  const vid q_res =
      b.scale(b.add(q0, b.linear(h, wkr, none, "k_repeated"), "q_res_sum"), 0.5f, "q_res");
  const vid k_res =
      b.scale(b.add(b.linear(h, wqm, none, "q_group_mean"), k0, "k_res_sum"), 0.5f, "k_res");
  TROUPE_TRY_ASSIGN(qc, zaya_conv(b, l, q0, H, 0, axis::heads, "q_conv"));
  TROUPE_TRY_ASSIGN(kc, zaya_conv(b, l, k0, Hkv, H * D, kv_axis, "k_conv"));
  // L2 norms to sqrt(D): RMS norms (torch clamps the norm at f32's epsilon, e: e^2 / D here)
  const float eps = static_cast<float>(1.1920929e-7 * 1.1920929e-7 / static_cast<double>(D));
  const vid ones = w_.constant(b.name("qk_norm") + ".ones", l, {D}, 1.0f);
  const vid q = b.norm(b.view(b.add(qc, q_res, "q_cca"), {-1, D}, "q_heads"), norm_type::rms, ones,
                       none, eps, "q_norm");
  const vid kn = b.norm(b.view(b.add(kc, k_res, "k_cca"), {-1, D}, "k_heads"), norm_type::rms, ones,
                        none, eps, "k_norm");
  const vid k =
      b.view(b.mul(b.view(kn, {-1}, "k_normed_flat"), ks, "k_scaled"), {-1, D}, "k_scaled_heads");
  // the values: the first half this token's, the second the previous token's
  const vid vst =
      graph::add_recurrent_state(g_, state_kind::conv, l, {Hkv, 1, D}, kv_axis, "v_state");
  kernels::op_params cp;
  cp.conv_plain = true;
  const vid v = b.op(op::causal_conv,
                     {b.view(b.linear(h, wv, none, "v_both"), {-1, D}, "v_in"), vt, vst,
                      g_.input(input_kind::state_table)},
                     "v_heads", cp);
  return b.attend(layer_spec(l), {q, k, v}, wo, none);
}

} // namespace troupe::arch::detail
