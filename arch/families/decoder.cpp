// decoder.cpp: the generic decoder builder (decoder.hpp): the class (decoder_build.hpp)'s
// embedding, layers, attention and head, and the layouts that carry a second stream (LongCat's
// experts, HRM-Text's cycles); the FFN and experts are decoder_ffn.cpp, the recurrent mixers
// decoder_mixers.cpp, the latent attention and the sparse attentions' indexers decoder_mla.cpp,
// DiffLlama's differential attention decoder_diff.cpp.
#include "arch/families/decoder_build.hpp"

#include <cmath>

#include "core/convert.hpp"

namespace troupe::arch {

namespace detail {

expected<std::shared_ptr<kernels::ew_program>> ew_program_of(const std::string& text,
                                                             const std::vector<std::string>& vars) {
  auto p = kernels::parse_expression(text, vars);
  if (!p) return p.error();
  p->sources = static_cast<int>(vars.size());
  return std::make_shared<kernels::ew_program>(std::move(*p));
}

expected<std::shared_ptr<kernels::ew_program>> clamped_swiglu(double L, bool after_act) {
  const std::string l = fmt::format("{:.17g}", L);
  return ew_program_of(fmt::format("{1} * max(min(u, {0}), -{0})", l,
                                   after_act ? fmt::format("min(silu(g), {})", l)
                                             : fmt::format("silu(min(g, {}))", l)),
                       {"g", "u"});
}

status decoder::build() {
  g_.n_layer = static_cast<int>(c_.n_layer);
  TROUPE_TRY(make_act());
  if (c_.hc_mult > 0) return build_hc();
  if (c_.altup > 0) return build_altup();
  if (c_.shortcut_moe) return build_shortcut();
  if (c_.cycle_layers > 0) return build_cycles();
  if (c_.ngpt) return build_ngpt();
  if (c_.zamba) return build_zamba();
  if (c_.inkling) return build_inkling();
  if (c_.zaya) return build_zaya();
  if (c_.doge) return build_doge();
  if (c_.swiglu_dense) // (MiniMax M3: GPT-OSS's clamped SwiGLU on the dense MLPs and shared
                       // experts too, gate and up apart)
    TROUPE_TRY_SET(clamp_expr_,
                   ew_program_of(fmt::format("(max(min(u, {0}), -{0}) + 1) * min(g, {0}) * "
                                             "sigmoid({1} * min(g, {0}))",
                                             fmt::format("{:.17g}", c_.swiglu_limit),
                                             fmt::format("{:.17g}", c_.swiglu_alpha)),
                                 {"g", "u"}));
  TROUPE_TRY_ASSIGN(x0, embed());
  vid x = x0;
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    TROUPE_TRY_ASSIGN(y, layer(l, x));
    x = y;
    if (c_.ple_dim > 0) {
      TROUPE_TRY_ASSIGN(p, per_layer_input(l, x));
      x = builder(g_, l).add(x, p, "ple_residual");
    }
    if (c_.layer_scalar) { // the whole stream times the layer's scalar (Gemma 4)
      builder b(g_, l);
      TROUPE_TRY_ASSIGN(s, req(n_.layer_scalar, l, {1}));
      x = b.mul(x, s, "layer_scaled");
    }
    g_.residual.push_back(x);
  }
  return head(x);
}

status decoder::build_shortcut() {
  // the stream and the experts' output carried beside it, one value [T, 2 C]: the even layers
  // put their experts' there, the odd ones add it (and pass it on; the next even layer replaces
  // it)
  TROUPE_TRY_ASSIGN(e, embed());
  builder b0(g_, -1);
  vid x = b0.op(op::concat, {e, b0.scale(e, 0.0f, "shortcut_none")}, "shortcut_streams");
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    builder b(g_, l);
    carried_ = l % 2 ? stream_of(b, x, 1, "shortcut_in") : none;
    TROUPE_TRY_ASSIGN(y, layer(l, stream_of(b, x, 0, "stream_in")));
    x = b.op(op::concat, {y, l % 2 ? carried_ : shortcut_}, "shortcut_streams");
    g_.residual.push_back(x);
  }
  return head(x);
}

status decoder::build_cycles() {
  // (low, high) at a pass's bounds; within a pass, (the pass's stream, the stream it leaves
  // alone), so a pipeline may cut anywhere
  const int64_t C = c_.C, per = c_.cycle_layers, round = per * (c_.cycles_low + 1);
  TROUPE_TRY_ASSIGN(e, embed());
  builder b0(g_, -1);
  TROUPE_TRY_ASSIGN(z, req(n_.cycle_init, -1, {1, C})); // (added to every row)
  const vid low = b0.add(b0.scale(e, 0.0f, "cycle_none"), z, "cycle_low");
  vid x = b0.op(op::concat, {low, e}, "cycle_streams");
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    builder b(g_, l);
    const bool high = (l % round) / per == c_.cycles_low, first = l % per == 0,
               last = l % per == per - 1;
    const vid s0 = stream_of(b, x, 0, "stream_0"), s1 = stream_of(b, x, 1, "stream_1");
    // a pass's first layer: over low + high (the H stack's: high + low), leaving the other
    const vid in = first ? (high ? b.add(s1, s0, "cycle_in") : b.add(s0, s1, "cycle_in")) : s0;
    const vid other = first && high ? s0 : s1;
    TROUPE_TRY_ASSIGN(y0, layer(l, in));
    vid y = y0;
    // the pass closed by its stack's weightless norm (the last one's is the head's)
    if (last && l < g_.n_layer - 1)
      TROUPE_TRY_SET(y, norm(y, l, "", "", C, norm_kind::rms, "cycle_norm"));
    x = b.op(op::concat, {last && high ? other : y, last && high ? y : other}, "cycle_streams");
    g_.residual.push_back(x);
  }
  return head(x);
}

