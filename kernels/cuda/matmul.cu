// matmul.cu: y = x W^T (+ bias), x f32 [T, K], W [N, K] in f32, f16, bf16, q8_0 or q4_0,
// f32 accumulation, f32 activations (the CPU's numbers). Two kernels:
//  - gemv (T <= 8: decode): one warp per output feature for every token of the step, lanes
//    striding over the row 16 bytes at a time (8 halves / 4 floats; whole q8_0 / q4_0 blocks
//    for the quantized rows), so each weight byte is read once per step and the row is
//    streamed by the whole warp: what decode needs is HBM bandwidth, nothing else;
//  - tiled (larger steps whose weights cuBLASLt does not take: f32 and the quantized types):
//    64 x 64 output tiles, K in slices of 32 staged (dequantized) in shared memory.
// bf16 weights with 16+ tokens go to cuBLASLt's tensor cores instead (gemm_lt.cpp).
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

constexpr int max_gemv_tokens = 8;

// One warp per feature n; acc[t] over the tokens. Float rows: 16-byte chunks per lane.
template <int Kind, int TT>
__global__ void gemv_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                            long long row_bytes, const float* __restrict__ bias,
                            float* __restrict__ y, long long T, long long K, long long N) {
  const long long n = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;
  const uint8_t* row = w + n * row_bytes;
  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;
  if constexpr (Kind <= e_bf16) {
    constexpr int per = Kind == e_f32 ? 4 : 8; // values per 16-byte chunk
    const long long chunks = K / per;
    for (long long ch = lane; ch < chunks; ch += 32) {
      const uint4 raw = reinterpret_cast<const uint4*>(row)[ch];
      float wv[per];
      if constexpr (Kind == e_f32) {
        wv[0] = __uint_as_float(raw.x), wv[1] = __uint_as_float(raw.y);
        wv[2] = __uint_as_float(raw.z), wv[3] = __uint_as_float(raw.w);
      } else {
        const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const unsigned short lo = static_cast<unsigned short>(u[i] & 0xffffu);
          const unsigned short hi = static_cast<unsigned short>(u[i] >> 16);
          if constexpr (Kind == e_f16) {
            wv[2 * i] = __half2float(__ushort_as_half(lo));
            wv[2 * i + 1] = __half2float(__ushort_as_half(hi));
          } else {
            wv[2 * i] = __uint_as_float(static_cast<uint32_t>(lo) << 16);
            wv[2 * i + 1] = __uint_as_float(static_cast<uint32_t>(hi) << 16);
          }
        }
      }
      const long long k0 = ch * per;
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t >= T) break;
        const float* xr = x + t * K + k0;
#pragma unroll
        for (int i = 0; i < per; ++i) acc[t] += wv[i] * xr[i];
      }
    }
    for (long long k = chunks * per + lane; k < K; k += 32) // a tail shorter than a chunk
      for (int t = 0; t < TT && t < T; ++t) acc[t] += weight_value<Kind>(row, k) * x[t * K + k];
  } else {
    constexpr int bb = Kind == 3 ? q8_block_bytes : q4_block_bytes;
    const long long blocks = K / q_block;
    for (long long b = lane; b < blocks; b += 32) {
      const uint8_t* blk = row + b * bb;
      const float d = block_scale(blk);
      float q[q_block];
      if constexpr (Kind == 3) {
#pragma unroll
        for (int i = 0; i < 16; ++i) { // 2-byte aligned pairs
          const unsigned short u = reinterpret_cast<const unsigned short*>(blk + 2)[i];
          q[2 * i] = static_cast<float>(static_cast<int8_t>(u & 0xff));
          q[2 * i + 1] = static_cast<float>(static_cast<int8_t>(u >> 8));
        }
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const unsigned short u = reinterpret_cast<const unsigned short*>(blk + 2)[i];
          const int b0 = u & 0xff, b1 = u >> 8;
          q[2 * i] = static_cast<float>((b0 & 15) - 8);
          q[2 * i + 1] = static_cast<float>((b1 & 15) - 8);
          q[2 * i + 16] = static_cast<float>((b0 >> 4) - 8);
          q[2 * i + 17] = static_cast<float>((b1 >> 4) - 8);
        }
      }
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t >= T) break;
        const float* xr = x + t * K + b * q_block;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < q_block; ++i) s += q[i] * xr[i];
        acc[t] += d * s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    if (t >= T) break;
    const float s = warp_sum(acc[t]);
    if (lane == 0) y[t * N + n] = s + (bias ? bias[n] : 0.0f);
  }
}

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
void gemv_by_tokens(const float* x, const uint8_t* w, long long rb, const float* bias, float* y,
                    long long T, long long K, long long N, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((N * 32 + 255) / 256);
  if (T <= 1)
    gemv_kernel<Kind, 1><<<blocks, 256, 0, s>>>(x, w, rb, bias, y, T, K, N);
  else if (T <= 2)
    gemv_kernel<Kind, 2><<<blocks, 256, 0, s>>>(x, w, rb, bias, y, T, K, N);
  else if (T <= 4)
    gemv_kernel<Kind, 4><<<blocks, 256, 0, s>>>(x, w, rb, bias, y, T, K, N);
  else
    gemv_kernel<Kind, 8><<<blocks, 256, 0, s>>>(x, w, rb, bias, y, T, K, N);
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
  // 16-byte rows for the vector loads (K a multiple of 4 f32 or 8 halves), else the tiled path
  const bool aligned = wt == dtype::q8_0 || wt == dtype::q4_0 ||
                       (rb % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T <= max_gemv_tokens && aligned) {
    with_weight_kind(wt, [&](auto kind) {
      gemv_by_tokens<decltype(kind)::value>(x, w, rb, bias, y, T, K, N, s);
    });
    return check_launch("gemv", c);
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
