// decoder_altup.cpp: the decoder builder's Gemma 3n (decoder_build.hpp): the model over AltUp's
// N residual streams (model_config::altup), carried between layers (and pipeline stages) as one
// value [T, N C]. The embedding fills stream 0 and, projected and RMS-matched to it, the others;
// each layer predicts every stream from a per-token mix of all (hc_post's [T, N N] form), runs
// its block on stream 0 (Laurel's low-rank residual beside the attention), corrects each stream
// by its share of the block's innovation (hc_post's [T, N] form) and adds the per-layer input,
// gated by the corrected stream 0, to the other streams; the head averages the streams back, each
// projected and RMS-matched to stream 0. Every AltUp and Laurel weight is small and whole on
// every TP rank; the attention and FFN are cut as in any layer.
#include "arch/families/decoder_build.hpp"

#include <cmath>

namespace troupe::arch::detail {

expected<vid> decoder::sparse_ffn(int l, vid h, vid wg, vid wu, vid wd) {
  // down(act(relu(g - mean(g) - std(g) z)) * up), mean and std over the whole gate row: each TP
  // rank's sums all-reduced
  builder b(g_, l);
  const int64_t F = c_.layer_ffn(l);
  const double z = c_.act_sparsity_z[static_cast<size_t>(l)];
  const char* act = c_.act == act_kind::silu        ? "silu"
                    : c_.act == act_kind::gelu_tanh ? "gelu_tanh"
                                                    : "gelu";
  TROUPE_TRY_ASSIGN(dev, ew_program_of(fmt::format("(g - a / {})^2", F), {"g", "a"}));
  TROUPE_TRY_ASSIGN(
      gated, ew_program_of(
                 fmt::format("{0}(relu(g - a / {1} - sqrt(s / {1}) * ({2:.17g}))) * u", act, F, z),
                 {"g", "u", "a", "s"}));
  const vid g = b.linear(h, wg, none, "ffn_gate");
  const vid u = b.linear(h, wu, none, "ffn_up");
  const vid sum = b.all_reduce(b.op(op::sum_rows, {g}, "ffn_gate_sum"), "ffn_gate_sum_all");
  const vid d = b.elementwise(std::move(dev), {g, sum}, "ffn_gate_dev");
  const vid var = b.all_reduce(b.op(op::sum_rows, {d}, "ffn_gate_ss"), "ffn_gate_ss_all");
  const vid a = b.elementwise(std::move(gated), {g, u, sum, var}, "ffn_act");
  return b.linear(a, wd, none, "ffn_out");
}

expected<vid> decoder::stream_weight(const std::string& pattern, int64_t i, int l) {
  const int64_t C = c_.C;
  if (pattern.find("{}") != std::string::npos) // one tensor per stream (HF)
    return req(at(pattern, static_cast<int>(i - 1)), l, {C, C});
  return req(pattern, l, {C, C}, cut::none, axis::none, 1, row_range((i - 1) * C, C)); // stacked
}

vid decoder::stream_of(builder& b, vid x, int64_t k, const std::string& what) const {
  return columns(b, x, k * c_.C, c_.C, what);
}

vid decoder::columns(builder& b, vid x, int64_t col0, int64_t cols, const std::string& what) {
  kernels::op_params p;
  p.col0 = col0;
  p.cols = cols;
  return b.op(op::slice, {x}, what, p);
}

expected<vid> decoder::rms_matched(builder& b, vid x, vid target_ss, const std::string& what) {
  // x sqrt(mean(target^2)) / sqrt(max(mean(x^2), 1e-5)), as transformers matches magnitudes
  TROUPE_TRY_ASSIGN(p,
                    ew_program_of(fmt::format("x * sqrt(a / {0}) / sqrt(max(s / {0}, 1e-5))", c_.C),
                                  {"x", "a", "s"}));
  const vid ss = b.op(op::sum_rows, {b.mul(x, x, what + "_sq")}, what + "_ss");
  return b.elementwise(std::move(p), {x, target_ss, ss}, what);
}

status decoder::build_altup() {
  const int64_t N = c_.altup;
  TROUPE_TRY_ASSIGN(e, embed());
  builder b(g_, -1);
  const vid ss = b.op(op::sum_rows, {b.mul(e, e, "altup_embd_sq")}, "altup_embd_ss");
  vid x = e;
  for (int64_t i = 1; i < N; ++i) {
    TROUPE_TRY_ASSIGN(w, stream_weight(n_.altup_proj, i, -1));
    const vid p = b.linear(e, w, none, fmt::format("altup_proj_{}", i));
    TROUPE_TRY_ASSIGN(s, rms_matched(b, p, ss, fmt::format("altup_stream_{}", i)));
    x = b.op(op::concat, {x, s}, fmt::format("altup_streams_{}", i));
  }
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    TROUPE_TRY_ASSIGN(y, altup_layer(l, x));
    x = y;
    g_.residual.push_back(x);
  }
  return head(x);
}

expected<decoder::altup_router> decoder::altup_router_of(int l) {
  const int64_t N = c_.altup, C = c_.C;
  weight_ref ref;
  ref.add = static_cast<float>(c_.norm_add);
  TROUPE_TRY_ASSIGN(n, req(n_.altup_router_norm, l, {C}, cut::none, axis::none, 1, ref));
  TROUPE_TRY_ASSIGN(w, req(n_.altup_router, l, {N, C}));
  return altup_router{n, w};
}

