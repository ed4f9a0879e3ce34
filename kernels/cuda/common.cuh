// common.cuh: what the CUDA kernels share: element loads from f32 / f16 / bf16 storage, the
// q8_0 / q4_0 block layouts (GGUF's: an f16 scale, then 32 int8 values or 16 bytes of
// nibbles), warp and block reductions in a fixed order (so a result never depends on
// scheduling), grid sizing and the stream of a call. Included by kernels/cuda/*.cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda.hpp"

namespace troupe::kernels::cuda {

inline cudaStream_t stream_of(const exec_ctx& c) {
  return static_cast<cudaStream_t>(c.stream);
}

/// Blocks of `threads` for a grid-stride loop over n elements (at most 65536 blocks).
inline unsigned grid_for(long long n, int threads = 256) {
  const long long b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

/// Element kinds a kernel reads: 0 f32, 1 f16, 2 bf16.
enum elem : int { e_f32 = 0, e_f16 = 1, e_bf16 = 2 };

inline int elem_of(dtype t) {
  return t == dtype::f16 ? e_f16 : t == dtype::bf16 ? e_bf16 : e_f32;
}

__device__ __forceinline__ float load_elem(const void* p, long long i, int e) {
  switch (e) {
  case e_f16:
    return __half2float(static_cast<const __half*>(p)[i]);
  case e_bf16:
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  default:
    return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_elem(void* p, long long i, int e, float v) {
  switch (e) {
  case e_f16:
    static_cast<__half*>(p)[i] = __float2half_rn(v);
    break;
  case e_bf16:
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    break;
  default:
    static_cast<float*>(p)[i] = v;
  }
}

// GGUF blocks of 32 values: bytes 0-1 an f16 scale d; q8_0: 32 int8 q (x = d q); q4_0: 16
// bytes, value j < 16 in the low nibble of byte j, value j >= 16 in the high nibble of byte
// j - 16 (x = d (nibble - 8)). 34 and 18 bytes: only 2-byte aligned.
constexpr int q8_block_bytes = 34, q4_block_bytes = 18, q_block = 32;

__device__ __forceinline__ float block_scale(const uint8_t* b) {
  return __half2float(*reinterpret_cast<const __half*>(b));
}

/// Value j (0..31) of a q8_0 or q4_0 block.
__device__ __forceinline__ float block_value(const uint8_t* b, int j, bool q4) {
  const float d = block_scale(b);
  if (!q4) return d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
  const uint8_t byte = b[2 + (j & 15)];
  return d * static_cast<float>((j < 16 ? (byte & 15) : (byte >> 4)) - 8);
}

/// Weight kinds of the matmul-like kernels: the element kinds, then 3 q8_0 and 4 q4_0.
/// Value k of a weight row of kind Kind.
template <int Kind>
__device__ __forceinline__ float weight_value(const uint8_t* row, long long k) {
  if constexpr (Kind <= e_bf16) {
    return load_elem(row, k, Kind);
  } else {
    const uint8_t* b = row + (k / q_block) * (Kind == 3 ? q8_block_bytes : q4_block_bytes);
    return block_value(b, static_cast<int>(k % q_block), Kind == 4);
  }
}

/// Calls f(std::integral_constant<int, Kind>) for the weight kind of `t` (q4_0 for any type
/// that is not f32, f16, bf16 or q8_0: the registry selects these kernels only for those five).
template <class F>
void with_weight_kind(dtype t, F&& f) {
  switch (t) {
  case dtype::f32:
    return f(std::integral_constant<int, 0>{});
  case dtype::f16:
    return f(std::integral_constant<int, 1>{});
  case dtype::bf16:
    return f(std::integral_constant<int, 2>{});
  case dtype::q8_0:
    return f(std::integral_constant<int, 3>{});
  default:
    return f(std::integral_constant<int, 4>{});
  }
}

/// A 16-byte piece of a row of element kind E as its values (4 f32 or 8 halves).
template <int E>
__device__ __forceinline__ void unpack16(const uint4 raw, float* v) {
  if constexpr (E == e_f32) {
    v[0] = __uint_as_float(raw.x), v[1] = __uint_as_float(raw.y);
    v[2] = __uint_as_float(raw.z), v[3] = __uint_as_float(raw.w);
  } else {
    const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const unsigned short lo = static_cast<unsigned short>(u[i] & 0xffffu);
      const unsigned short hi = static_cast<unsigned short>(u[i] >> 16);
      if constexpr (E == e_f16) {
        v[2 * i] = __half2float(__ushort_as_half(lo));
        v[2 * i + 1] = __half2float(__ushort_as_half(hi));
      } else {
        v[2 * i] = __uint_as_float(static_cast<uint32_t>(lo) << 16);
        v[2 * i + 1] = __uint_as_float(static_cast<uint32_t>(hi) << 16);
      }
    }
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/// The sum of `v` over the block (blockDim.x a multiple of 32, at most 1024), in a fixed order;
/// every thread gets it. `shared` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads(); // shared may hold an earlier call's values
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < warps; ++w) s += shared[w];
  return s;
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, shared[w]);
  return m;
}

} // namespace troupe::kernels::cuda
