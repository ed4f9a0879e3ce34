// decoder_inkling.cpp: the decoder builder's Inkling (model_config::inkling): pre-norm layers
// whose attention has no RoPE but a bias per head and distance mixed from each query's relative
// states (r_proj, then the layer's profiles [d_rel, extent] through head_matmul: paged
// attention's relative biases, src7), short convolutions (x + conv(x), causal and depthwise,
// a state per sequence) on k and v before their RMS norms and on both sublayers' outputs
// before the residual adds, and on the full layers q and the biases times the log scaling
// 1 + alpha ln(max((p + 1) / floor, 1)) (pos_scale over ones, clamped at 1); dense MLPs times a
// learned scalar, experts as decoder_ffn.cpp's (their shared experts in the router's sum).
#include "arch/families/decoder_build.hpp"

#include <cmath>

namespace troupe::arch::detail {

status decoder::build_inkling() {
  TROUPE_TRY_ASSIGN(x0, embed()); // (its RMS norm: model_config::embed_norm)
  vid x = x0;
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    TROUPE_TRY_ASSIGN(y, inkling_layer(l, x));
    x = y;
    g_.residual.push_back(x);
  }
  return head(x); // (divided by logits_mup_width_multiplier: model_config::logit_scale)
}

expected<vid> decoder::short_conv_residual(builder& b, int l, vid x, const std::string& taps,
                                           int64_t heads, int64_t width, axis ax,
                                           const std::string& what) {
  const int64_t K = c_.sconv;
  const bool cut_heads = ax != axis::none;
  TROUPE_TRY_ASSIGN(w, req(taps, l, {heads * width, K}, cut_heads ? cut::out : cut::none, ax,
                           cut_heads ? width : 1));
  const vid st = graph::add_recurrent_state(g_, state_kind::conv, l, {heads, K - 1, width}, ax,
                                            what + "_state");
  kernels::op_params cp;
  cp.conv_plain = true;
  const vid y = b.op(
      op::causal_conv,
      {b.view(x, {-1, width}, what + "_in"), w, st, g_.input(input_kind::state_table)}, what, cp);
  return b.add(x, b.view(y, {-1}, what + "_flat"), what + "_sum");
}

expected<vid> decoder::inkling_layer(int l, vid x) {
  builder b(g_, l);
  const int64_t C = c_.C;
  TROUPE_TRY_ASSIGN(h, norm(x, l, n_.attn_norm, "", C, norm_kind::rms, "attn_norm"));
  TROUPE_TRY_ASSIGN(a0, inkling_attention(l, h));
  TROUPE_TRY_ASSIGN(
      a, short_conv_residual(b, l, a0, n_.inkling_attn_conv, 1, C, axis::none, "attn_conv"));
  x = b.add(x, a, "attn_residual");
  TROUPE_TRY_ASSIGN(h2, norm(x, l, n_.ffn_norm, "", C, norm_kind::rms, "ffn_norm"));
  TROUPE_TRY_ASSIGN(f0, ffn(l, h2)); // (the experts where the layer has them)
  vid f = f0;
  if (!c_.layer_moe(l)) { // a dense MLP's learned scalar
    TROUPE_TRY_ASSIGN(s, req(n_.inkling_mlp_scale, l, {1}));
    f = b.mul(f, s, "ffn_scaled");
  }
  TROUPE_TRY_ASSIGN(
      fc, short_conv_residual(b, l, f, n_.inkling_mlp_conv, 1, C, axis::none, "ffn_conv"));
  return b.add(x, fc, "ffn_residual");
}