status decoder::make_act() {
  for (const auto& text : n_.layer_act) {
    auto p = kernels::parse_expression(text, {"x"});
    if (!p) return p.error();
    layer_act_.push_back(std::make_shared<kernels::ew_program>(std::move(*p)));
  }
  if (!layer_act_.empty() && static_cast<int64_t>(layer_act_.size()) != c_.n_layer)
    return make_error(errc::internal, "{}: {} layer activations for {} layers", m_.path,
                      layer_act_.size(), c_.n_layer);
  if (c_.act_quant) { // (as transformers: the scale in f32, its clamp at 1e-5, then x s rounded)
    TROUPE_TRY_SET(act_quant_, ew_program_of("min(max(round(x * (127 / max(m, 0.00001))), -128), "
                                             "127) / (127 / max(m, 0.00001))",
                                             {"x", "m"}));
    TROUPE_TRY_SET(act_step_, ew_program_of("max(m, 0.00001) / 127", {"m"}));
  }
  if (c_.act_expr.empty()) return {};
  auto p = kernels::parse_expression(c_.act_expr, {"x"});
  if (!p) {
    p = kernels::parse_expression(c_.act_expr, {"g", "u"});
    if (!p) return p.error();
    p->sources = 2; // the whole gating, over g and u
  }
  act_expr_ = std::make_shared<kernels::ew_program>(std::move(*p));
  return {};
}

std::pair<vid, vid> decoder::act_quant(builder& b, vid x, bool split, const std::string& what) {
  if (!c_.act_quant) return {x, none};
  kernels::op_params p;
  p.row_absmax = true;
  vid m = b.op(op::sum_rows, {x}, what + "_absmax", p);
  if (split) m = b.all_reduce(m, what + "_absmax_all", true);
  return {b.elementwise(act_quant_, {x, m}, what), b.elementwise(act_step_, {m}, what + "_step")};
}

expected<vid> decoder::embed() {
  const int64_t C = c_.C, V = c_.V;
  builder b(g_, -1);
  TROUPE_TRY_ASSIGN(tok, req(n_.tok_embd, -1, {V, C}, cut::out, axis::vocab));
  tok_ = tok;
  vid x = b.op(op::embedding, {tok, g_.input(input_kind::tokens)}, "tok_embd_out");
  if (c_.embed_scale != 0)
    x = b.scale(x,
                static_cast<float>(c_.embed_scale_rounded ? round_to(g_[tok].type, c_.embed_scale)
                                                          : c_.embed_scale),
                "embd_scaled");
  if (c_.learned_positions) {
    TROUPE_TRY_ASSIGN(pe,
                      req(n_.pos_embd, -1, {c_.position_rows > 0 ? c_.position_rows : c_.ctx, C}));
    const vid p = b.op(op::embedding, {pe, g_.input(input_kind::positions)}, "pos_embd_out");
    x = b.add(x, p, "embd_sum");
  }
  if (c_.embed_norm)
    TROUPE_TRY_SET(x, norm(x, -1, n_.embd_norm, n_.embd_norm_b, C, c_.norm, "embd_norm"));
  return x;
}

