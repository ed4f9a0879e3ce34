// matmul.cu: y = x W^T (+ bias) with W in f32, f16 or bf16; one warp per output feature and
// token, lanes striding over K, f32 accumulation and a warp-shuffle reduction. A first,
// correct kernel; the tensor-core path (cuBLASLt / wgmma) comes with the CUDA backend issue.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda.hpp"

namespace troupe::kernels::cuda {
namespace {

template <class W>
__device__ float load_w(const W* w, long long i);
template <>
__device__ float load_w<float>(const float* w, long long i) {
  return w[i];
}
template <>
__device__ float load_w<__half>(const __half* w, long long i) {
  return __half2float(w[i]);
}
template <>
__device__ float load_w<__nv_bfloat16>(const __nv_bfloat16* w, long long i) {
  return __bfloat162float(w[i]);
}

template <class W>
__global__ void matmul_kernel(const float* x, const W* w, const float* bias, float* y, long long T,
                              long long K, long long N) {
  const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= T * N) return;
  const long long t = warp / N, n = warp % N;
  float acc = 0.0f;
  for (long long k = lane; k < K; k += 32) acc += x[t * K + k] * load_w(w, n * K + k);
  for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[t * N + n] = acc + (bias ? bias[n] : 0.0f);
}

} // namespace

status launch_matmul(const op_args& a, const exec_ctx& c) {
  auto s = static_cast<cudaStream_t>(c.stream);
  const long long T = a.src[0].rows(), K = a.src[0].cols(), N = a.src[1].rows();
  const unsigned blocks = static_cast<unsigned>((T * N * 32 + 255) / 256);
  const float* bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  switch (a.src[1].type) {
  case dtype::f32:
    matmul_kernel<<<blocks, 256, 0, s>>>(a.src[0].as<float>(), a.src[1].as<float>(), bias,
                                         a.dst.as<float>(), T, K, N);
    break;
  case dtype::f16:
    matmul_kernel<<<blocks, 256, 0, s>>>(a.src[0].as<float>(), a.src[1].as<__half>(), bias,
                                         a.dst.as<float>(), T, K, N);
    break;
  case dtype::bf16:
    matmul_kernel<<<blocks, 256, 0, s>>>(a.src[0].as<float>(), a.src[1].as<__nv_bfloat16>(), bias,
                                         a.dst.as<float>(), T, K, N);
    break;
  default:
    break;
  }
  return check_launch("matmul", c);
}

} // namespace troupe::kernels::cuda
