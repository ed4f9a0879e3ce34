// gemv_kquant.hpp: the decode kernels for GGUF's K-quants (Q2_K ... Q6_K, layouts in
// core/kquant.hpp) on int8 activations, written once in 256-bit AVX2 intrinsics and included
// by each per-ISA file (gemv_avx2.cpp, gemv_avx512.cpp), which compiles it with its own -m
// flags; everything here has internal linkage, so the two copies never merge.
//
// No block is expanded to f32. Each 32-value group of a 256-value block holds unsigned codes
// u (2 to 6 bits) with one integer scale per 16 values; the activations of that group are one
// q8 block (int8 x, f32 scale xd). Then
//   dot(group) = d * xd * sum_16 (scale * sum(u * x))  -  offsets,
// where sum(u * x) is maddubs (u unsigned, x signed), the scales weight the int16 pairs in
// madd, and one FMA per group scales the int32 sums into f32. The offsets (Q4_K / Q5_K / Q2_K
// minimums, Q6_K's -32 and Q3_K's -4) need only the sums of the activations per 16 values,
// which the caller computes once per token (gemv_args::xs), so they cost a few scalar FMAs
// per block. Codes stay below 64 and |x| <= 127, so the int16 pairs cannot saturate.
// Tests: the K-quant matmul cases of the op harness (tests/kernels/op_cases_quant.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/kquant_codes.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace kqv {

using namespace kqc;

// The scales of a group as 16 int16 for madd: `idx` picks, for each half of 16 values, the
// byte of `sc` (16 int8 scales) that weights it.
inline __m256i pick_scales(__m128i sc, __m128i idx) {
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, idx));
}
inline __m128i halves(int s0, int s1) { // both halves' scale index: s0 for values 0-15
  return _mm_set_epi64x(static_cast<long long>(0x0101010101010101ull * static_cast<unsigned>(s1)),
                        static_cast<long long>(0x0101010101010101ull * static_cast<unsigned>(s0)));
}

// 32 unsigned codes times 32 int8 activations, the int16 pairs weighted by `sc` (one integer
// scale per 16 values), added into acc as f32 times *dx (d * xd of the group).
inline void group(__m256i u, const int8_t* x, __m256i sc, const float* dx, __m256& acc) {
  const __m256i p16 =
      _mm256_maddubs_epi16(u, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  acc =
      _mm256_fmadd_ps(_mm256_broadcast_ss(dx), _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, sc)), acc);
}

// The activations of one 256-value block: int8 values, 8 scales, 16 scaled sums per 16.
struct acts {
  const int8_t* x;
  const float* xd;
  const float* xs;
};

// Per-block accumulators: the scaled dot products (two chains) and the offsets to subtract.
struct accs {
  __m256 dot[2];
  __m256 off;
};

// d * xd for the block's 8 groups, on the stack for broadcasts from memory.
inline void group_factors(float d, const float* xd, float* dx) {
  _mm256_storeu_ps(dx, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_loadu_ps(xd)));
}

// The 16 per-16 sums in s as 8 per-32 sums (group order).
inline __m256 sums32(const float* xs) {
  const __m256 h = _mm256_hadd_ps(_mm256_loadu_ps(xs), _mm256_loadu_ps(xs + 8));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(h), 0xd8));
}

// 8 int8 (low bytes of v) as f32
inline __m256 f32_of8(__m128i v, bool sign) {
  return _mm256_cvtepi32_ps(sign ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
}

// sum over 16 runs of f(run) * xs(run), f the 16 int8 in v: into off times c
inline void run_term(__m128i v, bool sign, const float* xs, float c, __m256& off) {
  const __m256 lo = _mm256_mul_ps(f32_of8(v, sign), _mm256_loadu_ps(xs));
  const __m256 both =
      _mm256_fmadd_ps(f32_of8(_mm_srli_si128(v, 8), sign), _mm256_loadu_ps(xs + 8), lo);
  off = _mm256_fmadd_ps(_mm256_set1_ps(c), both, off);
}

// Q4_K / Q5_K's minimum term: dmin * sum_g m_g * sum(x of group g)
inline void min_term_k45(__m128i sm, float dmin, const float* xs, __m256& off) {
  off = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
                        _mm256_mul_ps(f32_of8(_mm_srli_si128(sm, 8), false), sums32(xs)), off);
}

// Q4_K (Q5 false) / Q5_K
template <bool Q5>
inline void k45(const uint8_t* b, const acts& a, accs& c) {
  alignas(32) float dx[8];
  group_factors(f16_at(b), a.xd, dx);
  const __m128i sm = scales_k45(b + 4);
  const __m256i qh = Q5 ? load32(b + 16) : _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) {
    __m256i lo, hi;
    k45_codes<Q5>(b, qh, j, lo, hi);
    group(lo, a.x + 64 * j, pick_scales(sm, _mm_set1_epi8(static_cast<char>(2 * j))), dx + 2 * j,
          c.dot[0]);
    group(hi, a.x + 64 * j + 32, pick_scales(sm, _mm_set1_epi8(static_cast<char>(2 * j + 1))),
          dx + 2 * j + 1, c.dot[1]);
  }
  min_term_k45(sm, f16_at(b + 2), a.xs, c.off);
}