expected<decoder::proj> decoder::projections(int l) {
  const int64_t C = c_.C, H = c_.layer_heads(l), Hkv = c_.layer_kv_heads(l),
                D = c_.layer_head_dim(l);
  const axis kv_axis = kv_axis_of(l);
  weight_ref tr;
  tr.transposed = n_.transposed;
  if (c_.rope_sin_flipped && (!n_.wqkv.empty() || c_.attn_output_gate))
    return make_error(errc::unsupported,
                      "{}: RoPE by the negated angle with a fused qkv or a gated "
                      "q_proj is not supported",
                      m_.path);
  if (n_.wqkv.empty() && c_.attn_output_gate) {
    // q_proj holds each head's q rows, then its gate's: [H, 2, D]
    weight_ref rq = head_rows(2 * D, 0, D), rg = head_rows(2 * D, D, D);
    rq.transposed = rg.transposed = n_.transposed;
    TROUPE_TRY_ASSIGN(wq, req(n_.wq, l, {H * D, C}, cut::out, axis::heads, D, rq));
    TROUPE_TRY_ASSIGN(wg, req(n_.wq, l, {H * D, C}, cut::out, axis::heads, D, rg));
    TROUPE_TRY_ASSIGN(wk, req(n_.wk, l, {Hkv * D, C}, cut::out, axis::kv_heads, D, tr));
    TROUPE_TRY_ASSIGN(wv, req(n_.wv, l, {Hkv * D, C}, cut::out, axis::kv_heads, D, tr));
    TROUPE_TRY_ASSIGN(bq, opt("", l, {H * D})); // no biases
    TROUPE_TRY_ASSIGN(bk, opt("", l, {Hkv * D}));
    TROUPE_TRY_ASSIGN(bv, opt("", l, {Hkv * D}));
    return proj{wq, wk, wv, bq, bk, bv, wg};
  }
  if (n_.wqkv.empty()) {
    // (Gemma 4's full layers with kv_shared_kv: no v_proj, the values are k's projection)
    const bool v_is_k = c_.kv_shared_kv && c_.layer_full_geometry(l);
    // (RoPE by the negated angle: q's and k's rows with each head's halves swapped)
    weight_ref rq = tr, rk = tr, rbq, rbk;
    if (c_.rope_sin_flipped) {
      rq.segments = rbq.segments = swapped_halves(H, D);
      rk.segments = rbk.segments = swapped_halves(Hkv, D);
    }
    TROUPE_TRY_ASSIGN(wq, req(n_.wq, l, {H * D, C}, cut::out, axis::heads, D, rq));
    TROUPE_TRY_ASSIGN(wk, req(n_.wk, l, {Hkv * D, C}, cut::out, kv_axis, D, rk));
    TROUPE_TRY_ASSIGN(wv, v_is_k ? expected<vid>(none)
                                 : req(n_.wv, l, {Hkv * D, C}, cut::out, kv_axis, D, tr));
    TROUPE_TRY_ASSIGN(bq, opt(n_.bq, l, {H * D}, cut::out, axis::heads, D, rbq));
    TROUPE_TRY_ASSIGN(bk, opt(n_.bk, l, {Hkv * D}, cut::out, kv_axis, D, rbk));
    TROUPE_TRY_ASSIGN(bv, opt(v_is_k ? "" : n_.bv, l, {Hkv * D}, cut::out, kv_axis, D));
    vid wg = none; // a gate per head [H, C]: mul broadcasts each over its head's values
    if (!n_.attn_head_gate.empty())
      TROUPE_TRY_SET(wg, req(n_.attn_head_gate, l, {H, C}, cut::out, axis::heads, 1));
    else if (c_.attn_value_gate) // or one per value [H D, C] (AFMoE's gate_proj)
      TROUPE_TRY_SET(wg, req(n_.mla_gate, l, {H * D, C}, cut::out, axis::heads, D, tr));
    return proj{wq, wk, wv, bq, bk, bv, wg};
  }
  // rows of q, k and v in the fused tensor
  std::vector<std::pair<int64_t, int64_t>> sq, sk, sv;
  switch (n_.layout) {
  case qkv_layout::blocks:
    sq = {{0, H * D}};
    sk = {{H * D, Hkv * D}};
    sv = {{(H + Hkv) * D, Hkv * D}};
    break;
  case qkv_layout::per_head:
    if (Hkv != H)
      return make_error(errc::corrupt_file,
                        "{}: a per-head fused qkv needs as many KV heads as heads", m_.path);
    for (int64_t h = 0; h < H; ++h) {
      sq.emplace_back(h * 3 * D, D);
      sk.emplace_back(h * 3 * D + D, D);
      sv.emplace_back(h * 3 * D + 2 * D, D);
    }
    break;
  case qkv_layout::grouped: {
    const int64_t G = H / Hkv;
    for (int64_t j = 0; j < Hkv; ++j) {
      const int64_t base = j * (G + 2) * D;
      sq.emplace_back(base, G * D);
      sk.emplace_back(base + G * D, D);
      sv.emplace_back(base + (G + 1) * D, D);
    }
    break;
  }
  case qkv_layout::mp4_qvk: {
    const int64_t local = H * D / 4;
    if (Hkv != H || (H * D) % 4)
      return make_error(errc::corrupt_file,
                        "{}: CodeGen's fused qkv needs as many KV heads as "
                        "heads and a width divisible by 4",
                        m_.path);
    for (int64_t s = 0; s < 4; ++s) {
      sq.emplace_back(s * 3 * local, local);
      sv.emplace_back(s * 3 * local + local, local);
      sk.emplace_back(s * 3 * local + 2 * local, local);
    }
    break;
  }
  }
  auto part = [&](const std::string& name, const std::vector<std::pair<int64_t, int64_t>>& seg,
                  int64_t rows, axis ax, bool matrix, bool optional) -> expected<vid> {
    weight_ref ref;
    ref.segments = seg;
    ref.transposed = matrix && n_.transposed;
    std::vector<int64_t> dims = matrix ? std::vector<int64_t>{rows, C} : std::vector<int64_t>{rows};
    return optional ? opt(name, l, dims, cut::out, ax, D, ref)
                    : req(name, l, dims, cut::out, ax, D, ref);
  };
  TROUPE_TRY_ASSIGN(wq, part(n_.wqkv, sq, H * D, axis::heads, true, false));
  TROUPE_TRY_ASSIGN(wk, part(n_.wqkv, sk, Hkv * D, axis::kv_heads, true, false));
  TROUPE_TRY_ASSIGN(wv, part(n_.wqkv, sv, Hkv * D, axis::kv_heads, true, false));
  TROUPE_TRY_ASSIGN(bq, part(n_.bqkv, sq, H * D, axis::heads, false, true));
  TROUPE_TRY_ASSIGN(bk, part(n_.bqkv, sk, Hkv * D, axis::kv_heads, false, true));
  TROUPE_TRY_ASSIGN(bv, part(n_.bqkv, sv, Hkv * D, axis::kv_heads, false, true));
  return proj{wq, wk, wv, bq, bk, bv};
}

expected<vid> decoder::qk_norm(builder& b, int l, vid x, int64_t heads, axis ax, bool is_q) {
  const int64_t D = c_.layer_head_dim(l);
  const std::string& wn = is_q ? n_.q_norm : n_.k_norm;
  const std::string& bn = is_q ? n_.q_norm_b : n_.k_norm_b;
  const std::string what = is_q ? "q_norm" : "k_norm";
  switch (c_.qk_norm) {
  case qk_norm_kind::none:
    return x;
  case qk_norm_kind::head: // x: [T, heads, D]
    return norm(x, l, wn, bn, D, c_.qk_norm_type, what);
  case qk_norm_kind::head_plain: { // RMS over each head, no weight
    const vid ones = w_.constant(b.name(what) + ".ones", l, {D}, 1.0f);
    return b.norm(x, norm_type::rms, ones, none, static_cast<float>(c_.norm_eps), what);
  }
  case qk_norm_kind::head_weights: { // normalise each head, then the per-head weights
    const vid ones = w_.constant(b.name(what) + ".ones", l, {D}, 1.0f);
    const vid xn = b.norm(x, c_.qk_norm_type == norm_kind::rms ? norm_type::rms : norm_type::layer,
                          ones, none, static_cast<float>(c_.norm_eps), what + "_plain");
    const vid flat = b.view(xn, {-1}, what + "_flat");
    weight_ref ref;
    ref.add = static_cast<float>(c_.norm_add);
    TROUPE_TRY_ASSIGN(wt, req(wn, l, {heads * D}, cut::out, ax, D, ref));
    vid y = b.mul(flat, wt, what);
    if (!bn.empty()) {
      TROUPE_TRY_ASSIGN(bias, opt(bn, l, {heads * D}, cut::out, ax, D));
      if (!g_[bias].empty) y = b.add(y, bias, what + "_bias");
    }
    return b.view(y, {-1, D}, what + "_heads");
  }
  case qk_norm_kind::full: { // x: [T, heads * D]; RMS over every head of every rank
    const vid xn = rms_across_ranks(b, x, heads * D, static_cast<float>(c_.norm_eps), what);
    weight_ref ref;
    ref.add = static_cast<float>(c_.norm_add);
    TROUPE_TRY_ASSIGN(wt, req(wn, l, {heads * D}, cut::out, ax, D, ref));
    return b.mul(xn, wt, what);
  }
  }
  return x;
}

