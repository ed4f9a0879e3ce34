// gemm_int8_avx512.cpp: the q8_0 / q4_0 / MXFP4 / IQ4_NL / IQ4_XS GEMM for 8+ tokens on AVX-512
// VNNI (gemm_q_args in gemv.hpp), built with -mavx512f -mavx512bw -mavx512vnni. 16 tokens in the
// lanes of a zmm: each 4 weight bytes of a row are broadcast and one vpdpbusd adds their products
// with 4 values of k of all 16 tokens into int32, so a 32-value block of one row costs 8 vpdpbusd
// per 16 tokens (512 products), then one conversion and one FMA scale the block's int32
// sums by the weight scale times the 16 activation scales. Up to 4 tiles (64 tokens) share
// each unpacked weight block.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemm_kquant.hpp"
#include "kernels/cpu/gemv.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int lanes = 16;

inline __m512i bcast4(const uint8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The vector type of gemm_kquant.hpp: 16 tokens a zmm, vpdpbusd.
struct v512 {
  using vi = __m512i;
  using vf = __m512;
  static constexpr int lanes = 16;
  static vi bcast4(const uint8_t* p) { return ::troupe::kernels::cpu::bcast4(p); }
  static vi bits(vi v, int shift, int mask) {
    return _mm512_and_si512(_mm512_srli_epi32(v, shift), _mm512_set1_epi8(static_cast<char>(mask)));
  }
  static vi sll(vi v, int s) { return _mm512_slli_epi32(v, s); }
  static vi or_(vi a, vi b) { return _mm512_or_si512(a, b); }
  static vi zeroi() { return _mm512_setzero_si512(); }
  static vi loadi(const void* p) { return _mm512_loadu_si512(p); }
  static vi dot(vi acc, vi u, vi x) { return _mm512_dpbusd_epi32(acc, u, x); }
  static vf zerof() { return _mm512_setzero_ps(); }
  static vf loadf(const float* p) { return _mm512_loadu_ps(p); }
  static vf set1(float v) { return _mm512_set1_ps(v); }
  static vf cvt(vi v) { return _mm512_cvtepi32_ps(v); }
  static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static vf fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
  template <int J>
  static void store_rows(const gemm_q_args& a, int64_t n, int64_t j0, const vf* f) {
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int j = 0; j < J; ++j) {
      alignas(64) float out[lanes];
      _mm512_store_ps(out, f[j]);
      const int64_t t0 = (j0 + j) * lanes;
      for (int l = 0; l < lanes && t0 + l < a.T; ++l)
        a.y[(t0 + l) * a.ldy + n - a.ycol0] = out[l] + bias;
    }
  }
};

enum class fmt { q8_0, q4_0, mxfp4, iq4_nl, iq4_xs };

// Rows [n0, n1) for tiles [j0, j0 + J).
template <fmt F, int J>
void rows(const gemm_q_args& a, int64_t j0) {
  constexpr bool Q4 = F == fmt::q4_0, MX = F == fmt::mxfp4, XS = F == fmt::iq4_xs;
  constexpr bool IQ = F == fmt::iq4_nl || XS; // codes looked up as value + 128 (offset 128)
  const int64_t nb = a.K / 32, kg = a.K / 4;
  // bytes per block (IQ4_XS: per 256 values, the 32-value sub-blocks within it)
  const int64_t bb = Q4 || F == fmt::iq4_nl ? 18 : MX ? 17 : XS ? 136 : 34;
  // the zero-masked form: the plain one trips GCC 12's -Wuninitialized (bug 105593)
  const __m512i lut =
      _mm512_maskz_broadcast_i32x4(0xffff, kqc::table16(IQ ? kqc::iq4_unsigned : kqc::mx_unsigned));
  const __m512i nib = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    __m512 f[J];
    for (int j = 0; j < J; ++j) f[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = XS ? row + (b / 8) * bb : row + b * bb;
      const uint8_t* qs = XS ? blk + 8 + (b % 8) * 16 : blk + (MX ? 1 : 2);
      // two accumulators a tile (low / high nibbles, even / odd k-groups): 8 independent
      // vpdpbusd chains for 4 tiles, enough to cover the instruction's latency
      __m512i acc[J], acc2[J];
      const int8_t* x[J];
      for (int j = 0; j < J; ++j) {
        acc[j] = _mm512_loadu_si512(a.corr + ((j0 + j) * nb + b) * lanes);
        acc2[j] = _mm512_setzero_si512();
        x[j] = a.xt + ((j0 + j) * kg + b * 8) * lanes * 4;
      }
      if constexpr (Q4 || MX || IQ) { // qs[4i..4i+3]: low nibbles k-group i, high ones 4 + i
        for (int i = 0; i < 4; ++i) {
          const __m512i v = bcast4(qs + 4 * i);
          __m512i lo = _mm512_and_si512(v, nib);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), nib);
          if constexpr (MX || IQ) { // the doubled values + 12 (offset 12), IQ4's + 128
            lo = _mm512_shuffle_epi8(lut, lo);
            hi = _mm512_shuffle_epi8(lut, hi);
          }
          for (int j = 0; j < J; ++j) {
            acc[j] = _mm512_dpbusd_epi32(acc[j], lo, _mm512_loadu_si512(x[j] + i * 64));
            acc2[j] = _mm512_dpbusd_epi32(acc2[j], hi, _mm512_loadu_si512(x[j] + (i + 4) * 64));
          }
        }
      } else {
        for (int i = 0; i < 8; i += 2) {
          const __m512i u0 = _mm512_xor_si512(bcast4(qs + 4 * i), flip); // w + 128, unsigned
          const __m512i u1 = _mm512_xor_si512(bcast4(qs + 4 * i + 4), flip);
          for (int j = 0; j < J; ++j) {
            acc[j] = _mm512_dpbusd_epi32(acc[j], u0, _mm512_loadu_si512(x[j] + i * 64));
            acc2[j] = _mm512_dpbusd_epi32(acc2[j], u1, _mm512_loadu_si512(x[j] + i * 64 + 64));
          }
        }
      }
      for (int j = 0; j < J; ++j) acc[j] = _mm512_add_epi32(acc[j], acc2[j]);
      const __m512 wd = _mm512_set1_ps(
          MX   ? kqc::mx_scale(blk[0])
          : XS ? kqc::f16_at(blk) *
                     static_cast<float>(kqc::iq4xs_scale(blk, static_cast<int>(b % 8)))
               : kqc::f16_at(blk));
      for (int j = 0; j < J; ++j)
        f[j] = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(acc[j]),
            _mm512_mul_ps(wd, _mm512_loadu_ps(a.xd + ((j0 + j) * nb + b) * lanes)), f[j]);
    }
    v512::store_rows<J>(a, n, j0, f);
  }
}

