// gemm_kquant.hpp: the K-quant GEMM for 8+ tokens (Q4_K, Q5_K, Q6_K; gemm_q_args in gemv.hpp)
// written once over a vector type V and included by each per-ISA file (gemm_int8_avx512.cpp
// with V = 16 lanes of vpdpbusd, gemm_int8_avx2.cpp with V = 8 lanes of maddubs + madd),
// which compiles it with its own -m flags; everything here has internal linkage, so the
// copies never merge.
//
// As for q4_0, the tokens are in the lanes and each 4 weight codes of a row are broadcast: the
// 6-bit-or-less unsigned codes u are the unsigned operand, so no offset is added. Per 32-value
// group of a 256-value block, the int32 sums (two chains of 16 values for Q6_K, whose scales
// are per 16) are scaled into f32 by d * scale * xd of each token. The codes' offsets come out
// of the activation sums the tiler made: Q6_K's -32 starts each 16-value chain at -32 * sum(x)
// (corr, per 16); the Q4_K / Q5_K minimums subtract dmin * m * (xd * sum(x)) per group (xs).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/kquant_codes.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace kqg {

using namespace kqc;

// The tiles' pointers for token tile t: k-group kg of the row, group g's scales and sums.
template <class V>
struct tile_at {
  const gemm_q_args& a;
  int64_t ng, nkg;
  const int8_t* x(int64_t t, int64_t kg) const { return a.xt + (t * nkg + kg) * V::lanes * 4; }
  typename V::vf xd(int64_t t, int64_t g) const { return V::loadf(a.xd + (t * ng + g) * V::lanes); }
  typename V::vf xs(int64_t t, int64_t g) const { return V::loadf(a.xs + (t * ng + g) * V::lanes); }
  typename V::vi corr(int64_t t, int64_t run) const {
    return V::loadi(a.corr + (t * 2 * ng + run) * V::lanes);
  }
};

// A block's 256 codes unpacked once into bytes (group g at u + 32 g), so the inner loop
// broadcasts them from memory instead of rebuilding each 4 from split bits per broadcast.
inline void store32(uint8_t* p, __m256i v) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(p), v);
}

template <bool Q5>
inline void unpack_k45(const uint8_t* b, uint8_t* u) {
  const __m256i qh = Q5 ? load32(b + 16) : _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) {
    __m256i lo, hi;
    k45_codes<Q5>(b, qh, j, lo, hi);
    store32(u + 64 * j, lo);
    store32(u + 64 * j + 32, hi);
  }
}

inline void unpack_q6(const uint8_t* b, uint8_t* u) {
  for (int g = 0; g < 8; ++g) store32(u + 32 * g, q6_codes(b, g));
}

// Q4_K (Q5 false) and Q5_K (Q5 true): rows [n0, n1) for tiles [j0, j0 + J).
template <class V, bool Q5, int J>
void k45_rows(const gemm_q_args& a, int64_t j0) {
  using vi = typename V::vi;
  using vf = typename V::vf;
  const tile_at<V> at{a, a.K / 32, a.K / 4};
  const int bytes = Q5 ? 176 : 144;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    vf f[J];
    for (int t = 0; t < J; ++t) f[t] = V::zerof();
    for (int64_t blk = 0; blk < a.K / 256; ++blk) {
      const uint8_t* b = row + blk * bytes;
      const float d = f16_at(b), dmin = f16_at(b + 2);
      alignas(16) uint8_t sm[16]; // scales of the 8 groups, then their minimums
      _mm_store_si128(reinterpret_cast<__m128i*>(sm), scales_k45(b + 4));
      const uint8_t* sc = sm;
      const uint8_t* m = sm + 8;
      alignas(32) uint8_t u[256];
      unpack_k45<Q5>(b, u);
      for (int j = 0; j < 4; ++j) { // groups 2j and 2j + 1, four independent chains
        vi lo_acc[J], hi_acc[J];
        for (int t = 0; t < J; ++t) lo_acc[t] = hi_acc[t] = V::zeroi();
        const int64_t kg = blk * 64 + j * 16; // k-group of value 0 of group 2j
        for (int i = 0; i < 8; ++i) {
          const vi lo = V::bcast4(u + 64 * j + 4 * i), hi = V::bcast4(u + 64 * j + 32 + 4 * i);
          for (int t = 0; t < J; ++t) {
            lo_acc[t] = V::dot(lo_acc[t], lo, V::loadi(at.x(j0 + t, kg + i)));
            hi_acc[t] = V::dot(hi_acc[t], hi, V::loadi(at.x(j0 + t, kg + 8 + i)));
          }
        }
        const int64_t g = blk * 8 + 2 * j;
        const vf s0 = V::set1(d * sc[2 * j]), s1 = V::set1(d * sc[2 * j + 1]);
        const vf m0 = V::set1(dmin * m[2 * j]), m1 = V::set1(dmin * m[2 * j + 1]);
        for (int t = 0; t < J; ++t) {
          f[t] = V::fma(V::cvt(lo_acc[t]), V::mul(s0, at.xd(j0 + t, g)), f[t]);
          f[t] = V::fma(V::cvt(hi_acc[t]), V::mul(s1, at.xd(j0 + t, g + 1)), f[t]);
          f[t] = V::fnma(m0, at.xs(j0 + t, g), f[t]);
          f[t] = V::fnma(m1, at.xs(j0 + t, g + 1), f[t]);
        }
      }
    }
    V::template store_rows<J>(a, n, j0, f);
  }
}

