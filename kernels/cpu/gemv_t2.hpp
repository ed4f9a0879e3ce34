// gemv_t2.hpp: the decode kernel for t2_32 weights (BitNet b1.58's ternary weights as loaded:
// an f32 scale, then 32 values in 2-bit codes w + 1; core/kquant.hpp) on int8 activations, in
// 256-bit AVX2 intrinsics, included by each per-ISA file like gemv_kquant.hpp; internal
// linkage.
//
// A block's 8 code bytes broadcast to four 64-bit lanes shifted by 0, 2, 4, 6 bits and masked
// give its 32 codes in order (value 8 i + j sits in bits 2 i of byte j), minus 1 the weights w
// in {-1, 0, 1}. The dot with a q8 block of activations is maddubs(|w|, sign(x, w)): each
// product is x, -x or 0 (|x| <= 127: the quantizer never writes -128), the int16 pairs summed by
// madd, one FMA by d * xd per block. Exact in the integers: with the activations quantized per
// row (as BitNet's already are, matmul_plan.cpp), a BitNet layer's products are its own.
// Tests: the t2_32 matmul cases of the op harness (tests/kernels/op_cases_quant.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_kquant.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace t2 {

constexpr int64_t summed_tokens = 16; // the most tokens gemv keeps sums of x for (more: prefill)
constexpr int64_t ahead = 4096;       // bytes of weights asked for ahead of those being read

// sum of |w| * sign(x, w), as 8 int32 partial sums (VNNI's one instruction where the file is
// built for it, else maddubs and madd)
inline __m256i dot(__m256i wt, __m256i x) {
#ifdef __AVX512VNNI__
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(wt, wt),
                             _mm256_sign_epi8(x, wt));
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wt, wt), _mm256_sign_epi8(x, wt)),
                           _mm256_set1_epi16(1));
#endif
}

// the block's 32 codes (w + 1 in {0, 1, 2}, unsigned bytes) from its 8 code bytes
inline __m256i codes(const uint8_t* q) {
  long long bits;
  __builtin_memcpy(&bits, q, 8);
  const __m256i lanes = _mm256_srlv_epi64(_mm256_set1_epi64x(bits), _mm256_set_epi64x(6, 4, 2, 0));
  return _mm256_and_si256(lanes, _mm256_set1_epi8(3));
}

// the block's 32 weights (w in {-1, 0, 1}, int8)
inline __m256i weights(const uint8_t* q) {
  return _mm256_sub_epi8(codes(q), _mm256_set1_epi8(1));
}

// One weight row against TC tokens (accumulators in registers).
template <int TC>
inline void row(const gemv_args& a, const uint8_t* w, int64_t t0, int64_t n, float bias) {
  constexpr int64_t bb = 12;
  const int64_t nb = a.K / 32;
  __m256 c[TC];
  for (int j = 0; j < TC; ++j) c[j] = _mm256_setzero_ps();
  const int8_t* xq = a.xq + t0 * a.K;
  const float* xd = a.xd + t0 * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * bb;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + ahead, _MM_HINT_T0);
    float d;
    __builtin_memcpy(&d, blk, 4);
    const __m256i wt = weights(blk + 4);
    for (int j = 0; j < TC; ++j) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j * a.K + b * 32));
      c[j] =
          _mm256_fmadd_ps(_mm256_set1_ps(d * xd[j * nb + b]), _mm256_cvtepi32_ps(dot(wt, x)), c[j]);
    }
  }
  for (int j = 0; j < TC; ++j) a.y[(t0 + j) * a.ldy + n - a.ycol0] = kqv::hsum8(c[j]) + bias;
}

// acc + the sums of codes (unsigned) times x (signed) by 4s
inline __m256i dot_codes(__m256i acc, __m256i c, __m256i x) {
#ifdef __AVX512VNNI__
  return _mm256_dpbusd_epi32(acc, c, x);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(c, x), _mm256_set1_epi16(1)));
#endif
}

inline int32_t hsum_i32(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1)));
}

