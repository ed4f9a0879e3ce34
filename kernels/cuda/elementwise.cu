// elementwise.cu: the element-wise ops on f32, one thread per element (grid-stride loops):
// add / mul with src1 broadcast over rows ([1, C]) or columns ([T, 1]); the unary ops silu,
// tanh, rsqrt, scale (x s + b), gelu (erf and tanh forms), relu, sigmoid, exp, abs, recip,
// clamp; swiglu = silu(gate) * up. f32 math with the accurate library functions (expf,
// tanhf, erff: within a few ulp of the f64 reference).
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

__global__ void binary_kernel(const float* x, const float* z, float* y, long long T, long long C,
                              long long R1, long long C1, bool mul) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < T * C;
       i += (long long)gridDim.x * blockDim.x) {
    const long long t = i / C, c = i % C;
    const float u = z[(R1 == 1 ? 0 : t) * C1 + c / (C / C1)];
    y[i] = mul ? x[i] * u : x[i] + u;
  }
}

enum unary_kind : int {
  u_silu,
  u_tanh,
  u_rsqrt,
  u_scale,
  u_gelu_erf,
  u_gelu_tanh,
  u_relu,
  u_sigmoid,
  u_exp,
  u_abs,
  u_recip,
  u_clamp
};

__global__ void unary_kernel(const float* x, float* y, long long n, int kind, float s, float b) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = x[i];
    float r;
    switch (kind) {
    case u_silu:
      r = v / (1.0f + expf(-v));
      break;
    case u_tanh:
      r = tanhf(v);
      break;
    case u_rsqrt:
      r = 1.0f / sqrtf(v);
      break;
    case u_scale:
      r = v * s + b;
      break;
    case u_gelu_erf:
      r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
      break;
    case u_gelu_tanh:
      r = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
      break;
    case u_relu:
      r = v > 0.0f ? v : 0.0f;
      break;
    case u_sigmoid:
      r = 1.0f / (1.0f + expf(-v));
      break;
    case u_exp: // expf is 2 ulp off, an absolute error that grows with the result: rounded once
      r = static_cast<float>(exp(static_cast<double>(v)));
      break;
    case u_abs:
      r = fabsf(v);
      break;
    case u_recip:
      r = 1.0f / v;
      break;
    default: // clamp
      r = fminf(fmaxf(v, -s), s);
    }
    y[i] = r;
  }
}

__global__ void swiglu_kernel(const float* g, const float* u, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

} // namespace

status launch_binary(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].rows(), C = a.src[0].cols();
  binary_kernel<<<grid_for(T * C), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.src[1].as<float>(), a.dst.as<float>(), T, C, a.src[1].rows(),
      a.src[1].cols(), a.kind == op::mul);
  return check_launch("binary", c);
}

status launch_unary(const op_args& a, const exec_ctx& c) {
  int kind = u_clamp;
  switch (a.kind) {
  case op::silu:
    kind = u_silu;
    break;
  case op::tanh:
    kind = u_tanh;
    break;
  case op::rsqrt:
    kind = u_rsqrt;
    break;
  case op::scale:
    kind = u_scale;
    break;
  case op::gelu_erf:
    kind = u_gelu_erf;
    break;
  case op::gelu_tanh:
    kind = u_gelu_tanh;
    break;
  case op::relu:
    kind = u_relu;
    break;
  case op::sigmoid:
    kind = u_sigmoid;
    break;
  case op::exp:
    kind = u_exp;
    break;
  case op::abs:
    kind = u_abs;
    break;
  case op::recip:
    kind = u_recip;
    break;
  case op::clamp:
    kind = u_clamp;
    break;
  default:
    return make_error(errc::unsupported, "cuda unary: op {}", to_string(a.kind));
  }
  const long long n = a.src[0].numel();
  unary_kernel<<<grid_for(n), 256, 0, stream_of(c)>>>(a.src[0].as<float>(), a.dst.as<float>(), n,
                                                      kind, a.p.scale, a.p.bias);
  return check_launch("unary", c);
}

status launch_swiglu(const op_args& a, const exec_ctx& c) {
  const long long n = a.src[0].numel();
  swiglu_kernel<<<grid_for(n), 256, 0, stream_of(c)>>>(a.src[0].as<float>(), a.src[1].as<float>(),
                                                       a.dst.as<float>(), n);
  return check_launch("swiglu", c);
}

} // namespace troupe::kernels::cuda
