// gemv_iq4.hpp: the decode kernels for GGUF's non-linear 4-bit formats IQ4_NL and IQ4_XS
// (layouts in core/kquant.hpp) on int8 activations, in 256-bit AVX2 intrinsics, included by
// each per-ISA file (gemv_avx2.cpp, gemv_avx512.cpp) like gemv_mxfp4.hpp; internal linkage.
//
// A code stands for one of 16 int8 values (kq::iq4_values), so one vpshufb turns 32 nibbles
// into int8 weights and a 32-value block's dot product is q8_0's (sign trick into maddubs:
// |w|, |x| <= 127, so the int16 pairs stay below 32767), scaled by the block's factor (IQ4_NL:
// its f16 d; IQ4_XS: d times its sub-block's 6-bit scale - 32) times the activations' scale.
// No block is expanded to f32. Tests: the IQ4 matmul cases of the op harness.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_kquant.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace iq4 {

// The 32 values of a 32-value run of codes (qs[16]: value j < 16 the low nibble of qs[j],
// j + 16 its high one) as int8, in value order.
inline __m256i values(const uint8_t* qs, __m256i lut) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i nib =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
  return _mm256_shuffle_epi8(lut, nib);
}

inline __m256i lut() {
  return _mm256_broadcastsi128_si256(kqc::table16(kq::iq4_values));
}

// sum(w * x) of 32 values as 8 float lanes (exact: at most 32 * 127 * 127 in int32).
inline __m256 dot(const uint8_t* qs, const int8_t* x, __m256i l) {
  return _mm256_cvtepi32_ps(
      kqc::signed_dot(values(qs, l), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))));
}

// IQ4_NL (18-byte blocks of 32: f16 d, qs[16]): rows [n0, n1), each read once for all T tokens
// (the tokens' passes find it in L1); two chains over the blocks.
inline void gemv_nl(const gemv_args& a) {
  constexpr int64_t bb = 18;
  const int64_t nb = a.K / 32;
  const __m256i l = lut();
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
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(kqc::f16_at(b0) * xd[b]), dot(b0 + 2, x + 32 * b, l),
                             c0);
        c1 = _mm256_fmadd_ps(_mm256_set1_ps(kqc::f16_at(b1) * xd[b + 1]),
                             dot(b1 + 2, x + 32 * b + 32, l), c1);
      }
      for (; b < nb; ++b) {
        const uint8_t* b0 = row + b * bb;
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(kqc::f16_at(b0) * xd[b]), dot(b0 + 2, x + 32 * b, l),
                             c0);
      }
      a.y[t * a.ldy + n - a.ycol0] = kqv::hsum8(_mm256_add_ps(c0, c1)) + bias;
    }
  }
}

// IQ4_XS (136-byte blocks of 256: f16 d, u16 scales_h, scales_l[4], qs[128]): as gemv_nl over
// its eight 32-value sub-blocks, two chains (even and odd sub-blocks).
inline void gemv_xs(const gemv_args& a) {
  constexpr int64_t bb = 136;
  const int64_t nb = a.K / 256;
  const __m256i l = lut();
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      const int8_t* x = a.xq + t * a.K;
      const float* xd = a.xd + t * (a.K / 32);
      __m256 c0 = _mm256_setzero_ps(), c1 = c0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * bb;
        _mm_prefetch(reinterpret_cast<const char*>(blk) + 2048, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(blk) + 2048 + 64, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(blk) + 2048 + 128, _MM_HINT_T0);
        const float d = kqc::f16_at(blk);
        const uint8_t* qs = blk + 8;
        const int8_t* xb = x + 256 * b;
        const float* db = xd + 8 * b;
        for (int s = 0; s < 8; s += 2) {
          c0 = _mm256_fmadd_ps(
              _mm256_set1_ps(d * static_cast<float>(kqc::iq4xs_scale(blk, s)) * db[s]),
              dot(qs + 16 * s, xb + 32 * s, l), c0);
          c1 = _mm256_fmadd_ps(
              _mm256_set1_ps(d * static_cast<float>(kqc::iq4xs_scale(blk, s + 1)) * db[s + 1]),
              dot(qs + 16 * s + 16, xb + 32 * s + 32, l), c1);
        }
      }
      a.y[t * a.ldy + n - a.ycol0] = kqv::hsum8(_mm256_add_ps(c0, c1)) + bias;
    }
  }
}

} // namespace iq4

void gemv_iq4_nl(const gemv_args& a) {
  iq4::gemv_nl(a);
}
void gemv_iq4_xs(const gemv_args& a) {
  iq4::gemv_xs(a);
}

} // namespace
} // namespace troupe::kernels::cpu
