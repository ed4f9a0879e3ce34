// elementwise.cpp (ref): unary ops (silu, gelu with erf or tanh, tanh, rsqrt), scale
// (x * s + b), clamp, swiglu (silu(gate) * up), and add / mul with src1 broadcast over rows ([1,
// C]) or columns ([T, 1]); pos_scale (a factor per token and head from its position). f32
// tensors; math in f64.
#include "kernels/expr.hpp"
#include "kernels/ref/ref.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace troupe::kernels::ref {
namespace {

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

template <class F>
void unary(const op_args& a, F f) {
  const float* x = a.src[0].as<float>();
  float* y = a.dst.as<float>();
  for (int64_t i = 0; i < a.src[0].numel(); ++i)
    y[i] = static_cast<float>(f(static_cast<double>(x[i])));
}

void silu_k(const op_args& a, const exec_ctx&) {
  unary(a, silu);
}
void gelu_erf_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); });
}
void gelu_tanh_k(const op_args& a, const exec_ctx&) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  unary(a, [](double x) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  });
}
void tanh_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return std::tanh(x); });
}
void rsqrt_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return 1.0 / std::sqrt(x); });
}
void scale_k(const op_args& a, const exec_ctx&) {
  const double s = a.p.scale, b = a.p.bias;
  unary(a, [s, b](double x) { return x * s + b; });
}

void clamp_k(const op_args& a, const exec_ctx&) {
  const double m = a.p.scale;
  unary(a, [m](double x) { return std::min(std::max(x, -m), m); });
}

void relu_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return x > 0 ? x : 0.0; });
}
void sigmoid_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}
void exp_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return std::exp(x); });
}
void abs_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return std::fabs(x); });
}
void recip_k(const op_args& a, const exec_ctx&) {
  unary(a, [](double x) { return 1.0 / x; });
}

// An element-wise program, interpreted in f64 (the specification of the JIT's kernels).
void elementwise_k(const op_args& a, const exec_ctx&) {
  const int64_t T = a.dst.rows(), C = a.dst.cols();
  float* y = a.dst.as<float>();
  double in[4] = {0, 0, 0, 0};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      for (int i = 0; i < a.p.program->sources && i < 4; ++i) {
        const tensor_view& s = a.src[static_cast<size_t>(i)];
        const int64_t r = s.rows() == 1 ? 0 : t, k = s.cols() == 1 ? 0 : c;
        in[i] = s.as<float>()[r * s.cols() + k];
      }
      y[t * C + c] = static_cast<float>(a.p.program->eval(in));
    }
}

void swiglu_k(const op_args& a, const exec_ctx&) {
  const float* g = a.src[0].as<float>();
  const float* u = a.src[1].as<float>();
  float* y = a.dst.as<float>();
  for (int64_t i = 0; i < a.src[0].numel(); ++i) y[i] = static_cast<float>(silu(g[i]) * u[i]);
}

template <bool Mul>
void binary(const op_args& a, const exec_ctx&) {
  const int64_t T = a.src[0].rows(), C = a.src[0].cols();
  const int64_t R1 = a.src[1].rows(), C1 = a.src[1].cols();
  const float* x = a.src[0].as<float>();
  const float* z = a.src[1].as<float>();
  float* y = a.dst.as<float>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      const double u = z[(R1 == 1 ? 0 : t) * C1 + c / (C / C1)]; // a group of C / C1 values
      const double v = x[t * C + c];
      y[t * C + c] = static_cast<float>(Mul ? v * u : v + u);
    }
  }
}

// x[t, h, :] times scale[h] ln(pos[t] + 1) + bias[h], or without them (1 + (pos[t] +
// p.temp_offset) / p.temp_floor) ^ p.temp_scale
void pos_scale_k(const op_args& a, const exec_ctx&) {
  const auto& x = a.src[0];
  const int64_t T = x.dims[0], H = x.dims[1], D = x.dims[2];
  const int32_t* pos = a.src[1].as<int32_t>();
  const float *s = a.src[2].as<float>(), *b = a.src[3].as<float>(), *xv = x.as<float>();
  float* y = a.dst.as<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const double f =
          s ? static_cast<double>(s[h]) * std::log(static_cast<double>(pos[t]) + 1.0) +
                  static_cast<double>(b[h])
            : std::pow(1.0 + static_cast<double>(pos[t] + a.p.temp_offset) / a.p.temp_floor,
                       static_cast<double>(a.p.temp_scale));
      for (int64_t d = 0; d < D; ++d)
        y[(t * H + h) * D + d] = static_cast<float>(xv[(t * H + h) * D + d] * f);
    }
}

bool all_f32_args(const op_args& a) {
  if (!all_contiguous(a) || a.dst.type != dtype::f32) return false;
  for (const auto& s : a.src)
    if (s.data && s.type != dtype::f32) return false;
  return true;
}

} // namespace

void register_elementwise(registry& r) {
  r.add(op::silu, backend::ref, "f32", all_f32_args, silu_k);
  r.add(op::gelu_erf, backend::ref, "f32", all_f32_args, gelu_erf_k);
  r.add(op::gelu_tanh, backend::ref, "f32", all_f32_args, gelu_tanh_k);
  r.add(op::tanh, backend::ref, "f32", all_f32_args, tanh_k);
  r.add(op::rsqrt, backend::ref, "f32", all_f32_args, rsqrt_k);
  r.add(op::scale, backend::ref, "f32", all_f32_args, scale_k);
  r.add(op::clamp, backend::ref, "f32", all_f32_args, clamp_k);
  r.add(op::relu, backend::ref, "f32", all_f32_args, relu_k);
  r.add(op::sigmoid, backend::ref, "f32", all_f32_args, sigmoid_k);
  r.add(op::pos_scale, backend::ref, "f32", all_contiguous, pos_scale_k);
  r.add(op::exp, backend::ref, "f32", all_f32_args, exp_k);
  r.add(op::abs, backend::ref, "f32", all_f32_args, abs_k);
  r.add(op::recip, backend::ref, "f32", all_f32_args, recip_k);
  r.add(op::elementwise, backend::ref, "interpreted", all_f32_args, elementwise_k);
  r.add(op::swiglu, backend::ref, "f32", all_f32_args, swiglu_k);
  r.add(op::add, backend::ref, "f32", all_f32_args, binary<false>);
  r.add(op::mul, backend::ref, "f32", all_f32_args, binary<true>);
}

} // namespace troupe::kernels::ref
