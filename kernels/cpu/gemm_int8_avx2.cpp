// gemm_int8_avx2.cpp: the q8_0 / q4_0 / MXFP4 GEMM for 8+ tokens on AVX2 (gemm_q_args in gemv.hpp),
// built with -mavx2 -mfma -mf16c. 8 tokens in the lanes of a ymm: 4 weight bytes of a row
// are broadcast and maddubs multiplies them with 4 values of k of all 8 tokens. q4_0's
// nibbles (0..15) are the unsigned operand, so the 8 int16 pair sums of a block add up
// without saturating (8 x 2 x 15 x 127 < 2^15) and one madd per block widens them; q8_0's
// signed bytes go through the sign trick (|w| times x with w's sign), so q8_offset is 0;
// MXFP4's nibbles are looked up (vpshufb) as their doubled values + 12, offset 12.
// Up to 4 tiles (32 tokens) share each unpacked weight block.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemm_kquant.hpp"
#include "kernels/cpu/gemv.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int lanes = 8;

inline __m256i bcast4(const uint8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i load(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The vector type of gemm_kquant.hpp: 8 tokens a ymm, maddubs + madd (codes below 64: no
// saturation).
struct v256 {
  using vi = __m256i;
  using vf = __m256;
  static constexpr int lanes = 8;
  static vi bcast4(const uint8_t* p) { return ::troupe::kernels::cpu::bcast4(p); }
  static vi bits(vi v, int shift, int mask) {
    return _mm256_and_si256(_mm256_srli_epi32(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
  }
  static vi sll(vi v, int s) { return _mm256_slli_epi32(v, s); }
  static vi or_(vi a, vi b) { return _mm256_or_si256(a, b); }
  static vi zeroi() { return _mm256_setzero_si256(); }
  static vi loadi(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static vi dot(vi acc, vi u, vi x) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)));
  }
  static vf zerof() { return _mm256_setzero_ps(); }
  static vf loadf(const float* p) { return _mm256_loadu_ps(p); }
  static vf set1(float v) { return _mm256_set1_ps(v); }
  static vf cvt(vi v) { return _mm256_cvtepi32_ps(v); }
  static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static vf fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
  template <int J>
  static void store_rows(const gemm_q_args& a, int64_t n, int64_t j0, const vf* f) {
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int j = 0; j < J; ++j) {
      alignas(32) float out[lanes];
      _mm256_store_ps(out, f[j]);
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
  constexpr bool IQ = F == fmt::iq4_nl || XS; // signed values, the sign trick (offset 0)
  const int64_t nb = a.K / 32, kg = a.K / 4;
  // bytes per block (IQ4_XS: per 256 values, the 32-value sub-blocks within it)
  const int64_t bb = Q4 || F == fmt::iq4_nl ? 18 : MX ? 17 : XS ? 136 : 34;
  const __m256i lut =
      _mm256_broadcastsi128_si256(kqc::table16(IQ ? kq::iq4_values : kqc::mx_unsigned));
  const __m256i nib = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    __m256 f[J];
    for (int j = 0; j < J; ++j) f[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = XS ? row + (b / 8) * bb : row + b * bb;
      const uint8_t* qs = XS ? blk + 8 + (b % 8) * 16 : blk + (MX ? 1 : 2);
      __m256i acc[J];
      const int8_t* x[J];
      for (int j = 0; j < J; ++j) {
        acc[j] = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(a.corr + ((j0 + j) * nb + b) * lanes));
        x[j] = a.xt + ((j0 + j) * kg + b * 8) * lanes * 4;
      }
      if constexpr (Q4) { // qs[4i..4i+3]: low nibbles k-group i, high ones k-group 4 + i
        __m256i s16[J];
        for (int j = 0; j < J; ++j) s16[j] = _mm256_setzero_si256();
        for (int i = 0; i < 4; ++i) {
          const __m256i v = bcast4(qs + 4 * i);
          const __m256i lo = _mm256_and_si256(v, nib);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(v, 4), nib);
          for (int j = 0; j < J; ++j) {
            s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(lo, load(x[j] + i * 32)));
            s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(hi, load(x[j] + (i + 4) * 32)));
          }
        }
        for (int j = 0; j < J; ++j)
          acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(s16[j], ones));
      } else if constexpr (MX) {
        // as q4_0, the codes looked up as value * 2 + 12 (0..24): four pairs of 2 x 24 x 127
        // fit an int16, so low and high nibbles sum apart and widen once each
        __m256i s16[J], h16[J];
        for (int j = 0; j < J; ++j) s16[j] = h16[j] = _mm256_setzero_si256();
        for (int i = 0; i < 4; ++i) {
          const __m256i v = bcast4(qs + 4 * i);
          const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nib));
          const __m256i hi =
              _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi32(v, 4), nib));
          for (int j = 0; j < J; ++j) {
            s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(lo, load(x[j] + i * 32)));
            h16[j] = _mm256_add_epi16(h16[j], _mm256_maddubs_epi16(hi, load(x[j] + (i + 4) * 32)));
          }
        }
        for (int j = 0; j < J; ++j)
          acc[j] = _mm256_add_epi32(acc[j], _mm256_add_epi32(_mm256_madd_epi16(s16[j], ones),
                                                             _mm256_madd_epi16(h16[j], ones)));
      } else if constexpr (IQ) {
        // as q8_0 (sign trick; a pair of 127 x 127 products fills an int16, so each widens
        // at once), the codes looked up as their signed values
        for (int i = 0; i < 4; ++i) {
          const __m256i v = bcast4(qs + 4 * i);
          const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nib));
          const __m256i hi =
              _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi32(v, 4), nib));
          const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
          for (int j = 0; j < J; ++j) {
            const __m256i p = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(load(x[j] + i * 32), lo));
            const __m256i q =
                _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(load(x[j] + (i + 4) * 32), hi));
            acc[j] = _mm256_add_epi32(
                acc[j], _mm256_add_epi32(_mm256_madd_epi16(p, ones), _mm256_madd_epi16(q, ones)));
          }
        }
      } else {
        for (int i = 0; i < 8; ++i) {
          const __m256i w = bcast4(qs + 4 * i);
          const __m256i aw = _mm256_abs_epi8(w);
          for (int j = 0; j < J; ++j) {
            const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(load(x[j] + i * 32), w));
            acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(p, ones));
          }
        }
      }
      const __m256 wd = _mm256_set1_ps(
          MX   ? kqc::mx_scale(blk[0])
          : XS ? kqc::f16_at(blk) *
                     static_cast<float>(kqc::iq4xs_scale(blk, static_cast<int>(b % 8)))
               : kqc::f16_at(blk));
      for (int j = 0; j < J; ++j)
        f[j] = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(acc[j]),
            _mm256_mul_ps(wd, _mm256_loadu_ps(a.xd + ((j0 + j) * nb + b) * lanes)), f[j]);
    }
    v256::store_rows<J>(a, n, j0, f);
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

