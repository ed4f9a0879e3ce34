// reduce.cu: the row reductions on f32 [T, N], one block of 256 threads per row: softmax (of
// x * scale, max-subtracted), sum_rows, argmax (the lowest index on ties) and top-k
// (descending values, ties by the lower index: k passes, each taking the best element below
// the previous pick in that order, so nothing is marked or sorted).
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

__global__ void softmax_kernel(const float* x, float* y, long long N, float scale) {
  __shared__ float red[32];
  const float* xr = x + blockIdx.x * N;
  float* yr = y + blockIdx.x * N;
  float m = -INFINITY;
  for (long long i = threadIdx.x; i < N; i += blockDim.x) m = fmaxf(m, xr[i] * scale);
  m = block_max(m, red);
  float s = 0.0f;
  for (long long i = threadIdx.x; i < N; i += blockDim.x) {
    const float e = expf(xr[i] * scale - m);
    yr[i] = e;
    s += e;
  }
  s = block_sum(s, red);
  const float inv = 1.0f / s;
  for (long long i = threadIdx.x; i < N; i += blockDim.x) yr[i] *= inv;
}

__global__ void sum_rows_kernel(const float* x, float* y, long long N, bool absmax) {
  __shared__ float red[32];
  const float* xr = x + blockIdx.x * N;
  float s = 0.0f;
  for (long long i = threadIdx.x; i < N; i += blockDim.x)
    s = absmax ? fmaxf(s, fabsf(xr[i])) : s + xr[i];
  s = absmax ? block_max(s, red) : block_sum(s, red);
  if (threadIdx.x == 0) y[blockIdx.x] = s;
}

// (value, index) pairs ordered by value descending, then index ascending
__device__ __forceinline__ bool better(float v, long long i, float bv, long long bi) {
  return v > bv || (v == bv && i < bi);
}

// The best element of the row strictly after (pv, pi) in that order (pi < 0: none yet).
__device__ void best_after(const float* xr, long long N, float pv, long long pi, float& out_v,
                           long long& out_i, float* sv, long long* si) {
  float bv = -INFINITY;
  long long bi = -1;
  for (long long i = threadIdx.x; i < N; i += blockDim.x) {
    const float v = xr[i];
    if (pi >= 0 && !better(pv, pi, v, i)) continue; // not after the previous pick
    if (bi < 0 || better(v, i, bv, bi)) bv = v, bi = i;
  }
  sv[threadIdx.x] = bv;
  si[threadIdx.x] = bi;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const long long oi = si[threadIdx.x + stride];
      const float ov = sv[threadIdx.x + stride];
      if (oi >= 0 && (si[threadIdx.x] < 0 || better(ov, oi, sv[threadIdx.x], si[threadIdx.x])))
        sv[threadIdx.x] = ov, si[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  out_v = sv[0];
  out_i = si[0];
  __syncthreads();
}

__global__ void topk_kernel(const float* x, int32_t* ids, float* vals, long long N, int k) {
  __shared__ float sv[256];
  __shared__ long long si[256];
  const float* xr = x + blockIdx.x * N;
  float pv = 0.0f;
  long long pi = -1;
  for (int j = 0; j < k; ++j) {
    float v;
    long long i;
    best_after(xr, N, pv, pi, v, i, sv, si);
    if (threadIdx.x == 0) {
      ids[blockIdx.x * k + j] = static_cast<int32_t>(i);
      if (vals) vals[blockIdx.x * k + j] = v;
    }
    pv = v, pi = i;
  }
}

} // namespace

status launch_softmax(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].rows();
  if (T == 0) return {};
  softmax_kernel<<<static_cast<unsigned>(T), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.dst.as<float>(), a.src[0].cols(), a.p.scale);
  return check_launch("softmax", c);
}

status launch_sum_rows(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].rows();
  if (T == 0) return {};
  sum_rows_kernel<<<static_cast<unsigned>(T), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.dst.as<float>(), a.src[0].cols(), a.p.row_absmax);
  return check_launch("sum_rows", c);
}

status launch_topk(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].rows();
  if (T == 0) return {};
  const bool argmax = a.kind == op::argmax;
  topk_kernel<<<static_cast<unsigned>(T), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.dst.as<int32_t>(), argmax ? nullptr : a.dst2.as<float>(),
      a.src[0].cols(), argmax ? 1 : a.p.k);
  return check_launch(argmax ? "argmax" : "topk", c);
}

} // namespace troupe::kernels::cuda