expected<vid> decoder::per_layer_input(int l, vid x) {
  builder b(g_, l);
  const int64_t C = c_.C, P = c_.ple_dim, V = c_.ple_vocab;
  const vid tokens = g_.input(input_kind::tokens);
  // the token's scaled embedding again (a row gather: each pipeline stage makes its own)
  vid e = b.op(op::embedding, {tok_, tokens}, "ple_embd");
  if (c_.embed_scale != 0)
    e = b.scale(e,
                static_cast<float>(c_.embed_scale_rounded ? round_to(g_[tok_].type, c_.embed_scale)
                                                          : c_.embed_scale),
                "ple_embd_scaled");
  // this layer's slice of the projection, times 1/sqrt(C), RMS-normed over P
  weight_ref rows = row_range(static_cast<int64_t>(l) * P, P);
  TROUPE_TRY_ASSIGN(wp, req(n_.ple_proj, -1, {P, C}, cut::none, axis::none, 1, rows));
  g_[wp].layer = l;
  const vid pr =
      b.scale(b.linear(e, wp, none, "ple_proj"),
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(C))), "ple_proj_scaled");
  if (ple_norm_ == none) { // one weight for every layer's norm (held once)
    weight_ref ref;
    ref.add = static_cast<float>(c_.norm_add);
    TROUPE_TRY_SET(ple_norm_, req(n_.ple_proj_norm, -1, {P}, cut::none, axis::none, 1, ref));
  }
  const vid pn =
      b.norm(pr, norm_type::rms, ple_norm_, none, static_cast<float>(c_.norm_eps), "ple_proj_norm");
  // plus the table's columns of this layer for the token, times sqrt(P); / sqrt(2)
  weight_ref cols;
  cols.col0 = static_cast<int64_t>(l) * P, cols.cols = P;
  const bool vocab_cut = V == c_.V; // vocabulary-parallel like the embeddings, else whole
  TROUPE_TRY_ASSIGN(wt, req(n_.ple_table, -1, {V, P}, vocab_cut ? cut::out : cut::none,
                            vocab_cut ? axis::vocab : axis::none, 1, cols));
  g_[wt].layer = l;
  // a table narrower than the vocabulary (Gemma 3n's 262144 of 262400): the ids past it read
  // row 0, as transformers' get_per_layer_inputs maps them
  kernels::op_params tp;
  tp.ids_row0 = !vocab_cut;
  vid tk = b.op(op::embedding, {wt, tokens}, "ple_tok", tp);
  tk = b.scale(tk, static_cast<float>(round_to(g_[wt].type, std::sqrt(static_cast<double>(P)))),
               "ple_tok_scaled");
  const vid pl =
      b.scale(b.add(pn, tk, "ple_sum"), static_cast<float>(1.0 / std::sqrt(2.0)), "ple_input");
  // norm(W_up (act(W_gate x) * p_l))
  TROUPE_TRY_ASSIGN(wg, req(n_.ple_gate, l, {P, C}));
  TROUPE_TRY_ASSIGN(wu, req(n_.ple_up, l, {C, P}));
  const op act = act_op();
  const vid gt = b.unary(act, b.linear(x, wg, none, "ple_gate"), "ple_gate_act");
  const vid up = b.linear(b.mul(gt, pl, "ple_gated"), wu, none, "ple_up");
  return norm(up, l, n_.ple_norm, "", C, c_.norm, "ple_post_norm");
}

attention_spec decoder::layer_spec(int l) const {
  attention_spec s;
  s.heads = c_.layer_heads(l);
  s.gate_softplus = c_.attn_gate_softplus;
  s.kv_heads = c_.layer_kv_heads(l);
  s.head_dim = c_.layer_head_dim(l);
  s.kv_axis = kv_axis_of(l);
  double scale = c_.attention_scale();
  if (c_.attn_scale_by_layer) scale /= static_cast<double>(l + 1);
  if (!c_.layer_rope(l)) scale *= c_.nope_scale_mult; // (Ergo's global layers)
  s.scale = static_cast<float>(scale);
  s.window = c_.layer_window(l);
  s.chunk = c_.layer_chunk(l);
  if (c_.layer_tempered(l)) {
    s.temp_floor = c_.attn_temp_floor;
    s.temp_scale = static_cast<float>(c_.attn_temp_scale);
    s.temp_offset = c_.attn_temp_offset;
  }
  s.softcap = static_cast<float>(c_.attn_softcap);
  s.alibi_max_bias = static_cast<float>(c_.alibi_max_bias);
  s.rope = c_.layer_rope(l) && c_.alibi_max_bias == 0;
  s.rope_params = c_.has_rope_local && s.window > 0 ? c_.rope_local : c_.rope;
  return s;
}

vid decoder::layer_state(int64_t layer, const char* what) const {
  const std::string name = fmt::format("blk.{}.{}", layer, what);
  for (size_t i = 0; i < g_.values.size(); ++i)
    if (g_.values[i].kind == value_kind::state && g_.values[i].name == name)
      return static_cast<vid>(i);
  return none;
}

expected<vid> decoder::shared_attention(int l, vid h, int64_t source) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.layer_heads(l), D = c_.layer_head_dim(l);
  attention_spec s = layer_spec(l);
  s.k_cache = layer_state(source, "k_cache"), s.v_cache = layer_state(source, "v_cache");
  if (s.k_cache == none || s.v_cache == none || c_.qk_norm != qk_norm_kind::head ||
      c_.clip_qkv > 0 || !n_.wqkv.empty())
    return make_error(errc::internal,
                      "{}: layer {} shares the KV cache of layer {}, which has none", m_.path, l,
                      source);
  TROUPE_TRY_ASSIGN(wq, req(n_.wq, l, {H * D, C}, cut::out, axis::heads, D));
  TROUPE_TRY_ASSIGN(bq, opt(n_.bq, l, {H * D}, cut::out, axis::heads, D));
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * D}, cut::in, axis::heads, D));
  TROUPE_TRY_ASSIGN(bo, opt(n_.bo, l, {C}));
  vid q = b.view(b.linear(h, wq, bq, "q"), {-1, D}, "q_heads");
  TROUPE_TRY_SET(q, qk_norm(b, l, q, H, axis::heads, true));
  return b.attend(s, {q, none, none}, wo, bo);
}

