// decoder_zamba.cpp: the decoder builder's Zamba2 (model_config::zamba): every layer a pre-norm
// Mamba-2 mixer with its residual; a hybrid layer first runs one of the shared transformer blocks
// over [stream, token embeddings] (2 C wide: its RMS norm, attention whose heads are 2 C / H wide,
// o_proj back to C, an RMS norm, the MLP from one gate_up), each use with its own LoRA adapters
// (x A^T B^T added to gate_up's output, and to q's, k's and v's where the config says), and a
// linear map of the layer's own adds the block's output to the mixer's input (not to the
// residual). The embeddings ride beside the stream ([T, 2 C]) so a pipeline cuts anywhere; a
// block's weights, stored under the first layer that uses it, load once.
#include "arch/families/decoder_build.hpp"

namespace troupe::arch::detail {

status decoder::build_zamba() {
  const int64_t C = c_.C;
  TROUPE_TRY_ASSIGN(e0, embed());
  builder b0(g_, -1);
  vid x = b0.op(op::concat, {e0, e0}, "zamba_streams");
  g_.residual.push_back(x);
  // (sized from a config, every layer has its copy where transformers would make one)
  const auto owners = zamba_block_owners(c_, [this](int64_t l) {
    return m_.shapes_only || m_.tensors->contains(at(n_.zamba_block, static_cast<int>(l)) +
                                                  "self_attn.q_proj.weight");
  });
  int64_t use = 0; // hybrid layers so far
  for (int l = 0; l < g_.n_layer; ++l) {
    builder b(g_, l);
    vid s = stream_of(b, x, 0, "stream_in");
    const vid e = stream_of(b, x, 1, "embd_in");
    vid in = s;
    if (const int64_t owner = owners[static_cast<size_t>(l)]; owner >= 0) {
      TROUPE_TRY_ASSIGN(t, zamba_shared(l, s, e, owner, use));
      TROUPE_TRY_ASSIGN(wl, req(n_.zamba_linear, l, {C, C}));
      in = b.add(s, b.linear(t, wl, none, "shared_linear"), "ssm_in_sum");
      ++use;
    }
    TROUPE_TRY_ASSIGN(h, norm(in, l, n_.attn_norm, "", C, norm_kind::rms, "attn_norm"));
    TROUPE_TRY_ASSIGN(m, c_.ssm_dt_rank > 0 ? mamba_heads(l, h) : mamba(l, h));
    s = b.add(s, m, "ssm_residual");
    x = b.op(op::concat, {s, e}, "zamba_streams");
    g_.residual.push_back(x);
  }
  return head(x);
}

expected<vid> decoder::zamba_shared(int l, vid s, vid e, int64_t owner, int64_t use) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.H, Hkv = c_.Hkv, D = c_.D, F = c_.F, r = c_.zamba_rank;
  const std::string p = at(n_.zamba_block, static_cast<int>(owner));
  const auto eps = static_cast<float>(c_.norm_eps);
  // x A^T B^T: use `use`'s adapter in list `list` (its B's rows `rows` of out, cut like the
  // projection it adds to)
  auto adapter = [&](vid x, const std::string& list, int64_t in, int64_t out, axis ax, int64_t unit,
                     weight_ref rows, const std::string& what) -> expected<vid> {
    const std::string a = fmt::format("{}{}.{}.", p, list, use);
    TROUPE_TRY_ASSIGN(wa, req(a + "0.weight", l, {r, in}));
    const int64_t n = rows.segments.empty() ? out : F; // (before rows is moved)
    TROUPE_TRY_ASSIGN(wb, req(a + "1.weight", l, {n, r}, cut::out, ax, unit, std::move(rows)));
    return b.linear(b.linear(x, wa, none, what + "_lora_a"), wb, none, what + "_lora");
  };
  // attention over [s, e]
  TROUPE_TRY_ASSIGN(n1, req(p + "input_layernorm.weight", l, {2 * C}));
  const vid hn =
      b.norm(b.op(op::concat, {s, e}, "shared_in"), norm_type::rms, n1, none, eps, "shared_norm");
  auto project = [&](const char* name, int64_t heads, axis ax, const char* list) -> expected<vid> {
    TROUPE_TRY_ASSIGN(
        w, req(p + "self_attn." + name + "_proj.weight", l, {heads * D, 2 * C}, cut::out, ax, D));
    vid y = b.linear(hn, w, none, name);
    if (c_.zamba_attn_adapters) {
      TROUPE_TRY_ASSIGN(
          ad, adapter(hn, std::string("self_attn.") + list, 2 * C, heads * D, ax, D, {}, name));
      y = b.add(y, ad, std::string(name) + "_adapted");
    }
    return b.view(y, {-1, D}, std::string(name) + "_heads");
  };
  TROUPE_TRY_ASSIGN(q, project("q", H, axis::heads, "linear_q_adapter_list"));
  TROUPE_TRY_ASSIGN(k, project("k", Hkv, axis::kv_heads, "linear_k_adapter_list"));
  TROUPE_TRY_ASSIGN(v, project("v", Hkv, axis::kv_heads, "linear_v_adapter_list"));
  TROUPE_TRY_ASSIGN(wo, req(p + "self_attn.o_proj.weight", l, {C, H * D}, cut::in, axis::heads, D));
  TROUPE_TRY_ASSIGN(bo, opt("", l, {C}));
  const vid a = b.attend(layer_spec(l), {q, k, v}, wo, bo);
  TROUPE_TRY_ASSIGN(n2, req(p + "pre_ff_layernorm.weight", l, {C}));
  const vid an = b.norm(a, norm_type::rms, n2, none, eps, "shared_ffn_norm");
  // the MLP: gate_up's gate and up rows, each with its rows of the adapter's B (Zamba's: gate_proj
  // and up_proj, no adapters)
  const std::string f = p + "feed_forward.";
  auto half = [&](int64_t part, const std::string& what) -> expected<vid> {
    if (n_.zamba_mlp_split) {
      TROUPE_TRY_ASSIGN(w, req(f + (part ? "up_proj.weight" : "gate_proj.weight"), l, {F, C},
                               cut::out, axis::ffn));
      return b.linear(an, w, none, what);
    }
    TROUPE_TRY_ASSIGN(w, req(f + "gate_up_proj.weight", l, {F, C}, cut::out, axis::ffn, 1,
                             row_range(part * F, F)));
    vid bias = none;
    if (c_.mlp_bias)
      TROUPE_TRY_SET(bias, req(f + "gate_up_proj.bias", l, {F}, cut::out, axis::ffn, 1,
                               row_range(part * F, F)));
    TROUPE_TRY_ASSIGN(ad, adapter(an, "feed_forward.gate_up_proj_adapter_list", C, 2 * F, axis::ffn,
                                  1, row_range(part * F, F), what));
    return b.add(b.linear(an, w, bias, what), ad, what + "_adapted");
  };
  TROUPE_TRY_ASSIGN(g, half(0, "ffn_gate"));
  TROUPE_TRY_ASSIGN(u, half(1, "ffn_up"));
  const vid prod = gated_product(b, g, u, "ffn");
  TROUPE_TRY_ASSIGN(wd, req(f + "down_proj.weight", l, {C, F}, cut::in, axis::ffn));
  vid bd = none;
  if (c_.mlp_bias) TROUPE_TRY_SET(bd, req(f + "down_proj.bias", l, {C}));
  return b.linear(prod, wd, bd, "ffn_out");
}

