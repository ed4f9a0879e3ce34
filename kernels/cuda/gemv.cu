// gemv.cu: the decode GEMV (gemv.cuh). A block of 8 warps takes 8 / S rows, each row's K split
// over S warps (S = 1, 2, 4 or 8: a matrix of few rows still has enough warps in flight to keep
// HBM busy). A warp's lanes stride over the row 16 bytes at a time (8 halves or 4 floats;
// whole q8_0 / q4_0 blocks for quantized rows; x in 16-byte loads too), four loads in flight
// per lane before any is used, the weights loaded streaming (evict-first: read once per step, they
// should not crowd out what the step reuses). Every token of the step is multiplied by the row as
// it passes, so each weight byte is read once per step. The S partial sums meet in shared memory in
// a fixed order (a result never depends on scheduling).
#include "kernels/cuda/gemv.cuh"

namespace troupe::kernels::cuda {
namespace {

constexpr int gemv_warps = 8;

// acc[t] += this warp's slice (of S) of row . x[t] for the step's tokens.
template <int Kind, int TT>
__device__ __forceinline__ void dot_row(const uint8_t* row, const float* __restrict__ x,
                                        long long T, long long K, int lane, int slice, int S,
                                        float* acc) {
  if constexpr (Kind <= e_bf16) {
    constexpr int per = Kind == e_f32 ? 4 : 8; // values per 16-byte chunk
    constexpr int U = 4;                       // chunks in flight per lane
    const long long chunks = K / per, stride = 32LL * S;
    const uint4* rc = reinterpret_cast<const uint4*>(row);
    auto use = [&](const uint4 raw, long long ch) {
      float wv[per];
      unpack16<Kind>(raw, wv);
      const long long k0 = ch * per;
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t >= T) break;
        // x as 16-byte loads: lanes 32 bytes apart, so a scalar load would touch 8 sectors
        // for 128 useful bytes and cap the GEMV near 2 TB/s
        const float4* xr = reinterpret_cast<const float4*>(x + t * K + k0);
#pragma unroll
        for (int i = 0; i < per / 4; ++i) {
          const float4 xv = xr[i];
          acc[t] +=
              wv[4 * i] * xv.x + wv[4 * i + 1] * xv.y + wv[4 * i + 2] * xv.z + wv[4 * i + 3] * xv.w;
        }
      }
    };
    long long ch = lane + 32LL * slice;
    for (; ch + (U - 1) * stride < chunks; ch += U * stride) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u) raw[u] = __ldcs(rc + ch + u * stride);
#pragma unroll
      for (int u = 0; u < U; ++u) use(raw[u], ch + u * stride);
    }
    for (; ch < chunks; ch += stride) use(__ldcs(rc + ch), ch);
    if (slice == 0) // a tail shorter than a chunk (rows the 16-byte loads take have none)
      for (long long k = chunks * per + lane; k < K; k += 32)
        for (int t = 0; t < TT && t < T; ++t) acc[t] += weight_value<Kind>(row, k) * x[t * K + k];
  } else {
    constexpr int bb = Kind == 3 ? q8_block_bytes : q4_block_bytes;
    const long long blocks = K / q_block;
    for (long long b = lane + 32LL * slice; b < blocks; b += 32LL * S) {
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
        const float4* xr = reinterpret_cast<const float4*>(x + t * K + b * q_block);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < q_block / 4; ++i) {
          const float4 xv = xr[i];
          s += q[4 * i] * xv.x + q[4 * i + 1] * xv.y + q[4 * i + 2] * xv.z + q[4 * i + 3] * xv.w;
        }
        acc[t] += d * s;
      }
    }
  }
}

// The part a job row falls in, and the row within it.
__device__ __forceinline__ int part_of(const gemv_job& j, long long n, long long& r) {
  int p = 0;
  r = n;
  while (p + 1 < j.parts && r >= j.part[p].n) r -= j.part[p].n, ++p;
  return p;
}

