// compose_moe.cpp: the mixture-of-experts op (op.hpp `moe`) from the backend's matmuls, for
// backends whose tensors live in host memory (the CPU): the step's (token, choice) pairs are
// grouped by expert; each expert that was chosen at all gathers its tokens' rows, runs one
// matmul_swiglu (or gate and up matmuls, with their biases where given, and a swiglu or
// GPT-OSS's clamped form; or, ungated, up and relu^2) and one down matmul (and bias) over its own
// rows of the stacked weights, and adds its rows, weighted, into the result. So a step reads only
// the chosen experts' weights, and an expert chosen by n tokens streams its weights once for all n.
// At decode sizes (at most two (token, choice) pairs per thread) the chosen experts run side
// by side, one thread each; larger steps split each expert's matmuls over the threads.
// Expert ids are checked (an id outside [0, E) is an error, but for the zero-computation
// experts past them, which add their weight times x). Temporaries come from the
// executor's scratch: gathered rows [T * k, C], hidden [T * k, F] (twice without a fused
// matmul_swiglu), down output [T * k, C], and the grouping (T k ints, 2 (E + 1) counters).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>

#include "core/thread_pool.hpp"
#include "kernels/compose_util.hpp"

namespace troupe::kernels {
namespace {

using compose::prim;
using compose::scratch;

// Rows [r0, r0 + n) of a stacked weight matrix, as a matrix of its own.
tensor_view rows_of(const tensor_view& w, int64_t r0, int64_t n) {
  return tensor_view(static_cast<uint8_t*>(w.data) + r0 * row_bytes(w.type, w.cols()), w.type,
                     shape{n, w.cols()});
}

op_args mm(tensor_view y, tensor_view x, tensor_view w, tensor_view bias = {}) {
  op_args a;
  a.kind = op::matmul;
  a.src[0] = x;
  a.src[1] = w;
  a.src[2] = bias;
  a.dst = y;
  return a;
}

// Elements [i0, i0 + n) of a bias vector (none stays none).
tensor_view part_of(const tensor_view& b, int64_t i0, int64_t n) {
  if (!b.data) return {};
  return tensor_view(b.as<float>() + i0, dtype::f32, shape{n});
}

// GPT-OSS's clamped SwiGLU, in place over h (the up products) with g the gate's.
void swiglu_clamped(float* h, const float* g, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float gv = std::min(g[i], limit), uv = std::clamp(h[i], -limit, limit);
    h[i] = (uv + 1.0f) * gv / (1.0f + std::exp(-alpha * gv));
  }
}
// h = silu(min(g, L)) clamp(h, -L, L), in place (DeepSeek-V4's experts)
void silu_clamped(float* h, const float* g, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float gv = std::min(g[i], limit), uv = std::clamp(h[i], -limit, limit);
    h[i] = gv / (1.0f + std::exp(-gv)) * uv;
  }
}
// h = min(silu(g), limit) clamp(h, +-limit), in place (Step 3.7's order: clipped after the SiLU)
void silu_then_clamped(float* h, const float* g, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float uv = std::clamp(h[i], -limit, limit);
    h[i] = std::min(g[i] / (1.0f + std::exp(-g[i])), limit) * uv;
  }
}
// h = gelu_tanh(g) h, in place
void geglu(float* h, const float* g, int64_t n) {
  const float k = 0.7978845608028654f; // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    const float gv = g[i];
    h[i] *= 0.5f * gv * (1.0f + std::tanh(k * (gv + 0.044715f * gv * gv * gv)));
  }
}
op_args mm_swiglu(tensor_view y, tensor_view x, tensor_view g, tensor_view u) {
  op_args a = mm(y, x, g);
  a.kind = op::matmul_swiglu;
  a.src[2] = u;
  return a;
}
op_args swiglu_of(tensor_view y, tensor_view g, tensor_view u) {
  op_args a = mm(y, g, u);
  a.kind = op::swiglu;
  return a;
}

