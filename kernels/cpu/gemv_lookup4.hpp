// gemv_lookup4.hpp: the decode kernel for the 4-bit formats whose codes index a table of 16
// int8 values: MXFP4 (GPT-OSS's experts; E2M1 codes doubled into integers, a power-of-two
// scale byte) and GGUF's IQ4_NL / IQ4_XS (kq::iq4_values; an f16 d, and for IQ4_XS a 6-bit
// scale per 32 values in blocks of 256); layouts in core/kquant.hpp. 256-bit AVX2 intrinsics,
// included by each per-ISA file (gemv_avx2.cpp, gemv_avx512.cpp) like gemv_kquant.hpp;
// internal linkage.
//
// One vpshufb turns 32 nibbles into int8 weights, and a 32-value block's dot product is
// q8_0's (the sign trick into maddubs: |w|, |x| <= 127, so the int16 pairs stay below 32767),
// scaled by the block's factor times the activations' scale. No block is expanded to f32.
// Tests: the MXFP4 / IQ4 matmul and moe cases of the op harness.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_kquant.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace lk4 {

// Where each format keeps 32-value block b of a row: its codes (qs[16]: value j < 16 the
// low nibble of qs[j], j + 16 its high one), and its factor.
struct mxfp4 { // 17 bytes: e8m0 scale, qs[16]
  static const int8_t* table() { return kqc::mx_twice; }
  static const uint8_t* codes(const uint8_t* row, int64_t b) { return row + b * 17 + 1; }
  static float factor(const uint8_t* row, int64_t b) { return kqc::mx_scale(row[b * 17]); }
};
struct iq4_nl { // 18 bytes: f16 d, qs[16]
  static const int8_t* table() { return kq::iq4_values; }
  static const uint8_t* codes(const uint8_t* row, int64_t b) { return row + b * 18 + 2; }
  static float factor(const uint8_t* row, int64_t b) { return kqc::f16_at(row + b * 18); }
};

// sum(w * x) of the 32 values whose codes are at q, against the 32 int8 activations at x,
// as 8 float lanes (exact: at most 32 * 127 * 127 in int32).
inline __m256 dot(const uint8_t* q, const int8_t* x, __m256i lut) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m256i nib =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
  return _mm256_cvtepi32_ps(kqc::signed_dot(
      _mm256_shuffle_epi8(lut, nib), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))));
}

// Rows [n0, n1), each read once for all T tokens (the tokens' passes find it in L1); two
// chains over the blocks. (IQ4_XS has a walk of its own, below.)
template <class F>
inline void gemv(const gemv_args& a) {
  const int64_t nb = a.K / 32;
  const __m256i lut = _mm256_broadcastsi128_si256(kqc::table16(F::table()));
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      const int8_t* x = a.xq + t * a.K;
      const float* xd = a.xd + t * nb;
      __m256 c0 = _mm256_setzero_ps(), c1 = c0;
      int64_t b = 0;
      for (; b + 2 <= nb; b += 2) {
        _mm_prefetch(reinterpret_cast<const char*>(F::codes(row, b)) + 2048, _MM_HINT_T0);
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(F::factor(row, b) * xd[b]),
                             dot(F::codes(row, b), x + 32 * b, lut), c0);
        c1 = _mm256_fmadd_ps(_mm256_set1_ps(F::factor(row, b + 1) * xd[b + 1]),
                             dot(F::codes(row, b + 1), x + 32 * b + 32, lut), c1);
      }
      if (b < nb)
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(F::factor(row, b) * xd[b]),
                             dot(F::codes(row, b), x + 32 * b, lut), c0);
      a.y[t * a.ldy + n - a.ycol0] = kqv::hsum8(_mm256_add_ps(c0, c1)) + bias;
    }
  }
}

// IQ4_XS: as gemv over each block of 256's eight 32-value blocks, their factors decoded
// once per block of 256 (doing it per 32 values, through the generic walk, cost a third of
// the decode), two chains (even and odd blocks).
inline void gemv_xs(const gemv_args& a) {
  const int64_t nb = a.K / 256;
  const __m256i lut = _mm256_broadcastsi128_si256(kqc::table16(kq::iq4_values));
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      const int8_t* x = a.xq + t * a.K;
      const float* xd = a.xd + t * (a.K / 32);
      __m256 c0 = _mm256_setzero_ps(), c1 = c0;
      for (int64_t B = 0; B < nb; ++B) {
        const uint8_t* blk = row + B * 136;
        for (int l = 0; l < 3; ++l)
          _mm_prefetch(reinterpret_cast<const char*>(blk) + 2048 + 64 * l, _MM_HINT_T0);
        const float d = kqc::f16_at(blk);
        for (int s = 0; s < 8; s += 2) {
          const int64_t b = B * 8 + s;
          c0 = _mm256_fmadd_ps(
              _mm256_set1_ps(d * static_cast<float>(kqc::iq4xs_scale(blk, s)) * xd[b]),
              dot(blk + 8 + 16 * s, x + 32 * b, lut), c0);
          c1 = _mm256_fmadd_ps(
              _mm256_set1_ps(d * static_cast<float>(kqc::iq4xs_scale(blk, s + 1)) * xd[b + 1]),
              dot(blk + 24 + 16 * s, x + 32 * b + 32, lut), c1);
        }
      }
      a.y[t * a.ldy + n - a.ycol0] = kqv::hsum8(_mm256_add_ps(c0, c1)) + bias;
    }
  }
}

} // namespace lk4

void gemv_mxfp4(const gemv_args& a) {
  lk4::gemv<lk4::mxfp4>(a);
}
void gemv_iq4_nl(const gemv_args& a) {
  lk4::gemv<lk4::iq4_nl>(a);
}
void gemv_iq4_xs(const gemv_args& a) {
  lk4::gemv_xs(a);
}

} // namespace
} // namespace troupe::kernels::cpu
