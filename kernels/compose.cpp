// compose.cpp: ops built from primitives when a backend lacks a native kernel (registry.hpp).
//   swiglu    = mul(silu(gate), up)
//   gelu_tanh = mul(x, scale(tanh(scale(add(x, scale(mul(mul(x, x), x), 0.044715)), k)), .5, .5))
//   layernorm = mul(mul(add(x, -mean), rsqrt(var + eps)), w) (+ b), means from sum_rows
//   rmsnorm   = mul(mul(x, rsqrt(sum_rows(x * x) / C + eps)), w)
// and the fused ops (op.hpp), which are defined by the composition they replace:
//   add_rmsnorm   = rmsnorm(add(x, r) -> dst2, w)   (then quantize, for a q8_0 dst)
//   rmsnorm to q8_0 = quantize(rmsnorm(x, w))
//   matmul_swiglu = swiglu(matmul(x, W_gate), matmul(x, W_up))
//   matmul_qkv    = matmul(x, Wq) -> dst, matmul(x, Wk) -> dst2, matmul(x, Wv) -> dst3
//   rope_kv_store = kv_store(rope(k, pos), slots) (+ kv_store(v, slots), rope(q, pos))
// Temporaries come from the backend's device; primitives are looked up native-only, so a
// composite never recurses. Slower than a fused kernel, but correct: the op harness runs
// every composite against the reference (tests/kernels/test_ops.cpp, `--composed`).
#include <cmath>
#include <numbers>

#include "kernels/compose_util.hpp"

namespace troupe::kernels {
namespace {

using compose::prim;
using compose::scratch;

op_args make(op o, tensor_view dst, tensor_view s0, tensor_view s1 = {}, float scale = 1.0f,
             float bias = 0.0f) {
  op_args a;
  a.kind = o;
  a.src[0] = s0;
  a.src[1] = s1;
  a.dst = dst;
  a.p.scale = scale;
  a.p.bias = bias;
  return a;
}

bool has(const registry& r, backend b, std::initializer_list<op> ops, const tensor_view& like) {
  for (op o : ops) {
    const tensor_view col(like.data, dtype::f32, shape{like.rows(), 1});
    const tensor_view row(like.data, dtype::f32, shape{1, like.cols()});
    op_args a = make(o, like, like, like);
    if (o == op::sum_rows) a.dst = col;
    if (!r.find(b, a, lookup::native_only)) return false;
    if (o == op::add || o == op::mul) {
      a.src[1] = col;
      if (!r.find(b, a, lookup::native_only)) return false;
      a.src[1] = row;
      if (!r.find(b, a, lookup::native_only)) return false;
    }
  }
  return true;
}

tensor_view f32_2d(const tensor_view& t) {
  return tensor_view(t.data, dtype::f32, shape{t.rows(), t.cols()});
}

bool f32_only(const op_args& a) {
  for (const auto& s : a.src)
    if (s.data && s.type != dtype::f32) return false;
  return a.dst.type == dtype::f32;
}

// swiglu
bool swiglu_ok(const registry& r, backend b, const op_args& a) {
  return f32_only(a) && get_device(b) && has(r, b, {op::silu, op::mul}, f32_2d(a.src[0]));
}
status swiglu_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  const auto g = f32_2d(a.src[0]), u = f32_2d(a.src[1]), y = f32_2d(a.dst);
  scratch s{c, {}};
  TROUPE_TRY_ASSIGN(t, s.make(b, g.rows(), g.cols()));
  TROUPE_TRY(prim(r, b, make(op::silu, t, g), c));
  TROUPE_TRY(prim(r, b, make(op::mul, y, t, u), c));
  return {};
}

// gelu_tanh
bool gelu_ok(const registry& r, backend b, const op_args& a) {
  return f32_only(a) && get_device(b) &&
         has(r, b, {op::mul, op::add, op::scale, op::tanh}, f32_2d(a.src[0]));
}
status gelu_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  const auto x = f32_2d(a.src[0]), y = f32_2d(a.dst);
  scratch s{c, {}};
  TROUPE_TRY_ASSIGN(t1, s.make(b, x.rows(), x.cols()));
  TROUPE_TRY_ASSIGN(t2, s.make(b, x.rows(), x.cols()));
  const float k = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
  TROUPE_TRY(prim(r, b, make(op::mul, t1, x, x), c));                 // x^2
  TROUPE_TRY(prim(r, b, make(op::mul, t1, t1, x), c));                // x^3
  TROUPE_TRY(prim(r, b, make(op::scale, t1, t1, {}, 0.044715f), c));  // 0.044715 x^3
  TROUPE_TRY(prim(r, b, make(op::add, t1, t1, x), c));                // x + 0.044715 x^3
  TROUPE_TRY(prim(r, b, make(op::scale, t1, t1, {}, k), c));          // k (...)
  TROUPE_TRY(prim(r, b, make(op::tanh, t2, t1), c));                  // tanh
  TROUPE_TRY(prim(r, b, make(op::scale, t2, t2, {}, 0.5f, 0.5f), c)); // (1 + tanh) / 2
  TROUPE_TRY(prim(r, b, make(op::mul, y, x, t2), c));
  return {};
}