bool moe_ok(const registry& r, backend b, const op_args& a) {
  if (b == backend::cuda || !get_device(b)) return false; // reads ids and rows on the host
  const auto &x = a.src[0], &wg = a.src[3], &wd = a.src[5];
  const int64_t C = x.cols(), F = wd.cols(), n = x.rows() * a.src[1].cols();
  const tensor_view xs(x.data, dtype::f32, shape{n, C});
  const tensor_view hs(x.data, dtype::f32, shape{n, F});
  const auto ge = rows_of(wg, 0, F), de = rows_of(wd, 0, C);
  const bool plain =
      !a.src[6].data && !a.src[7].data && a.p.swiglu_limit <= 0 && !a.p.moe_relu2 && !a.p.moe_gelu;
  const bool fused = plain && r.find(b, mm_swiglu(hs, xs, ge, ge), lookup::native_only).has_value();
  const bool split = r.find(b, mm(hs, xs, ge, part_of(a.src[6], 0, F)), lookup::native_only) &&
                     r.find(b, mm(xs, hs, de, part_of(a.src[8], 0, C)), lookup::native_only) &&
                     r.find(b, swiglu_of(hs, hs, hs), lookup::native_only);
  return (fused || split) && r.find(b, mm(xs, hs, de), lookup::native_only);
}

