// decoder_doge.cpp: the decoder builder's Doge (model_config::doge). A layer: x = r_a x +
// attention(norm(x)), then x = r_f x + mlp(norm(x)) (r_a, r_f learned vectors [C]). The attention's
// dynamic mask raises key j's scores by m_j = exp(A softplus(dt_proj(v_j))) per KV head (v_j all of
// position j's values; dt_proj row-parallel under TP). The paged attention has no per-key bias, so
// heads carry 8 more values: a query's are (1, 0, ...), a key's (m_j sqrt(D), 0, ...), a value's
// zeros; scores are scaled by 1 / sqrt(D) as published, so q . k gains m_j exactly; the output's
// first D values of each head go on to o_proj (a head_matmul with a selection). RoPE turns the
// first D values (the extras are never rotated).
#include "arch/families/decoder_build.hpp"

namespace troupe::arch::detail {

namespace {
constexpr int64_t extra = model_config::doge_extra;
} // namespace

status decoder::build_doge() {
  TROUPE_TRY_ASSIGN(x0, embed());
  vid x = x0;
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    TROUPE_TRY_ASSIGN(y, doge_layer(l, x));
    x = y;
    g_.residual.push_back(x);
  }
  return head(x);
}

expected<vid> decoder::doge_layer(int l, vid x) {
  builder b(g_, l);
  const int64_t C = c_.C;
  TROUPE_TRY_ASSIGN(h, norm(x, l, n_.attn_norm, "", C, norm_kind::rms, "attn_norm"));
  TROUPE_TRY_ASSIGN(a, doge_attention(l, h));
  TROUPE_TRY_ASSIGN(ra, req(n_.doge_res_attn, l, {C}));
  x = b.add(b.mul(x, ra, "attn_res_scaled"), a, "attn_residual");
  TROUPE_TRY_ASSIGN(h2, norm(x, l, n_.ffn_norm, "", C, norm_kind::rms, "ffn_norm"));
  TROUPE_TRY_ASSIGN(f, ffn(l, h2));
  TROUPE_TRY_ASSIGN(rf, req(n_.doge_res_ffn, l, {C}));
  return b.add(b.mul(x, rf, "ffn_res_scaled"), f, "ffn_residual");
}

expected<vid> decoder::doge_attention(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.H, Hkv = c_.Hkv, D = c_.D, De = D + extra;
  const axis kv_axis = kv_axis_of(l);
  TROUPE_TRY_ASSIGN(p, projections(l));
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * D}, cut::in, axis::heads, D));
  TROUPE_TRY_ASSIGN(bo, opt(n_.bo, l, {C}));
  TROUPE_TRY_ASSIGN(A, req(n_.doge_a, l, {Hkv}));
  TROUPE_TRY_ASSIGN(wdt, req(n_.doge_dt, l, {Hkv, Hkv * D}, cut::in, kv_axis, D));
  vid bdt = none;
  if (!n_.doge_dt_b.empty()) TROUPE_TRY_SET(bdt, req(n_.doge_dt_b, l, {Hkv}));
  TROUPE_TRY_ASSIGN(qx, req(n_.doge_q_extra, l, {H * extra}, cut::out, axis::heads, extra));
  TROUPE_TRY_ASSIGN(km, req(n_.doge_k_map, l, {Hkv * extra, Hkv}, cut::out, kv_axis, extra));
  weight_ref each; // every head's selection of its first D values
  for (int64_t hh = 0; hh < H; ++hh) each.segments.emplace_back(0, D);
  TROUPE_TRY_ASSIGN(sel, req(n_.doge_select, l, {H * D, De}, cut::out, axis::heads, D, each));
  // (the constant extra values of q and v: zero maps of a column of zeros, plus q's pattern)
  const vid zq = w_.constant(b.name("q_extra") + ".zeros", l, {H * extra, 1}, 0.0f, cut::out,
                             axis::heads, extra);
  const vid zv = w_.constant(b.name("v_extra") + ".zeros", l, {Hkv * extra, 1}, 0.0f, cut::out,
                             kv_axis, extra);
  const vid zero = b.scale(b.op(op::sum_rows, {h}, "extra_rows"), 0.0f, "extra_zero");
  const vid q0 = b.view(b.linear(h, p.wq, p.bq, "q"), {-1, D}, "q_heads");
  const vid k0 = b.view(b.linear(h, p.wk, p.bk, "k"), {-1, D}, "k_heads");
  const vid v0 = b.linear(h, p.wv, p.bv, "v");
  TROUPE_TRY_ASSIGN(q, qk_norm(b, l, q0, H, axis::heads, true));
  TROUPE_TRY_ASSIGN(k, qk_norm(b, l, k0, Hkv, kv_axis, false));
  // the mask's score of each key (of every KV head: dt_proj sums over the ranks' values)
  TROUPE_TRY_ASSIGN(mask_expr, ew_program_of("exp(a * softplus(x))", {"x", "a"}));
  const vid score =
      b.elementwise(std::move(mask_expr), {b.linear(v0, wdt, bdt, "dt"), A}, "dyn_mask");
  const vid kx = b.view(b.linear(score, km, none, "k_extra"), {-1, extra}, "k_extra_heads");
  const vid qe = b.view(b.linear(zero, zq, qx, "q_extra"), {-1, extra}, "q_extra_heads");
  const vid ve = b.view(b.linear(zero, zv, none, "v_extra"), {-1, extra}, "v_extra_heads");
  attention_spec s = layer_spec(l);
  s.head_dim = De;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  s.before_out = [&](builder& bb, vid out) { // each head's first D values
    const vid y =
        bb.op(op::head_matmul, {bb.view(out, {-1, De}, "attn_extended"), sel}, "attn_selected");
    return std::pair<vid, vid>{bb.view(y, {-1}, "attn_selected_flat"), none};
  };
  return b.attend(s,
                  {b.op(op::concat, {q, qe}, "q_ext"), b.op(op::concat, {k, kx}, "k_ext"),
                   b.op(op::concat, {b.view(v0, {-1, D}, "v_heads"), ve}, "v_ext")},
                  wo, bo);
}

} // namespace troupe::arch::detail
