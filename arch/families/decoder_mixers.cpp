// decoder_mixers.cpp: the recurrent mixers of the decoder builder (decoder_build.hpp), each
// run on the layers model_config::linear_layers marks (or beside attention: Falcon-H1): the
// gated DeltaNet, LFM2's gated short convolution, Mamba-2's and Mamba-1's selective scans, Kimi's
// KDA, MiniMax's lightning attention (Mamba-2's scan with a unit step) and Griffin's RG-LRU
// block (lru_scan). Each keeps its state
// per sequence in the executor's recurrent state slots.
// Tests: tests/exec/forward_test.cpp and pipeline_test (the families' fixtures), op cases.
#include "arch/families/decoder_build.hpp"

namespace troupe::arch::detail {

// Gated DeltaNet (Qwen3.5, Qwen3-Next): q, k, v each through its channels of the short causal
// convolution (and SiLU), the gated delta rule over the sequence's recurrent memory, an RMS
// norm per value head times silu(z), out_proj. TP cuts key and value heads (a key head and
// the value heads that read it stay together).
expected<vid> decoder::delta_net(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, Hk = c_.lin_k_heads, Hv = c_.lin_v_heads, Dk = c_.lin_k_dim,
                Dv = c_.lin_v_dim, K = c_.lin_conv, Kd = Hk * Dk, Vd = Hv * Dv;
  const auto rows = row_range;
  // rows [first, + count) of every key head's group of `stride` rows
  auto grouped = [Hk](int64_t stride, int64_t first, int64_t count) {
    weight_ref r;
    for (int64_t g = 0; g < Hk; ++g) r.segments.emplace_back(g * stride + first, count);
    return r;
  };
  // tiled value heads read every key head: q and k whole on every rank
  const axis ak = c_.lin_tiled ? axis::none : axis::lin_k_heads, av = axis::lin_v_heads;
  const cut ck_cut = c_.lin_tiled ? cut::none : cut::out;
  const bool fused = !n_.lin_qkvz.empty(), fused_ba = !n_.lin_ba.empty();
  const int64_t rep = Hv / Hk, gs = 2 * Dk + 2 * rep * Dv; // value heads, rows per group
  const std::string& nqkv = fused ? n_.lin_qkvz : n_.lin_qkv;
  const std::string& nz = fused ? n_.lin_qkvz : n_.lin_z;
  const std::string& na = fused_ba ? n_.lin_ba : n_.lin_a;
  const std::string& nb = fused_ba ? n_.lin_ba : n_.lin_b;
  // q, k or v: its own tensor (OLMo hybrid), rows of each key head's group of the fused
  // in_proj_qkvz (Qwen3-Next), or rows of in_proj_qkv
  const bool apart = !n_.lin_q.empty();
  auto qkv_part = [&](const std::string& own, weight_ref in_group, weight_ref in_rows) {
    return apart ? std::pair{own, weight_ref{}} : std::pair{nqkv, fused ? in_group : in_rows};
  };
  const auto [nq, rq] = qkv_part(n_.lin_q, grouped(gs, 0, Dk), rows(0, Kd));
  const auto [nk, rk] = qkv_part(n_.lin_k, grouped(gs, Dk, Dk), rows(Kd, Kd));
  const auto [nv, rv] = qkv_part(n_.lin_v, grouped(gs, 2 * Dk, rep * Dv), rows(2 * Kd, Vd));
  TROUPE_TRY_ASSIGN(wq, req(nq, l, {Kd, C}, ck_cut, ak, Dk, rq));
  TROUPE_TRY_ASSIGN(wk, req(nk, l, {Kd, C}, ck_cut, ak, Dk, rk));
  TROUPE_TRY_ASSIGN(wv, req(nv, l, {Vd, C}, cut::out, av, Dv, rv));
  TROUPE_TRY_ASSIGN(cq, req(n_.lin_conv, l, {Kd, K}, ck_cut, ak, Dk, rows(0, Kd)));
  TROUPE_TRY_ASSIGN(ck, req(n_.lin_conv, l, {Kd, K}, ck_cut, ak, Dk, rows(Kd, Kd)));
  TROUPE_TRY_ASSIGN(cv, req(n_.lin_conv, l, {Vd, K}, cut::out, av, Dv, rows(2 * Kd, Vd)));
  TROUPE_TRY_ASSIGN(wz, req(nz, l, {Vd, C}, cut::out, av, Dv,
                            fused ? grouped(gs, 2 * Dk + rep * Dv, rep * Dv) : weight_ref{}));
  TROUPE_TRY_ASSIGN(wa, req(na, l, {Hv, C}, cut::out, av, 1,
                            fused_ba ? grouped(2 * rep, rep, rep) : weight_ref{}));
  TROUPE_TRY_ASSIGN(
      wb, req(nb, l, {Hv, C}, cut::out, av, 1, fused_ba ? grouped(2 * rep, 0, rep) : weight_ref{}));
  TROUPE_TRY_ASSIGN(dt, req(n_.lin_dt_bias, l, {Hv}, cut::out, av, 1));
  TROUPE_TRY_ASSIGN(alog, req(n_.lin_A_log, l, {Hv}, cut::out, av, 1));
  TROUPE_TRY_ASSIGN(nw, req(n_.lin_norm, l, {Dv})); // its own weight, never (1 + w)
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, Vd}, cut::in, av, Dv));
  const vid table = g_.input(input_kind::state_table);
  auto conv = [&](vid w, vid x, int64_t heads, int64_t D, axis ax, const std::string& what) {
    const vid st = graph::add_recurrent_state(g_, state_kind::conv, l, {heads, K - 1, D}, ax,
                                              what + "_conv_state");
    return b.op(op::causal_conv, {b.view(x, {-1, D}, what + "_heads"), w, st, table},
                what + "_conv");
  };
  const vid q = conv(cq, b.linear(h, wq, none, "lin_q"), Hk, Dk, ak, "lin_q");
  const vid k = conv(ck, b.linear(h, wk, none, "lin_k"), Hk, Dk, ak, "lin_k");
  const vid v = conv(cv, b.linear(h, wv, none, "lin_v"), Hv, Dv, av, "lin_v");
  const vid a = b.linear(h, wa, none, "lin_a");
  const vid beta = b.linear(h, wb, none, "lin_b");
  const vid st =
      graph::add_recurrent_state(g_, state_kind::delta, l, {Hv, Dk, Dv}, av, "delta_state");
  kernels::op_params dp;
  dp.delta_tiled = c_.lin_tiled;
  dp.delta_neg_a = c_.lin_neg_a;
  dp.delta_beta_scale = static_cast<float>(c_.delta_beta_scale);
  const vid o = b.op(op::gated_delta, {q, k, v, a, beta, alog, dt, st, table}, "delta", dp);
  const double eps = c_.lin_norm_eps > 0 ? c_.lin_norm_eps : c_.norm_eps;
  const vid on = b.norm(o, norm_type::rms, nw, none, static_cast<float>(eps), "delta_norm");
  const vid z = b.view(b.linear(h, wz, none, "lin_z"), {-1, Dv}, "lin_z_heads");
  const vid gated = b.op(op::swiglu, {z, on}, "delta_gated"); // silu(z) * norm(o)
  return b.linear(b.view(gated, {-1}, "delta_flat"), wo, none, "delta_out");
}