vid decoder::altup_modalities(int l, const altup_router& r, vid s, const std::string& what) {
  // tanh(W_router (norm(s) / C))
  builder b(g_, l);
  const vid n =
      b.norm(s, norm_type::rms, r.norm, none, static_cast<float>(c_.norm_eps), what + "_norm");
  const vid in = b.scale(n, static_cast<float>(1.0 / static_cast<double>(c_.C)), what + "_in");
  return b.unary(op::tanh, b.linear(in, r.w, none, what + "_logits"), what);
}

expected<vid> decoder::altup_layer(int l, vid x) {
  builder b(g_, l);
  const int64_t N = c_.altup, C = c_.C, r = c_.laurel_rank;
  // the prediction: stream k plus sum_j coef[k N + j] stream j, coef from stream 0's router
  const vid x0 = stream_of(b, x, 0, "altup_in_0");
  TROUPE_TRY_ASSIGN(router, altup_router_of(l)); // (one router for both, read once)
  const vid m = altup_modalities(l, router, x0, "altup_predict_mod");
  TROUPE_TRY_ASSIGN(wp, req(n_.altup_predict, l, {N * N, N}));
  const vid coef = b.linear(m, wp, none, "altup_predict_coef");
  const vid pred = b.op(op::hc_post, {x, x0, coef}, "altup_pred"); // (x0 for the shape only)
  const vid a = stream_of(b, pred, 0, "altup_active");
  // the block on the active stream, Laurel beside its attention
  TROUPE_TRY_ASSIGN(h, norm(a, l, n_.attn_norm, "", C, c_.norm, "attn_norm"));
  TROUPE_TRY_ASSIGN(wl, req(n_.laurel_l, l, {r, C}));
  TROUPE_TRY_ASSIGN(wr, req(n_.laurel_r, l, {C, r}));
  const vid lr = b.linear(b.linear(h, wl, none, "laurel_left"), wr, none, "laurel_right");
  TROUPE_TRY_ASSIGN(ln, norm(lr, l, n_.laurel_norm, "", C, c_.norm, "laurel_norm"));
  const vid laurel = b.add(h, ln, "laurel_out");
  TROUPE_TRY_ASSIGN(att, attention(l, h));
  TROUPE_TRY_ASSIGN(an, norm(att, l, n_.post_attn_norm, "", C, c_.norm, "attn_post_norm"));
  const vid sum = b.add(b.add(a, an, "attn_residual"), laurel, "attn_laurel_sum");
  const vid al = b.scale(sum, static_cast<float>(1.0 / std::sqrt(2.0)), "attn_laurel");
  TROUPE_TRY_ASSIGN(h2, norm(al, l, n_.ffn_norm, "", C, c_.norm, "ffn_norm"));
  TROUPE_TRY_ASSIGN(f, ffn(l, h2));
  TROUPE_TRY_ASSIGN(fn, norm(f, l, n_.post_ffn_norm, "", C, c_.norm, "ffn_post_norm"));
  const vid out = b.add(al, fn, "ffn_residual");
  // the correction: stream k + (coef_k + 1) (out - active), coef from the output's router
  const vid m2 = altup_modalities(l, router, out, "altup_correct_mod");
  TROUPE_TRY_ASSIGN(wc, req(n_.altup_correct, l, {N, N}));
  const vid cc =
      b.scale(b.linear(m2, wc, none, "altup_correct_logits"), 1.0f, "altup_correct_coef", 1.0f);
  TROUPE_TRY_ASSIGN(minus, ew_program_of("o - a", {"o", "a"}));
  const vid innov = b.elementwise(std::move(minus), {out, a}, "altup_innovation");
  const vid corr = b.op(op::hc_post, {pred, innov, cc}, "altup_corrected");
  if (c_.ple_dim <= 0) return corr;
  // the per-layer input, gated by the corrected stream 0 (times its scale), into streams 1..
  vid first = stream_of(b, corr, 0, "altup_first");
  if (c_.altup_correct_scale) {
    TROUPE_TRY_ASSIGN(ws, req(n_.altup_scale, l, {C}));
    first = b.mul(first, ws, "altup_first_scaled");
  }
  TROUPE_TRY_ASSIGN(p, per_layer_input(l, first));
  vid add = b.scale(p, 0.0f, "ple_none");
  for (int64_t i = 1; i < N; ++i)
    add = b.op(op::concat, {add, p}, fmt::format("ple_streams_{}", i));
  return b.add(corr, add, "ple_residual");
}

expected<vid> decoder::altup_collapse(vid rows) {
  // the mean of stream 0 and the others, each projected back and RMS-matched to stream 0
  const int64_t N = c_.altup;
  const int L = g_.n_layer;
  builder b(g_, L);
  const vid s0 = stream_of(b, rows, 0, "altup_out_0");
  const vid ss = b.op(op::sum_rows, {b.mul(s0, s0, "altup_out_0_sq")}, "altup_out_0_ss");
  vid sum = s0;
  for (int64_t i = 1; i < N; ++i) {
    TROUPE_TRY_ASSIGN(w, stream_weight(n_.altup_unembd, i, L));
    const vid p = b.linear(stream_of(b, rows, i, fmt::format("altup_out_{}", i)), w, none,
                           fmt::format("altup_unembd_{}", i));
    TROUPE_TRY_ASSIGN(back, rms_matched(b, p, ss, fmt::format("altup_back_{}", i)));
    sum = b.add(sum, back, fmt::format("altup_sum_{}", i));
  }
  return b.scale(sum, static_cast<float>(1.0 / static_cast<double>(N)), "altup_mean");
}

} // namespace troupe::arch::detail
