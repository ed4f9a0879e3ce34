// decoder_mla.cpp: the decoder builder's latent attention (decoder_build.hpp): DeepSeek's MLA,
// absorbed, and DeepSeek Sparse Attention's lightning indexer, whose choice of keys the MLA then
// attends over (DeepSeek-V3.2, GLM-5); Mistral Large 4's additions (layers reading an earlier
// layer's latent cache, layers without RoPE, queries scaled by position, LeRoPE); and MiniMax
// M3's block indexer, which picks the positions of standard attention's KV heads.
#include "arch/families/decoder_build.hpp"

#include <cmath>

#include "core/convert.hpp"

namespace troupe::arch::detail {

expected<rope_spec> decoder::model_rope() {
  if (model_rope_) return *model_rope_;
  rope_spec r = c_.rope;
  if (!c_.rope_learned || m_.shapes_only) return r; // (a config alone: exp(0), as initialised)
  const int64_t half = r.rot_dim / 2;
  const tensor_info* a = m_.tensors->find(n_.rope_alpha);
  if (!a)
    return make_error(errc::not_found, "{}: no '{}' (LeRoPE's alpha)", m_.path, n_.rope_alpha);
  if (!a->supported || is_quantized(a->type) || a->dims.numel() != half)
    return make_error(errc::shape_mismatch, "{}: '{}' must be float [{}] (is {} {})", m_.path,
                      n_.rope_alpha, half, a->raw_type, a->dims.to_string());
  std::vector<float> alpha(static_cast<size_t>(half));
  to_f32(a->type, a->data, alpha.data(), half);
  r.learned.resize(alpha.size());
  for (size_t i = 0; i < alpha.size(); ++i) r.learned[i] = std::exp(static_cast<double>(alpha[i]));
  model_rope_ = r;
  return r;
}

expected<vid> decoder::pos_scaled(builder& b, int l, vid q, int64_t heads, const std::string& scale,
                                  const std::string& bias, bool cut_heads, const char* what) {
  const cut c = cut_heads ? cut::out : cut::none;
  const axis ax = cut_heads ? axis::heads : axis::none;
  TROUPE_TRY_ASSIGN(ws, req(scale, l, {heads}, c, ax, 1));
  TROUPE_TRY_ASSIGN(wb, req(bias, l, {heads}, c, ax, 1));
  return b.op(op::pos_scale, {q, g_.input(input_kind::positions), ws, wb}, what);
}

expected<vid> decoder::mla(int l, vid h) {
  builder b(g_, l);
  // (Mistral Large 4's layers without RoPE: the positional dims join the nope ones, and kv_a
  // makes the latent alone)
  const int64_t C = c_.C, H = c_.H, rope = c_.layer_qk_rope(l),
                nope = c_.qk_nope + c_.qk_rope - rope, kvl = c_.kv_lora, vh = c_.v_head,
                qk = nope + rope;
  // a layer that attends over an earlier layer's latent cache has no kv_a of its own
  const int64_t source = c_.layer_kv_source(l);
  const bool own = source == l;
  vid src = h, qin = h;
  int64_t K = C;
  std::string wq = n_.mla_q;
  if (c_.q_lora > 0) {
    TROUPE_TRY_ASSIGN(wa, req(n_.mla_q_a, l, {c_.q_lora, C}));
    const vid qa = b.linear(h, wa, none, "q_a");
    TROUPE_TRY_SET(src, norm(qa, l, n_.mla_q_a_norm, "", c_.q_lora, norm_kind::rms, "q_a_norm"));
    qin = src;
    K = c_.q_lora;
    wq = n_.mla_q_b;
    if (c_.mla_q_gate) { // (A.X K2: q_b over the latent normed and raw, side by side)
      qin = b.op(op::concat, {src, qa}, "q_a_both");
      K = 2 * c_.q_lora;
    }
  }
  // each head's rows of q_b: its q (nope, rope), then with mla_q_gate its values' gate
  const int64_t per = c_.mla_q_gate ? qk + vh : qk;
  // (no positional part at all, rope 0: GLM-5.3's; its q and kv_a are the nope / latent rows)
  TROUPE_TRY_ASSIGN(wqn, req(wq, l, {H * nope, K}, cut::out, axis::heads, nope,
                             rope > 0 || per != qk ? head_rows(per, 0, nope) : weight_ref{}));
  vid wqp = none, wkp = none;
  weight_ref lat, pe;
  lat.segments = {{0, kvl}};
  pe.segments = {{kvl, rope}};
  if (rope > 0) {
    TROUPE_TRY_SET(
        wqp, req(wq, l, {H * rope, K}, cut::out, axis::heads, rope, head_rows(per, nope, rope)));
    if (own) TROUPE_TRY_SET(wkp, req(n_.mla_kv_a, l, {rope, C}, cut::none, axis::none, 1, pe));
  }
  vid wc = none;
  if (own)
    TROUPE_TRY_SET(
        wc, req(n_.mla_kv_a, l, {kvl, C}, cut::none, axis::none, 1, rope > 0 ? lat : weight_ref{}));
  // W_kb(h): from kv_b as [nope, kvl] per head (q_latent = W^T q_nope), or GGUF's k_b
  // already [kvl, nope] per head (q_latent = W q_nope)
  const bool split = !n_.mla_k_b.empty();
  vid wkb, wvb;
  if (split) {
    TROUPE_TRY_SET(wkb, req(n_.mla_k_b, l, {H * kvl, nope}, cut::out, axis::heads, kvl));
    TROUPE_TRY_SET(wvb, req(n_.mla_v_b, l, {H * vh, kvl}, cut::out, axis::heads, vh));
  } else {
    TROUPE_TRY_SET(wkb, req(n_.mla_kv_b, l, {H * nope, kvl}, cut::out, axis::heads, nope,
                            head_rows(nope + vh, 0, nope)));
    TROUPE_TRY_SET(wvb, req(n_.mla_kv_b, l, {H * vh, kvl}, cut::out, axis::heads, vh,
                            head_rows(nope + vh, nope, vh)));
  }
  TROUPE_TRY_ASSIGN(wo, req(n_.wo, l, {C, H * vh}, cut::in, axis::heads, vh));
  const vid qn = b.view(b.linear(qin, wqn, none, "q_nope"), {-1, nope}, "q_nope_heads");
  vid kf = none;
  if (own) {
    TROUPE_TRY_ASSIGN(cv, norm(b.linear(h, wc, none, "kv_latent"), l, n_.mla_kv_a_norm, "", kvl,
                               norm_kind::rms, "kv_latent_norm"));
    if (c_.latent_scale != 1) // (LongCat's kv LoRA scaling: keys' nope part and values alike)
      cv = b.scale(cv, static_cast<float>(c_.latent_scale), "kv_latent_scaled");
    kf = b.view(cv, {1, kvl}, "kv_latent_head");
  }
  kernels::op_params t;
  t.k = split ? 0 : 1; // kv_b's W_kb(h) is [nope, kvl]: q_latent = W_kb(h)^T q_nope
  const vid ql = b.op(op::head_matmul, {qn, wkb}, "q_latent", t);
  vid qf = ql;
  if (rope > 0) {
    vid qp = b.view(b.linear(qin, wqp, none, "q_pe"), {-1, rope}, "q_pe_heads");
    vid kp = own ? b.view(b.linear(h, wkp, none, "k_pe"), {1, rope}, "k_pe_head") : none;
    const vid pos = g_.input(input_kind::positions);
    kernels::op_params rp;
    TROUPE_TRY_SET(rp.rope, model_rope());
    if (c_.rope_enabled) { // (Kimi-Linear's latent attention has no positions at all)
      qp = b.op(op::rope, {qp, pos}, "q_pe_rope", rp);
      if (own) kp = b.op(op::rope, {kp, pos}, "k_pe_rope", rp);
    }
    qf = b.op(op::concat, {ql, qp}, "q_mla");
    if (own) kf = b.op(op::concat, {kf, kp}, "kv_mla");
  }
  if (c_.attn_pos_scale) // (Mistral Large 4: a scalar per token and head, so on the absorbed q)
    TROUPE_TRY_SET(qf, pos_scaled(b, l, qf, H, n_.q_pos_scale, n_.q_pos_bias, true, "q_scaled"));
  vid cache = none;
  if (own) {
    cache = add_kv_state(g_, state_kind::k_cache, l, 1, kvl + rope);
    b.op_into(op::kv_store, {kf, g_.input(input_kind::slots)}, cache, "kv_store");
  } else { // the source layer's latent cache, of the same geometry
    cache = layer_state(source, "k_cache");
    if (cache == none || g_[cache].dims != std::vector<int64_t>{1, kvl + rope})
      return make_error(errc::internal, "{}: layer {} reads the latent cache of layer {}, which {}",
                        m_.path, l, source, cache == none ? "has none" : "has another geometry");
  }
  if (c_.layer_chunk(l) > 0)
    return make_error(errc::unsupported,
                      "{}: chunked attention is not implemented for latent "
                      "attention",
                      m_.path);
  kernels::op_params ap;
  ap.scale = static_cast<float>(c_.attention_scale());
  if (c_.layer_tempered(l)) { // (Mistral 4) every query's scores times the temperature
    ap.temp_floor = c_.attn_temp_floor;
    ap.temp_scale = static_cast<float>(c_.attn_temp_scale);
    ap.temp_offset = c_.attn_temp_offset;
  }
  std::vector<vid> ain = {qf, cache, cache, g_.input(input_kind::seq_table)};
  if (c_.attn_sinks) { // a sink logit per head (HY-V4)
    TROUPE_TRY_ASSIGN(sinks, req(n_.attn_sinks, l, {H}, cut::out, axis::heads, 1));
    ain.push_back(sinks);
  }
  if (c_.dsa_topk > 0) { // over the positions the indexer picks (src5)
    if (c_.q_lora <= 0 && !c_.dsa_q_from_input)
      return make_error(errc::unsupported, "{}: sparse attention without a q bottleneck", m_.path);
    const bool own = c_.dsa_source.empty() || c_.dsa_source[static_cast<size_t>(l)] == l;
    if (own) TROUPE_TRY_SET(dsa_sel_, dsa_indexer(l, h, src));
    if (dsa_sel_ == none)
      return make_error(errc::internal, "{}: layer {} reuses a selection no layer made", m_.path,
                        l);
    if (ain.size() == 4) ain.push_back(none); // (no sinks)
    ain.push_back(dsa_sel_);
  }
  const vid a = b.op(op::paged_attention, std::move(ain), "attn", ap);
  vid v = b.op(op::head_matmul, {a, wvb}, "attn_values"); // W_vb(h) (first kvl of a)
  if (c_.mla_q_gate) { // A.X K2: every value times sigmoid of its gate row of q_b
    TROUPE_TRY_ASSIGN(wg,
                      req(wq, l, {H * vh, K}, cut::out, axis::heads, vh, head_rows(per, qk, vh)));
    const vid gate = b.view(b.linear(qin, wg, none, "attn_gate"), {-1, vh}, "attn_gate_heads");
    v = b.mul(v, b.unary(op::sigmoid, gate, "attn_gate_sigmoid"), "attn_values_gated");
  }
  if (c_.attn_value_gate) { // HY-V4: every value times sigmoid(x w) of its own row
    TROUPE_TRY_ASSIGN(wg, req(n_.mla_gate, l, {H * vh, C}, cut::out, axis::heads, vh));
    const vid gate = b.view(b.linear(h, wg, none, "attn_gate"), {-1, vh}, "attn_gate_heads");
    v = b.mul(v, b.unary(op::sigmoid, gate, "attn_gate_sigmoid"), "attn_values_gated");
  }
  vid flat = b.view(v, {-1}, "attn_flat");
  if (!n_.attn_head_gate.empty()) { // Ling 3: each head's values times sigmoid(x w) of its own
    TROUPE_TRY_ASSIGN(wg, req(n_.attn_head_gate, l, {H, C}, cut::out, axis::heads, 1));
    const vid gate = b.unary(op::sigmoid, b.linear(h, wg, none, "attn_gate"), "attn_gate_sigmoid");
    flat = b.mul(flat, gate, "attn_gated"); // ([T, H] over each head's values)
  }
  return b.linear(flat, wo, none, "attn_out");
}

expected<vid> decoder::dsa_indexer(int l, vid h, vid q_resid) {
  builder b(g_, l);
  const int64_t C = c_.C, Hi = c_.dsa_heads, Di = c_.dsa_dim;
  // every weight whole on every rank: each computes the same selection
  if (c_.dsa_q_from_input) { // (Mistral Large 4) the queries from a LayerNorm of the input
    TROUPE_TRY_ASSIGN(nq, req(n_.dsa_q_norm, l, {C}));
    TROUPE_TRY_ASSIGN(nqb, req(n_.dsa_q_norm_b, l, {C}));
    q_resid = b.norm(h, norm_type::layer, nq, nqb, 1e-6f, "idx_q_in_norm");
  }
  TROUPE_TRY_ASSIGN(wq, req(n_.dsa_wq, l, {Hi * Di, c_.dsa_q_from_input ? C : c_.q_lora}));
  TROUPE_TRY_ASSIGN(wk, req(n_.dsa_wk, l, {Di, C}));
  TROUPE_TRY_ASSIGN(nw, req(n_.dsa_k_norm, l, {Di}));
  TROUPE_TRY_ASSIGN(nb, req(n_.dsa_k_norm_b, l, {Di}));
  TROUPE_TRY_ASSIGN(ww, req(n_.dsa_w, l, {Hi, C}));
  vid q = b.view(b.linear(q_resid, wq, none, "idx_q"), {-1, Di}, "idx_q_heads");
  if (c_.attn_pos_scale)
    TROUPE_TRY_SET(
        q, pos_scaled(b, l, q, Hi, n_.dsa_pos_scale, n_.dsa_pos_bias, false, "idx_q_scaled"));
  vid k = b.norm(b.linear(h, wk, none, "idx_k"), norm_type::layer, nw, nb,
                 static_cast<float>(c_.dsa_norm_eps), "idx_k_norm");
  const vid w =
      b.scale(b.linear(h, ww, none, "idx_weights"),
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(Hi))), "idx_weights_scaled");
  kernels::op_params sp;
  sp.k = static_cast<int>(c_.dsa_topk);
  sp.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Di)));
  if (c_.dsa_pool > 0) { // GLM-5.3's k-pools: pools of m tokens' keys, their positions picked
    const int64_t m = c_.dsa_pool;
    TROUPE_TRY_ASSIGN(wg, req(n_.dsa_pool_gate, l, {Di, C}));
    TROUPE_TRY_ASSIGN(ape, req(n_.dsa_pool_ape, l, {m, Di}));
    const vid rows =
        b.view(b.op(op::concat, {k, b.linear(h, wg, none, "idx_pool_gate")}, "idx_rows"),
               {1, 2 * Di}, "idx_row");
    const vid src = add_kv_state(g_, state_kind::k_cache, l, 1, 2 * Di, axis::none);
    g_[src].name = b.name("idx_src_cache");
    b.op_into(op::kv_store, {rows, g_.input(input_kind::slots)}, src, "idx_store");
    const vid pools = add_kv_state(g_, state_kind::k_cache, l, 1, Di, axis::none);
    g_[pools].name = b.name("idx_pool_cache");
    kernels::op_params cp;
    cp.compress = m; // (no norm, no rotation)
    b.op_into(op::kv_compress, {src, ape, none, g_.input(input_kind::seq_table)}, pools, "idx_pool",
              cp);
    sp.k = static_cast<int>(c_.dsa_topk / m);
    sp.compress = m;
    sp.expand = true;
    return b.op(op::dsa_select, {q, pools, g_.input(input_kind::seq_table), w}, "idx_select", sp);
  }
  k = b.view(k, {1, Di}, "idx_k_head");
  if (c_.layer_qk_rope(l) > 0) { // (none on Mistral Large 4's layers without RoPE)
    kernels::op_params rp;
    // the model's rotation over the first qk_rope dims, pairs as the indexer's
    TROUPE_TRY_SET(rp.rope, model_rope());
    rp.rope.layout = c_.dsa_rope_interleaved ? rope_layout::interleaved : rope_layout::neox;
    if (c_.dsa_rope_last) rp.rope.rot_offset = static_cast<int>(Di - c_.qk_rope); // (HY-V4)
    const vid pos = g_.input(input_kind::positions);
    q = b.op(op::rope, {q, pos}, "idx_q_rope", rp);
    k = b.op(op::rope, {k, pos}, "idx_k_rope", rp);
  }
  value cv; // the index keys: one head of Di per token, whole on every rank
  cv.name = "blk." + std::to_string(l) + ".idx_cache";
  cv.kind = value_kind::state;
  cv.state = state_kind::k_cache;
  cv.r = rows::fixed;
  cv.dims = {1, Di};
  cv.layer = l;
  cv.along = axis::none;
  const vid cache = g_.add_value(std::move(cv));
  b.op_into(op::kv_store, {k, g_.input(input_kind::slots)}, cache, "idx_store");
  return b.op(op::dsa_select, {q, cache, g_.input(input_kind::seq_table), w}, "idx_select", sp);
}