// layernorm and rmsnorm
bool norm_ok(const registry& r, backend b, const op_args& a) {
  return f32_only(a) && get_device(b) &&
         has(r, b, {op::sum_rows, op::scale, op::add, op::mul, op::rsqrt}, f32_2d(a.src[0]));
}
status norm_run(const registry& r, backend b, const op_args& a, const exec_ctx& c, bool center) {
  const auto x = f32_2d(a.src[0]), y = f32_2d(a.dst);
  const int64_t T = x.rows(), C = x.cols();
  scratch s{c, {}};
  TROUPE_TRY_ASSIGN(xc, s.make(b, T, C));
  TROUPE_TRY_ASSIGN(col, s.make(b, T, 1));
  const tensor_view w(a.src[1].data, dtype::f32, shape{1, C});
  if (center) {
    TROUPE_TRY(prim(r, b, make(op::sum_rows, col, x), c));
    TROUPE_TRY(prim(r, b, make(op::scale, col, col, {}, -1.0f / C), c)); // -mean
    TROUPE_TRY(prim(r, b, make(op::add, xc, x, col), c));                // x - mean
  } else {
    TROUPE_TRY(prim(r, b, make(op::scale, xc, x, {}, 1.0f), c)); // copy
  }
  TROUPE_TRY(prim(r, b, make(op::mul, y, xc, xc), c)); // squares (y as scratch)
  TROUPE_TRY(prim(r, b, make(op::sum_rows, col, y), c));
  TROUPE_TRY(prim(r, b, make(op::scale, col, col, {}, 1.0f / C, a.p.eps), c)); // var + eps
  TROUPE_TRY(prim(r, b, make(op::rsqrt, col, col), c));
  TROUPE_TRY(prim(r, b, make(op::mul, y, xc, col), c));
  TROUPE_TRY(prim(r, b, make(op::mul, y, y, w), c));
  if (center && a.src[2].data)
    TROUPE_TRY(
        prim(r, b, make(op::add, y, y, tensor_view(a.src[2].data, dtype::f32, shape{1, C})), c));
  return {};
}
status layernorm_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  return norm_run(r, b, a, c, true);
}
status rmsnorm_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  return norm_run(r, b, a, c, false);
}

// The fused ops: their sub-op arguments, built once for supports() and for the run.
op_args add_of(const op_args& a) {
  return make(op::add, a.dst2, a.src[0], a.src[1]);
}
// rmsnorm of x into y (f32), and y quantized into q (for a q8_0 destination)
op_args rms_into(const tensor_view& y, const tensor_view& x, const tensor_view& w, float eps) {
  op_args s = make(op::rmsnorm, y, x, w);
  s.p.eps = eps;
  return s;
}
bool rms_quant_ok(const registry& r, backend b, const tensor_view& q, const tensor_view& x,
                  const tensor_view& w, float eps) {
  const tensor_view like = f32_2d(x);
  return get_device(b) && r.find(b, rms_into(like, like, w, eps), lookup::native_only) &&
         r.find(b, make(op::quantize, q, like), lookup::native_only);
}
status rms_quant_run(const registry& r, backend b, const tensor_view& q, const tensor_view& x,
                     const tensor_view& w, float eps, const exec_ctx& c) {
  scratch s{c, {}};
  TROUPE_TRY_ASSIGN(y, s.make(b, x.rows(), x.cols()));
  TROUPE_TRY(prim(r, b, rms_into(y, f32_2d(x), w, eps), c));
  TROUPE_TRY(prim(r, b, make(op::quantize, q, y), c));
  return {};
}

bool add_rmsnorm_ok(const registry& r, backend b, const op_args& a) {
  if (!r.find(b, add_of(a), lookup::native_only)) return false;
  if (is_quantized(a.dst.type)) return rms_quant_ok(r, b, a.dst, a.dst2, a.src[2], a.p.eps);
  return r.find(b, rms_into(a.dst, a.dst2, a.src[2], a.p.eps), lookup::native_only).has_value();
}
status add_rmsnorm_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  TROUPE_TRY(prim(r, b, add_of(a), c));
  if (is_quantized(a.dst.type))
    TROUPE_TRY(rms_quant_run(r, b, a.dst, a.dst2, a.src[2], a.p.eps, c));
  else
    TROUPE_TRY(prim(r, b, rms_into(a.dst, a.dst2, a.src[2], a.p.eps), c));
  return {};
}

bool rmsnorm_q_ok(const registry& r, backend b, const op_args& a) {
  return a.dst.type == dtype::q8_0 && a.src[0].type == dtype::f32 &&
         rms_quant_ok(r, b, a.dst, a.src[0], a.src[1], a.p.eps);
}
status rmsnorm_q_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  return rms_quant_run(r, b, a.dst, a.src[0], a.src[1], a.p.eps, c);
}