// Q6_K: rows [n0, n1) for tiles [j0, j0 + J).
template <class V, int J>
void q6_rows(const gemm_q_args& a, int64_t j0) {
  using vi = typename V::vi;
  using vf = typename V::vf;
  const tile_at<V> at{a, a.K / 32, a.K / 4};
  // a.next's lines spread over the rows of every pass over the tiles (J at a time)
  const int64_t rows = a.n1 - a.n0, lines = (a.next_bytes + 63) / 64;
  const int64_t steps = rows * ((a.tiles + 1) / 2), per = (lines + steps - 1) / steps;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    for (int64_t l = (j0 / 2 * rows + n - a.n0) * per, e = l + per; l < e && l < lines; ++l)
      _mm_prefetch(static_cast<const char*>(a.next) + l * 64, _MM_HINT_T1);
    vf f[J];
    for (int t = 0; t < J; ++t) f[t] = V::zerof();
    for (int64_t blk = 0; blk < a.K / 256; ++blk) {
      const uint8_t* b = row + blk * 210;
      const auto* s8 = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_at(b + 208);
      alignas(32) uint8_t u[256];
      unpack_q6(b, u);
      for (int g = 0; g < 8; ++g) {
        const int64_t gg = blk * 8 + g;
        vi acc[2][J]; // values 0-15 and 16-31: one scale each; start at -32 * sum(x)
        for (int t = 0; t < J; ++t) {
          acc[0][t] = at.corr(j0 + t, 2 * gg);
          acc[1][t] = at.corr(j0 + t, 2 * gg + 1);
        }
        for (int i = 0; i < 8; ++i) {
          const vi w = V::bcast4(u + 32 * g + 4 * i);
          for (int t = 0; t < J; ++t)
            acc[i / 4][t] = V::dot(acc[i / 4][t], w, V::loadi(at.x(j0 + t, gg * 8 + i)));
        }
        const vf s0 = V::set1(d * s8[2 * g]), s1 = V::set1(d * s8[2 * g + 1]);
        for (int t = 0; t < J; ++t) {
          const vf xd = at.xd(j0 + t, gg);
          f[t] = V::fma(V::cvt(acc[0][t]), V::mul(s0, xd), f[t]);
          f[t] = V::fma(V::cvt(acc[1][t]), V::mul(s1, xd), f[t]);
        }
      }
    }
    V::template store_rows<J>(a, n, j0, f);
  }
}

// All tiles, two at a time (they share each weight block's unpacking).
template <class V, void (*R1)(const gemm_q_args&, int64_t), void (*R2)(const gemm_q_args&, int64_t)>
void over_tiles(const gemm_q_args& a) {
  int64_t j0 = 0;
  for (; j0 + 2 <= a.tiles; j0 += 2) R2(a, j0);
  if (j0 < a.tiles) R1(a, j0);
}

} // namespace kqg

template <class V>
void gemm_q4_k(const gemm_q_args& a) {
  kqg::over_tiles<V, kqg::k45_rows<V, false, 1>, kqg::k45_rows<V, false, 2>>(a);
}
template <class V>
void gemm_q5_k(const gemm_q_args& a) {
  kqg::over_tiles<V, kqg::k45_rows<V, true, 1>, kqg::k45_rows<V, true, 2>>(a);
}
template <class V>
void gemm_q6_k(const gemm_q_args& a) {
  kqg::over_tiles<V, kqg::q6_rows<V, 1>, kqg::q6_rows<V, 2>>(a);
}

} // namespace
} // namespace troupe::kernels::cpu