expected<vid> decoder::attention(int l, vid h) {
  if (c_.kv_lora > 0 && !c_.layer_linear(l)) return mla(l, h); // (its own cache or another's)
  if (const int64_t src = c_.layer_kv_source(l); src != l) return shared_attention(l, h, src);
  if (c_.diff_attn) return diff_attention(l, h);
  if (c_.layer_linear(l) && c_.ssm_dt_rank > 0) return mamba1(l, h);
  if (c_.layer_linear(l))
    return c_.lightning    ? lightning(l, h)
           : c_.mlstm      ? mlstm(l, h)
           : c_.rg_lru     ? rg_lru(l, h)
           : c_.mamba      ? mamba(l, h)
           : c_.short_conv ? short_conv(l, h)
           : c_.kda        ? kda(l, h)
                           : delta_net(l, h);
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.layer_heads(l), Hkv = c_.layer_kv_heads(l),
                D = c_.layer_head_dim(l);
  const axis kv_axis = kv_axis_of(l);
  TROUPE_TRY_ASSIGN(p, projections(l));
  weight_ref tr;
  tr.transposed = n_.transposed;
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * D}, cut::in, axis::heads, D, tr));
  TROUPE_TRY_ASSIGN(bo, opt(n_.bo, l, {C}));
  vid step = none; // (BitNet: h rounded, the step of its rows)
  std::tie(h, step) = act_quant(b, h, false, "attn_in_q");
  vid q = b.linear(h, p.wq, p.bq, "q", step);
  vid k = b.linear(h, p.wk, p.bk, "k", step);
  vid v = p.wv == none ? k : b.linear(h, p.wv, p.bv, "v", step); // (none: the keys' projection)
  if (c_.clip_qkv > 0) {
    const auto cl = static_cast<float>(c_.clip_qkv);
    q = b.clamp(q, cl, "q_clip");
    k = b.clamp(k, cl, "k_clip");
    v = b.clamp(v, cl, "v_clip");
  }
  if (c_.qk_norm == qk_norm_kind::full) {
    TROUPE_TRY_SET(q, qk_norm(b, l, q, H, axis::heads, true));
    TROUPE_TRY_SET(k, qk_norm(b, l, k, Hkv, kv_axis, false));
  }
  q = b.view(q, {-1, D}, "q_heads");
  k = b.view(k, {-1, D}, "k_heads");
  v = b.view(v, {-1, D}, "v_heads");
  // (before RoPE: where a family norms after it, as Llama 4 does, the same, since a rotation
  // of pairs keeps each head's sum of squares)
  if ((c_.qk_norm == qk_norm_kind::head || c_.qk_norm == qk_norm_kind::head_weights ||
       c_.qk_norm == qk_norm_kind::head_plain) &&
      (!c_.qk_norm_rope_layers || c_.layer_rope(l)) && !c_.qk_norm_after_rope) {
    TROUPE_TRY_SET(q, qk_norm(b, l, q, H, axis::heads, true));
    TROUPE_TRY_SET(k, qk_norm(b, l, k, Hkv, kv_axis, false));
  }
  if (c_.v_norm) { // RMS over each value head, no weight (Gemma 4)
    const vid ones = w_.constant(b.name("v_norm") + ".ones", l, {D}, 1.0f);
    v = b.norm(v, norm_type::rms, ones, none, static_cast<float>(c_.norm_eps), "v_norm");
  }
  attention_spec s = layer_spec(l);
  if (c_.qk_norm_after_rope) { // the attention normalises each rotated head (Hunyuan)
    bool biased = false;       // (none is implemented after RoPE: one in the checkpoint refuses)
    for (const std::string* bn : {&n_.q_norm_b, &n_.k_norm_b})
      if (!bn->empty()) {
        TROUPE_TRY_ASSIGN(bias, opt(*bn, l, {D}));
        biased = biased || !g_[bias].empty;
      }
    if (c_.qk_norm != qk_norm_kind::head || c_.qk_norm_type != norm_kind::rms || !s.rope ||
        c_.norm_add != 0 || biased)
      return make_error(errc::internal, "{}: a q/k norm after RoPE is an RMS norm of each head",
                        m_.path);
    TROUPE_TRY_ASSIGN(wq, req(n_.q_norm, l, {D}));
    TROUPE_TRY_ASSIGN(wk, req(n_.k_norm, l, {D}));
    s.q_norm = wq, s.k_norm = wk;
    s.qk_norm_eps = static_cast<float>(c_.norm_eps);
  }
  if (c_.attn_sinks && (!c_.sinks_windowed_only || c_.layer_window(l) > 0))
    TROUPE_TRY_SET(s.sinks, req(n_.attn_sinks, l, {H}, cut::out, axis::heads));
  if (p.wgate != none) {
    vid gb = none; // (Beam: a bias per head on the value gate, each head's D values alike)
    if (!n_.attn_gate_bias.empty()) {
      weight_ref rep;
      for (int64_t hh = 0; hh < H; ++hh) rep.segments.insert(rep.segments.end(), D, {hh, 1});
      TROUPE_TRY_SET(gb, req(n_.attn_gate_bias, l, {H * D}, cut::out, axis::heads, D, rep));
    }
    s.gate = b.linear(h, p.wgate, gb, "q_gate");
  }
  if (c_.nope_q_base > 0 && !s.rope) { // (Beam's NoPE layers: q times (1 + (p + 1) / base)^power)
    kernels::op_params pp;
    pp.temp_floor = static_cast<int64_t>(c_.nope_q_base);
    pp.temp_offset = 1;
    pp.temp_scale = static_cast<float>(c_.nope_q_power);
    q = b.op(op::pos_scale, {q, g_.input(input_kind::positions), none, none}, "q_pos_scaled", pp);
  }
  if (c_.layer_sparse_attn(l)) TROUPE_TRY_SET(s.select, block_indexer(l, h, kv_axis));
  if (c_.sub_norms || c_.act_quant) { // (BitNet: over every head, each rank holding some)
    vid ws = none;
    if (c_.sub_norms)
      TROUPE_TRY_SET(ws, req(n_.attn_sub_norm, l, {H * D}, cut::out, axis::heads, D));
    const auto eps = static_cast<float>(c_.norm_eps);
    s.before_out = [this, ws, eps, W = H * D](builder& bb, vid y) {
      if (ws != none) y = bb.mul(rms_across_ranks(bb, y, W, eps, "attn_sub"), ws, "attn_sub_norm");
      return act_quant(bb, y, true, "attn_out_q");
    };
  }
  return b.attend(s, {q, k, v}, wo, bo);
}