// Decode (one token): R rows at a time, each its own stream of misses asked for well ahead (the
// weights come from DRAM: one row's prefetches alone kept too few in flight), the token's
// activations loaded once for all R. A row whose blocks share one scale (BitNet's: one a
// matrix), with the token's one scale (per row, matmul_plan.cpp), is sum(c x) - sum(x) over the
// whole row in int32 (c = w + 1 unsigned, so no sign work), times the two scales once; a row
// with scales that differ goes through row<1>.
template <int R>
inline void rows_one_token(const gemv_args& a, int64_t n, int32_t xsum) {
  constexpr int64_t bb = 12;
  const int64_t nb = a.K / 32;
  __m256i acc[R];
  const uint8_t* w[R];
  uint32_t d0[R], diff[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_si256();
    w[r] = a.w + (n + r) * a.row_bytes;
    __builtin_memcpy(&d0[r], w[r], 4);
    diff[r] = 0;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + b * 32));
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w[r] + b * bb;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + ahead, _MM_HINT_T0);
      uint32_t d;
      __builtin_memcpy(&d, blk, 4);
      diff[r] |= d ^ d0[r];
      acc[r] = dot_codes(acc[r], codes(blk + 4), x);
    }
  }
  for (int r = 0; r < R; ++r) {
    const float bias = a.bias ? a.bias[n + r] : 0.0f;
    if (diff[r]) {
      row<1>(a, w[r], 0, n + r, bias);
      continue;
    }
    float d;
    __builtin_memcpy(&d, &d0[r], 4);
    a.y[n + r - a.ycol0] = d * a.xd[0] * static_cast<float>(hsum_i32(acc[r]) - xsum) + bias;
  }
}

// One row against TC tokens the same way (a row of one scale: int32 sums, the scales once);
// false, with nothing written, where the row's scales differ.
template <int TC>
inline bool row_one_scale(const gemv_args& a, const uint8_t* w, int64_t t0, int64_t n, float bias,
                          const int32_t* xsum) {
  constexpr int64_t bb = 12;
  const int64_t nb = a.K / 32;
  __m256i acc[TC];
  for (int j = 0; j < TC; ++j) acc[j] = _mm256_setzero_si256();
  uint32_t d0, diff = 0;
  __builtin_memcpy(&d0, w, 4);
  const int8_t* xq = a.xq + t0 * a.K;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * bb;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + ahead, _MM_HINT_T0);
    uint32_t d;
    __builtin_memcpy(&d, blk, 4);
    diff |= d ^ d0;
    const __m256i c = codes(blk + 4);
    for (int j = 0; j < TC; ++j)
      acc[j] = dot_codes(
          acc[j], c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j * a.K + b * 32)));
  }
  if (diff) return false;
  float d;
  __builtin_memcpy(&d, &d0, 4);
  for (int j = 0; j < TC; ++j)
    a.y[(t0 + j) * a.ldy + n - a.ycol0] =
        d * a.xd[(t0 + j) * nb] * static_cast<float>(hsum_i32(acc[j]) - xsum[t0 + j]) + bias;
  return true;
}

template <int TC>
inline void tokens(const gemv_args& a, const uint8_t* w, int64_t t0, int64_t n, float bias,
                   const int32_t* xsum) {
  if (!row_one_scale<TC>(a, w, t0, n, bias, xsum)) row<TC>(a, w, t0, n, bias);
}

inline void gemv(const gemv_args& a) {
  int32_t xsum[summed_tokens]; // each token's sum of x, for the codes' + 1
  const int64_t T = a.T <= summed_tokens ? a.T : 0;
  for (int64_t t = 0; t < T; ++t) {
    __m256i s = _mm256_setzero_si256();
    for (int64_t k = 0; k < a.K; k += 32)
      s = dot_codes(s, _mm256_set1_epi8(1),
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + t * a.K + k)));
    xsum[t] = hsum_i32(s);
  }
  if (a.T == 1) {
    int64_t n = a.n0;
    for (; n + 4 <= a.n1; n += 4) rows_one_token<4>(a, n, xsum[0]);
    for (; n < a.n1; ++n) rows_one_token<1>(a, n, xsum[0]);
    return;
  }
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* w = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    if (T == 0) { // (many tokens, which the plan gives other paths: the general form)
      for (int64_t t0 = 0; t0 < a.T; ++t0) row<1>(a, w, t0, n, bias);
      continue;
    }
    int64_t t0 = 0;
    for (; t0 + 4 <= a.T; t0 += 4) tokens<4>(a, w, t0, n, bias, xsum);
    switch (a.T - t0) {
    case 3:
      tokens<3>(a, w, t0, n, bias, xsum);
      break;
    case 2:
      tokens<2>(a, w, t0, n, bias, xsum);
      break;
    case 1:
      tokens<1>(a, w, t0, n, bias, xsum);
      break;
    default:
      break;
    }
  }
}

} // namespace t2

void gemv_t2_32(const gemv_args& a) {
  t2::gemv(a);
}

} // namespace
} // namespace troupe::kernels::cpu
