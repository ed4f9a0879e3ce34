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

// the block's 32 weights (w in {-1, 0, 1}, int8) from its 8 code bytes
inline __m256i weights(const uint8_t* q) {
  long long bits;
  __builtin_memcpy(&bits, q, 8);
  const __m256i lanes = _mm256_srlv_epi64(_mm256_set1_epi64x(bits), _mm256_set_epi64x(6, 4, 2, 0));
  return _mm256_sub_epi8(_mm256_and_si256(lanes, _mm256_set1_epi8(3)), _mm256_set1_epi8(1));
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
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 768, _MM_HINT_T0);
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

// Decode (one token): R rows at a time, each its own stream of misses asked for well ahead (the
// weights come from DRAM: one row's prefetches alone kept too few in flight), the token's
// activations loaded once for all R.
template <int R>
inline void rows_one_token(const gemv_args& a, int64_t n) {
  constexpr int64_t bb = 12, ahead = 4096;
  const int64_t nb = a.K / 32;
  __m256 c[R];
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) {
    c[r] = _mm256_setzero_ps();
    w[r] = a.w + (n + r) * a.row_bytes;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + b * 32));
    const float xd = a.xd[b];
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w[r] + b * bb;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + ahead, _MM_HINT_T0);
      float d;
      __builtin_memcpy(&d, blk, 4);
      const __m256i wt = weights(blk + 4);
      c[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * xd), _mm256_cvtepi32_ps(dot(wt, x)), c[r]);
    }
  }
  for (int r = 0; r < R; ++r)
    a.y[n + r - a.ycol0] = kqv::hsum8(c[r]) + (a.bias ? a.bias[n + r] : 0.0f);
}

inline void gemv(const gemv_args& a) {
  if (a.T == 1) {
    int64_t n = a.n0;
    for (; n + 4 <= a.n1; n += 4) rows_one_token<4>(a, n);
    for (; n < a.n1; ++n) rows_one_token<1>(a, n);
    return;
  }
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* w = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    int64_t t0 = 0;
    for (; t0 + 4 <= a.T; t0 += 4) row<4>(a, w, t0, n, bias);
    switch (a.T - t0) {
    case 3:
      row<3>(a, w, t0, n, bias);
      break;
    case 2:
      row<2>(a, w, t0, n, bias);
      break;
    case 1:
      row<1>(a, w, t0, n, bias);
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
