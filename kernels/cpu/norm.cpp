// norm.cpp (cpu): rmsnorm and layernorm over f32 rows, and the fused residual add + rmsnorm
// (the sum is written once and normalised while its row is still in L1), threaded over rows.
#include <cmath>

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

void rmsnorm(const op_args& a, const exec_ctx& ctx) {
  const int64_t C = a.src[0].cols();
  parallel(ctx, a.src[0].rows(), 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      rms_row(a.src[0].row<float>(t), a.src[1].as<float>(), a.dst.row<float>(t), C, a.p.eps);
  });
}

void add_rmsnorm(const op_args& a, const exec_ctx& ctx) {
  const int64_t C = a.src[0].cols();
  parallel(ctx, a.src[0].rows(), 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      add_rms_row(a.src[0].row<float>(t), a.src[1].row<float>(t), a.src[2].as<float>(),
                  a.dst2.row<float>(t), a.dst.row<float>(t), C, a.p.eps);
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

} // namespace

void register_norm(registry& r) {
  r.add(op::rmsnorm, backend::cpu, "f32", f32_args, rmsnorm);
  r.add(op::layernorm, backend::cpu, "f32", f32_args, layernorm);
  r.add(
      op::add_rmsnorm, backend::cpu, "f32",
      [](const op_args& a) {
        return f32_args(a) && a.dst2.type == dtype::f32 && a.dst2.contiguous();
      },
      add_rmsnorm);
}

} // namespace troupe::kernels::cpu
