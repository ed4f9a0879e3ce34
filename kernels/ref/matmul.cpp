// matmul.cpp (ref): y[t, n] = sum_k x[t, k] * W[n, k] (+ bias[n]), W in any stored dtype,
// dequantized to f32 and accumulated in f64.
#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {
namespace {

void matmul(const op_args& a, const exec_ctx&) {
  const auto& x = a.src[0];
  const auto& w = a.src[1];
  const float* bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  const int64_t T = x.rows(), K = x.cols(), N = w.rows();
  std::vector<float> wrow(K), xs(T * K);
  for (int64_t t = 0; t < T; ++t) to_f32(x.type, x.row(t), xs.data() + t * K, K); // f32 or q8_0
  for (int64_t n = 0; n < N; ++n) {
    to_f32(w.type, w.row(n), wrow.data(), K);
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = xs.data() + t * K;
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(xr[k]) * wrow[k];
      if (bias) acc += bias[n];
      a.dst.row<float>(t)[n] = static_cast<float>(acc);
    }
  }
}

} // namespace

void register_matmul(registry& r) {
  r.add(
      op::matmul, backend::ref, "any", [](const op_args& a) { return all_contiguous(a); }, matmul);
}

} // namespace troupe::kernels::ref
