// norm.cpp (cpu): rmsnorm and layernorm over f32 rows, and the fused residual add + rmsnorm
// (the sum is written once and normalised while its row is still in L1), threaded over rows.
// rmsnorm and add_rmsnorm can write q8_0 rows: the normalised activations quantized in the
// same pass, as the next matmul's int8 dot products want them (op.hpp).
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

TROUPE_CPU_DISPATCH
void rms_row(const float* x, const float* w, float* y, int64_t C, float eps) {
  const float ss = dot_f32(x, x, C);
  const float inv = 1.0f / std::sqrt(ss / C + eps);
  for (int64_t c = 0; c < C; ++c) y[c] = x[c] * inv * w[c];
}

// s = x + r (s may alias x), y = rmsnorm(s) * w
TROUPE_CPU_DISPATCH
void add_rms_row(const float* x, const float* r, const float* w, float* s, float* y, int64_t C,
                 float eps) {
  for (int64_t c = 0; c < C; ++c) s[c] = x[c] + r[c];
  const float ss = dot_f32(s, s, C);
  const float inv = 1.0f / std::sqrt(ss / C + eps);
  for (int64_t c = 0; c < C; ++c) y[c] = s[c] * inv * w[c];
}

TROUPE_CPU_DISPATCH
void ln_row(const float* x, const float* w, const float* b, float* y, int64_t C, float eps) {
  float sum = 0.0f;
  for (int64_t c = 0; c < C; ++c) sum += x[c];
  const float mean = sum / C;
  float var = 0.0f;
  for (int64_t c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean);
  const float inv = 1.0f / std::sqrt(var / C + eps);
  for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - mean) * inv * w[c] + (b ? b[c] : 0.0f);
}

// Runs norm(t, y) for every row t, y being where row t's f32 result goes: the dst row
// itself, or (q8_0 destination) an L1 buffer quantized from there, so the f32 row never
// reaches memory.
template <class F>
void norm_rows(const op_args& a, const exec_ctx& ctx, F&& norm) {
  const tensor_view& dst = a.dst;
  parallel(ctx, a.src[0].rows(), 4, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> buf;
    if (dst.type != dtype::f32) buf.resize(dst.cols());
    for (int64_t t = t0; t < t1; ++t) {
      norm(t, dst.type == dtype::f32 ? dst.row<float>(t) : buf.data());
      if (dst.type != dtype::f32) store_row(dst.type, buf.data(), dst.row(t), dst.cols());
    }
  });
}

void rmsnorm(const op_args& a, const exec_ctx& ctx) {
  const int64_t C = a.src[0].cols();
  norm_rows(a, ctx, [&](int64_t t, float* y) {
    rms_row(a.src[0].row<float>(t), a.src[1].as<float>(), y, C, a.p.eps);
  });
}

void add_rmsnorm(const op_args& a, const exec_ctx& ctx) {
  const int64_t C = a.src[0].cols();
  norm_rows(a, ctx, [&](int64_t t, float* y) {
    add_rms_row(a.src[0].row<float>(t), a.src[1].row<float>(t), a.src[2].as<float>(),
                a.dst2.row<float>(t), y, C, a.p.eps);
  });
}

void layernorm(const op_args& a, const exec_ctx& ctx) {
  const int64_t C = a.src[0].cols();
  const float* b = a.src[2].data ? a.src[2].as<float>() : nullptr;
  parallel(ctx, a.src[0].rows(), 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      ln_row(a.src[0].row<float>(t), a.src[1].as<float>(), b, a.dst.row<float>(t), C, a.p.eps);
  });
}

bool f32_args(const op_args& a) {
  for (const auto& s : a.src)
    if (s.data && s.type != dtype::f32) return false;
  return contiguous_args(a) && a.dst.type == dtype::f32;
}

// f32 sources; an f32 destination, or q8_0 rows (whole blocks)
bool f32_to_f32_or_q8(const op_args& a) {
  for (const auto& s : a.src)
    if (s.data && s.type != dtype::f32) return false;
  const bool q8 = a.dst.type == dtype::q8_0 && a.dst.cols() % qk == 0;
  return contiguous_args(a) && (a.dst.type == dtype::f32 || q8);
}

} // namespace

void register_norm(registry& r) {
  r.add(op::rmsnorm, backend::cpu, "f32 -> f32|q8_0", f32_to_f32_or_q8, rmsnorm);
  r.add(op::layernorm, backend::cpu, "f32", f32_args, layernorm);
  r.add(
      op::add_rmsnorm, backend::cpu, "f32 -> f32|q8_0",
      [](const op_args& a) {
        return f32_to_f32_or_q8(a) && a.dst2.type == dtype::f32 && a.dst2.contiguous();
      },
      add_rmsnorm);
}

} // namespace troupe::kernels::cpu