op_args matmul_of(const op_args& a, const tensor_view& w, const tensor_view& y) {
  return make(op::matmul, y, a.src[0], w);
}
bool matmul_swiglu_ok(const registry& r, backend b, const op_args& a) {
  const tensor_view y = a.dst;
  return get_device(b) && r.find(b, matmul_of(a, a.src[1], y), lookup::native_only) &&
         r.find(b, make(op::swiglu, y, y, y), lookup::native_only);
}
status matmul_swiglu_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  scratch s{c, {}};
  TROUPE_TRY_ASSIGN(g, s.make(b, a.dst.rows(), a.dst.cols()));
  TROUPE_TRY_ASSIGN(u, s.make(b, a.dst.rows(), a.dst.cols()));
  TROUPE_TRY(prim(r, b, matmul_of(a, a.src[1], g), c));
  TROUPE_TRY(prim(r, b, matmul_of(a, a.src[2], u), c));
  TROUPE_TRY(prim(r, b, make(op::swiglu, a.dst, g, u), c));
  return {};
}

bool matmul_qkv_ok(const registry& r, backend b, const op_args& a) {
  return r.find(b, matmul_of(a, a.src[1], a.dst), lookup::native_only) &&
         r.find(b, matmul_of(a, a.src[2], a.dst2), lookup::native_only) &&
         r.find(b, matmul_of(a, a.src[3], a.dst3), lookup::native_only);
}
status matmul_qkv_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  TROUPE_TRY(prim(r, b, matmul_of(a, a.src[1], a.dst), c));
  TROUPE_TRY(prim(r, b, matmul_of(a, a.src[2], a.dst2), c));
  TROUPE_TRY(prim(r, b, matmul_of(a, a.src[3], a.dst3), c));
  return {};
}

// rope of x into y
op_args rope_of(const op_args& a, const tensor_view& y, const tensor_view& x) {
  op_args s = make(op::rope, y, x, a.src[1]);
  s.p.rope = a.p.rope;
  return s;
}
// x into the cache `cache`
op_args store_of(const op_args& a, const tensor_view& x, const tensor_view& cache) {
  op_args s = make(op::kv_store, cache, x, a.src[2]);
  s.p.block_size = a.p.block_size;
  return s;
}
bool rope_kv_store_ok(const registry& r, backend b, const op_args& a) {
  const auto &v = a.src[3], &q = a.src[4];
  return a.src[0].type == dtype::f32 && get_device(b) &&
         r.find(b, rope_of(a, a.src[0], a.src[0]), lookup::native_only) &&
         r.find(b, store_of(a, a.src[0], a.dst), lookup::native_only) &&
         (!v.data || r.find(b, store_of(a, v, a.dst2), lookup::native_only)) &&
         (!q.data || r.find(b, rope_of(a, a.dst3, q), lookup::native_only));
}
status rope_kv_store_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  scratch s{c, {}};
  TROUPE_TRY_ASSIGN(flat, s.make(b, a.src[0].dims[0], a.src[0].numel() / a.src[0].dims[0]));
  const tensor_view k(flat.data, dtype::f32, a.src[0].dims);
  TROUPE_TRY(prim(r, b, rope_of(a, k, a.src[0]), c));
  TROUPE_TRY(prim(r, b, store_of(a, k, a.dst), c));
  if (a.src[3].data) TROUPE_TRY(prim(r, b, store_of(a, a.src[3], a.dst2), c));
  if (a.src[4].data) TROUPE_TRY(prim(r, b, rope_of(a, a.dst3, a.src[4]), c));
  return {};
}

} // namespace

void register_composites(registry& r) {
  r.add_composite(op::add_rmsnorm, "add,rmsnorm", add_rmsnorm_ok, add_rmsnorm_run);
  r.add_composite(op::rmsnorm, "rmsnorm,quantize", rmsnorm_q_ok, rmsnorm_q_run);
  r.add_composite(op::matmul_swiglu, "matmul,matmul,swiglu", matmul_swiglu_ok, matmul_swiglu_run);
  r.add_composite(op::rope_kv_store, "rope,kv_store", rope_kv_store_ok, rope_kv_store_run);
  r.add_composite(op::matmul_qkv, "matmul,matmul,matmul", matmul_qkv_ok, matmul_qkv_run);
  r.add_composite(op::swiglu, "silu,mul", swiglu_ok, swiglu_run);
  r.add_composite(op::gelu_tanh, "mul,add,scale,tanh", gelu_ok, gelu_run);
  r.add_composite(op::layernorm, "sum_rows,scale,add,mul,rsqrt", norm_ok, layernorm_run);
  r.add_composite(op::rmsnorm, "sum_rows,scale,mul,rsqrt", norm_ok, rmsnorm_run);
  register_moe_composite(r);
}

} // namespace troupe::kernels
