// attention.cuh: the arguments of the CUDA attention kernels (attention.cu: any head size and
// score modifier, CUDA cores; attention_mma.cu: prefill on the tensor cores;
// attention_decode.cu: decode rows), as the launchers of attention.cu fill them from op_args.
// Included by those files only.
#pragma once

#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {

struct attn_args {
  const float* q; // [T, H, D]
  float* out;     // [T, H, D]
  const void *k, *v;
  int e; // cache element kind
  long long T, H, Hkv, D;
  const int32_t* seqs; // paged: [S, cols] (begin, count, pos0, block ids); null: contiguous
  long long S, cols, P;
  long long pos0; // contiguous: the first query's position
  float scale, softcap, alibi_max_bias;
  int alibi_heads, head0;
  const float* sinks;   // [H] or null
  long long window;     // 0: all keys
  long long chunk;      // keys from the query's chunk only (0: off)
  long long temp_floor; // Llama 4's attention temperature (0: off) and its factor's scale
  float temp_scale;
  long long temp_offset;
};

/// ALiBi's slope for head h of n (the heads past the largest power of two take the odd
/// powers of the half-step base), as the reference computes it.
__device__ inline float alibi_slope(int h, int n, float max_bias) {
  int m = 1;
  while (m * 2 <= n) m *= 2;
  if (h < m) return static_cast<float>(pow(pow(2.0, -max_bias / m), h + 1.0));
  return static_cast<float>(pow(pow(2.0, -max_bias / (2.0 * m)), 2.0 * (h - m) + 1.0));
}

/// Query row t's position, its first key (the later of its window's and its chunk's starts,
/// else 0) and its block table
/// (paged; null for a contiguous cache); false when no sequence of a paged call covers it.
__device__ inline bool locate_row(const attn_args& a, long long t, long long& qpos,
                                  long long& first, const int32_t*& blocks) {
  qpos = a.pos0 + t;
  blocks = nullptr;
  if (a.seqs) {
    for (long long si = 0; si < a.S && !blocks; ++si) {
      const int32_t* row = a.seqs + si * a.cols;
      if (t >= row[0] && t < row[0] + row[1]) qpos = row[2] + (t - row[0]), blocks = row + 3;
    }
    if (!blocks) return false;
  }
  first = a.window > 0 && qpos - a.window + 1 > 0 ? qpos - a.window + 1 : 0;
  if (a.chunk > 0 && qpos - qpos % a.chunk > first) first = qpos - qpos % a.chunk;
  return true;
}

/// The scale of a query's scores at position qpos: a.scale, times the temperature factor.
__device__ inline float query_scale(const attn_args& a, long long qpos) {
  if (a.temp_floor <= 0) return a.scale;
  return a.scale *
         (1.0f + a.temp_scale * log1pf(static_cast<float>((qpos + a.temp_offset) / a.temp_floor)));
}

/// Query head h's ALiBi slope (0 without ALiBi).
__device__ inline float head_slope(const attn_args& a, long long h) {
  if (a.alibi_max_bias <= 0) return 0.0f;
  return alibi_slope(a.head0 + static_cast<int>(h),
                     a.alibi_heads > 0 ? a.alibi_heads : static_cast<int>(a.H), a.alibi_max_bias);
}

/// Causal attention of 16+ query rows on the tensor cores: a 16-bit cache (e_f16 / e_bf16), D
/// 64 or 128, no soft-cap, ALiBi or sinks (a window, chunks and a temperature allowed); q and the
/// probabilities are rounded to the cache's type, the scores and the output accumulate in f32.
/// Whether the tensor-core kernel takes these rows: 16+, a 16-bit cache, D 64 or 128, no
/// soft-cap, ALiBi or sinks, and activations not asked to be exact
/// (precision.hpp).
bool attention_mma_takes(const attn_args& a);
status launch_attention_mma(const attn_args& a, const exec_ctx& c);

/// Whether the decode kernel (attention_decode.cu) takes these rows: fewer than 16, D of 8,
/// 16 or 32 sixteen-byte pieces (bf16 / f16: 64, 128, 256; f32: 32, 64, 128), 16-byte aligned.
bool attention_decode_takes(const attn_args& a);
/// Attention of decode rows, every modifier, keys spread over a block's 256 threads.
status launch_attention_decode(const attn_args& a, const exec_ctx& c);

} // namespace troupe::kernels::cuda