void gemm_q8_0_avx2(const gemm_q_args& a) {
  gemm<fmt::q8_0>(a);
}
void gemm_q4_0_avx2(const gemm_q_args& a) {
  gemm<fmt::q4_0>(a);
}
void gemm_mxfp4_avx2(const gemm_q_args& a) {
  gemm<fmt::mxfp4>(a);
}
void gemm_iq4_nl_avx2(const gemm_q_args& a) {
  gemm<fmt::iq4_nl>(a);
}
void gemm_iq4_xs_avx2(const gemm_q_args& a) {
  gemm<fmt::iq4_xs>(a);
}

void gemm_q4_k_avx2(const gemm_q_args& a) {
  gemm_q4_k<v256>(a);
}
void gemm_q5_k_avx2(const gemm_q_args& a) {
  gemm_q5_k<v256>(a);
}
void gemm_q6_k_avx2(const gemm_q_args& a) {
  gemm_q6_k<v256>(a);
}

// pack_q6_k's group block (G = 8): the rows' d (16 bytes), then 52 chunks of 8 dwords (the 4
// scale chunks, 32 of ql, 16 of qh), chunk j's dword r from row r: ql and qh are six 8 x 8
// transposes (pairs of dwords, of qwords, then the two 128-bit lanes) into each row's first
// 192 bytes; the scales and d go one row at a time.
void unpack_q6_k_x8(const uint8_t* grp, int64_t K, uint8_t* rows) {
  const int64_t nb = K / 256, rb = nb * 210;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* o = grp + b * 8 * 210;
    uint8_t* out = rows + b * 210;
    for (int q = 0; q < 6; ++q) { // chunks 4 + 8 q .. 11 + 8 q: bytes 32 q .. 32 q + 31
      __m256i v[8], t[8];
      for (int j = 0; j < 8; ++j)
        v[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o + 16 + 32 * (4 + 8 * q + j)));
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
      }
      // v[2k + g]: column 4L + k of rows 4g .. 4g + 3 in lane L
      for (int g = 0; g < 2; ++g) {
        const __m256i* p = t + 4 * g;
        v[g] = _mm256_unpacklo_epi64(p[0], p[2]);
        v[2 + g] = _mm256_unpackhi_epi64(p[0], p[2]);
        v[4 + g] = _mm256_unpacklo_epi64(p[1], p[3]);
        v[6 + g] = _mm256_unpackhi_epi64(p[1], p[3]);
      }
      for (int k = 0; k < 4; ++k) {
        const __m256i lo = _mm256_permute2x128_si256(v[2 * k], v[2 * k + 1], 0x20);
        const __m256i hi = _mm256_permute2x128_si256(v[2 * k], v[2 * k + 1], 0x31);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k * rb + 32 * q), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (4 + k) * rb + 32 * q), hi);
      }
    }
    for (int r = 0; r < 8; ++r) {
      __builtin_memcpy(out + r * rb + 208, o + 2 * r, 2);
      for (int i = 0; i < 4; ++i)
        __builtin_memcpy(out + r * rb + 192 + 4 * i, o + 16 + 32 * i + 4 * r, 4);
    }
  }
}

} // namespace troupe::kernels::cpu