// Zamba's mixer: Mamba-1 over Di channels in nh heads of hd. in_proj's rows alternate each
// channel's x and gate (strided row views); x through the causal conv1d (its bias, SiLU); each
// head's x_proj [R + 2 N, hd] gives its dt (through its dt_proj [hd, R]), B and C (head_matmuls
// over the head's channels: a group of B and C per head); the scan with an A per channel and
// state value, D and dt's bias per channel; times silu(gate); out_proj. TP cuts by whole heads
// (lin_k_heads), so every per-head map stays on one rank.
expected<vid> decoder::mamba_heads(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, N = c_.lin_k_dim, Di = c_.lin_v_heads, K = c_.lin_conv,
                R = c_.ssm_dt_rank, nh = c_.lin_k_heads, hd = Di / nh, W = R + 2 * N;
  const axis ah = axis::lin_v_heads, ak = axis::lin_k_heads; // (channels; mamba heads)
  const vid table = g_.input(input_kind::state_table);
  TROUPE_TRY_ASSIGN(wx, req(n_.ssm_in, l, {Di, C}, cut::out, ah, 1, gate_up_rows(true, false, Di)));
  TROUPE_TRY_ASSIGN(wz, req(n_.ssm_in, l, {Di, C}, cut::out, ah, 1, gate_up_rows(true, true, Di)));
  TROUPE_TRY_ASSIGN(taps, req(n_.lin_conv, l, {Di, K}, cut::out, ah, 1));
  vid bc = none;
  if (c_.ssm_conv_bias) TROUPE_TRY_SET(bc, req(n_.ssm_conv_b, l, {Di}, cut::out, ah, 1));
  // x_proj [nh, R + 2 N, hd] as [nh W, hd]: each head's dt, B or C rows
  auto per_head = [&](int64_t first, int64_t count) {
    weight_ref r;
    for (int64_t k = 0; k < nh; ++k) r.segments.emplace_back(k * W + first, count);
    return r;
  };
  TROUPE_TRY_ASSIGN(xdt, req(n_.ssm_x, l, {nh * R, hd}, cut::out, ak, R, per_head(0, R)));
  TROUPE_TRY_ASSIGN(xb, req(n_.ssm_x, l, {nh * N, hd}, cut::out, ak, N, per_head(R, N)));
  TROUPE_TRY_ASSIGN(xc, req(n_.ssm_x, l, {nh * N, hd}, cut::out, ak, N, per_head(R + N, N)));
  TROUPE_TRY_ASSIGN(wdt, req(n_.ssm_dt_w, l, {Di, R}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(dtb, req(n_.lin_dt_bias, l, {Di}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(a, req(n_.lin_A_log, l, {Di * N}, cut::out, ah, N));
  TROUPE_TRY_ASSIGN(d, req(n_.ssm_D, l, {Di}, cut::out, ah, 1));
  TROUPE_TRY_ASSIGN(wo, req(n_.lin_out, l, {C, Di}, cut::in, ah, 1));
  const vid st_conv =
      graph::add_recurrent_state(g_, state_kind::conv, l, {Di, K - 1, 1}, ah, "ssm_x_conv_state");
  const vid x = b.op(
      op::causal_conv,
      {b.view(b.linear(h, wx, none, "ssm_x"), {-1, 1}, "ssm_x_heads"), taps, st_conv, table, bc},
      "ssm_x_conv");
  const vid xh = b.view(x, {-1, hd}, "ssm_x_mamba_heads"); // [T, nh, hd]
  auto head_map = [&](vid in, vid w, const char* what) {
    return b.op(op::head_matmul, {in, w}, what); // (W [nh n, k]: each head's rows)
  };
  const vid ts = head_map(xh, xdt, "ssm_dt_rank");                          // [T, nh, R]
  const vid dt = b.view(head_map(ts, wdt, "ssm_dt"), {-1}, "ssm_dt_flat");  // [T, Di]
  const vid bm = head_map(xh, xb, "ssm_B"), cm = head_map(xh, xc, "ssm_C"); // [T, nh, N]
  const vid st = graph::add_recurrent_state(g_, state_kind::ssm, l, {Di, 1, N}, ah, "ssm_state");
  const vid y = b.op(op::ssm_scan, {x, dt, a, bm, cm, d, dtb, st, table}, "ssm");
  const vid z = b.linear(h, wz, none, "ssm_z");
  const vid gated = b.op(op::swiglu, {z, b.view(y, {-1}, "ssm_flat")}, "ssm_gated");
  return b.linear(gated, wo, none, "ssm_out");
}

} // namespace troupe::arch::detail