expected<vid> decoder::inkling_attention(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.layer_heads(l), Hkv = c_.layer_kv_heads(l),
                D = c_.layer_head_dim(l), R = c_.rel_dim, E = c_.layer_rel_extent(l);
  const axis kv_axis = kv_axis_of(l);
  TROUPE_TRY_ASSIGN(wq, req(n_.wq, l, {H * D, C}, cut::out, axis::heads, D));
  TROUPE_TRY_ASSIGN(wk, req(n_.wk, l, {Hkv * D, C}, cut::out, kv_axis, D));
  TROUPE_TRY_ASSIGN(wv, req(n_.wv, l, {Hkv * D, C}, cut::out, kv_axis, D));
  TROUPE_TRY_ASSIGN(wr, req(n_.inkling_r, l, {H * R, C}, cut::out, axis::heads, R));
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * D}, cut::in, axis::heads, D));
  // the profiles [R, E] as every head's [E, R] rows (transposed, repeated)
  weight_ref rp;
  rp.transposed = true;
  for (int64_t hh = 0; hh < H; ++hh) rp.segments.emplace_back(0, E);
  TROUPE_TRY_ASSIGN(wp, req(n_.inkling_rel, l, {H * E, R}, cut::out, axis::heads, E, rp));
  vid q = b.view(b.linear(h, wq, none, "q"), {-1, D}, "q_heads");
  TROUPE_TRY_ASSIGN(kc, short_conv_residual(b, l, b.linear(h, wk, none, "k"), n_.inkling_k_conv,
                                            Hkv, D, kv_axis, "k_conv"));
  TROUPE_TRY_ASSIGN(vc, short_conv_residual(b, l, b.linear(h, wv, none, "v"), n_.inkling_v_conv,
                                            Hkv, D, kv_axis, "v_conv"));
  TROUPE_TRY_SET(q, qk_norm(b, l, q, H, axis::heads, true));
  TROUPE_TRY_ASSIGN(k, qk_norm(b, l, b.view(kc, {-1, D}, "k_heads"), Hkv, kv_axis, false));
  const vid v = b.view(vc, {-1, D}, "v_heads");
  // each query's biases by distance [T, H, E]
  vid rel = b.op(op::head_matmul, {b.view(b.linear(h, wr, none, "r"), {-1, R}, "r_heads"), wp},
                 "rel_logits");
  if (c_.log_scale_floor > 0 && c_.layer_window(l) == 0) {
    // tau = max(1, 1 + alpha ln((p + 1) / floor)) per token: pos_scale over ones of
    // alpha ln(p + 1) + 1 - alpha ln(floor), clamped below at 1
    const double alpha = c_.log_scale_alpha;
    const vid ones =
        b.scale(b.op(op::sum_rows, {h}, "log_scale_rows"), 0.0f, "log_scale_ones", 1.0f);
    const vid sa = w_.constant(b.name("log_scale") + ".alpha", l, {1}, static_cast<float>(alpha));
    const vid sb = w_.constant(
        b.name("log_scale") + ".bias", l, {1},
        static_cast<float>(1.0 - alpha * std::log(static_cast<double>(c_.log_scale_floor))));
    const vid raw =
        b.op(op::pos_scale,
             {b.view(ones, {1, 1}, "log_scale_in"), g_.input(input_kind::positions), sa, sb},
             "log_scale_raw");
    TROUPE_TRY_ASSIGN(clamp1, ew_program_of("max(x, 1)", {"x"}));
    const vid tau =
        b.elementwise(std::move(clamp1), {b.view(raw, {-1}, "log_scale_flat")}, "log_scale");
    q = b.view(b.mul(b.view(q, {-1}, "q_flat"), tau, "q_log_scaled"), {-1, D}, "q_scaled_heads");
    rel =
        b.view(b.mul(b.view(rel, {-1}, "rel_flat"), tau, "rel_log_scaled"), {-1, E}, "rel_scaled");
  }
  attention_spec s = layer_spec(l);
  s.scale = static_cast<float>(1.0 / static_cast<double>(D)); // (q and k RMS-normed per head)
  s.rope = false;
  s.rel = rel;
  return b.attend(s, {q, k, v}, wo, none);
}

} // namespace troupe::arch::detail