// Warp w takes job row n = block * (8 / S) + w / S, slice w % S of its K.
template <int Kind, int TT, bool Swiglu>
__global__ void __launch_bounds__(32 * gemv_warps) gemv_kernel(const gemv_job j, int S) {
  constexpr int M = Swiglu ? 2 : 1; // dot products per row: gate and up, or one
  __shared__ float partial[gemv_warps][M][TT];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const long long n = blockIdx.x * (long long)(gemv_warps / S) + warp / S;
  const int slice = warp % S;
  float acc[M][TT];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[m][t] = 0.0f;
  long long r = n; // the row within its part (swiglu: gate's and up's row n)
  const int p = !Swiglu && n < j.rows ? part_of(j, n, r) : 0;
  if (n < j.rows)
#pragma unroll
    for (int m = 0; m < M; ++m)
      dot_row<Kind, TT>(j.part[p + m].w + r * j.row_bytes, j.x, j.T, j.K, lane, slice, S, acc[m]);
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const float s = warp_sum(acc[m][t]);
      if (lane == 0) partial[warp][m][t] = s;
    }
  if (S > 1) __syncthreads(); // S is the same for the whole block
  if (lane != 0 || slice != 0 || n >= j.rows) return;
  const gemv_part& out = j.part[p];
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    if (t >= j.T) break;
    float s[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      s[m] = 0.0f;
      for (int i = 0; i < S; ++i) s[m] += partial[warp + i][m][t];
      if (j.part[p + m].bias) s[m] += j.part[p + m].bias[r];
    }
    if constexpr (Swiglu)
      out.y[t * out.n + r] = s[0] / (1.0f + expf(-s[0])) * s[1];
    else
      out.y[t * out.n + r] = s[0];
  }
}

template <int Kind, bool Swiglu>
void launch_kind(const gemv_job& j, cudaStream_t s) {
  // K split over S warps while the rows alone give fewer than 4096 warps, as long as each
  // warp keeps at least two chunks (or quantized blocks) per lane
  const long long units = Kind <= e_bf16 ? j.K / (Kind == e_f32 ? 4 : 8) : j.K / q_block;
  int S = 1;
  while (S < gemv_warps && j.rows * S < 4096 && units >= 64LL * S) S *= 2;
  const long long per_block = gemv_warps / S;
  const unsigned blocks = static_cast<unsigned>((j.rows + per_block - 1) / per_block);
  constexpr int th = 32 * gemv_warps;
  if (j.T <= 1)
    gemv_kernel<Kind, 1, Swiglu><<<blocks, th, 0, s>>>(j, S);
  else if (j.T <= 2)
    gemv_kernel<Kind, 2, Swiglu><<<blocks, th, 0, s>>>(j, S);
  else if (j.T <= 4)
    gemv_kernel<Kind, 4, Swiglu><<<blocks, th, 0, s>>>(j, S);
  else
    gemv_kernel<Kind, 8, Swiglu><<<blocks, th, 0, s>>>(j, S);
}

} // namespace

bool gemv_aligned(dtype t, long long row_bytes, const void* w, const float* x, long long K) {
  const bool x_ok = K % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0; // float4 rows of x
  return x_ok && (t == dtype::q8_0 || t == dtype::q4_0 ||
                  (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0));
}

status launch_gemv(const gemv_job& j, dtype t, const exec_ctx& c) {
  if (j.T <= 0 || j.rows <= 0) return {};
  if (j.T > max_gemv_tokens)
    return make_error(errc::internal, "gemv: {} tokens (at most {})", j.T, max_gemv_tokens);
  auto s = stream_of(c);
  with_weight_kind(t, [&](auto kind) {
    if (j.swiglu)
      launch_kind<decltype(kind)::value, true>(j, s);
    else
      launch_kind<decltype(kind)::value, false>(j, s);
  });
  return check_launch(j.swiglu ? "gemv (swiglu)" : "gemv", c);
}

} // namespace troupe::kernels::cuda
