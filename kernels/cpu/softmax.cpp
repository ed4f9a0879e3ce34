// softmax.cpp (cpu): row-wise max-subtracted softmax of x * scale in f32, threaded over rows.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

void softmax(const op_args& a, const exec_ctx& ctx) {
  const int64_t N = a.src[0].cols();
  const float scale = a.p.scale;
  parallel(ctx, a.src[0].rows(), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* x = a.src[0].row<float>(t);
      float* y = a.dst.row<float>(t);
      float mx = -INFINITY;
      for (int64_t i = 0; i < N; ++i) mx = std::max(mx, x[i] * scale);
      float sum = 0.0f;
      for (int64_t i = 0; i < N; ++i) sum += y[i] = std::exp(x[i] * scale - mx);
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < N; ++i) y[i] *= inv;
    }
  });
}

} // namespace

void register_softmax(registry& r) {
  r.add(
      op::softmax, backend::cpu, "f32",
      [](const op_args& a) {
        return contiguous_args(a) && a.src[0].type == dtype::f32 && a.dst.type == dtype::f32;
      },
      softmax);
}

} // namespace troupe::kernels::cpu