expected<vid> decoder::norm_gate(int l, vid y, const std::string& down, const std::string& up,
                                 const std::string& what) {
  // y sigmoid(W_up silu(W_down y)): a low-rank gate of the norm's own output, whole on every rank
  builder b(g_, l);
  const int64_t C = c_.C, r = c_.gated_norm_rank;
  TROUPE_TRY_ASSIGN(wd, req(down, l, {r, C}));
  TROUPE_TRY_ASSIGN(wu, req(up, l, {C, r}));
  const vid s = b.unary(op::silu, b.linear(y, wd, none, what + "_gate_down"), what + "_gate_act");
  const vid gate = b.unary(op::sigmoid, b.linear(s, wu, none, what + "_gate_up"), what + "_gate");
  return b.mul(y, gate, what + "_gated");
}

expected<vid> decoder::nas_layer(int l, vid x) {
  builder b(g_, l);
  const int64_t C = c_.C;
  // a linear [C, C] map, whole on every rank: its output is complete there, no partial sum
  auto linear = [&](vid h, const std::string& w, const std::string& what) -> expected<vid> {
    TROUPE_TRY_ASSIGN(wt, req(w, l, {C, C}));
    return b.linear(h, wt, none, what);
  };
  if (c_.layer_has_mixer(l)) {
    TROUPE_TRY_ASSIGN(h, norm(x, l, n_.attn_norm, "", C, c_.norm, "attn_norm"));
    TROUPE_TRY_ASSIGN(a, c_.layer_linear_attn(l) ? linear(h, n_.attn_linear, "attn_linear")
                                                 : attention(l, h));
    x = b.add(x, a, "attn_residual");
  }
  if (c_.layer_has_ffn(l)) {
    TROUPE_TRY_ASSIGN(h, norm(x, l, n_.ffn_norm, "", C, c_.norm, "ffn_norm"));
    TROUPE_TRY_ASSIGN(f,
                      c_.layer_linear_ffn(l) ? linear(h, n_.ffn_linear, "ffn_linear") : ffn(l, h));
    x = b.add(x, f, "ffn_residual");
  }
  return x;
}

