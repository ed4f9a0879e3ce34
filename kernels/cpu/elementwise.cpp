// elementwise.cpp (cpu): unary ops, scale, swiglu, and add / mul with row or column
// broadcast, and pos_scale, over f32, threaded over rows.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu.hpp"
#include "kernels/jit.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t grain = 4096; // elements per task: below this threading costs more than it saves

template <class F>
void unary(const op_args& a, const exec_ctx& ctx, F f) {
  const float* x = a.src[0].as<float>();
  float* y = a.dst.as<float>();
  parallel(ctx, a.src[0].numel(), grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = f(x[i]);
  });
}

void silu_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return x / (1.0f + std::exp(-x)); });
}
void gelu_erf_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); });
}
void gelu_tanh_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) {
    return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  });
}
void tanh_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return std::tanh(x); });
}
void rsqrt_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return 1.0f / std::sqrt(x); });
}
void scale_k(const op_args& a, const exec_ctx& c) {
  const float s = a.p.scale, b = a.p.bias;
  unary(a, c, [s, b](float x) { return x * s + b; });
}
void clamp_k(const op_args& a, const exec_ctx& c) {
  const float m = a.p.scale;
  unary(a, c, [m](float x) { return x < -m ? -m : x > m ? m : x; });
}
void relu_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return x > 0.0f ? x : 0.0f; });
}
void sigmoid_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
}
void exp_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return std::exp(x); });
}
void abs_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return std::fabs(x); });
}
void recip_k(const op_args& a, const exec_ctx& c) {
  unary(a, c, [](float x) { return 1.0f / x; });
}

// A JIT-compiled element-wise program (jit.hpp), threaded over rows.
void elementwise_k(const op_args& a, const exec_ctx& ctx) {
  const auto fn = reinterpret_cast<ew_fn>(a.p.program->compiled);
  const int64_t T = a.dst.rows(), C = a.dst.cols();
  const float* src[4] = {nullptr, nullptr, nullptr, nullptr};
  int64_t rs[4] = {0, 0, 0, 0}, cs[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    const tensor_view& s = a.src[static_cast<size_t>(i)];
    if (!s.data) continue;
    src[i] = s.as<float>();
    rs[i] = s.rows() == 1 ? 0 : s.cols();
    cs[i] = s.cols() == 1 ? 0 : 1;
  }
  parallel(ctx, T, std::max<int64_t>(1, grain / C), [&](int64_t t0, int64_t t1) {
    const float* off[4];
    for (int i = 0; i < 4; ++i) off[i] = src[i] ? src[i] + t0 * rs[i] : nullptr;
    fn(off, rs, cs, a.dst.as<float>() + t0 * C, t1 - t0, C);
  });
}

void swiglu_k(const op_args& a, const exec_ctx& ctx) {
  const float* g = a.src[0].as<float>();
  const float* u = a.src[1].as<float>();
  float* y = a.dst.as<float>();
  parallel(ctx, a.src[0].numel(), grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

template <bool Mul>
void binary(const op_args& a, const exec_ctx& ctx) {
  const int64_t C = a.src[0].cols();
  const int64_t R1 = a.src[1].rows(), C1 = a.src[1].cols();
  const float* x = a.src[0].as<float>();
  const float* z = a.src[1].as<float>();
  float* y = a.dst.as<float>();
  parallel(ctx, a.src[0].rows(), std::max<int64_t>(1, grain / C), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* zr = z + (R1 == 1 ? 0 : t) * C1;
      const float* xr = x + t * C;
      float* yr = y + t * C;
      if (C1 == C) {
        for (int64_t c = 0; c < C; ++c) yr[c] = Mul ? xr[c] * zr[c] : xr[c] + zr[c];
        continue;
      }
      const int64_t n = C / C1; // each value of src1's row meets a group of n (a head)
      for (int64_t j = 0; j < C1; ++j) {
        const float u = zr[j];
        const float* xg = xr + j * n;
        float* yg = yr + j * n;
        for (int64_t c = 0; c < n; ++c) yg[c] = Mul ? xg[c] * u : xg[c] + u;
      }
    }
  });
}

// x[t, h, :] times scale[h] ln(pos[t] + 1) + bias[h], or (1 + (pos[t] + offset) / F) ^ scale
// (the factor in f64, as the reference)
void pos_scale_k(const op_args& a, const exec_ctx& ctx) {
  const auto& x = a.src[0];
  const int64_t H = x.dims[1], D = x.dims[2];
  const int32_t* pos = a.src[1].as<int32_t>();
  const float *s = a.src[2].as<float>(), *b = a.src[3].as<float>(), *xv = x.as<float>();
  float* y = a.dst.as<float>();
  parallel(ctx, x.dims[0], std::max<int64_t>(1, grain / (H * D)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const double lp = std::log(static_cast<double>(pos[t]) + 1.0);
      // (without scale and bias: Beam's power of the position, every head alike)
      const double pw =
          s ? 0.0
            : std::pow(1.0 + static_cast<double>(pos[t] + a.p.temp_offset) / a.p.temp_floor,
                       static_cast<double>(a.p.temp_scale));
      for (int64_t h = 0; h < H; ++h) {
        const float f = static_cast<float>(s ? static_cast<double>(s[h]) * lp + b[h] : pw);
        const float* xr = xv + (t * H + h) * D;
        float* yr = y + (t * H + h) * D;
        for (int64_t d = 0; d < D; ++d) yr[d] = xr[d] * f;
      }
    }
  });
}

bool f32_args(const op_args& a) {
  for (const auto& s : a.src)
    if (s.data && s.type != dtype::f32) return false;
  return contiguous_args(a) && a.dst.type == dtype::f32;
}

} // namespace

void register_elementwise(registry& r) {
  r.add(op::silu, backend::cpu, "f32", f32_args, silu_k);
  r.add(op::gelu_erf, backend::cpu, "f32", f32_args, gelu_erf_k);
  r.add(op::gelu_tanh, backend::cpu, "f32", f32_args, gelu_tanh_k);
  r.add(op::tanh, backend::cpu, "f32", f32_args, tanh_k);
  r.add(op::rsqrt, backend::cpu, "f32", f32_args, rsqrt_k);
  r.add(op::scale, backend::cpu, "f32", f32_args, scale_k);
  r.add(op::clamp, backend::cpu, "f32", f32_args, clamp_k);
  r.add(op::relu, backend::cpu, "f32", f32_args, relu_k);
  r.add(op::sigmoid, backend::cpu, "f32", f32_args, sigmoid_k);
  r.add(op::pos_scale, backend::cpu, "f32", contiguous_args, pos_scale_k);
  r.add(op::exp, backend::cpu, "f32", f32_args, exp_k);
  r.add(op::abs, backend::cpu, "f32", f32_args, abs_k);
  r.add(op::recip, backend::cpu, "f32", f32_args, recip_k);
  r.add(
      op::elementwise, backend::cpu, "jit",
      [](const op_args& a) { return f32_args(a) && a.p.program && a.p.program->compiled; },
      elementwise_k);
  r.add(op::swiglu, backend::cpu, "f32", f32_args, swiglu_k);
  r.add(op::add, backend::cpu, "f32", f32_args, binary<false>);
  r.add(op::mul, backend::cpu, "f32", f32_args, binary<true>);
}

} // namespace troupe::kernels::cpu
