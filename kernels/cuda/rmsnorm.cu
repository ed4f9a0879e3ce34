// rmsnorm.cu: one block of 256 threads per row; the sum of squares reduces through shared
// memory in a fixed order, so a row's result does not depend on scheduling.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda.hpp"

namespace troupe::kernels::cuda {
namespace {

__global__ void rmsnorm_kernel(const float* x, const float* w, float* y, long long C, float eps) {
  __shared__ float partial[256];
  const float* xr = x + blockIdx.x * C;
  float* yr = y + blockIdx.x * C;
  float s = 0.0f;
  for (long long c = threadIdx.x; c < C; c += blockDim.x) s += xr[c] * xr[c];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / C + eps);
  for (long long c = threadIdx.x; c < C; c += blockDim.x) yr[c] = xr[c] * inv * w[c];
}

} // namespace

status launch_rmsnorm(const op_args& a, const exec_ctx& c) {
  auto s = static_cast<cudaStream_t>(c.stream);
  rmsnorm_kernel<<<static_cast<unsigned>(a.src[0].rows()), 256, 0, s>>>(
      a.src[0].as<float>(), a.src[1].as<float>(), a.dst.as<float>(), a.src[0].cols(), a.p.eps);
  return check_launch("rmsnorm", c);
}

} // namespace troupe::kernels::cuda
