// norm.cpp (ref): rmsnorm y = x / sqrt(mean(x^2) + eps) * w and layernorm
// y = (x - mean) / sqrt(var + eps) * w + b (biased variance), per row, in f64.
#include "kernels/ref/ref.hpp"

#include <cmath>

namespace troupe::kernels::ref {
namespace {

void rmsnorm(const op_args& a, const exec_ctx&) {
  const auto w = all_f32(a.src[1]);
  const int64_t C = a.src[0].cols();
  for (int64_t t = 0; t < a.src[0].rows(); ++t) {
    const auto x = row_f32(a.src[0], t);
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / C + a.p.eps);
    std::vector<float> y(C);
    for (int64_t c = 0; c < C; ++c) y[c] = static_cast<float>(x[c] * inv * w[c]);
    from_f32(a.dst.type, y.data(), a.dst.row(t), C);
  }
}

void layernorm(const op_args& a, const exec_ctx&) {
  const auto w = all_f32(a.src[1]);
  const auto b = a.src[2].data ? all_f32(a.src[2]) : std::vector<float>(w.size(), 0.0f);
  const int64_t C = a.src[0].cols();
  for (int64_t t = 0; t < a.src[0].rows(); ++t) {
    const auto x = row_f32(a.src[0], t);
    double mean = 0.0;
    for (float v : x) mean += v;
    mean /= C;
    double var = 0.0;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= C;
    const double inv = 1.0 / std::sqrt(var + a.p.eps);
    std::vector<float> y(C);
    for (int64_t c = 0; c < C; ++c) y[c] = static_cast<float>((x[c] - mean) * inv * w[c] + b[c]);
    from_f32(a.dst.type, y.data(), a.dst.row(t), C);
  }
}

bool float_rows(const op_args& a) {
  return all_contiguous(a) && !is_quantized(a.src[0].type) && !is_quantized(a.dst.type);
}

} // namespace

void register_norm(registry& r) {
  r.add(op::rmsnorm, backend::ref, "any", float_rows, rmsnorm);
  r.add(op::layernorm, backend::ref, "any", float_rows, layernorm);
}

} // namespace troupe::kernels::ref
