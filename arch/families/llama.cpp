// llama.cpp (arch/families): the Llama family and the architectures that are Llama with other
// defaults: Llama 2 / 3 (rope scaling), Mistral (sliding window), Qwen2 (q/k/v biases,
// per-layer windows). Pre-norm decoder: x += attn(rmsnorm(x)); x += ffn(rmsnorm(x)); SwiGLU
// (or another activation, gated or not); tied or separate lm_head.
#include "arch/families/families.hpp"

namespace troupe::arch {

using namespace graph;

status build_llama(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  const weight_names& n = c.names;
  weights w(m, g);
  g.n_layer = static_cast<int>(c.n_layer);
  std::shared_ptr<kernels::ew_program> act_expr; // a spec file's activation, shared by the layers
  if (!c.act_expr.empty()) {
    auto p = kernels::parse_expression(c.act_expr, {"x"});
    if (!p) {
      p = kernels::parse_expression(c.act_expr, {"g", "u"});
      if (!p) return p.error();
      p->sources = 2; // the whole gating, over g and u
    }
    act_expr = std::make_shared<kernels::ew_program>(std::move(*p));
  }
  const int64_t C = c.C, H = c.H, Hkv = c.Hkv, D = c.D, F = c.F, V = c.V;
  // embedding (vocabulary-parallel)
  TROUPE_TRY_ASSIGN(tok, w.get(n.tok_embd, -1, {V, C}, cut::out, axis::vocab));
  builder pre(g, -1);
  vid x = pre.op(kernels::op::embedding, {tok, g.input(input_kind::tokens)}, "tok_embd_out");
  g.residual.push_back(x);
  for (int l = 0; l < g.n_layer; ++l) {
    auto L = [l](const std::string& p) { return weight_names::layer(p, l); };
    builder b(g, l);
    TROUPE_TRY_ASSIGN(attn_norm, w.get(L(n.attn_norm), l, {C}));
    TROUPE_TRY_ASSIGN(wq, w.get(L(n.wq), l, {H * D, C}, cut::out, axis::heads, D));
    TROUPE_TRY_ASSIGN(wk, w.get(L(n.wk), l, {Hkv * D, C}, cut::out, axis::kv_heads, D));
    TROUPE_TRY_ASSIGN(wv, w.get(L(n.wv), l, {Hkv * D, C}, cut::out, axis::kv_heads, D));
    TROUPE_TRY_ASSIGN(wo, w.get(L(n.wo), l, {C, H * D}, cut::in, axis::heads, D));
    TROUPE_TRY_ASSIGN(bq, w.get(L(n.bq), l, {H * D}, cut::out, axis::heads, D, !c.qkv_bias));
    TROUPE_TRY_ASSIGN(bk, w.get(L(n.bk), l, {Hkv * D}, cut::out, axis::kv_heads, D, !c.qkv_bias));
    TROUPE_TRY_ASSIGN(bv, w.get(L(n.bv), l, {Hkv * D}, cut::out, axis::kv_heads, D, !c.qkv_bias));
    TROUPE_TRY_ASSIGN(bo, w.get(L(n.bo), l, {C}, cut::none, axis::none, 1, !c.o_bias));
    TROUPE_TRY_ASSIGN(ffn_norm, w.get(L(n.ffn_norm), l, {C}));
    vid wg = none;
    if (c.gated_ffn) {
      TROUPE_TRY_ASSIGN(v, w.get(L(n.w_gate), l, {F, C}, cut::out, axis::ffn));
      wg = v;
    }
    TROUPE_TRY_ASSIGN(wu, w.get(L(n.w_up), l, {F, C}, cut::out, axis::ffn));
    TROUPE_TRY_ASSIGN(wd, w.get(L(n.w_down), l, {C, F}, cut::in, axis::ffn));
    attention_spec s;
    s.heads = H;
    s.kv_heads = Hkv;
    s.head_dim = D;
    s.scale = static_cast<float>(c.attention_scale());
    s.window = c.layer_window(l);
    s.rope_params = c.rope;
    const float eps = static_cast<float>(c.norm_eps);
    const vid h = b.norm(x, norm_type::rms, attn_norm, none, eps, "attn_norm");
    const vid a = b.attention(h, s, wq, wk, wv, wo, bq, bk, bv, bo);
    x = b.add(x, a, "attn_residual");
    const vid h2 = b.norm(x, norm_type::rms, ffn_norm, none, eps, "ffn_norm");
    const kernels::op act = c.act == act_kind::silu        ? kernels::op::silu
                            : c.act == act_kind::gelu_tanh ? kernels::op::gelu_tanh
                                                           : kernels::op::gelu_erf;
    const vid f = b.ffn(h2, wg, wu, wd, none, none, none, act, act_expr);
    x = b.add(x, f, "ffn_residual");
    g.residual.push_back(x);
  }
  // head: the rows that need logits, the final norm, the vocabulary-parallel lm_head
  builder post(g, g.n_layer);
  TROUPE_TRY_ASSIGN(out_norm, w.get(n.output_norm, g.n_layer, {C}));
  vid out_w = tok;
  if (!c.tie_embeddings) {
    TROUPE_TRY_ASSIGN(o, w.get(n.output, g.n_layer, {V, C}, cut::out, axis::vocab));
    out_w = o;
  }
  const vid rows = post.op(kernels::op::embedding, {x, g.input(input_kind::logit_rows)}, "rows");
  const vid hn = post.norm(rows, norm_type::rms, out_norm, none, static_cast<float>(c.norm_eps),
                           "output_norm");
  g.logits = post.op(kernels::op::matmul, {hn, out_w, none}, "logits");
  g[g.logits].output = true;
  return {};
}

} // namespace troupe::arch
