// decoder_hc.cpp: the decoder builder's DeepSeek-V4 (decoder_build.hpp): the model over
// hc_mult residual streams (the embedding repeated; each sublayer reads the streams' mix that
// hc_pre makes and hc_post mixes its output back in; the head collapses them), and its attention:
// one shared key-value head, rotated in its last qk_rope dims, attended over a sliding window
// with sinks, plus compressed entries (kv_compress over each window of tokens; on the sparse
// layers the lightning indexer's top-k of them), the output turned back by the conjugate
// rotation and projected in o_groups groups of heads.
#include "arch/families/decoder_build.hpp"

#include <cmath>

namespace troupe::arch::detail {

status decoder::build_hc() {
  const int64_t N = c_.hc_mult;
  if (c_.swiglu_clamp && !c_.swiglu_clamp_experts_only) { // the shared expert's and dense
                                                          // layers' clamped SwiGLU
    TROUPE_TRY_SET(clamp_expr_, clamped_swiglu(c_.swiglu_limit, c_.swiglu_after_act));
  }
  TROUPE_TRY_ASSIGN(e, embed());
  builder b(g_, -1);
  vid x = e; // the embedding in every stream
  for (int64_t i = 1; i < N; ++i) x = b.op(op::concat, {x, e}, fmt::format("hc_streams_{}", i));
  g_.residual.push_back(x);
  for (int l = 0; l < g_.n_layer; ++l) {
    TROUPE_TRY_ASSIGN(y, hc_layer(l, x));
    x = y;
    g_.residual.push_back(x);
  }
  return head(x);
}

expected<decoder::hc_mix> decoder::hyper(int l, vid x, const std::string& fn,
                                         const std::string& base, const std::string& scale,
                                         const std::string& what) {
  const int64_t N = c_.hc_mult, C = c_.C;
  const bool head = l == g_.n_layer; // the model's: the streams' mix only
  // a layer's: pre, post and comb; or (independent, HY-V4) pre and post
  const int64_t M = head ? N : c_.hc_independent ? 2 * N : N * (N + 2);
  builder b(g_, l);
  if (head && c_.hc_head_mean) { // GLM-5.3's: the streams' mean, no weights
    kernels::op_params p;
    p.k = static_cast<int>(N); // (the streams, for the shape)
    return hc_mix{b.op(op::hc_pre, {x}, what + "_in", p), none};
  }
  TROUPE_TRY_ASSIGN(wf, req(fn, l, {M, N * C}));
  TROUPE_TRY_ASSIGN(wb, req(base, l, {M}));
  TROUPE_TRY_ASSIGN(ws, req(scale, l, {head ? 1 : c_.hc_independent ? 2 : 3}));
  value in, mix;
  in.name = b.name(what + "_in");
  in.layer = l;
  const vid iv = g_.add_value(std::move(in));
  vid mv = none;
  node n;
  n.kind = node_kind::op;
  n.op = op::hc_pre;
  n.in = {x, wf, wb, ws};
  n.out = {iv};
  if (!head) {
    mix.name = b.name(what + "_mix");
    mix.layer = l;
    mv = g_.add_value(std::move(mix));
    n.out.push_back(mv);
  }
  n.p.eps = static_cast<float>(c_.norm_eps);
  n.p.bias = static_cast<float>(c_.hc_eps);
  n.p.k = static_cast<int>(c_.hc_iters);
  n.p.scale = static_cast<float>(c_.hc_magnitude); // (the independent form's post)
  n.layer = l;
  n.name = g_[iv].name;
  g_.add_node(std::move(n));
  return hc_mix{iv, mv};
}

expected<vid> decoder::hc_layer(int l, vid x) {
  builder b(g_, l);
  const int64_t C = c_.C;
  TROUPE_TRY_ASSIGN(ha, hyper(l, x, n_.hc_attn_fn, n_.hc_attn_base, n_.hc_attn_scale, "hc_attn"));
  TROUPE_TRY_ASSIGN(h, norm(ha.in, l, n_.attn_norm, "", C, norm_kind::rms, "attn_norm"));
  vid a = none; // DeepSeek-V4's attention, or (GLM-5.3) KDA or latent attention
  if (c_.layer_linear(l))
    TROUPE_TRY_SET(a, kda(l, h));
  else if (c_.kv_lora > 0)
    TROUPE_TRY_SET(a, mla(l, h));
  else
    TROUPE_TRY_SET(a, v4_attention(l, h));
  x = b.op(op::hc_post, {x, a, ha.mix}, "attn_residual");
  TROUPE_TRY_ASSIGN(hf, hyper(l, x, n_.hc_ffn_fn, n_.hc_ffn_base, n_.hc_ffn_scale, "hc_ffn"));
  TROUPE_TRY_ASSIGN(h2, norm(hf.in, l, n_.ffn_norm, "", C, norm_kind::rms, "ffn_norm"));
  TROUPE_TRY_ASSIGN(f, ffn(l, h2)); // (the experts, or a dense layer's MLP)
  return b.op(op::hc_post, {x, f, hf.mix}, "ffn_residual");
}

expected<vid> decoder::compressor(int l, vid h, const std::string& wkv, const std::string& wgate,
                                  const std::string& ape, const std::string& nw, int64_t Dc,
                                  int64_t m, bool overlap, const rope_spec& rs,
                                  const std::string& what) {
  builder b(g_, l);
  const int64_t C = c_.C, W = overlap ? 2 * Dc : Dc;
  // every weight whole on every rank: each computes the same entries
  TROUPE_TRY_ASSIGN(wk, req(wkv, l, {W, C}));
  TROUPE_TRY_ASSIGN(wg, req(wgate, l, {W, C}));
  TROUPE_TRY_ASSIGN(wa, req(ape, l, {m, W}));
  TROUPE_TRY_ASSIGN(wn, req(nw, l, {Dc}));
  const vid kv = b.linear(h, wk, none, what + "_kv");
  const vid gate = b.linear(h, wg, none, what + "_gate");
  const vid rows = b.view(b.op(op::concat, {kv, gate}, what + "_rows"), {1, 2 * W}, what + "_row");
  const vid src = add_kv_state(g_, state_kind::k_cache, l, 1, 2 * W, axis::none);
  g_[src].name = b.name(what + "_src_cache");
  b.op_into(op::kv_store, {rows, g_.input(input_kind::slots)}, src, what + "_store");
  const vid entries = add_kv_state(g_, state_kind::k_cache, l, 1, Dc, axis::none);
  g_[entries].name = b.name(what + "_cache");
  kernels::op_params p;
  p.compress = m;
  p.eps = static_cast<float>(c_.norm_eps);
  p.rope = rs;
  b.op_into(op::kv_compress, {src, wa, wn, g_.input(input_kind::seq_table)}, entries, what, p);
  return entries;
}

expected<vid> decoder::v4_attention(int l, vid h) {
  builder b(g_, l);
  const int64_t C = c_.C, H = c_.H, D = c_.D, R = c_.qk_rope, G = c_.o_groups, Ro = c_.o_rank;
  const int64_t m = c_.layer_compress(l);
  const bool sparse = m > 0 && c_.layer_compress_sparse(l);
  const rope_spec rs = m > 0 ? c_.rope_compress : c_.rope;
  const vid pos = g_.input(input_kind::positions);
  // q through its bottleneck, each head RMS-normed (no weight) and rotated
  TROUPE_TRY_ASSIGN(wqa, req(n_.mla_q_a, l, {c_.q_lora, C}));
  TROUPE_TRY_ASSIGN(qr, norm(b.linear(h, wqa, none, "q_a"), l, n_.mla_q_a_norm, "", c_.q_lora,
                             norm_kind::rms, "q_a_norm"));
  TROUPE_TRY_ASSIGN(wqb, req(n_.mla_q_b, l, {H * D, c_.q_lora}, cut::out, axis::heads, D));
  vid q = b.view(b.linear(qr, wqb, none, "q"), {-1, D}, "q_heads");
  TROUPE_TRY_SET(q, norm(q, l, "", "", D, norm_kind::rms, "q_norm"));
  kernels::op_params rp;
  rp.rope = rs;
  q = b.op(op::rope, {q, pos}, "q_rope", rp);
  // the one key-value head, normed and rotated, whole on every rank
  TROUPE_TRY_ASSIGN(wkv, req(n_.v4_wkv, l, {D, C}));
  TROUPE_TRY_ASSIGN(
      kv, norm(b.linear(h, wkv, none, "kv"), l, n_.v4_kv_norm, "", D, norm_kind::rms, "kv_norm"));
  const vid kvr = b.op(op::rope, {b.view(kv, {1, D}, "kv_head"), pos}, "kv_rope", rp);
  const vid cache = add_kv_state(g_, state_kind::k_cache, l, 1, D, axis::none);
  b.op_into(op::kv_store, {kvr, g_.input(input_kind::slots)}, cache, "kv_store");
  TROUPE_TRY_ASSIGN(sinks, req(n_.attn_sinks, l, {H}, cut::out, axis::heads, 1));
  std::vector<vid> ain = {q, cache, cache, g_.input(input_kind::seq_table), sinks};
  kernels::op_params ap;
  ap.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  ap.window = c_.sliding_window;
  if (m > 0) {
    TROUPE_TRY_ASSIGN(entries, compressor(l, h, n_.cmp_wkv, n_.cmp_wgate, n_.cmp_ape, n_.cmp_norm,
                                          D, m, sparse, rs, "cmp"));
    vid sel = none;
    if (sparse) { // the indexer: its own compressed keys, q from the bottleneck, head weights
      const int64_t Hi = c_.dsa_heads, Di = c_.dsa_dim;
      rope_spec ri = rs;
      ri.rot_offset = static_cast<int>(Di - R);
      TROUPE_TRY_ASSIGN(ikeys, compressor(l, h, n_.idx_wkv, n_.idx_wgate, n_.idx_ape, n_.idx_norm,
                                          Di, m, true, ri, "idx_cmp"));
      TROUPE_TRY_ASSIGN(wiq, req(n_.dsa_wq, l, {Hi * Di, c_.q_lora}));
      TROUPE_TRY_ASSIGN(wiw, req(n_.dsa_w, l, {Hi, C}));
      kernels::op_params irp;
      irp.rope = ri;
      const vid iq =
          b.op(op::rope, {b.view(b.linear(qr, wiq, none, "idx_q"), {-1, Di}, "idx_q_heads"), pos},
               "idx_q_rope", irp);
      const vid w = b.scale(b.linear(h, wiw, none, "idx_weights"),
                            static_cast<float>(1.0 / std::sqrt(static_cast<double>(Hi))),
                            "idx_weights_scaled");
      kernels::op_params sp;
      sp.k = static_cast<int>(c_.dsa_topk);
      sp.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Di)));
      sp.compress = m;
      sel = b.op(op::dsa_select, {iq, ikeys, g_.input(input_kind::seq_table), w}, "idx_select", sp);
    }
    ain.insert(ain.end(), {sel, entries});
    ap.compress = m;
  }
  vid a = b.op(op::paged_attention, std::move(ain), "attn", ap);
  kernels::op_params back = rp;
  back.rope.inverse = true; // the values' rotation turned back at the query's position
  a = b.op(op::rope, {a, pos}, "attn_unrope", back);
  // the grouped output: each group of H / G heads to Ro values, then all to C
  if ((G * Ro) % H)
    return make_error(errc::unsupported, "{}: o_groups {} x o_lora_rank {} over {} heads", m_.path,
                      G, Ro, H);
  const int64_t per_head = G * Ro / H; // wo_a's rows, and wo_b's columns, of one head
  TROUPE_TRY_ASSIGN(woa, req(n_.wo_a, l, {G * Ro, H * D / G}, cut::out, axis::heads, per_head));
  TROUPE_TRY_ASSIGN(wob, req(n_.wo_b, l, {C, G * Ro}, cut::in, axis::heads, per_head));
  const vid grouped = b.view(a, {-1, H * D / G}, "attn_groups"); // (G / tp of them on a TP rank)
  const vid oa = b.op(op::head_matmul, {grouped, woa}, "attn_out_a");
  return b.linear(b.view(oa, {-1}, "attn_out_a_flat"), wob, none, "attn_out");
}

} // namespace troupe::arch::detail
