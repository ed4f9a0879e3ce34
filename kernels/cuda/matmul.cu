// matmul.cu: y = x W^T (+ bias), x f32 [T, K], W [N, K] in f32, f16, bf16, q8_0 or q4_0,
// f32 accumulation, f32 activations (the CPU's numbers). Two kernels:
//  - gemv (T <= 8: decode; gemv.cuh, shared with the fused matmul_qkv and matmul_swiglu):
//    each weight byte read once per step, streamed at HBM bandwidth;
//  - tiled (larger steps whose weights cuBLASLt does not take: f32 and the quantized types):
//    64 x 64 output tiles, K in slices of 32 staged (dequantized) in shared memory.
// bf16 weights with 16+ tokens go to cuBLASLt's tensor cores instead (gemm_lt.cpp).
#include "kernels/cuda/gemv.cuh"

namespace troupe::kernels::cuda {
namespace {

// 64 x 64 tiles of y, 256 threads each computing 4 x 4 outputs; K in slices of 32 (one
// quantization block), W dequantized into shared memory.
template <int Kind>
__global__ void tiled_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                             long long row_bytes, const float* __restrict__ bias,
                             float* __restrict__ y, long long T, long long K, long long N) {
  __shared__ float xs[32][64 + 1], ws[32][64 + 1]; // [k][token], [k][feature]
  const long long t0 = blockIdx.y * 64LL, n0 = blockIdx.x * 64LL;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16; // 4 features x 4 tokens each
  float acc[4][4] = {};
  for (long long k0 = 0; k0 < K; k0 += 32) {
    for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x) {
      const int r = i / 32, kk = i % 32; // row r of the tile, k offset kk
      const long long t = t0 + r, n = n0 + r, k = k0 + kk;
      xs[kk][r] = t < T && k < K ? x[t * K + k] : 0.0f;
      ws[kk][r] = n < N && k < K ? weight_value<Kind>(w + n * row_bytes, k) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < 32; ++kk) {
      float xv[4], wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = xs[kk][ty * 4 + i], wv[i] = ws[kk][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += xv[i] * wv[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const long long t = t0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (t < T && n < N) y[t * N + n] = acc[i][j] + (bias ? bias[n] : 0.0f);
    }
}

template <int Kind>
void tiled(const float* x, const uint8_t* w, long long rb, const float* bias, float* y, long long T,
           long long K, long long N, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((N + 63) / 64), static_cast<unsigned>((T + 63) / 64));
  tiled_kernel<Kind><<<grid, 256, 0, s>>>(x, w, rb, bias, y, T, K, N);
}

} // namespace

bool matmul_weight_ok(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16 || t == dtype::q8_0 ||
         t == dtype::q4_0;
}

status launch_matmul(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].rows(), K = a.src[0].cols(), N = a.src[1].rows();
  if (T == 0 || N == 0) return {};
  const float* x = a.src[0].as<float>();
  const auto* w = static_cast<const uint8_t*>(a.src[1].data);
  const long long rb = row_bytes(a.src[1].type, K);
  const float* bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  float* y = a.dst.as<float>();
  auto s = stream_of(c);
  const dtype wt = a.src[1].type;
  const bool aligned = gemv_aligned(wt, rb, w, x, K);
  if (T <= max_gemv_tokens && aligned) {
    gemv_job j{};
    j.x = x, j.T = T, j.K = K, j.row_bytes = rb, j.rows = N, j.parts = 1;
    j.part[0] = {w, bias, y, N};
    return launch_gemv(j, wt, c);
  }
  // bf16 only: f16 activations would overflow past 65504, which some models' down-projection
  // inputs reach; f16 weights keep f32 activations in the tiled kernel
  if (wt == dtype::bf16 && T >= 16) {
    auto st = gemm_lt(a, c); // tensor cores; falls back below when cuBLASLt declines
    if (st || st.error().code != errc::unsupported) return st;
  }
  with_weight_kind(wt,
                   [&](auto kind) { tiled<decltype(kind)::value>(x, w, rb, bias, y, T, K, N, s); });
  return check_launch("tiled matmul", c);
}

} // namespace troupe::kernels::cuda
