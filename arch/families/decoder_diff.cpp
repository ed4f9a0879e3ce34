// decoder_diff.cpp: DiffLlama's differential attention in the decoder builder (decoder_build.hpp,
// model_config::diff_attn): by halves of the heads, so that TP takes its share of each half.
// Tests: tests/exec/forward_test.cpp, pipeline_test and tensor_parallel_test (the diffllama
// fixture).
#include <array>
#include <cmath>

#include "arch/families/decoder_build.hpp"

namespace troupe::arch::detail {

expected<vid> decoder::diff_attention(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.layer_heads(l), Hkv = c_.layer_kv_heads(l),
                D = c_.layer_head_dim(l);
  const attention_spec s = layer_spec(l);
  if (H % 2 || Hkv % 2 || !s.rope || s.window > 0 || s.softcap > 0)
    return make_error(errc::internal, "{}: differential attention of {} heads, {} KV heads",
                      m_.path, H, Hkv);
  const int64_t Hh = H / 2, Kh = Hkv / 2; // the heads of each half
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * D}, cut::in, axis::heads, D));
  TROUPE_TRY_ASSIGN(bo, opt(n_.bo, l, {C}));
  const vid pos = g_.input(input_kind::positions), slots = g_.input(input_kind::slots);
  kernels::op_params rp;
  rp.rope = s.rope_params;
  // half i of a projection's heads (its rows; TP takes its share of each half alike)
  auto half = [&](const std::string& wn, const std::string& bn, int64_t heads, axis ax, int i,
                  const std::string& what) -> expected<vid> {
    const weight_ref rows = row_range(i * heads * D, heads * D);
    TROUPE_TRY_ASSIGN(w, req(wn, l, {heads * D, C}, cut::out, ax, D, rows));
    TROUPE_TRY_ASSIGN(bias, opt(bn, l, {heads * D}, cut::out, ax, D, rows));
    return b.view(b.linear(h, w, bias, what), {-1, D}, what + "_heads");
  };
  // each half's queries, keys (cached) and values (cached): q of the first half over the first
  // half's keys, of the second over the second's, each against both halves of the values (as
  // transformers' two calls read the value halves repeated over every KV head)
  std::array<vid, 2> q{}, kc{}, vc{};
  for (int i = 0; i < 2; ++i) {
    const std::string t = std::to_string(i + 1);
    TROUPE_TRY_ASSIGN(qi, half(n_.wq, n_.bq, Hh, axis::heads_half, i, "q" + t));
    TROUPE_TRY_ASSIGN(ki, half(n_.wk, n_.bk, Kh, axis::kv_heads_half, i, "k" + t));
    TROUPE_TRY_ASSIGN(vi, half(n_.wv, n_.bv, Kh, axis::kv_heads_half, i, "v" + t));
    q[static_cast<size_t>(i)] = b.op(op::rope, {qi, pos}, "q" + t + "_rope", rp);
    const vid ki_rope = b.op(op::rope, {ki, pos}, "k" + t + "_rope", rp);
    kc[static_cast<size_t>(i)] =
        add_kv_state(g_, state_kind::k_cache, l, Kh, D, axis::kv_heads_half);
    vc[static_cast<size_t>(i)] =
        add_kv_state(g_, state_kind::v_cache, l, Kh, D, axis::kv_heads_half);
    g_[kc[static_cast<size_t>(i)]].name = fmt::format("blk.{}.k{}_cache", l, t);
    g_[vc[static_cast<size_t>(i)]].name = fmt::format("blk.{}.v{}_cache", l, t);
    b.op_into(op::kv_store, {ki_rope, slots}, kc[static_cast<size_t>(i)], "k" + t + "_store");
    b.op_into(op::kv_store, {vi, slots}, vc[static_cast<size_t>(i)], "v" + t + "_store");
  }
  kernels::op_params ap;
  ap.scale = s.scale > 0 ? s.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  std::array<vid, 2> a{}; // each half's heads, their two outputs side by side [T, Hh, 2 D]
  for (size_t i = 0; i < 2; ++i) {
    std::array<vid, 2> o{};
    for (size_t j = 0; j < 2; ++j)
      o[j] = b.op(op::paged_attention, {q[i], kc[i], vc[j], g_.input(input_kind::seq_table)},
                  fmt::format("attn{}{}", i + 1, j + 1), ap);
    a[i] = b.view(b.op(op::concat, {o[0], o[1]}, fmt::format("attn{}_both", i + 1)), {-1},
                  fmt::format("attn{}_flat", i + 1));
  }
  // lambda = exp(q1 . k1) - exp(q2 . k2) + lambda_init (in the graph: the stored vectors counted)
  const double init = 0.8 - 0.6 * std::exp(-0.3 * l);
  std::array<vid, 2> e{};
  for (int i = 0; i < 2; ++i) {
    const std::string t = std::to_string(i + 1);
    TROUPE_TRY_ASSIGN(lq, req(i ? n_.lambda_q2 : n_.lambda_q1, l, {1, D}));
    TROUPE_TRY_ASSIGN(lk, req(i ? n_.lambda_k2 : n_.lambda_k1, l, {1, D}));
    e[static_cast<size_t>(i)] =
        b.unary(op::exp, b.op(op::sum_rows, {b.mul(lq, lk, "lambda_qk" + t)}, "lambda_dot" + t),
                "lambda_exp" + t);
  }
  TROUPE_TRY_ASSIGN(lam_of, ew_program_of(fmt::format("e - f + {:.17g}", init), {"e", "f"}));
  const vid lam = b.elementwise(std::move(lam_of), {e[0], e[1]}, "lambda");
  // (first half - lambda second half), RMS-normed over each head's 2 D values, times 1 - init
  const vid diff =
      b.add(a[0], b.scale(b.mul(a[1], lam, "attn2_lambda"), -1.0f, "attn2_neg"), "attn_diff");
  const vid ones = w_.constant(b.name("attn_group_norm") + ".ones", l, {2 * D}, 1.0f);
  const vid normed = b.norm(b.view(diff, {-1, 2 * D}, "attn_diff_heads"), norm_type::rms, ones,
                            none, static_cast<float>(c_.norm_eps), "attn_group_norm");
  const vid out = b.scale(b.view(normed, {-1}, "attn_group_flat"), static_cast<float>(1.0 - init),
                          "attn_group_scaled");
  return b.linear(out, wo, bo, "attn_out");
}

} // namespace troupe::arch::detail