status moe_run(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  const auto &x = a.src[0], &ids = a.src[1], &wts = a.src[2];
  const auto &wg = a.src[3], &wu = a.src[4], &wd = a.src[5];
  const auto &bg = a.src[6], &bu = a.src[7], &bd = a.src[8];
  const int64_t T = x.rows(), C = x.cols(), k = ids.cols(), F = wd.cols(), E = wg.rows() / F;
  const int64_t n = T * k;
  const float limit = a.p.swiglu_limit, alpha = a.p.swiglu_alpha;
  const bool relu2 = a.p.moe_relu2; // Nemotron-H: down(relu(up x)^2), no gate
  const bool gelu = a.p.moe_gelu;   // Gemma 4: gelu_tanh(gate x) up x
  const bool plain = !bg.data && !bu.data && limit <= 0 && !relu2 && !gelu; // silu(gate) up
  scratch s{c, {}};
  // the grouping: count[e] then, per expert, its (token, choice) pairs in token order
  TROUPE_TRY_ASSIGN(order_t, s.make(b, n, 1));
  auto* order = reinterpret_cast<int32_t*>(order_t.data);
  TROUPE_TRY_ASSIGN(count_t, s.make(b, 2 * (E + 1), 2)); // start[E + 1], at[E + 1] (int64)
  auto* start = reinterpret_cast<int64_t*>(count_t.data);
  int64_t* at = start + E + 1;
  std::memset(start, 0, static_cast<size_t>(2 * (E + 1)) * sizeof(int64_t));
  // ids are global; this shard holds experts [e0, e0 + E) (all of them without expert
  // parallelism): the others' choices are left to the shards that hold them
  const int64_t e0 = a.p.expert0, all = a.p.n_expert > 0 ? a.p.n_expert : E;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t id = ids.row<int32_t>(t)[j];
      if (id < 0 || id >= all + a.p.zero_experts)
        return make_error(errc::invalid_argument, "moe: token {} chose expert {} of {}", t, id,
                          all + a.p.zero_experts);
      if (id >= e0 && id < e0 + E) ++start[id - e0 + 1];
    }
  for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  std::memcpy(at, start, static_cast<size_t>(E) * sizeof(int64_t));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids.row<int32_t>(t)[j] - e0;
      if (e >= 0 && e < E) order[at[e]++] = static_cast<int32_t>(t * k + j);
    }
  TROUPE_TRY_ASSIGN(xg, s.make(b, n, C));
  TROUPE_TRY_ASSIGN(h, s.make(b, n, F));
  TROUPE_TRY_ASSIGN(yg, s.make(b, n, C));
  const tensor_view probe_h(h.data, dtype::f32, shape{1, F});
  const tensor_view probe_x(xg.data, dtype::f32, shape{1, C});
  const bool fused =
      plain && r.find(b, mm_swiglu(probe_h, probe_x, rows_of(wg, 0, F), rows_of(wu, 0, F)),
                      lookup::native_only)
                   .has_value();
  tensor_view g2;
  if (!fused && !relu2) TROUPE_TRY_SET(g2, s.make(b, n, F));
  std::memset(a.dst.data, 0, static_cast<size_t>(T * C) * sizeof(float));
  // one expert's rows: gather, gate / up and SwiGLU, down; each expert owns rows [p0, p0 + m)
  // of the temporaries, so experts may run side by side
  auto run_expert = [&](int64_t e, const exec_ctx& ec) -> status {
    const int64_t p0 = start[e], m = start[e + 1] - p0;
    if (m == 0) return {};
    const tensor_view xe(xg.row<float>(p0), dtype::f32, shape{m, C});
    const tensor_view he(h.row<float>(p0), dtype::f32, shape{m, F});
    const tensor_view ye(yg.row<float>(p0), dtype::f32, shape{m, C});
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(xe.row<float>(i), x.row<float>(order[p0 + i] / k), static_cast<size_t>(C) * 4);
    const auto ge = rows_of(wg, e * F, F), ue = rows_of(wu, e * F, F), de = rows_of(wd, e * C, C);
    if (relu2) {
      TROUPE_TRY(prim(r, b, mm(he, xe, ue, part_of(bu, e * F, F)), ec));
      float* hp = he.as<float>();
      for (int64_t i = 0; i < m * F; ++i) hp[i] = hp[i] > 0 ? hp[i] * hp[i] : 0.0f;
    } else if (fused) {
      TROUPE_TRY(prim(r, b, mm_swiglu(he, xe, ge, ue), ec));
    } else {
      const tensor_view gt(g2.row<float>(p0), dtype::f32, shape{m, F});
      TROUPE_TRY(prim(r, b, mm(gt, xe, ge, part_of(bg, e * F, F)), ec));
      TROUPE_TRY(prim(r, b, mm(he, xe, ue, part_of(bu, e * F, F)), ec));
      if (gelu)
        geglu(he.as<float>(), gt.as<float>(), m * F);
      else if (limit > 0 && a.p.moe_clamp && a.p.moe_clamp_after)
        silu_then_clamped(he.as<float>(), gt.as<float>(), m * F, limit);
      else if (limit > 0 && a.p.moe_clamp)
        silu_clamped(he.as<float>(), gt.as<float>(), m * F, limit);
      else if (limit > 0)
        swiglu_clamped(he.as<float>(), gt.as<float>(), m * F, alpha, limit);
      else
        TROUPE_TRY(prim(r, b, swiglu_of(he, gt, he), ec));
    }
    TROUPE_TRY(prim(r, b, mm(ye, he, de, part_of(bd, e * C, C)), ec));
    if (a.p.moe_post_norm) // Ergo: each output row RMS-normed times its expert's row
      for (int64_t i = 0; i < m; ++i) {
        float* yr = ye.row<float>(i);
        double ss = 0;
        for (int64_t cc = 0; cc < C; ++cc) ss += static_cast<double>(yr[cc]) * yr[cc];
        const float inv =
            static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(C) + a.p.eps));
        const float* wn = a.src[9].row<float>(e0 + e);
        for (int64_t cc = 0; cc < C; ++cc) yr[cc] *= inv * wn[cc];
      }
    return status{};
  };
  // decode-sized steps (a few rows per expert): the chosen experts in parallel, one thread
  // each, instead of every expert's small matmuls split over the threads in turn
  const int threads = c.pool ? c.pool->size() : 1;
  if (threads > 1 && n <= 2 * threads) {
    exec_ctx one = c;
    one.pool = nullptr;
    std::atomic<bool> failed{false};
    error first;
    std::mutex mu;
    int64_t na = 0; // the chosen experts, into `at` (free once `order` is built)
    for (int64_t e = 0; e < E; ++e)
      if (start[e + 1] > start[e]) at[na++] = e;
    c.pool->parallel_for(na, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        if (auto st = run_expert(at[i], one); !st) {
          std::lock_guard<std::mutex> lk(mu);
          if (!failed.exchange(true)) first = st.error();
        }
    });
    if (failed) return first;
  } else {
    for (int64_t e = 0; e < E; ++e) TROUPE_TRY(run_expert(e, c));
  }
  // the weighted sum, in expert order for every token (the same order whichever way they ran)
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = start[e]; i < start[e + 1]; ++i) {
      const int32_t tj = order[i];
      float w = wts.row<float>(tj / k)[tj % k];
      if (a.src[9].data && !a.p.moe_post_norm) w *= a.src[9].as<float>()[e0 + e]; // its scale
      float* out = a.dst.row<float>(tj / k);
      const float* y = yg.row<float>(i);
      for (int64_t cc = 0; cc < C; ++cc) out[cc] += w * y[cc];
    }
  // the zero-computation experts (ids past the real ones): each its weight times x, added by
  // one shard of a summed split
  if (a.p.zero_experts > 0 && !a.p.zero_elsewhere)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < k; ++j) {
        if (ids.row<int32_t>(t)[j] < all) continue;
        const float w = wts.row<float>(t)[j];
        const float* xr = x.row<float>(t);
        float* out = a.dst.row<float>(t);
        for (int64_t cc = 0; cc < C; ++cc) out[cc] += w * xr[cc];
      }
  return {};
}

} // namespace

void register_moe_composite(registry& r) {
  r.add_composite(op::moe, "gather,matmul_swiglu,matmul,scatter", moe_ok, moe_run);
}

} // namespace troupe::kernels
