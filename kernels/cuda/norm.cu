// norm.cu: the row norms on f32, one block of 256 threads per row: rmsnorm, add_rmsnorm (the
// residual sum written to dst2 and normalised while the row is on chip) and layernorm
// (biased variance, optional bias). Sums reduce in a fixed order (common.cuh), so a row's
// result does not depend on scheduling.
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

// r null: rmsnorm(x); else sum = x + r goes to `sum` and is normalised
__global__ void rmsnorm_kernel(const float* x, const float* r, const float* w, float* y, float* sum,
                               long long C, float eps) {
  __shared__ float red[32];
  const long long row = blockIdx.x;
  const float* xr = x + row * C;
  const float* rr = r ? r + row * C : nullptr;
  float* yr = y + row * C;
  float* sr = sum ? sum + row * C : nullptr;
  float ss = 0.0f;
  for (long long c = threadIdx.x; c < C; c += blockDim.x) {
    float v = xr[c];
    if (rr) {
      v += rr[c];
      sr[c] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float inv = rsqrtf(ss / static_cast<float>(C) + eps);
  for (long long c = threadIdx.x; c < C; c += blockDim.x) {
    const float v = rr ? sr[c] : xr[c]; // this thread wrote sr[c] above
    yr[c] = v * inv * w[c];
  }
}

__global__ void layernorm_kernel(const float* x, const float* w, const float* b, float* y,
                                 long long C, float eps) {
  __shared__ float red[32];
  const long long row = blockIdx.x;
  const float* xr = x + row * C;
  float* yr = y + row * C;
  float s = 0.0f;
  for (long long c = threadIdx.x; c < C; c += blockDim.x) s += xr[c];
  const float mean = block_sum(s, red) / static_cast<float>(C);
  float v = 0.0f;
  for (long long c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = xr[c] - mean;
    v += d * d;
  }
  const float inv = rsqrtf(block_sum(v, red) / static_cast<float>(C) + eps);
  for (long long c = threadIdx.x; c < C; c += blockDim.x)
    yr[c] = (xr[c] - mean) * inv * w[c] + (b ? b[c] : 0.0f);
}

} // namespace

status launch_rmsnorm(const op_args& a, const exec_ctx& c) {
  if (a.src[0].rows() == 0) return {};
  rmsnorm_kernel<<<static_cast<unsigned>(a.src[0].rows()), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), nullptr, a.src[1].as<float>(), a.dst.as<float>(), nullptr,
      a.src[0].cols(), a.p.eps);
  return check_launch("rmsnorm", c);
}

status launch_add_rmsnorm(const op_args& a, const exec_ctx& c) {
  if (a.src[0].rows() == 0) return {};
  rmsnorm_kernel<<<static_cast<unsigned>(a.src[0].rows()), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.src[1].as<float>(), a.src[2].as<float>(), a.dst.as<float>(),
      a.dst2.as<float>(), a.src[0].cols(), a.p.eps);
  return check_launch("add_rmsnorm", c);
}

status launch_layernorm(const op_args& a, const exec_ctx& c) {
  if (a.src[0].rows() == 0) return {};
  layernorm_kernel<<<static_cast<unsigned>(a.src[0].rows()), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.src[1].as<float>(), a.src[2].data ? a.src[2].as<float>() : nullptr,
      a.dst.as<float>(), a.src[0].cols(), a.p.eps);
  return check_launch("layernorm", c);
}

} // namespace troupe::kernels::cuda
