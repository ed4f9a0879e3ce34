// gemv_f8.hpp: the decode kernel for f8_b128 weights (DeepSeek-V3's FP8 after loading: an f32
// scale, then 128 E4M3 bytes; core/kquant.hpp) on f32 activations, in 256-bit AVX2 + F16C
// intrinsics, included by each per-ISA file like gemv_kquant.hpp; internal linkage.
//
// An E4M3 byte s.eeee.mmm is, bit for bit, the f16 s.0eeee.mmm0000000 times 2^8 (f16's
// exponent bias 15 against E4M3's 7; E4M3's subnormals land on f16 subnormals with the same
// factor), so 8 codes widen to 16 bits, shift into f16 and convert with one vcvtph2ps: exact
// (the NaN code 0x7f, absent from real checkpoints, reads as 480). The 2^8 joins the block's
// scale. f32 activations, as transformers dequantizes the published weights.
// Tests: the f8_b128 matmul cases of the op harness.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_kquant.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace f8 {

// 8 E4M3 codes as f32, without the 2^8 (see above).
inline __m256 widen8(const uint8_t* p) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i mag = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7);
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
  return _mm256_cvtph_ps(_mm_or_si128(mag, sign));
}

// Rows [n0, n1), each read once per token; two chains within a block, one FMA per block.
inline void gemv(const gemv_args& a) {
  constexpr int64_t bb = 132;
  const int64_t nb = a.K / 128;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      const float* x = a.x + t * a.K;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * bb;
        _mm_prefetch(reinterpret_cast<const char*>(blk) + 1024, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(blk) + 1088, _MM_HINT_T0);
        float d;
        __builtin_memcpy(&d, blk, 4);
        const uint8_t* q = blk + 4;
        const float* xb = x + b * 128;
        __m256 c0 = _mm256_setzero_ps(), c1 = c0;
        for (int i = 0; i < 128; i += 16) {
          c0 = _mm256_fmadd_ps(widen8(q + i), _mm256_loadu_ps(xb + i), c0);
          c1 = _mm256_fmadd_ps(widen8(q + i + 8), _mm256_loadu_ps(xb + i + 8), c1);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * 256.0f), _mm256_add_ps(c0, c1), acc);
      }
      a.y[t * a.ldy + n - a.ycol0] = kqv::hsum8(acc) + bias;
    }
  }
}

} // namespace f8

void gemv_f8_b128(const gemv_args& a) {
  f8::gemv(a);
}

} // namespace
} // namespace troupe::kernels::cpu