// LFM2's gated short convolution: in_proj gives B, C and x, the depthwise causal convolution
// (lin_conv taps, no activation) runs over B * x, C gates what it gives, out_proj. TP cuts
// the channels in groups of lin_v_dim (B, C, x, the taps and the state alike).
expected<vid> decoder::short_conv(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, G = c_.lin_v_heads, Dg = c_.lin_v_dim, K = c_.lin_conv, N = G * Dg;
  const axis ax = axis::lin_v_heads;
  auto rows = [N](int64_t part) {
    weight_ref r;
    r.segments = {{part * N, N}};
    return r;
  };
  TROUPE_TRY_ASSIGN(wb, req(n_.lin_bcx, l, {N, C}, cut::out, ax, Dg, rows(0)));
  TROUPE_TRY_ASSIGN(wc, req(n_.lin_bcx, l, {N, C}, cut::out, ax, Dg, rows(1)));
  TROUPE_TRY_ASSIGN(wx, req(n_.lin_bcx, l, {N, C}, cut::out, ax, Dg, rows(2)));
  TROUPE_TRY_ASSIGN(taps, req(n_.lin_conv, l, {N, K}, cut::out, ax, Dg));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, N}, cut::in, ax, Dg));
  const vid bx = b.mul(b.linear(h, wb, none, "conv_b"), b.linear(h, wx, none, "conv_x"), "conv_bx");
  const vid st =
      graph::add_recurrent_state(g_, state_kind::conv, l, {G, K - 1, Dg}, ax, "conv_state");
  kernels::op_params cp;
  cp.conv_plain = true;
  const vid y =
      b.op(op::causal_conv,
           {b.view(bx, {-1, Dg}, "conv_bx_groups"), taps, st, g_.input(input_kind::state_table)},
           "conv", cp);
  const vid gated =
      b.mul(b.linear(h, wc, none, "conv_c"), b.view(y, {-1}, "conv_flat"), "conv_gated");
  return b.linear(gated, wo, none, "conv_out");
}

