// shapes.cpp: shape inference over a graph (passes.hpp): every activation's row class and
// per-row dims follow from its node's operands, by the table of kernels/op.hpp. Run after a
// pass changes weights' shapes (the tensor-parallel cut) so the activations follow.
#include <numeric>

#include "graph/passes.hpp"

namespace troupe::graph {
namespace {

using kernels::op;

status bad(const graph& g, const node& n, std::string_view what) {
  return make_error(errc::shape_mismatch, "graph: {} ({}): {}", n.name, kernels::to_string(n.op),
                    what);
}

int64_t product(const std::vector<int64_t>& d) {
  return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<>());
}

} // namespace

status infer_shapes(graph& g) {
  for (node& n : g.nodes) {
    auto in = [&](size_t i) -> value* {
      return i < n.in.size() && n.in[i] != none ? &g[n.in[i]] : nullptr;
    };
    value& out = g[n.out[0]];
    if (out.kind == value_kind::state) { // a KV store: the caches keep their shapes
      // the attention's prologue (rope_kv_store) also rotates q (src4) into dst3
      if (n.kind == node_kind::op && n.op == op::rope_kv_store && n.out.size() > 2 &&
          n.out[2] != none) {
        value* q = in(4);
        if (!q) return bad(g, n, "rope_kv_store writes a rotated q without reading one");
        value& qr = g[n.out[2]];
        qr.r = q->r;
        qr.dims = q->dims;
        qr.type = dtype::f32;
      }
      continue;
    }
    value* x = in(0);
    if (!x) return bad(g, n, "no first operand");
    switch (n.kind) {
    case node_kind::view: {
      // the pattern may hold one -1, inferred from the element count
      out.dims = n.dims;
      int64_t known = 1, unknown = -1;
      for (size_t i = 0; i < out.dims.size(); ++i) {
        if (out.dims[i] < 0) {
          if (unknown >= 0) return bad(g, n, "a view with two unknown dims");
          unknown = static_cast<int64_t>(i);
        } else {
          known *= out.dims[i];
        }
      }
      const int64_t total = x->row_elems();
      if (unknown >= 0) {
        if (known == 0 || total % known) return bad(g, n, "the view does not divide its source");
        out.dims[static_cast<size_t>(unknown)] = total / known;
      } else if (known != total) {
        return bad(g, n, "the view changes the element count");
      }
      out.r = x->r;
      out.type = x->type;
      continue;
    }
    case node_kind::all_reduce:
      out.r = x->r;
      out.dims = x->dims;
      out.type = x->type;
      continue;
    case node_kind::all_gather:
      out.r = x->r;
      // the full vocabulary: set by the tensor-parallel pass (out.dims[0] = V)
      if (out.dims.empty()) out.dims = x->dims;
      out.type = dtype::f32;
      continue;
    case node_kind::op:
      break;
    }
    switch (n.op) {
    case op::embedding: { // rows of a table [V, C], or of an activation (selecting rows)
      value* ids = in(1);
      if (!ids || (x->r == rows::fixed && x->dims.size() != 2))
        return bad(g, n, "embedding needs a table [V, C] or an activation, and ids");
      out.r = ids->r;
      out.dims = x->r == rows::fixed ? std::vector<int64_t>{x->dims[1]} : x->dims;
      out.type = dtype::f32;
      break;
    }
    case op::matmul:
    case op::matmul_swiglu: {
      value* w = in(1);
      if (!w || w->r != rows::fixed || w->dims.size() != 2)
        return bad(g, n, "matmul needs a weight [N, K]");
      if (x->row_elems() != w->dims[1])
        return bad(g, n,
                   fmt::format("input has {} features per row, the weight {}", x->row_elems(),
                               w->dims[1]));
      out.r = x->r;
      out.dims = {w->dims[0]};
      out.type = dtype::f32;
      break;
    }
    case op::matmul_qkv: { // three products of one input, each into its own output
      for (int i = 0; i < 3; ++i) {
        value* w = in(1 + i);
        if (!w || w->r != rows::fixed || w->dims.size() != 2 || w->dims[1] != x->row_elems() ||
            n.out.size() != 3)
          return bad(g, n, "matmul_qkv needs three weights [N, K] of the input's K, three outputs");
        value& o = g[n.out[static_cast<size_t>(i)]];
        o.r = x->r;
        o.dims = {w->dims[0]};
        o.type = dtype::f32;
      }
      break;
    }
    case op::add_rmsnorm: {
      value& sum = g[n.out[1]];
      sum.r = x->r;
      sum.dims = x->dims;
      sum.type = dtype::f32;
      out.r = x->r;
      out.dims = x->dims; // out.type: f32, or q8_0 set by the quantize fusion
      break;
    }
    case op::topk:
    case op::moe_router: { // ids [k] and their values (router: weights) [k]
      if (n.out.size() != 2) return bad(g, n, "topk and moe_router write ids and values");
      out.r = x->r;
      out.dims = {n.p.k};
      out.type = dtype::i32;
      value& vals = g[n.out[1]];
      vals.r = x->r;
      vals.dims = {n.p.k};
      vals.type = dtype::f32;
      break;
    }
    case op::concat: {
      value* y = in(1);
      if (!y || y->dims.size() != x->dims.size() || x->dims.empty())
        return bad(g, n, "concat needs two values of the same rank");
      out.r = x->r;
      out.dims = x->dims;
      out.dims.back() += y->dims.back();
      out.type = dtype::f32;
      break;
    }
    case op::head_matmul: { // x [H, Kx] per row, W [H * N, K] or (p.k) [H * K, N]
      value* w = in(1);
      if (!w || w->dims.size() != 2 || x->dims.size() != 2)
        return bad(g, n, "head_matmul needs x [H, K] per row and a weight matrix");
      const int64_t H = x->dims[0];
      out.r = x->r;
      out.dims = {H, n.p.k ? w->dims[1] : w->dims[0] / H};
      out.type = dtype::f32;
      break;
    }
    case op::sum_rows:
      out.r = x->r;
      out.dims = {1};
      out.type = dtype::f32;
      break;
    case op::rmsnorm:
    case op::layernorm:
    case op::quantize:
    case op::dequantize:
    case op::convert:
      out.r = x->r;
      out.dims = x->dims; // the dtype is the builder's or a pass's
      break;
    case op::hc_pre: { // the block's input [C], and a layer's mix [N (N + 1)]
      value* fn = in(1);
      if (fn && fn->dims.size() != 2) return bad(g, n, "hc_pre needs fn [M, N C]");
      const int64_t M = fn ? fn->dims[0] : n.p.k; // (the mean: p.k streams)
      // a layer's M = N (N + 2) (scale [3]), an independent layer's 2 N (scale [2]), a head's N
      const bool independent = n.out.size() > 1 && in(3) && in(3)->dims == std::vector<int64_t>{2};
      int64_t N = independent ? M / 2 : M;
      if (n.out.size() > 1 && !independent)
        for (N = 1; N * (N + 2) < M; ++N) {
        }
      if (N <= 0 || (n.out.size() > 1 && !independent && N * (N + 2) != M) || x->row_elems() % N)
        return bad(g, n, "hc_pre: fn's rows are not N (N + 2), 2 N or N for the streams");
      out.r = x->r;
      out.dims = {x->row_elems() / N};
      out.type = dtype::f32;
      if (n.out.size() > 1) {
        value& mix = g[n.out[1]];
        mix.r = x->r;
        mix.dims = {independent ? N : N * (N + 1)};
        mix.type = dtype::f32;
      }
      break;
    }
    case op::slice: // p.cols of each row
      if (n.p.col0 < 0 || n.p.cols <= 0 || n.p.col0 + n.p.cols > x->row_elems())
        return bad(g, n, "slice takes columns within the row");
      out.r = x->r;
      out.dims = {n.p.cols};
      out.type = dtype::f32;
      break;
    case op::pos_scale: // x's shape
    case op::hc_post:   // the streams' shape
      out.r = x->r;
      out.dims = x->dims;
      out.type = dtype::f32;
      break;
    case op::dsa_select: // k positions per query (expanded: k entries of m, and a tail of m - 1)
      out.r = x->r;
      out.dims = {n.p.block > 0 ? x->dims[0] * n.p.k * n.p.block // (each head's blocks)
                  : n.p.expand  ? n.p.k * n.p.compress + n.p.compress - 1
                                : n.p.k};
      out.type = dtype::i32;
      break;
    case op::lru_scan: // a's shape [T, W]
    case op::ssm_scan: // x's shape [T, H, P]
      if (!x) return bad(g, n, "ssm_scan without x");
      out.r = x->r;
      out.dims = x->dims;
      out.type = dtype::f32;
      break;
    case op::gated_delta: // the values' shape [T, Hv, Dv]
    case op::mlstm_scan:  // (and [T, H, Dv])
      if (!in(2)) return bad(g, n, "a recurrence without values");
      out.r = in(2)->r;
      out.dims = in(2)->dims;
      out.type = dtype::f32;
      break;
    case op::attention:
    case op::paged_attention:
    case op::rope:
    case op::silu:
    case op::gelu_erf:
    case op::gelu_tanh:
    case op::tanh:
    case op::rsqrt:
    case op::swiglu:
    case op::softmax:
    case op::add:
    case op::mul:
    case op::scale:
    default:
      out.r = x->r;
      out.dims = x->dims;
      out.type = dtype::f32;
      break;
    }
    (void)product;
  }
  return {};
}

} // namespace troupe::graph
