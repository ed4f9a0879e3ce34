// softmax.cpp (ref): row-wise softmax of x * scale, max-subtracted, in f64.
#include "kernels/ref/ref.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::kernels::ref {
namespace {

void softmax(const op_args& a, const exec_ctx&) {
  const int64_t N = a.src[0].cols();
  for (int64_t t = 0; t < a.src[0].rows(); ++t) {
    const float* x = a.src[0].row<float>(t);
    float* y = a.dst.row<float>(t);
    double mx = -INFINITY;
    for (int64_t i = 0; i < N; ++i) mx = std::max(mx, static_cast<double>(x[i]) * a.p.scale);
    double sum = 0.0;
    std::vector<double> e(N);
    for (int64_t i = 0; i < N; ++i)
      sum += e[i] = std::exp(x[i] * static_cast<double>(a.p.scale) - mx);
    for (int64_t i = 0; i < N; ++i) y[i] = static_cast<float>(e[i] / sum);
  }
}

} // namespace

void register_softmax(registry& r) {
  r.add(
      op::softmax, backend::ref, "f32",
      [](const op_args& a) {
        return all_contiguous(a) && a.src[0].type == dtype::f32 && a.dst.type == dtype::f32;
      },
      softmax);
}

} // namespace troupe::kernels::ref