expected<vid> decoder::layer(int l, vid x) {
  if (c_.nas_blocks) return nas_layer(l, x);
  builder b(g_, l);
  const int64_t C = c_.C;
  auto times = [&](vid v, double s, const char* what) {
    return s != 1 ? b.scale(v, static_cast<float>(s), what) : v;
  };
  auto scaled = [&](vid v, const char* what) { return times(v, c_.residual_scale, what); };
  // (OLMo hybrid: its linear layers pre-norm, by their own names)
  const bool pre_linear = c_.linear_pre_norm && c_.layer_linear(l);
  const std::string& attn_norm = pre_linear ? n_.lin_attn_norm : n_.attn_norm;
  const std::string& ffn_norm = pre_linear ? n_.lin_ffn_norm : n_.ffn_norm;
  if (c_.norms == norm_place::post && !pre_linear) { // OLMo 2: x += N(attn(x)); x += N(ffn(x))
    TROUPE_TRY_ASSIGN(a, attention(l, x));
    TROUPE_TRY_ASSIGN(an, norm(a, l, n_.attn_norm, n_.attn_norm_b, C, c_.norm, "attn_post_norm"));
    x = b.add(x, scaled(an, "attn_scaled"), "attn_residual");
    TROUPE_TRY_ASSIGN(f, ffn(l, x));
    TROUPE_TRY_ASSIGN(fn, norm(f, l, n_.ffn_norm, n_.ffn_norm_b, C, c_.norm, "ffn_post_norm"));
    return b.add(x, scaled(fn, "ffn_scaled"), "ffn_residual");
  }
  vid h = x; // (ModernBERT's first layer attends over the stream as it is)
  if (!(c_.first_attn_unnormed && l == 0))
    TROUPE_TRY_SET(h, norm(x, l, attn_norm, n_.attn_norm_b, C, c_.norm, "attn_norm"));
  if (c_.gated_norm_rank > 0) // (A.X K2: every layer's)
    TROUPE_TRY_SET(h, norm_gate(l, h, n_.attn_norm_gate_down, n_.attn_norm_gate_up, "attn_norm"));
  if (c_.normed_residual) { // MiniMax: the residual is the normed stream, both terms scaled
    const bool lin = c_.layer_linear(l);
    TROUPE_TRY_ASSIGN(a, attention(l, h));
    x = b.add(times(h, lin ? c_.lin_alpha : c_.full_alpha, "attn_res_scaled"),
              times(a, lin ? c_.lin_beta : c_.full_beta, "attn_scaled"), "attn_residual");
    TROUPE_TRY_ASSIGN(h2, norm(x, l, n_.ffn_norm, n_.ffn_norm_b, C, c_.norm, "ffn_norm"));
    TROUPE_TRY_ASSIGN(f, ffn(l, h2));
    return b.add(times(h2, c_.ffn_alpha, "ffn_res_scaled"), times(f, c_.ffn_beta, "ffn_scaled"),
                 "ffn_residual");
  }
  if (c_.ssm_parallel) { // Falcon-H1: x += out_m mamba(in_m h) + out_a attn(in_a h); x += ffn
    TROUPE_TRY_ASSIGN(m, mamba(l, times(h, c_.ssm_in_scale, "ssm_in_scaled")));
    TROUPE_TRY_ASSIGN(a, attention(l, times(h, c_.attn_in_scale, "attn_in_scaled")));
    const vid both = b.add(times(m, c_.ssm_out_scale, "ssm_out_scaled"),
                           times(a, c_.attn_out_scale, "attn_out_scaled"), "mixers");
    x = b.add(x, both, "attn_residual");
    TROUPE_TRY_ASSIGN(h2, norm(x, l, n_.ffn_norm, n_.ffn_norm_b, C, c_.norm, "ffn_norm"));
    TROUPE_TRY_ASSIGN(f, ffn(l, h2));
    return b.add(x, times(f, c_.ffn_down_scale, "ffn_down_scaled"), "ffn_residual");
  }
  if (!c_.layer_has_mixer(l)) { // a block of the FFN alone (Nemotron-H's), under the one norm
    TROUPE_TRY_ASSIGN(f, ffn(l, h));
    return b.add(x, scaled(f, "ffn_scaled"), "ffn_residual");
  }
  switch (c_.residual) {
  case residual_kind::parallel: {
    TROUPE_TRY_ASSIGN(a, attention(l, h));
    TROUPE_TRY_ASSIGN(f, ffn(l, h));
    const vid xa = b.add(x, scaled(a, "attn_scaled"), "attn_residual");
    return b.add(xa, scaled(f, "ffn_scaled"), "ffn_residual");
  }
  case residual_kind::parallel_two_norms: {
    TROUPE_TRY_ASSIGN(h2, norm(x, l, n_.ffn_norm, n_.ffn_norm_b, C, c_.norm, "ffn_norm"));
    TROUPE_TRY_ASSIGN(a, attention(l, h));
    TROUPE_TRY_ASSIGN(f, ffn(l, h2));
    const vid xa = b.add(x, scaled(a, "attn_scaled"), "attn_residual");
    return b.add(xa, scaled(f, "ffn_scaled"), "ffn_residual");
  }
  case residual_kind::sequential:
    break;
  }
  TROUPE_TRY_ASSIGN(a0, attention(l, h));
  vid a = a0;
  if (c_.norms == norm_place::sandwich)
    TROUPE_TRY_SET(a, norm(a, l, n_.post_attn_norm, "", C, c_.norm, "attn_post_norm"));
  // (Beam: the residual's k-th add, x sqrt((k - 1) / k) + a / sqrt(k), k = 2 (l + 1), then + 1)
  auto residual = [&](vid r, vid y, int64_t k, const char* sc,
                      const std::string& what) -> expected<vid> {
    if (c_.residual_gates) { // (Ergo: y s + x sqrt(1 - s^2), s a vector [C])
      const bool attn = what == "attn_residual";
      TROUPE_TRY_ASSIGN(branch, req(attn ? n_.attn_res_branch : n_.ffn_res_branch, l, {1, C}));
      TROUPE_TRY_ASSIGN(keep_of, ew_program_of("sqrt(1 - s * s)", {"s"}));
      const vid keep = b.elementwise(std::move(keep_of), {branch}, what + "_keep");
      return b.add(b.mul(y, branch, what + "_y"), b.mul(r, keep, what + "_r"), what);
    }
    if (!c_.depth_scaled_residual) return b.add(r, scaled(y, sc), what);
    const double kd = static_cast<double>(k);
    return b.add(b.scale(r, static_cast<float>(std::sqrt((kd - 1) / kd)), what + "_r"),
                 b.scale(y, static_cast<float>(1 / std::sqrt(kd)), what + "_y"), what);
  };
  TROUPE_TRY_SET(x, residual(x, a, 2 * (l + 1), "attn_scaled", "attn_residual"));
  if (!c_.layer_has_ffn(l)) return x; // a block of the mixer alone (Mamba2)
  vid f = none;
  if (c_.moe_beside_mlp && c_.layer_moe(l)) {
    TROUPE_TRY_SET(f, mlp_and_experts(l, x));
  } else {
    // (A.X K2: gated before the experts, a plain norm of another name before a dense MLP)
    const bool gated = c_.gated_norm_rank > 0 && c_.layer_moe(l);
    TROUPE_TRY_ASSIGN(h2, norm(x, l, gated ? n_.ffn_norm_gated : ffn_norm, n_.ffn_norm_b, C,
                               c_.norm, "ffn_norm"));
    if (gated)
      TROUPE_TRY_SET(h2, norm_gate(l, h2, n_.ffn_norm_gate_down, n_.ffn_norm_gate_up, "ffn_norm"));
    TROUPE_TRY_SET(f, ffn(l, h2));
    if (c_.shortcut_moe && l % 2 == 0) TROUPE_TRY_SET(shortcut_, moe(l, h2)); // (LongCat)
  }
  if (c_.norms == norm_place::sandwich || (c_.post_moe_norm && c_.layer_moe(l)))
    TROUPE_TRY_SET(f, norm(f, l, n_.post_ffn_norm, "", C, c_.norm, "ffn_post_norm"));
  TROUPE_TRY_ASSIGN(out, residual(x, f, 2 * (l + 1) + 1, "ffn_scaled", "ffn_residual"));
  if (c_.shortcut_moe && l % 2) return b.add(out, carried_, "shortcut_residual");
  return out;
}

