// elementwise.cu: add/mul with row or column broadcast, unary ops and swiglu on f32, one
// thread per element (grid-stride loop).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda.hpp"

namespace troupe::kernels::cuda {
namespace {

__global__ void binary_kernel(const float* x, const float* z, float* y, long long T, long long C,
                              long long R1, long long C1, bool mul) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < T * C;
       i += (long long)gridDim.x * blockDim.x) {
    const long long t = i / C, c = i % C;
    const float u = z[(R1 == 1 ? 0 : t) * C1 + (C1 == 1 ? 0 : c)];
    y[i] = mul ? x[i] * u : x[i] + u;
  }
}

__global__ void unary_kernel(const float* x, float* y, long long n, int kind, float s, float b) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = x[i];
    float r;
    switch (kind) {
    case 0:
      r = v / (1.0f + expf(-v));
      break; // silu
    case 1:
      r = tanhf(v);
      break; // tanh
    case 2:
      r = rsqrtf(v);
      break; // rsqrt
    case 3:
      r = v * s + b;
      break; // scale
    case 4:
      r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
      break; // gelu_erf
    default:
      r = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
    y[i] = r;
  }
}

__global__ void swiglu_kernel(const float* g, const float* u, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

int blocks_for(long long n) {
  return static_cast<int>(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
}

} // namespace

status launch_binary(const op_args& a, const exec_ctx& c) {
  auto s = static_cast<cudaStream_t>(c.stream);
  const long long T = a.src[0].rows(), C = a.src[0].cols();
  binary_kernel<<<blocks_for(T * C), 256, 0, s>>>(a.src[0].as<float>(), a.src[1].as<float>(),
                                                  a.dst.as<float>(), T, C, a.src[1].rows(),
                                                  a.src[1].cols(), a.kind == op::mul);
  return check_launch("binary", c);
}

status launch_unary(const op_args& a, const exec_ctx& c) {
  auto s = static_cast<cudaStream_t>(c.stream);
  int kind = 5;
  switch (a.kind) {
  case op::silu:
    kind = 0;
    break;
  case op::tanh:
    kind = 1;
    break;
  case op::rsqrt:
    kind = 2;
    break;
  case op::scale:
    kind = 3;
    break;
  case op::gelu_erf:
    kind = 4;
    break;
  default:
    kind = 5;
  }
  const long long n = a.src[0].numel();
  unary_kernel<<<blocks_for(n), 256, 0, s>>>(a.src[0].as<float>(), a.dst.as<float>(), n, kind,
                                             a.p.scale, a.p.bias);
  return check_launch("unary", c);
}

status launch_swiglu(const op_args& a, const exec_ctx& c) {
  auto s = static_cast<cudaStream_t>(c.stream);
  const long long n = a.src[0].numel();
  swiglu_kernel<<<blocks_for(n), 256, 0, s>>>(a.src[0].as<float>(), a.src[1].as<float>(),
                                              a.dst.as<float>(), n);
  return check_launch("swiglu", c);
}

} // namespace troupe::kernels::cuda
