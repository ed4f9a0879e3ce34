// builder.cpp: the layer helpers (builder.hpp).
#include "graph/builder.hpp"

#include <cmath>
#include <tuple>

#include "kernels/expr.hpp"

namespace troupe::graph {
namespace {

std::shared_ptr<kernels::ew_program> softplus_program() {
  auto p = kernels::parse_expression("softplus(x)", {"x"});
  return std::make_shared<kernels::ew_program>(std::move(*p)); // (a constant text: it parses)
}

} // namespace

using kernels::op;

std::string builder::name(const std::string& what) const {
  if (layer_ < 0 || layer_ >= g_.n_layer) return what;
  return "blk." + std::to_string(layer_) + "." + what;
}

vid builder::op(kernels::op o, std::vector<vid> in, const std::string& what, kernels::op_params p) {
  value v;
  v.name = name(what);
  v.layer = layer_;
  const vid out = g_.add_value(std::move(v));
  op_into(o, std::move(in), out, what, p);
  return out;
}

void builder::op_into(kernels::op o, std::vector<vid> in, vid out, const std::string& what,
                      kernels::op_params p) {
  node n;
  n.kind = node_kind::op;
  n.op = o;
  n.in = std::move(in);
  n.out = {out};
  n.p = p;
  n.layer = layer_;
  n.name = name(what);
  g_.add_node(std::move(n));
}

vid builder::view(vid x, std::vector<int64_t> dims, const std::string& what) {
  value v;
  v.name = name(what);
  v.layer = layer_;
  v.dims = dims;
  v.alias = x;
  const vid out = g_.add_value(std::move(v));
  node n;
  n.dims = std::move(dims);
  n.kind = node_kind::view;
  n.in = {x};
  n.out = {out};
  n.layer = layer_;
  n.name = g_[out].name;
  g_.add_node(std::move(n));
  return out;
}

vid builder::all_reduce(vid x, const std::string& what, bool max) {
  value v;
  v.name = name(what);
  v.layer = layer_;
  v.alias = x;
  const vid out = g_.add_value(std::move(v));
  node n;
  n.kind = node_kind::all_reduce;
  n.p.reduce_max = max;
  n.in = {x};
  n.out = {out};
  n.layer = layer_;
  n.name = g_[out].name;
  g_.add_node(std::move(n));
  return out;
}

vid builder::norm(vid x, norm_type t, vid w, vid b, float eps, const std::string& what) {
  kernels::op_params p;
  p.eps = eps;
  if (t == norm_type::rms) return op(op::rmsnorm, {x, w}, what, p);
  return op(op::layernorm, {x, w, b}, what, p);
}

vid builder::linear(vid x, vid w, vid b, const std::string& what, vid step) {
  const bool bias = b != none && !g_[b].empty;
  std::vector<vid> in = {x, w, none};
  if (step != none) in.push_back(step);
  if (bias && g_[w].split == cut::in) { // partial sums: the bias goes after the all-reduce
    const vid y = op(op::matmul, std::move(in), what + "_nobias");
    return add(y, b, what);
  }
  if (bias) in[2] = b;
  return op(op::matmul, std::move(in), what);
}

vid builder::add(vid a, vid b, const std::string& what) {
  return op(op::add, {a, b}, what);
}

vid builder::mul(vid a, vid b, const std::string& what) {
  return op(op::mul, {a, b}, what);
}

vid builder::scale(vid x, float s, const std::string& what, float bias) {
  kernels::op_params p;
  p.scale = s;
  p.bias = bias;
  return op(op::scale, {x}, what, p);
}

vid builder::unary(kernels::op o, vid x, const std::string& what) {
  return op(o, {x}, what);
}

vid builder::clamp(vid x, float c, const std::string& what) {
  kernels::op_params p;
  p.scale = c;
  return op(op::clamp, {x}, what, p);
}

vid builder::elementwise(std::shared_ptr<kernels::ew_program> program, std::vector<vid> in,
                         const std::string& what) {
  kernels::op_params p;
  p.program = program.get();
  g_.programs.push_back(std::move(program));
  return op(op::elementwise, std::move(in), what, p);
}

vid builder::ffn(vid h, vid w_gate, vid w_up, vid w_down, vid b_gate, vid b_up, vid b_down,
                 kernels::op act, std::shared_ptr<kernels::ew_program> expr,
                 const std::string& what,
                 const std::function<std::pair<vid, vid>(vid)>& before_down, vid step) {
  vid a;
  if (expr && w_gate != none) {
    const vid g = linear(h, w_gate, b_gate, what + "_gate", step);
    const vid u = linear(h, w_up, b_up, what + "_up", step);
    if (expr->sources == 2) {
      a = elementwise(expr, {g, u}, what + "_act"); // the whole gating, over g and u
    } else {
      const vid ga = elementwise(expr, {g}, what + "_gate_act");
      a = mul(ga, u, what + "_act");
    }
  } else if (expr) {
    const vid u = linear(h, w_up, b_up, what + "_up", step);
    a = elementwise(expr, {u}, what + "_act");
  } else if (w_gate != none) {
    const vid g = linear(h, w_gate, b_gate, what + "_gate", step);
    const vid u = linear(h, w_up, b_up, what + "_up", step);
    if (act == op::silu) {
      a = op(op::swiglu, {g, u}, what + "_act");
    } else {
      const vid ga = unary(act, g, what + "_gate_act");
      a = mul(ga, u, what + "_act");
    }
  } else {
    const vid u = linear(h, w_up, b_up, what + "_up", step);
    a = unary(act, u, what + "_act");
  }
  vid a_step = none;
  if (before_down) std::tie(a, a_step) = before_down(a);
  return linear(a, w_down, b_down, what + "_out", a_step);
}

vid builder::moe(vid h, const moe_spec& s, vid w_router, vid w_gate, vid w_up, vid w_down,
                 vid router_bias, const moe_biases& biases) {
  vid logits = op(op::matmul, {s.router_in != none ? s.router_in : h, w_router, biases.router},
                  "ffn_router");
  if (s.logit_softcap > 0)
    logits = scale(unary(op::tanh, scale(logits, 1.0f / s.logit_softcap, "ffn_router_capped_in"),
                         "ffn_router_tanh"),
                   s.logit_softcap, "ffn_router_capped");
  // the experts: the stacked weights, and the biases and clamped activation where given
  kernels::op_params ep;
  ep.swiglu_alpha = s.swiglu_alpha;
  ep.swiglu_limit = s.swiglu_limit;
  ep.moe_relu2 = s.relu2;
  ep.moe_gelu = s.gelu;
  ep.moe_clamp = s.clamp;
  ep.moe_clamp_after = s.clamp_after;
  ep.zero_experts = static_cast<int>(s.zero_experts);
  if (s.null_experts > 0) ep.n_expert = static_cast<int>(s.experts + s.null_experts);
  auto experts = [&](vid ids, vid wts) {
    vid x = h;
    // one expert per token (the families refuse more): its input times the weight ([T, 1]
    // broadcast), its output times 1
    if (s.scale_input) {
      x = mul(h, wts, "ffn_moe_in");
      wts = scale(wts, 0.0f, "ffn_expert_ones", 1.0f);
    }
    std::vector<vid> in = {x, ids, wts, w_gate, w_up, w_down};
    if (biases.gate != none || biases.up != none || biases.down != none ||
        s.expert_scales != none || s.post_norm != none)
      in.insert(in.end(), {biases.gate, biases.up, biases.down});
    if (s.expert_scales != none) in.push_back(s.expert_scales);
    if (s.post_norm != none) { // (src9: the norms' rows in place of scales)
      in.push_back(s.post_norm);
      ep.moe_post_norm = true;
      ep.eps = s.post_norm_eps;
    }
    return op(op::moe, std::move(in), "ffn_moe", ep);
  };
  // the choice: ids [k] and their weights [k], written by one node
  auto choose = [&](kernels::op o, std::vector<vid> in, kernels::op_params p) {
    value ids, wts;
    ids.name = name("ffn_experts");
    ids.layer = layer_;
    wts.name = name("ffn_expert_weights");
    wts.layer = layer_;
    const vid iv = g_.add_value(std::move(ids)), wv = g_.add_value(std::move(wts));
    node n;
    n.kind = node_kind::op;
    n.op = o;
    n.in = std::move(in);
    n.out = {iv, wv};
    n.p = p;
    n.p.k = static_cast<int>(s.used);
    n.layer = layer_;
    n.name = g_[iv].name;
    g_.add_node(std::move(n));
    return std::pair<vid, vid>{iv, wv};
  };
  if (s.sigmoid || s.n_group > 1 || router_bias != none || s.sqrt_softplus || s.hash != none ||
      s.sparsemixer) { // one op: DeepSeek's routing (or PhiMoE's)
    kernels::op_params p;
    p.router_sqrt_softplus = s.sqrt_softplus;
    p.router_sparsemixer = s.sparsemixer;
    p.router_bias_on_logits = s.bias_on_logits;
    p.router_jitter = s.jitter;
    p.scale = s.scale;
    p.router_sigmoid = s.sigmoid;
    p.router_norm = s.norm_topk;
    p.router_eps = s.router_eps;
    p.n_group = static_cast<int>(s.n_group);
    p.topk_group = static_cast<int>(s.topk_group);
    p.group_max = s.group_max;
    std::vector<vid> rin = {logits, router_bias};
    if (s.hash != none) rin.insert(rin.end(), {g_.input(input_kind::tokens), s.hash});
    const auto [iv, wv] = choose(op::moe_router, std::move(rin), p);
    return experts(iv, s.reweight ? s.reweight(*this, wv) : wv);
  }
  const vid probs = op(op::softmax, {logits}, "ffn_router_probs");
  const auto [iv, wv] = choose(op::topk, {probs}, {});
  vid w = wv;
  if (s.norm_topk) {
    const vid sum = op(op::sum_rows, {w}, "ffn_expert_weights_sum");
    w = mul(w, unary(op::recip, sum, "ffn_expert_weights_inv"), "ffn_expert_weights_norm");
  }
  if (s.scale != 1) w = scale(w, s.scale, "ffn_expert_weights_scaled");
  return experts(iv, s.reweight ? s.reweight(*this, w) : w);
}

vid builder::attention(vid h, const attention_spec& s, vid wq, vid wk, vid wv, vid wo, vid bq,
                       vid bk, vid bv, vid bo, vid q_norm, vid k_norm, norm_type qk_norm,
                       float qk_eps) {
  const int64_t D = s.head_dim;
  vid q = linear(h, wq, bq, "q");
  vid k = linear(h, wk, bk, "k");
  vid v = linear(h, wv, bv, "v");
  if (s.clip_qkv > 0) {
    q = clamp(q, s.clip_qkv, "q_clip");
    k = clamp(k, s.clip_qkv, "k_clip");
    v = clamp(v, s.clip_qkv, "v_clip");
  }
  q = view(q, {-1, D}, "q_heads");
  k = view(k, {-1, D}, "k_heads");
  v = view(v, {-1, D}, "v_heads");
  if (q_norm != none) q = norm(q, qk_norm, q_norm, none, qk_eps, "q_norm");
  if (k_norm != none) k = norm(k, qk_norm, k_norm, none, qk_eps, "k_norm");
  return attend(s, {q, k, v}, wo, bo);
}

vid builder::attend(const attention_spec& s, qkv x, vid wo, vid bo) {
  const int64_t D = s.head_dim;
  vid q = x.q, k = x.k, v = x.v;
  const vid pos = g_.input(input_kind::positions);
  const vid slots = g_.input(input_kind::slots);
  const bool shared = s.k_cache != none; // attends over another layer's cache
  if (s.rope) {
    kernels::op_params rp;
    rp.rope = s.rope_params;
    q = op(op::rope, {q, pos}, "q_rope", rp);
    if (!shared) k = op(op::rope, {k, pos}, "k_rope", rp);
  }
  if (s.q_norm != none) q = norm(q, norm_type::rms, s.q_norm, none, s.qk_norm_eps, "q_norm");
  if (s.k_norm != none && !shared)
    k = norm(k, norm_type::rms, s.k_norm, none, s.qk_norm_eps, "k_norm");
  vid kc = s.k_cache, vc = s.v_cache;
  if (!shared) {
    kc = add_kv_state(g_, state_kind::k_cache, layer_, s.kv_heads, D, s.kv_axis);
    vc = add_kv_state(g_, state_kind::v_cache, layer_, s.kv_heads, D, s.kv_axis);
    op_into(op::kv_store, {k, slots}, kc, "k_store");
    op_into(op::kv_store, {v, slots}, vc, "v_store");
  }
  kernels::op_params ap;
  ap.scale = s.scale > 0 ? s.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  ap.window = s.window;
  ap.chunk = s.chunk;
  ap.temp_floor = s.temp_floor;
  ap.temp_scale = s.temp_scale;
  ap.temp_offset = s.temp_offset;
  ap.softcap = s.softcap;
  ap.alibi_max_bias = s.alibi_max_bias;
  ap.alibi_heads = static_cast<int>(s.heads);
  std::vector<vid> in = {q, kc, vc, g_.input(input_kind::seq_table)};
  if (s.sinks != none || s.select != none) in.push_back(s.sinks);
  if (s.select != none) { // (block-sparse: each KV head's selection)
    in.push_back(s.select);
    ap.sel_per_kv = true;
  }
  if (s.rel != none) { // (src7; none between)
    in.resize(7, none);
    in.push_back(s.rel);
  }
  const vid a = op(op::paged_attention, std::move(in), "attn", ap);
  vid flat = view(a, {-1}, "attn_flat");
  if (s.gate != none) {
    // (softplus has no primitive op: an element-wise program, JIT-built or run by the reference)
    const vid gt = s.gate_softplus ? elementwise(softplus_program(), {s.gate}, "attn_gate")
                                   : unary(op::sigmoid, s.gate, "attn_gate");
    flat = mul(flat, gt, "attn_gated");
  }
  vid step = none;
  if (s.before_out) std::tie(flat, step) = s.before_out(*this, flat);
  return linear(flat, wo, bo, "attn_out", step);
}

vid add_weight(graph& g, const std::string& name, weight_ref ref, dtype t,
               std::vector<int64_t> dims, int layer, cut split, axis along, int64_t unit) {
  value v;
  v.name = name;
  v.kind = value_kind::weight;
  v.type = t;
  v.r = rows::fixed;
  v.dims = std::move(dims);
  v.layer = layer;
  v.w = std::move(ref);
  v.split = split;
  v.along = along;
  v.unit = unit;
  return g.add_value(std::move(v));
}

vid add_recurrent_state(graph& g, state_kind k, int layer, std::vector<int64_t> dims, axis along,
                        const std::string& what) {
  value v;
  v.name = "blk." + std::to_string(layer) + "." + what;
  v.kind = value_kind::state;
  v.state = k;
  v.r = rows::fixed;
  v.dims = std::move(dims);
  v.layer = layer;
  v.along = along;
  return g.add_value(std::move(v));
}

vid add_kv_state(graph& g, state_kind k, int layer, int64_t kv_heads, int64_t head_dim,
                 axis along) {
  value v;
  v.name = "blk." + std::to_string(layer) + (k == state_kind::k_cache ? ".k_cache" : ".v_cache");
  v.kind = value_kind::state;
  v.state = k;
  v.r = rows::fixed;
  v.dims = {kv_heads, head_dim};
  v.layer = layer;
  v.along = along;
  return g.add_value(std::move(v));
}

} // namespace troupe::graph
