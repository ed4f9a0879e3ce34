// decoder_ngpt.cpp: the decoder builder's normalized transformer (nGPT, as NVIDIA's Dory runs
// it; model_config::ngpt): every hidden state L2-normed to the unit sphere by weightless norms,
// each sublayer's normed output reached by a learned per-channel interpolation instead of an
// add, q and k normed per head and q rescaled per channel after RoPE, a sigmoid gate on every
// value with its own learned scale, the attention's output and the MLP's product L2-normed
// over their whole rows (every TP rank's part), the logits scaled per token id; and Dory's
// recurrent section, run `loops` times (each run its own layers and KV caches, reading the first
// run's weights), each run starting from its stream and the section's input, both L2-normed and
// summed (the input carried beside the stream, [T, 2 C], so a pipeline may cut anywhere).
// Every learned scale is computed in the graph from the stored parameter, as transformers does
// each step (a node over one vector).
#include "arch/families/decoder_build.hpp"

#include <cmath>

namespace troupe::arch::detail {

namespace {

constexpr float l2_eps = 1e-6f; // (DoryL2Norm's)

std::string num(double v) {
  return fmt::format("{:.17g}", v);
}

} // namespace

vid decoder::l2_norm(builder& b, vid x, int64_t n, const std::string& what) {
  // x / sqrt(sum x^2 + eps) = x / sqrt(mean x^2 + eps / n) / sqrt(n)
  const double dn = static_cast<double>(n);
  const vid w =
      w_.constant(b.name(what) + ".l2", b.layer(), {n}, static_cast<float>(1.0 / std::sqrt(dn)));
  return b.norm(x, norm_type::rms, w, none, static_cast<float>(l2_eps / dn), what);
}

expected<vid> decoder::ngpt_scale(builder& b, const std::string& name, int l, int64_t n,
                                  const std::string& expr, cut cu, axis ax, int64_t unit,
                                  const std::string& what) {
  TROUPE_TRY_ASSIGN(v, req(name, l, {n}, cu, ax, unit));
  TROUPE_TRY_ASSIGN(prog, ew_program_of(expr, {"x"}));
  return b.elementwise(std::move(prog), {v}, what);
}

status decoder::build_ngpt() {
  const int64_t loop_end = c_.loop_begin + c_.loop_layers * c_.loops;
  const bool loops = c_.loop_layers > 0;
  TROUPE_TRY_ASSIGN(e, embed());
  builder b0(g_, -1);
  // (before the section, the carried input is zeros until its first layer sets it)
  vid x = loops ? b0.op(op::concat, {e, b0.scale(e, 0.0f, "loop_none")}, "loop_streams") : e;
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    builder b(g_, l);
    vid h = loops ? stream_of(b, x, 0, "stream_in") : x;
    vid in = loops ? stream_of(b, x, 1, "loop_in") : none;
    if (loops && l >= c_.loop_begin && l < loop_end && (l - c_.loop_begin) % c_.loop_layers == 0) {
      // a run's first layer: L2(h) + L2(the section's input), that input made at the first run
      if (l == c_.loop_begin) in = l2_norm(b, h, c_.C, "loop_input");
      h = b.add(l2_norm(b, h, c_.C, "loop_norm"), in, "loop_start");
    }
    TROUPE_TRY_ASSIGN(y, ngpt_layer(l, h));
    x = loops ? b.op(op::concat, {y, in}, "loop_streams") : y;
    g_.residual.push_back(x);
  }
  return head(x); // (its L2 norm and logit scale: model_config::ngpt)
}

expected<vid> decoder::ngpt_layer(int l, vid x) {
  // h = L2(x); h += |lambda_1 a| (L2(attn(h)) - h); h = L2(h); h += |lambda_2 a| (L2(mlp(h)) - h)
  builder b(g_, l);
  const int64_t C = c_.C;
  const std::string rate = fmt::format("abs(x * {})", num(c_.ngpt_alpha / c_.ngpt_init));
  auto toward = [&](vid h, vid y, const std::string& lambda,
                    const std::string& what) -> expected<vid> {
    TROUPE_TRY_ASSIGN(r,
                      ngpt_scale(b, lambda, l, C, rate, cut::none, axis::none, 1, what + "_rate"));
    const vid d = b.add(y, b.scale(h, -1.0f, what + "_neg"), what + "_diff");
    return b.add(h, b.mul(d, r, what + "_step"), what);
  };
  vid h = l2_norm(b, x, C, "attn_norm");
  TROUPE_TRY_ASSIGN(a, ngpt_attention(l, h));
  TROUPE_TRY_SET(h,
                 toward(h, l2_norm(b, a, C, "attn_post_norm"), n_.ngpt_lambda_1, "attn_residual"));
  h = l2_norm(b, h, C, "ffn_norm");
  TROUPE_TRY_ASSIGN(f, ngpt_mlp(l, h));
  return toward(h, l2_norm(b, f, C, "ffn_post_norm"), n_.ngpt_lambda_2, "ffn_residual");
}