status decoder::head(vid x) {
  const int64_t C = c_.C, V = c_.V;
  const int L = g_.n_layer;
  builder b(g_, L);
  vid rows = b.op(op::embedding, {x, g_.input(input_kind::logit_rows)}, "rows");
  if (c_.hc_mult > 0) { // the streams collapsed by the head's own weights
    TROUPE_TRY_ASSIGN(hm,
                      hyper(L, rows, n_.hc_head_fn, n_.hc_head_base, n_.hc_head_scale, "hc_head"));
    rows = hm.in;
  }
  if (c_.altup > 0) TROUPE_TRY_SET(rows, altup_collapse(rows));
  if (c_.shortcut_moe || c_.zamba || c_.zaya || c_.loop_layers > 0) // (the stream, not what
                                                                    // rides beside)
    rows = stream_of(b, rows, 0, "rows_stream");
  if (c_.cycle_layers > 0) rows = stream_of(b, rows, 1, "rows_high"); // (HRM-Text)
  vid hn = none;
  if (c_.ngpt) // (Dory: weightless, to the unit sphere)
    hn = l2_norm(b, rows, C, "output_norm");
  else
    TROUPE_TRY_SET(hn, norm(rows, L, n_.out_norm, n_.out_norm_b, C, c_.norm, "output_norm"));
  if (c_.head_transform) { // (ModernBERT's prediction head: dense, activation, norm)
    TROUPE_TRY_ASSIGN(hw, req(n_.head_dense, L, {C, C}));
    TROUPE_TRY_ASSIGN(hb, opt(n_.head_dense_b, L, {C}));
    const vid t = b.unary(act_op(c_.head_act), b.linear(hn, hw, hb, "head_dense"), "head_act");
    TROUPE_TRY_SET(hn, norm(t, L, n_.head_norm, n_.head_norm_b, C, c_.norm, "head_norm"));
  }
  vid out_w = tok_;
  if (!c_.tie_embeddings) {
    TROUPE_TRY_ASSIGN(o, req(n_.lm_head, L, {V, C}, cut::out, axis::vocab));
    out_w = o;
  }
  TROUPE_TRY_ASSIGN(ob, opt(n_.lm_head_b, L, {V}, cut::out, axis::vocab));
  vid lg = b.op(op::matmul, {hn, out_w, g_[ob].empty ? none : ob}, "logits");
  if (c_.logit_scale != 1) lg = b.scale(lg, static_cast<float>(c_.logit_scale), "logits_scaled");
  if (c_.ngpt) { // (Dory: times logit_scale / init per token id, whole on every rank: TP gathers
                 // the vocabulary's logits right after the matmul)
    TROUPE_TRY_ASSIGN(ls, ngpt_scale(b, n_.ngpt_logit_scale, L, V,
                                     fmt::format("x * {:.17g}", 1.0 / c_.ngpt_init), cut::none,
                                     axis::none, 1, "logit_scale"));
    lg = b.mul(lg, ls, "logits_scaled");
  }
  lg = softcap(b, lg, static_cast<float>(c_.final_softcap), "logits");
  g_.logits = lg;
  g_[lg].output = true;
  return {};
}

} // namespace detail

using detail::decoder;

double round_to(dtype t, double v) {
  if (t == dtype::f32) return static_cast<float>(v);
  if (t != dtype::f16 && t != dtype::bf16) return v;
  float f = static_cast<float>(v), back = 0;
  uint16_t h = 0;
  from_f32(t, &f, &h, 1);
  to_f32(t, &h, &back, 1);
  return back;
}

decoder_names hf_llama_layout(bool qkv_bias, bool o_bias, bool mlp_bias) {
  decoder_names n;
  const std::string a = "model.layers.{}.self_attn.", f = "model.layers.{}.mlp.";
  n.tok_embd = "model.embed_tokens.weight";
  n.out_norm = "model.norm.weight";
  n.lm_head = "lm_head.weight";
  n.attn_norm = "model.layers.{}.input_layernorm.weight";
  n.ffn_norm = "model.layers.{}.post_attention_layernorm.weight";
  n.wq = a + "q_proj.weight", n.wk = a + "k_proj.weight", n.wv = a + "v_proj.weight";
  n.wo = a + "o_proj.weight";
  if (qkv_bias) n.bq = a + "q_proj.bias", n.bk = a + "k_proj.bias", n.bv = a + "v_proj.bias";
  if (o_bias) n.bo = a + "o_proj.bias";
  n.q_norm = a + "q_norm.weight", n.k_norm = a + "k_norm.weight";
  n.w_gate = f + "gate_proj.weight", n.w_up = f + "up_proj.weight";
  n.w_down = f + "down_proj.weight";
  if (mlp_bias)
    n.b_gate = f + "gate_proj.bias", n.b_up = f + "up_proj.bias", n.b_down = f + "down_proj.bias";
  return n;
}

decoder_names gguf_layout(const model_source& m) {
  decoder_names n;
  const std::string b = "blk.{}.";
  n.tok_embd = "token_embd.weight";
  n.pos_embd = "position_embd.weight";
  n.embd_norm = "token_embd_norm.weight", n.embd_norm_b = "token_embd_norm.bias";
  n.out_norm = "output_norm.weight", n.out_norm_b = "output_norm.bias";
  n.lm_head = "output.weight", n.lm_head_b = "output.bias";
  n.attn_norm = b + "attn_norm.weight", n.attn_norm_b = b + "attn_norm.bias";
  n.ffn_norm = b + "ffn_norm.weight", n.ffn_norm_b = b + "ffn_norm.bias";
  n.post_attn_norm = b + "post_attention_norm.weight";
  n.post_ffn_norm = b + "post_ffw_norm.weight";
  n.wq = b + "attn_q.weight", n.wk = b + "attn_k.weight", n.wv = b + "attn_v.weight";
  n.bq = b + "attn_q.bias", n.bk = b + "attn_k.bias", n.bv = b + "attn_v.bias";
  n.wo = b + "attn_output.weight", n.bo = b + "attn_output.bias";
  n.q_norm = b + "attn_q_norm.weight", n.k_norm = b + "attn_k_norm.weight";
  n.q_norm_b = b + "attn_q_norm.bias", n.k_norm_b = b + "attn_k_norm.bias";
  n.w_gate = b + "ffn_gate.weight", n.w_up = b + "ffn_up.weight";
  n.w_down = b + "ffn_down.weight";
  n.b_gate = b + "ffn_gate.bias", n.b_up = b + "ffn_up.bias", n.b_down = b + "ffn_down.bias";
  if (m.tensors->contains("blk.0.attn_qkv.weight")) {
    n.wq.clear(), n.wk.clear(), n.wv.clear(), n.bq.clear(), n.bk.clear(), n.bv.clear();
    n.wqkv = b + "attn_qkv.weight", n.bqkv = b + "attn_qkv.bias";
    n.layout = qkv_layout::blocks;
  }
  n.optional_biases = true;
  return n;
}

status build_decoder(const model_source& m, const decoder_names& n, graph::graph& g) {
  decoder d(m, n, g);
  return d.build();
}

} // namespace troupe::arch