expected<vid> decoder::block_indexer(int l, vid h, axis kv_axis) {
  // a head per KV head (TP cuts them alike), one key per token whole on every rank; normed,
  // rotated as the attention's heads are, the keys cached
  builder b(g_, l);
  const int64_t C = c_.C, Hi = c_.layer_kv_heads(l), Di = c_.sparse_dim;
  TROUPE_TRY_ASSIGN(wq, req(n_.sparse_q, l, {Hi * Di, C}, cut::out, kv_axis, Di));
  TROUPE_TRY_ASSIGN(wk, req(n_.sparse_k, l, {Di, C}));
  vid q = b.view(b.linear(h, wq, none, "idx_q"), {-1, Di}, "idx_q_heads");
  vid k = b.view(b.linear(h, wk, none, "idx_k"), {1, Di}, "idx_k_head");
  TROUPE_TRY_SET(q, norm(q, l, n_.sparse_q_norm, "", Di, norm_kind::rms, "idx_q_norm"));
  TROUPE_TRY_SET(k, norm(k, l, n_.sparse_k_norm, "", Di, norm_kind::rms, "idx_k_norm"));
  const attention_spec s = layer_spec(l);
  if (s.rope) {
    if (s.rope_params.rot_offset + s.rope_params.rot_dim > Di)
      return make_error(errc::unsupported, "{}: an index head of {} under a rotation of {}",
                        m_.path, Di, s.rope_params.rot_dim);
    kernels::op_params rp;
    rp.rope = s.rope_params;
    const vid pos = g_.input(input_kind::positions);
    q = b.op(op::rope, {q, pos}, "idx_q_rope", rp);
    k = b.op(op::rope, {k, pos}, "idx_k_rope", rp);
  }
  const vid cache = add_kv_state(g_, state_kind::k_cache, l, 1, Di, axis::none);
  g_[cache].name = b.name("idx_cache");
  b.op_into(op::kv_store, {k, g_.input(input_kind::slots)}, cache, "idx_store");
  kernels::op_params sp;
  sp.k = static_cast<int>(c_.sparse_topk);
  sp.block = static_cast<int>(c_.sparse_block);
  sp.local_blocks = static_cast<int>(c_.sparse_local);
  sp.scale = 1.0f;
  return b.op(op::dsa_select, {q, cache, g_.input(input_kind::seq_table), none}, "idx_select", sp);
}

} // namespace troupe::arch::detail