expected<vid> decoder::ngpt_attention(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.layer_heads(l), D = c_.layer_head_dim(l);
  TROUPE_TRY_ASSIGN(p, projections(l)); // (q, k, v and the value gate's gate_proj)
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * D}, cut::in, axis::heads, D));
  TROUPE_TRY_ASSIGN(bo, opt(n_.bo, l, {C}));
  vid q = b.view(b.linear(h, p.wq, p.bq, "q"), {-1, D}, "q_heads");
  vid k = b.view(b.linear(h, p.wk, p.bk, "k"), {-1, D}, "k_heads");
  const vid v = b.view(b.linear(h, p.wv, p.bv, "v"), {-1, D}, "v_heads");
  q = l2_norm(b, q, D, "q_norm");
  k = l2_norm(b, k, D, "k_norm");
  attention_spec s = layer_spec(l);
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  if (s.rope) { // (here: q's scale comes after the rotation)
    kernels::op_params rp;
    rp.rope = s.rope_params;
    const vid pos = g_.input(input_kind::positions);
    q = b.op(op::rope, {q, pos}, "q_rope", rp);
    k = b.op(op::rope, {k, pos}, "k_rope", rp);
    s.rope = false;
  }
  // q times (sqk sqrt(D) / init)^2 per channel
  const std::string sq =
      fmt::format("(x * {0}) * (x * {0})", num(std::sqrt(static_cast<double>(D)) / c_.ngpt_init));
  TROUPE_TRY_ASSIGN(qs,
                    ngpt_scale(b, n_.ngpt_sqk, l, H * D, sq, cut::out, axis::heads, D, "q_scale"));
  q = b.view(b.mul(b.view(q, {-1}, "q_flat"), qs, "q_scaled"), {-1, D}, "q_scaled_heads");
  // the gate: sigmoid(gate_proj h (s_gate C^(1/4) / init)^2) on every value (attend's sigmoid)
  const std::string sg = fmt::format("(x * {0}) * (x * {0})",
                                     num(std::pow(static_cast<double>(C), 0.25) / c_.ngpt_init));
  TROUPE_TRY_ASSIGN(
      gs, ngpt_scale(b, n_.ngpt_s_gate, l, H * D, sg, cut::out, axis::heads, D, "gate_scale"));
  s.gate = b.mul(b.linear(h, p.wgate, none, "q_gate"), gs, "q_gate_scaled");
  // the output L2-normed over its H D values (each rank holding some heads) before o_proj
  s.before_out = [W = H * D](builder& bb, vid y) {
    return std::pair<vid, vid>{l2_across_ranks(bb, y, W, l2_eps, "attn"), none};
  };
  if (const int64_t src = c_.layer_kv_source(l); src != l) {
    // (Dory's last_loop: this run writes the first run's cache, then attends over it)
    s.k_cache = layer_state(src, "k_cache"), s.v_cache = layer_state(src, "v_cache");
    if (s.k_cache == none || s.v_cache == none || !c_.kv_source_writes)
      return make_error(errc::internal,
                        "{}: layer {} writes the KV cache of layer {}, which has none", m_.path, l,
                        src);
    const vid slots = g_.input(input_kind::slots);
    b.op_into(op::kv_store, {k, slots}, s.k_cache, "k_store");
    b.op_into(op::kv_store, {v, slots}, s.v_cache, "v_store");
  }
  return b.attend(s, {q, k, v}, wo, bo);
}

expected<vid> decoder::ngpt_mlp(int l, vid h) {
  // down(L2(act(gate h suv_g sqrt(C)) * up h suv_u sqrt(C))), the L2 over every rank's part of F
  builder b(g_, l);
  const int64_t C = c_.C, F = c_.layer_ffn(l);
  TROUPE_TRY_ASSIGN(wg, req(n_.w_gate, l, {F, C}, cut::out, axis::ffn));
  TROUPE_TRY_ASSIGN(bg, opt(n_.b_gate, l, {F}, cut::out, axis::ffn));
  TROUPE_TRY_ASSIGN(wu, req(n_.w_up, l, {F, C}, cut::out, axis::ffn));
  TROUPE_TRY_ASSIGN(bu, opt(n_.b_up, l, {F}, cut::out, axis::ffn));
  TROUPE_TRY_ASSIGN(wd, req(n_.w_down, l, {C, F}, cut::in, axis::ffn));
  TROUPE_TRY_ASSIGN(bd, opt(n_.b_down, l, {C}));
  const std::string times = fmt::format("x * {}", num(std::sqrt(static_cast<double>(C))));
  TROUPE_TRY_ASSIGN(
      sg, ngpt_scale(b, n_.ngpt_suv_gate, l, F, times, cut::out, axis::ffn, 1, "ffn_gate_scale"));
  TROUPE_TRY_ASSIGN(
      su, ngpt_scale(b, n_.ngpt_suv_up, l, F, times, cut::out, axis::ffn, 1, "ffn_up_scale"));
  const vid g = b.mul(b.linear(h, wg, bg, "ffn_gate"), sg, "ffn_gate_scaled");
  const vid u = b.mul(b.linear(h, wu, bu, "ffn_up"), su, "ffn_up_scaled");
  const vid y = l2_across_ranks(b, gated_product(b, g, u, "ffn"), F, l2_eps, "ffn");
  return b.linear(y, wd, bd, "ffn_out");
}

} // namespace troupe::arch::detail