template <fmt F>
void gemm(const gemm_q_args& a) {
  for (int64_t j0 = 0; j0 < a.tiles; j0 += 4) {
    switch (a.tiles - j0 < 4 ? a.tiles - j0 : 4) {
    case 4:
      rows<F, 4>(a, j0);
      break;
    case 3:
      rows<F, 3>(a, j0);
      break;
    case 2:
      rows<F, 2>(a, j0);
      break;
    default:
      rows<F, 1>(a, j0);
      break;
    }
  }
}

} // namespace

void gemm_q8_0_avx512(const gemm_q_args& a) {
  gemm<fmt::q8_0>(a);
}
void gemm_q4_0_avx512(const gemm_q_args& a) {
  gemm<fmt::q4_0>(a);
}
void gemm_mxfp4_avx512(const gemm_q_args& a) {
  gemm<fmt::mxfp4>(a);
}
void gemm_iq4_nl_avx512(const gemm_q_args& a) {
  gemm<fmt::iq4_nl>(a);
}
void gemm_iq4_xs_avx512(const gemm_q_args& a) {
  gemm<fmt::iq4_xs>(a);
}

void gemm_q4_k_avx512(const gemm_q_args& a) {
  gemm_q4_k<v512>(a);
}
void gemm_q5_k_avx512(const gemm_q_args& a) {
  gemm_q5_k<v512>(a);
}
void gemm_q6_k_avx512(const gemm_q_args& a) {
  gemm_q6_k<v512>(a);
}

namespace {

// Rows v[0..15] of 16 dwords transposed in place (v[c] becomes column c): pairs of dwords,
// then of qwords, give each 128-bit lane a 4 x 4 block; two rounds of lane shuffles place them.
inline void transpose16(__m512i* v) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  // u[4k + g]: column 4L + k of rows 4g .. 4g + 3 in lane L
  for (int g = 0; g < 4; ++g) {
    const __m512i* q = t + 4 * g;
    u[g] = _mm512_unpacklo_epi64(q[0], q[2]);
    u[4 + g] = _mm512_unpackhi_epi64(q[0], q[2]);
    u[8 + g] = _mm512_unpacklo_epi64(q[1], q[3]);
    u[12 + g] = _mm512_unpackhi_epi64(q[1], q[3]);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512i* q = u + 4 * k;
    const __m512i a = _mm512_shuffle_i32x4(q[0], q[1], 0x44),
                  b = _mm512_shuffle_i32x4(q[0], q[1], 0xee);
    const __m512i c = _mm512_shuffle_i32x4(q[2], q[3], 0x44),
                  d = _mm512_shuffle_i32x4(q[2], q[3], 0xee);
    v[k] = _mm512_shuffle_i32x4(a, c, 0x88);
    v[4 + k] = _mm512_shuffle_i32x4(a, c, 0xdd);
    v[8 + k] = _mm512_shuffle_i32x4(b, d, 0x88);
    v[12 + k] = _mm512_shuffle_i32x4(b, d, 0xdd);
  }
}

} // namespace

// pack_q6_k's group block (G = 16): the rows' d (32 bytes), then 52 chunks of 16 dwords (the
// 4 scale chunks, 32 of ql, 16 of qh), chunk j's dword r from row r: ql and qh are three
// 16 x 16 transposes into each row's first 192 bytes; the scales and d go one row at a time.
void unpack_q6_k_x16(const uint8_t* grp, int64_t K, uint8_t* rows) {
  const int64_t nb = K / 256, rb = nb * 210;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* o = grp + b * 16 * 210;
    uint8_t* out = rows + b * 210;
    for (int q = 0; q < 3; ++q) { // chunks 4 + 16 q .. 19 + 16 q: bytes 64 q .. 64 q + 63
      __m512i v[16];
      for (int j = 0; j < 16; ++j) v[j] = _mm512_loadu_si512(o + 32 + 64 * (4 + 16 * q + j));
      transpose16(v);
      for (int r = 0; r < 16; ++r) _mm512_storeu_si512(out + r * rb + 64 * q, v[r]);
    }
    for (int r = 0; r < 16; ++r) {
      __builtin_memcpy(out + r * rb + 208, o + 2 * r, 2);
      for (int i = 0; i < 4; ++i)
        __builtin_memcpy(out + r * rb + 192 + 4 * i, o + 32 + 64 * i + 4 * r, 4);
    }
  }
}

} // namespace troupe::kernels::cpu