inline void q6_k(const uint8_t* b, const acts& a, accs& c) {
  const float d = f16_at(b + 208);
  alignas(32) float dx[8];
  group_factors(d, a.xd, dx);
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
  for (int g = 0; g < 8; ++g)
    group(q6_codes(b, g), a.x + 32 * g, pick_scales(sc, halves(2 * g, 2 * g + 1)), dx + g,
          c.dot[g % 2]);
  run_term(sc, true, a.xs, 32.0f * d, c.off); // codes are value + 32
}

inline void q3_k(const uint8_t* b, const acts& a, accs& c) {
  const uint8_t* s = b + 96;
  const float d = f16_at(b + 108);
  alignas(32) float dx[8];
  group_factors(d, a.xd, dx);
  alignas(16) int8_t s8[16];
  for (int r = 0; r < 16; ++r) {
    const int lo = r < 8 ? s[r] & 0x0f : s[r - 8] >> 4;
    const int hi = (s[8 + r % 4] >> (2 * (r / 4))) & 3;
    s8[r] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
  const __m128i sc = _mm_load_si128(reinterpret_cast<const __m128i*>(s8));
  const __m256i hm = load32(b); // bit g of byte l: value l of group g, 3rd bit
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load32(b + 32 + 32 * h);
    for (int k = 0; k < 4; ++k) {
      const int g = 4 * h + k;
      const __m256i u = _mm256_or_si256(bits(q, 2 * k, 3), _mm256_slli_epi16(bits(hm, g, 1), 2));
      group(u, a.x + 32 * g, pick_scales(sc, halves(2 * g, 2 * g + 1)), dx + g, c.dot[k % 2]);
    }
  }
  run_term(sc, true, a.xs, 4.0f * d, c.off); // codes are value + 4
}

inline void q2_k(const uint8_t* b, const acts& a, accs& c) {
  alignas(32) float dx[8];
  group_factors(f16_at(b + 80), a.xd, dx);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)); // scale | min << 4
  const __m128i nib = _mm_set1_epi8(0x0f);
  const __m128i sc = _mm_and_si128(v, nib), m = _mm_and_si128(_mm_srli_epi16(v, 4), nib);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load32(b + 16 + 32 * h);
    for (int k = 0; k < 4; ++k) {
      const int g = 4 * h + k;
      group(bits(q, 2 * k, 3), a.x + 32 * g, pick_scales(sc, halves(2 * g, 2 * g + 1)), dx + g,
            c.dot[k % 2]);
    }
  }
  run_term(m, false, a.xs, f16_at(b + 82), c.off);
}

inline float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

using block_fn = void (*)(const uint8_t*, const acts&, accs&);

// Rows [n0, n1): each row read once for all T tokens (it stays in L1 between them).
template <block_fn Block, int Bytes>
void gemv(const gemv_args& a) {
  const int64_t nb = a.K / 256;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      accs c{{_mm256_setzero_ps(), _mm256_setzero_ps()}, _mm256_setzero_ps()};
      const int8_t* x = a.xq + t * a.K;
      const float* xd = a.xd + t * (a.K / 32);
      const float* xs = a.xs + t * (a.K / 16);
      for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* blk = row + i * Bytes;
        for (int p = 0; p < Bytes; p += 64)
          _mm_prefetch(reinterpret_cast<const char*>(blk) + 2048 + p, _MM_HINT_T0);
        Block(blk, acts{x + 256 * i, xd + 8 * i, xs + 16 * i}, c);
      }
      a.y[t * a.ldy + n - a.ycol0] =
          hsum8(_mm256_sub_ps(_mm256_add_ps(c.dot[0], c.dot[1]), c.off)) + bias;
    }
  }
}

} // namespace kqv

void gemv_q2_k(const gemv_args& a) {
  kqv::gemv<kqv::q2_k, 84>(a);
}
void gemv_q3_k(const gemv_args& a) {
  kqv::gemv<kqv::q3_k, 110>(a);
}
void gemv_q4_k(const gemv_args& a) {
  kqv::gemv<kqv::k45<false>, 144>(a);
}
void gemv_q5_k(const gemv_args& a) {
  kqv::gemv<kqv::k45<true>, 176>(a);
}
void gemv_q6_k(const gemv_args& a) {
  kqv::gemv<kqv::q6_k, 210>(a);
}

} // namespace
} // namespace troupe::kernels::cpu