// Mamba-2: in_proj gives z, x, B, C and dt; x, B and C each through its channels of the
// causal conv1d (with its bias) and SiLU; the selective scan over the sequence's state; an
// RMS norm over each group's heads of y silu(z); out_proj. TP cuts the heads (z, x, dt, their
// taps, A, D, dt_bias, the norm's weight); B and C go with their groups, or are whole on every
// rank where there is one group, whose norm then sums its squares over the ranks (as OLMo 2's
// q/k norm).
expected<vid> decoder::mamba(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, G = c_.lin_k_heads, N = c_.lin_k_dim, H = c_.lin_v_heads,
                P = c_.lin_v_dim, K = c_.lin_conv, Di = H * P, GN = G * N;
  const auto rows = row_range;
  const axis ah = axis::lin_v_heads, ag = G == 1 ? axis::none : axis::lin_k_heads;
  const cut cg = G == 1 ? cut::none : cut::out;
  struct part {
    int64_t in_row, conv_row, count; // rows of in_proj and of the conv1d
    cut cu;
    axis ax;
    int64_t unit;
    const char* what;
    int mup; // its multiplier in model_config::ssm_mup (z, x, B, C, dt)
  };
  const part px{Di, 0, Di, cut::out, ah, P, "ssm_x", 1}, pb{2 * Di, Di, GN, cg, ag, N, "ssm_B", 2},
      pc{2 * Di + GN, Di + GN, GN, cg, ag, N, "ssm_C", 3},
      pz{0, -1, Di, cut::out, ah, P, "ssm_z", 0},
      pdt{2 * Di + 2 * GN, -1, H, cut::out, ah, 1, "ssm_dt", 4};
  const vid table = g_.input(input_kind::state_table);
  // one part of in_proj's output (its bias too where the projections have them)
  auto project = [&](const part& q) -> expected<vid> {
    TROUPE_TRY_ASSIGN(w,
                      req(n_.ssm_in, l, {q.count, C}, q.cu, q.ax, q.unit, rows(q.in_row, q.count)));
    vid bias = none;
    if (c_.ssm_proj_bias)
      TROUPE_TRY_SET(bias,
                     req(n_.ssm_in_b, l, {q.count}, q.cu, q.ax, q.unit, rows(q.in_row, q.count)));
    const vid y = b.linear(h, w, bias, q.what);
    const double mup = c_.ssm_mup[q.mup];
    return mup != 1 ? b.scale(y, static_cast<float>(mup), std::string(q.what) + "_mup") : y;
  };
  // x, B or C through its channels of the convolution (groups of `unit` channels)
  auto convolve = [&](const part& q, int64_t groups) -> expected<vid> {
    TROUPE_TRY_ASSIGN(x, project(q));
    TROUPE_TRY_ASSIGN(
        taps, req(n_.lin_conv, l, {q.count, K}, q.cu, q.ax, q.unit, rows(q.conv_row, q.count)));
    vid bias = none;
    if (c_.ssm_conv_bias)
      TROUPE_TRY_SET(
          bias, req(n_.ssm_conv_b, l, {q.count}, q.cu, q.ax, q.unit, rows(q.conv_row, q.count)));
    const std::string what = q.what;
    const vid st = graph::add_recurrent_state(g_, state_kind::conv, l, {groups, K - 1, q.unit},
                                              q.ax, what + "_conv_state");
    return b.op(op::causal_conv, {b.view(x, {-1, q.unit}, what + "_heads"), taps, st, table, bias},
                what + "_conv");
  };
  TROUPE_TRY_ASSIGN(x, convolve(px, H));
  TROUPE_TRY_ASSIGN(bm, convolve(pb, G));
  TROUPE_TRY_ASSIGN(cm, convolve(pc, G));
  TROUPE_TRY_ASSIGN(dt, project(pdt));
  TROUPE_TRY_ASSIGN(z, project(pz));
  TROUPE_TRY_ASSIGN(a, req(n_.lin_A_log, l, {H}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(d, req(n_.ssm_D, l, {H}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(dtb, req(n_.lin_dt_bias, l, {H}, cut::out, ah, 1));
  vid nw = none;
  if (c_.ssm_norm != model_config::ssm_norm_kind::none)
    TROUPE_TRY_SET(nw, req(n_.lin_norm, l, {Di}, cut::out, ah, P));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, Di}, cut::in, ah, P));
  vid bo = none;
  if (c_.ssm_out_bias) TROUPE_TRY_SET(bo, req(n_.ssm_out_b, l, {C}));
  const vid st = graph::add_recurrent_state(g_, state_kind::ssm, l, {H, P, N}, ah, "ssm_state");
  kernels::op_params sp;
  sp.delta_neg_a = c_.lin_neg_a;
  sp.scan_dt_min = static_cast<float>(c_.ssm_dt_min);
  const vid y = b.op(op::ssm_scan, {x, dt, a, bm, cm, d, dtb, st, table}, "ssm", sp);
  const vid yf = b.view(y, {-1}, "ssm_flat");
  using nk = model_config::ssm_norm_kind;
  if (c_.ssm_norm == nk::none) // y silu(z), no norm (Falcon-H1's mamba_rms_norm false)
    return b.linear(b.op(op::swiglu, {z, yf}, "ssm_gated"), wo, bo, "ssm_out");
  const float eps = static_cast<float>(c_.norm_eps);
  // RMS over each group: of y silu(z), or of y with the gate after (norm_before_gate)
  const vid x0 = c_.ssm_norm == nk::after_gate ? b.op(op::swiglu, {z, yf}, "ssm_gated") : yf;
  vid normed;
  if (G == 1) { // over every head of every rank
    normed = rms_across_ranks(b, x0, Di, eps, "ssm");
  } else { // over each group's heads, on the rank that holds them
    const vid ones = w_.constant(b.name("ssm_norm") + ".ones", l, {Di / G}, 1.0f);
    normed = b.view(b.norm(b.view(x0, {-1, Di / G}, "ssm_groups"), norm_type::rms, ones, none, eps,
                           "ssm_plain_groups"),
                    {-1}, "ssm_plain");
  }
  vid out = b.mul(normed, nw, "ssm_norm");
  if (c_.ssm_norm == nk::before_gate) out = b.op(op::swiglu, {z, out}, "ssm_gated");
  return b.linear(out, wo, bo, "ssm_out");
}

// MiniMax's lightning attention: q, k, v = silu of qkv_proj's rows of each head ([q | k | v] per
// head), then Mamba-2's scan with a unit step and no D term (op_params::scan_unit_dt) over a state
// [H, D, D] per sequence: x = v, B = k and C = q per head (a group per head), A = -s_h (the
// family's derived slope, n_.lin_A_log), so S = exp(-s_h) S + v k^T and out = S q; then the RMS
// norm over every head (a TP shard sums its squares with the others'), times sigmoid of
// output_gate (n_.lin_z), and out_proj (n_.lin_out)
expected<vid> decoder::lightning(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.H, D = c_.D, HD = H * D;
  auto project = [&](int64_t first, const std::string& what) -> expected<vid> {
    TROUPE_TRY_ASSIGN(
        w, req(n_.lin_qkv, l, {HD, C}, cut::out, axis::heads, D, head_rows(3 * D, first, D)));
    const vid y = b.unary(op::silu, b.linear(h, w, none, what), what + "_silu");
    return b.view(y, {-1, D}, what + "_heads");
  };
  TROUPE_TRY_ASSIGN(q, project(0, "lightning_q"));
  TROUPE_TRY_ASSIGN(k, project(D, "lightning_k"));
  TROUPE_TRY_ASSIGN(v, project(2 * D, "lightning_v"));
  TROUPE_TRY_ASSIGN(a, req(n_.lin_A_log, l, {H}, cut::out, axis::heads, 1));
  TROUPE_TRY_ASSIGN(nw, req(n_.lin_norm, l, {HD}, cut::out, axis::heads, D));
  TROUPE_TRY_ASSIGN(wg, req(n_.lin_z, l, {HD, C}, cut::out, axis::heads, D));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, HD}, cut::in, axis::heads, D));
  const vid st =
      graph::add_recurrent_state(g_, state_kind::ssm, l, {H, D, D}, axis::heads, "lightning_state");
  kernels::op_params sp;
  sp.scan_unit_dt = true;
  sp.delta_neg_a = true; // (the slope tensor holds A = -s itself)
  const vid y =
      b.op(op::ssm_scan, {v, none, a, k, q, none, none, st, g_.input(input_kind::state_table)},
           "lightning", sp);
  const vid yf = b.view(y, {-1}, "lightning_flat");
  const vid normed =
      b.mul(rms_across_ranks(b, yf, HD, static_cast<float>(c_.norm_eps), "lightning"), nw,
            "lightning_norm");
  const vid gate =
      b.unary(op::sigmoid, b.linear(h, wg, none, "lightning_gate"), "lightning_gate_act");
  return b.linear(b.mul(normed, gate, "lightning_gated"), wo, none, "lightning_out");
}

