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

namespace troupe::kernels::cpu {
namespace {
namespace kqg {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Q4_K / Q5_K: the 6-bit scale and minimum of each 32-value group from the 12 packed bytes
inline void scales_k45(const uint8_t* s, int* sc, int* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 6) << 4);
    m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

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

// Q4_K (Q5 false) and Q5_K (Q5 true): rows [n0, n1) for tiles [j0, j0 + J).
template <class V, bool Q5, int J>
void k45_rows(const gemm_q_args& a, int64_t j0) {
  using vi = typename V::vi;
  using vf = typename V::vf;
  const tile_at<V> at{a, a.K / 32, a.K / 4};
  const int bytes = Q5 ? 176 : 144, qs_at = Q5 ? 48 : 16;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    vf f[J];
    for (int t = 0; t < J; ++t) f[t] = V::zerof();
    for (int64_t blk = 0; blk < a.K / 256; ++blk) {
      const uint8_t* b = row + blk * bytes;
      const float d = f16_at(b), dmin = f16_at(b + 2);
      int sc[8], m[8];
      scales_k45(b + 4, sc, m);
      for (int j = 0; j < 4; ++j) { // 32 bytes of codes: group 2j low nibbles, 2j + 1 high
        vi lo_acc[J], hi_acc[J];
        for (int t = 0; t < J; ++t) lo_acc[t] = hi_acc[t] = V::zeroi();
        const int64_t kg = blk * 64 + j * 16; // k-group of value 0 of group 2j
        for (int i = 0; i < 8; ++i) {
          const vi v = V::bcast4(b + qs_at + 32 * j + 4 * i);
          vi lo = V::bits(v, 0, 0x0f), hi = V::bits(v, 4, 0x0f);
          if constexpr (Q5) { // bit g of qh[l]: the 5th bit of value l of group g
            const vi h = V::bcast4(b + 16 + 4 * i);
            lo = V::or_(lo, V::sll(V::bits(h, 2 * j, 1), 4));
            hi = V::or_(hi, V::sll(V::bits(h, 2 * j + 1, 1), 4));
          }
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
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    vf f[J];
    for (int t = 0; t < J; ++t) f[t] = V::zerof();
    for (int64_t blk = 0; blk < a.K / 256; ++blk) {
      const uint8_t* b = row + blk * 210;
      const auto* s8 = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_at(b + 208);
      for (int g = 0; g < 8; ++g) { // group g: half h = g / 4, k = g % 4 (kq::q6_k)
        const int h = g / 4, k = g % 4;
        const uint8_t* ql = b + 64 * h + 32 * (k % 2);
        const uint8_t* qh = b + 128 + 32 * h;
        const int64_t gg = blk * 8 + g;
        vi acc[2][J]; // values 0-15 and 16-31: one scale each; start at -32 * sum(x)
        for (int t = 0; t < J; ++t) {
          acc[0][t] = at.corr(j0 + t, 2 * gg);
          acc[1][t] = at.corr(j0 + t, 2 * gg + 1);
        }
        for (int i = 0; i < 8; ++i) {
          const vi u = V::or_(V::bits(V::bcast4(ql + 4 * i), 4 * (k / 2), 0x0f),
                              V::sll(V::bits(V::bcast4(qh + 4 * i), 2 * k, 3), 4));
          for (int t = 0; t < J; ++t)
            acc[i / 4][t] = V::dot(acc[i / 4][t], u, V::loadi(at.x(j0 + t, gg * 8 + i)));
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
