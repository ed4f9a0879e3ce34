// gemv_mxfp4.hpp: the decode kernel for MXFP4 weights (GPT-OSS's experts; layout in
// core/kquant.hpp) on int8 activations, in 256-bit AVX2 intrinsics, included by each per-ISA
// file (gemv_avx2.cpp, gemv_avx512.cpp) like gemv_kquant.hpp; internal linkage.
//
// An E2M1 code doubled is a small integer (0, +-1, +-2, +-3, +-4, +-6, +-8, +-12), so one
// vpshufb turns 32 nibbles into int8 weights, and a block's dot product is the int8 one of
// q8_0 (sign trick into maddubs: |w| <= 12, so the int16 pairs cannot saturate) scaled by
// 2^(e - 128) times the activations' scale. No block is expanded to f32.
// Tests: the MXFP4 matmul and moe cases of the op harness.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_kquant.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace mx {

// The 32 doubled values of a block's codes (qs[16]: value j < 16 the low nibble of qs[j],
// j + 16 its high one) as int8, in value order.
inline __m256i values(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i nib =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
  const __m256i lut = _mm256_broadcastsi128_si256(kqc::table16(kqc::mx_twice));
  return _mm256_shuffle_epi8(lut, nib);
}

// sum(w * x) of one block as 8 int32 lanes.
inline __m256i dot(__m256i w, const int8_t* x) {
  return kqc::signed_dot(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

// Rows [n0, n1): each row read once for all T tokens; two chains over the blocks.
inline void gemv(const gemv_args& a) {
  constexpr int64_t bb = 17;
  const int64_t nb = a.K / 32;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      const int8_t* x = a.xq + t * a.K;
      const float* xd = a.xd + t * nb;
      __m256 c0 = _mm256_setzero_ps(), c1 = c0;
      int64_t b = 0;
      for (; b + 2 <= nb; b += 2) {
        const uint8_t* b0 = row + b * bb;
        const uint8_t* b1 = b0 + bb;
        _mm_prefetch(reinterpret_cast<const char*>(b0) + 2048, _MM_HINT_T0);
        const __m256i p0 = dot(values(b0 + 1), x + 32 * b);
        const __m256i p1 = dot(values(b1 + 1), x + 32 * b + 32);
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(kqc::mx_scale(b0[0]) * xd[b]), _mm256_cvtepi32_ps(p0),
                             c0);
        c1 = _mm256_fmadd_ps(_mm256_set1_ps(kqc::mx_scale(b1[0]) * xd[b + 1]),
                             _mm256_cvtepi32_ps(p1), c1);
      }
      for (; b < nb; ++b) {
        const uint8_t* b0 = row + b * bb;
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(kqc::mx_scale(b0[0]) * xd[b]),
                             _mm256_cvtepi32_ps(dot(values(b0 + 1), x + 32 * b)), c0);
      }
      a.y[t * a.ldy + n - a.ycol0] = kqv::hsum8(_mm256_add_ps(c0, c1)) + bias;
    }
  }
}

} // namespace mx

void gemv_mxfp4(const gemv_args& a) {
  mx::gemv(a);
}

} // namespace
} // namespace troupe::kernels::cpu
