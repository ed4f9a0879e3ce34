// decoder_xlstm.cpp: the decoder builder's mLSTM layer (model_config::mlstm, xLSTM). From the
// layer's normed input: q, k (heads of lin_k_dim), v and the output gate (heads of lin_v_dim),
// and per head the input and forget gates' preactivations, each soft-capped (c tanh(x / c)); the
// mLSTM cell over a state per sequence (kernels' mlstm_scan: the memory, its normaliser and its
// stabiliser); a LayerNorm over each head's values (weightless: the one weight over every head
// follows it) times sigmoid(output gate); out_proj. TP cuts by heads: everything but out_proj is
// per head, and out_proj's partial sums are all-reduced. The fused form (weight_mode "fused")
// reads q, k, v and the output gate as row ranges of one tensor, the two gates of another.
#include "arch/families/decoder_build.hpp"

namespace troupe::arch::detail {

expected<vid> decoder::mlstm(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.lin_v_heads, Dk = c_.lin_k_dim, Dv = c_.lin_v_dim;
  const int64_t Kd = H * Dk, Vd = H * Dv;
  const axis ah = axis::lin_v_heads;
  const bool fused = n_.mlstm_fused;
  // rows [first, first + count) of the fused tensor `fused_name`, or all of `own` [count, C]
  auto part = [&](const std::string& own, const std::string& fused_name, int64_t first,
                  int64_t count, int64_t unit) -> expected<vid> {
    if (!fused) return req(own, l, {count, C}, cut::out, ah, unit);
    return req(fused_name, l, {count, C}, cut::out, ah, unit, row_range(first, count));
  };
  TROUPE_TRY_ASSIGN(wq, part(n_.lin_q, n_.lin_q, 0, Kd, Dk));
  TROUPE_TRY_ASSIGN(wk, part(n_.lin_k, n_.lin_q, Kd, Kd, Dk));
  TROUPE_TRY_ASSIGN(wv, part(n_.lin_v, n_.lin_q, 2 * Kd, Vd, Dv));
  TROUPE_TRY_ASSIGN(wz, part(n_.lin_z, n_.lin_q, 2 * Kd + Vd, Vd, Dv));
  TROUPE_TRY_ASSIGN(wi, part(n_.mlstm_i, n_.mlstm_i, 0, H, 1));
  TROUPE_TRY_ASSIGN(wf, part(n_.mlstm_f, n_.mlstm_i, H, H, 1));
  TROUPE_TRY_ASSIGN(
      bi, req(n_.mlstm_i_b, l, {H}, cut::out, ah, 1, fused ? row_range(0, H) : weight_ref{}));
  TROUPE_TRY_ASSIGN(bf, req(fused ? n_.mlstm_i_b : n_.mlstm_f_b, l, {H}, cut::out, ah, 1,
                            fused ? row_range(H, H) : weight_ref{}));
  TROUPE_TRY_ASSIGN(nw, req(n_.lin_norm, l, {Vd}, cut::out, ah, Dv));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, Vd}, cut::in, ah, Dv));
  const auto cap = static_cast<float>(c_.mlstm_gate_cap);
  auto gate = [&](vid w, vid bias, const std::string& what) {
    return softcap(b, b.linear(h, w, bias, what), cap, what);
  };
  const vid q = b.view(b.linear(h, wq, none, "mlstm_q"), {-1, Dk}, "mlstm_q_heads");
  const vid k = b.view(b.linear(h, wk, none, "mlstm_k"), {-1, Dk}, "mlstm_k_heads");
  const vid v = b.view(b.linear(h, wv, none, "mlstm_v"), {-1, Dv}, "mlstm_v_heads");
  const vid ig = gate(wi, bi, "mlstm_igate"), fg = gate(wf, bf, "mlstm_fgate");
  const vid st =
      graph::add_recurrent_state(g_, state_kind::ssm, l, {H, Dk + 1, Dv + 1}, ah, "mlstm_state");
  kernels::op_params sp;
  sp.eps = static_cast<float>(c_.mlstm_eps);
  const vid y =
      b.op(op::mlstm_scan, {q, k, v, ig, fg, st, g_.input(input_kind::state_table)}, "mlstm", sp);
  const vid ones = w_.constant(b.name("mlstm_norm") + ".ones", l, {Dv}, 1.0f);
  const vid yn =
      b.norm(y, norm_type::layer, ones, none, static_cast<float>(c_.norm_eps), "mlstm_norm_plain");
  const vid normed = b.mul(b.view(yn, {-1}, "mlstm_flat"), nw, "mlstm_norm");
  const vid og = b.unary(op::sigmoid, b.linear(h, wz, none, "mlstm_ogate"), "mlstm_ogate_act");
  return b.linear(b.mul(normed, og, "mlstm_gated"), wo, none, "mlstm_out");
}

} // namespace troupe::arch::detail