// Mamba-1: in_proj gives x and z per channel; x through the causal conv1d (with its bias) and
// SiLU; x_proj of that gives dt (rank R), B and C (RMS-normed where the family says), dt_proj
// widens dt to the channels; the scan with an A per channel and state value (each channel a
// head of one value, B and C one group); y silu(z); out_proj. TP cuts the channels: x_proj then
// reads a shard's channels (cut by input features: its dt, B and C are all-reduced), dt_proj
// gives the shard's.
expected<vid> decoder::mamba1(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, N = c_.lin_k_dim, Di = c_.lin_v_heads, K = c_.lin_conv,
                R = c_.ssm_dt_rank;
  const axis ah = axis::lin_v_heads;
  const auto rows = row_range;
  const vid table = g_.input(input_kind::state_table);
  TROUPE_TRY_ASSIGN(wx, req(n_.ssm_in, l, {Di, C}, cut::out, ah, 1, rows(0, Di)));
  TROUPE_TRY_ASSIGN(wz, req(n_.ssm_in, l, {Di, C}, cut::out, ah, 1, rows(Di, Di)));
  vid bx = none, bz = none, bc = none, bo = none;
  if (c_.ssm_proj_bias) {
    TROUPE_TRY_SET(bx, req(n_.ssm_in_b, l, {Di}, cut::out, ah, 1, rows(0, Di)));
    TROUPE_TRY_SET(bz, req(n_.ssm_in_b, l, {Di}, cut::out, ah, 1, rows(Di, Di)));
  }
  TROUPE_TRY_ASSIGN(taps, req(n_.lin_conv, l, {Di, K}, cut::out, ah, 1));
  if (c_.ssm_conv_bias) TROUPE_TRY_SET(bc, req(n_.ssm_conv_b, l, {Di}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(xdt, req(n_.ssm_x, l, {R, Di}, cut::in, ah, 1, rows(0, R)));
  TROUPE_TRY_ASSIGN(xb, req(n_.ssm_x, l, {N, Di}, cut::in, ah, 1, rows(R, N)));
  TROUPE_TRY_ASSIGN(xc, req(n_.ssm_x, l, {N, Di}, cut::in, ah, 1, rows(R + N, N)));
  TROUPE_TRY_ASSIGN(wdt, req(n_.ssm_dt_w, l, {Di, R}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(dtb, req(n_.lin_dt_bias, l, {Di}, cut::out, ah, 1));
  // (flat: loaded as f32 whatever the checkpoint stores it in, as ssm_scan reads it)
  TROUPE_TRY_ASSIGN(a, req(n_.lin_A_log, l, {Di * N}, cut::out, ah, N));
  TROUPE_TRY_ASSIGN(d, req(n_.ssm_D, l, {Di}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, Di}, cut::in, ah, 1));
  if (c_.ssm_out_bias) TROUPE_TRY_SET(bo, req(n_.ssm_out_b, l, {C}));
  const vid st_conv =
      graph::add_recurrent_state(g_, state_kind::conv, l, {Di, K - 1, 1}, ah, "ssm_x_conv_state");
  const vid x =
      b.op(op::causal_conv,
           {b.view(b.linear(h, wx, bx, "ssm_x"), {-1, 1}, "ssm_x_heads"), taps, st_conv, table, bc},
           "ssm_x_conv");
  const vid xf = b.view(x, {-1}, "ssm_x_flat");
  // dt, B, C from the convolved x, each normed where the family says
  using bk = model_config::ssm_bcdt_kind;
  auto part = [&](vid w, const std::string& norm_name, int64_t width,
                  const char* what) -> expected<vid> {
    vid v = b.linear(xf, w, none, what);
    if (c_.ssm_bcdt_norm == bk::none) return v;
    vid nw;
    if (c_.ssm_bcdt_norm == bk::weighted) {
      TROUPE_TRY_SET(nw, req(norm_name, l, {width}));
    } else {
      nw = w_.constant(b.name(what) + "_norm.ones", l, {width}, 1.0f);
    }
    return b.norm(v, norm_type::rms, nw, none, static_cast<float>(c_.ssm_bcdt_eps),
                  std::string(what) + "_norm");
  };
  TROUPE_TRY_ASSIGN(ts, part(xdt, n_.ssm_dt_norm, R, "ssm_dt_rank"));
  TROUPE_TRY_ASSIGN(bm, part(xb, n_.ssm_b_norm, N, "ssm_B"));
  TROUPE_TRY_ASSIGN(cm, part(xc, n_.ssm_c_norm, N, "ssm_C"));
  const vid dt = b.linear(ts, wdt, none, "ssm_dt");
  const vid st = graph::add_recurrent_state(g_, state_kind::ssm, l, {Di, 1, N}, ah, "ssm_state");
  kernels::op_params sp;
  sp.delta_neg_a = c_.lin_neg_a;
  const vid y = b.op(op::ssm_scan,
                     {x, dt, a, b.view(bm, {-1, N}, "ssm_B_group"),
                      b.view(cm, {-1, N}, "ssm_C_group"), d, dtb, st, table},
                     "ssm", sp);
  const vid z = b.linear(h, wz, bz, "ssm_z");
  const vid gated = b.op(op::swiglu, {z, b.view(y, {-1}, "ssm_flat")}, "ssm_gated");
  return b.linear(gated, wo, bo, "ssm_out");
}

expected<vid> decoder::rg_lru(int l, vid h) {
  // y = gelu(W_y h); x = conv(W_x h); i, r = sigmoid of x's block-diagonal gates per head;
  // a = exp(r log_a); the RG-LRU h_t = a h_t-1 + sqrt(1 - a^2) (i x) (i x at position 0); out =
  // W_out (h y). TP cuts by heads (every gate block on one rank).
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.lin_v_heads, bw = c_.lin_v_dim, W = H * bw, K = c_.lin_conv;
  const axis ah = axis::lin_v_heads;
  TROUPE_TRY_ASSIGN(wx, req(n_.lru_x, l, {W, C}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(bx, req(n_.lru_x_b, l, {W}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(wy, req(n_.lru_y, l, {W, C}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(by, req(n_.lru_y_b, l, {W}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(taps, req(n_.lin_conv, l, {W, K}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(bc, req(n_.ssm_conv_b, l, {W}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(wi, req(n_.lru_gate_i, l, {W, bw}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(bi, req(n_.lru_gate_i_b, l, {W}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(wa, req(n_.lru_gate_a, l, {W, bw}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(ba, req(n_.lru_gate_a_b, l, {W}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(la, req(n_.lru_log_a, l, {W}, cut::out, ah, bw));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, W}, cut::in, ah, bw));
  TROUPE_TRY_ASSIGN(bo, opt(n_.ssm_out_b, l, {C}));
  const vid table = g_.input(input_kind::state_table);
  const vid y = b.unary(act_op(), b.linear(h, wy, by, "lru_y"), "lru_y_act");
  const vid st_conv =
      graph::add_recurrent_state(g_, state_kind::conv, l, {H, K - 1, bw}, ah, "lru_conv_state");
  kernels::op_params cp;
  cp.conv_plain = true;
  const vid xc = b.op(
      op::causal_conv,
      {b.view(b.linear(h, wx, bx, "lru_x"), {-1, bw}, "lru_x_heads"), taps, st_conv, table, bc},
      "lru_x_conv", cp);
  kernels::op_params tp;
  tp.k = 1; // (W [H bw, bw]: each head's x times its block)
  auto gate = [&](vid w, vid bias, const char* what) {
    const vid g =
        b.view(b.op(op::head_matmul, {xc, w}, what, tp), {-1}, std::string(what) + "_flat");
    return b.unary(op::sigmoid, b.add(g, bias, std::string(what) + "_biased"),
                   std::string(what) + "_sigmoid");
  };
  const vid in = gate(wi, bi, "lru_input_gate"), rec = gate(wa, ba, "lru_rec_gate");
  const vid a = b.unary(op::exp, b.mul(rec, la, "lru_log_a"), "lru_a");
  const vid u = b.mul(b.view(xc, {-1}, "lru_x_flat"), in, "lru_u");
  const vid st = graph::add_recurrent_state(g_, state_kind::ssm, l, {H, bw, 1}, ah, "lru_state");
  kernels::op_params sp;
  sp.lru_norm = true;
  const vid r = b.op(op::lru_scan, {a, u, st, table}, "lru", sp);
  return b.linear(b.mul(r, y, "lru_gated"), wo, bo, "lru_out");
}

expected<vid> decoder::kda(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.lin_v_heads, D = c_.lin_v_dim, K = c_.lin_conv, HD = H * D;
  const axis av = axis::lin_v_heads; // (every head's key and value on one rank)
  TROUPE_TRY_ASSIGN(wq, req(n_.kda_q, l, {HD, C}, cut::out, av, D));
  TROUPE_TRY_ASSIGN(wk, req(n_.kda_k, l, {HD, C}, cut::out, av, D));
  TROUPE_TRY_ASSIGN(wv, req(n_.kda_v, l, {HD, C}, cut::out, av, D));
  TROUPE_TRY_ASSIGN(cq, req(n_.kda_conv_q, l, {HD, K}, cut::out, av, D));
  TROUPE_TRY_ASSIGN(ck, req(n_.kda_conv_k, l, {HD, K}, cut::out, av, D));
  TROUPE_TRY_ASSIGN(cv, req(n_.kda_conv_v, l, {HD, K}, cut::out, av, D));
  // the decay's input and the output gate: low-rank pairs, or one full-rank map each (Ling 3)
  auto two_maps = [&](const std::string& full, const std::string& a, const std::string& bn,
                      const std::string& what) -> expected<vid> {
    if (c_.kda_full_gates) {
      TROUPE_TRY_ASSIGN(w, req(full, l, {HD, C}, cut::out, av, D));
      return b.linear(h, w, none, what);
    }
    TROUPE_TRY_ASSIGN(wa, req(a, l, {D, C}));
    TROUPE_TRY_ASSIGN(wb, req(bn, l, {HD, D}, cut::out, av, D));
    return b.linear(b.linear(h, wa, none, what + "_a"), wb, none, what + "_b");
  };
  TROUPE_TRY_ASSIGN(dt, req(n_.lin_dt_bias, l, {HD}, cut::out, av, D));
  TROUPE_TRY_ASSIGN(alog, req(n_.lin_A_log, l, {H}, cut::out, av, 1));
  TROUPE_TRY_ASSIGN(wb, req(n_.lin_b, l, {H, C}, cut::out, av, 1));
  TROUPE_TRY_ASSIGN(nw, req(n_.lin_norm, l, {D}));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, HD}, cut::in, av, D));
  const vid table = g_.input(input_kind::state_table);
  auto conv = [&](vid w, vid x, const std::string& what) {
    const vid st = graph::add_recurrent_state(g_, state_kind::conv, l, {H, K - 1, D}, av,
                                              what + "_conv_state");
    return b.op(op::causal_conv, {b.view(x, {-1, D}, what + "_heads"), w, st, table},
                what + "_conv");
  };
  const vid q = conv(cq, b.linear(h, wq, none, "kda_q"), "kda_q");
  const vid k = conv(ck, b.linear(h, wk, none, "kda_k"), "kda_k");
  const vid v = conv(cv, b.linear(h, wv, none, "kda_v"), "kda_v");
  // the decay's input per head and key channel; the op adds dt_bias and takes the softplus
  TROUPE_TRY_ASSIGN(f, two_maps(n_.kda_f, n_.kda_f_a, n_.kda_f_b, "kda_f"));
  const vid a = b.view(f, {-1, D}, "kda_decay_in");
  const vid beta = b.linear(h, wb, none, "kda_b");
  const vid st = graph::add_recurrent_state(g_, state_kind::delta, l, {H, D, D}, av, "delta_state");
  kernels::op_params kp;
  kp.delta_bound = static_cast<float>(c_.kda_bound); // (GLM-5.3's safe gate; 0: off)
  kp.delta_neg_a = c_.lin_neg_a;                     // (GGUF's ssm_a: -exp(A_log))
  const vid o = b.op(op::gated_delta, {q, k, v, a, beta, alog, dt, st, table}, "kda", kp);
  const vid on = b.norm(o, norm_type::rms, nw, none, static_cast<float>(c_.norm_eps), "kda_norm");
  TROUPE_TRY_ASSIGN(gl, two_maps(n_.kda_g, n_.kda_g_a, n_.kda_g_b, "kda_g"));
  const vid gate = b.view(gl, {-1, D}, "kda_gate_heads");
  const vid gated = b.mul(on, b.unary(op::sigmoid, gate, "kda_gate"), "kda_gated");
  return b.linear(b.view(gated, {-1}, "kda_flat"), wo, none, "kda_out");
}

} // namespace troupe::arch::detail
