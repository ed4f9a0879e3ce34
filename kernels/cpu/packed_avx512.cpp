// packed_avx512.cpp: the AVX-512 VNNI kernels over the layouts made at load (gemv.hpp,
// pack_q8_0 / pack_q4_0 / pack_q4_k / pack_q5_k / pack_q6_k / pack_iq4_xs with groups of 16
// interleaved rows, a row in each 32-bit lane of a zmm): decode of 1-7 tokens walks a group
// for 4 tokens at a time; prefill (8+ tokens, where AMX does not take it) decodes 256 values
// of a group once and lets every token pass over them (k4x16_block, x16_span). Built with
// the AVX-512 flags of gemv_avx512.cpp, whose table names them; internals in namespace
// packed_avx512 (see packed_avx2.cpp).
#include <immintrin.h>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_packed.hpp"
#include "kernels/cpu/kquant_codes.hpp"

// GCC 12 reports _mm512_cvtepi32_ps's _mm512_undefined_ps() as "used uninitialized" in
// k4x16_block::run (the CMake file's GCC bug 105593, here as -Wuninitialized)
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace troupe::kernels::cpu::packed_avx512 {

inline __m512i bcast4(const int8_t* x) {
  int32_t v;
  __builtin_memcpy(&v, x, 4);
  return _mm512_set1_epi32(v);
}

// A group's 16 outputs for token t: acc plus the bias, into y.
inline void store16(const gemv_args& a, int64_t n, int64_t t, __m512 acc) {
  if (a.bias) acc = _mm512_add_ps(acc, _mm512_loadu_ps(a.bias + n));
  _mm512_storeu_ps(a.y + t * a.ldy + n - a.ycol0, acc);
}

// A group's 16 outputs for token t: v added into y, or, for the first block, v plus the bias.
inline void add16(const gemv_args& a, int64_t n, int64_t t, __m512 v, bool first) {
  float* y = a.y + t * a.ldy + n - a.ycol0;
  if (!first)
    v = _mm512_add_ps(v, _mm512_loadu_ps(y));
  else if (a.bias)
    v = _mm512_add_ps(v, _mm512_loadu_ps(a.bias + n));
  _mm512_storeu_ps(y, v);
}

// q4_0 from the packed layout (gemv.hpp, pack_q4_0 with 16 rows): 16 rows in the 32-bit lanes
// of a zmm. Per block the 8 code vectors (low and high nibbles of 4 chunks of 64 bytes) meet
// the broadcast activations in vpdpbusd (4 products a lane into int32, no int16 stage), the
// sums start at the nibbles' offset -8 x sum(x), and the 16 rows' scales are one vector: no
// horizontal sums, no scalar scale per row. NT tokens share each block's code vectors.
// q8_0 (Q8) takes the same walk with its 8 chunks' bytes made unsigned (w + 128) by one xor and
// the sums starting at -128 x sum(x); IQ4_NL (the same layout as q4_0's) its nibbles looked up
// as value + 128, the sums starting at -128 x sum(x). Either way code vector i meets
// activations 4i..4i+3.
enum class pk { q4_0, q8_0, iq4_nl };
template <pk P, int NT>
void x16_tokens(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  constexpr bool Q8 = P == pk::q8_0, IQ = P == pk::iq4_nl;
  constexpr int64_t block = Q8 ? 544 : 288;
  constexpr int offset = Q8 || IQ ? 128 : 8;
  const int64_t nb = a.K / 32;
  const __m512i m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i lut = _mm512_maskz_broadcast_i32x4(0xffff, kqc::table16(kqc::iq4_unsigned));
  __m512 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * block;
    prefetch_block(blk, block);
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i u[8]; // q4_0: the low nibbles of the 4 chunks, then their high ones
    for (int c = 0; c < (Q8 ? 8 : 4); ++c) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * c);
      if constexpr (Q8) {
        u[c] = _mm512_xor_si512(v, flip);
      } else {
        u[c] = _mm512_and_si512(v, m4);
        u[4 + c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (IQ) {
          u[c] = _mm512_shuffle_epi8(lut, u[c]);
          u[4 + c] = _mm512_shuffle_epi8(lut, u[4 + c]);
        }
      }
    }
    for (int j = 0; j < NT; ++j) {
      const int64_t t = t0 + j;
      const int8_t* x = a.xq + t * a.K + b * 32;
      __m512i s0 = _mm512_set1_epi32(-offset * a.xsum[t * nb + b]), s1 = _mm512_setzero_si512();
      for (int i = 0; i < 8; i += 2) {
        s0 = _mm512_dpbusd_epi32(s0, u[i], bcast4(x + 4 * i));
        s1 = _mm512_dpbusd_epi32(s1, u[i + 1], bcast4(x + 4 * i + 4));
      }
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                               _mm512_mul_ps(wd, _mm512_set1_ps(a.xd[t * nb + b])), acc[j]);
    }
  }
  for (int j = 0; j < NT; ++j) store16(a, n, t0 + j, acc[j]);
}

template <pk P>
struct block32_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    x16_tokens<P, NT>(a, grp, n, t0);
  }
};

// Prefill (8+ tokens) of q4_0 / q8_0 / IQ4_NL / IQ4_XS, 256 values of a group at a time (8
// blocks of 32, or an IQ4_XS block): their code vectors made once (x16_tokens' and
// x16_iq4_xs' unsigned codes) with each 32 values' 16 scales, then every token passes over
// them and adds its share into y, where those walks make the codes again for every 4 tokens.
// P: the layout of x16_tokens' formats; XS: IQ4_XS's instead.
template <pk P, bool XS>
struct x16_span {
  static constexpr int offset = P == pk::q4_0 && !XS ? 8 : 128; // the codes' offset in the sums
  int subs = 0;
  __m512 ws[8];
  alignas(64) uint8_t u[8][8][64]; // [32 values][code vector][16 rows x 4 codes]

  void decode(const uint8_t* grp, int64_t k32, int n32) {
    if constexpr (XS)
      decode_xs(grp, k32);
    else
      decode_blocks(grp, k32, n32);
  }

  // up to 8 blocks of 32 from block k32 of a group laid out as pack_q4_0 / pack_q8_0 do
  void decode_blocks(const uint8_t* grp, int64_t k32, int n32) {
    constexpr bool Q8 = P == pk::q8_0, IQ = P == pk::iq4_nl;
    constexpr int64_t block = Q8 ? 544 : 288;
    const __m512i m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i lut = _mm512_maskz_broadcast_i32x4(0xffff, kqc::table16(kqc::iq4_unsigned));
    subs = n32;
    for (int s = 0; s < n32; ++s) {
      const uint8_t* blk = grp + (k32 + s) * block;
      prefetch_block(blk, block);
      ws[s] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
      for (int c = 0; c < (Q8 ? 8 : 4); ++c) {
        const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * c);
        if constexpr (Q8) {
          _mm512_store_si512(u[s][c], _mm512_xor_si512(v, flip));
        } else {
          __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
          if constexpr (IQ) {
            lo = _mm512_shuffle_epi8(lut, lo);
            hi = _mm512_shuffle_epi8(lut, hi);
          }
          _mm512_store_si512(u[s][c], lo);
          _mm512_store_si512(u[s][4 + c], hi);
        }
      }
    }
  }

  // IQ4_XS block k32 / 8 of a group laid out as pack_iq4_xs does
  void decode_xs(const uint8_t* grp, int64_t k32) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lut = _mm512_maskz_broadcast_i32x4(0xffff, kqc::table16(kqc::iq4_unsigned));
    const uint8_t* blk = grp + (k32 / 8) * 136 * 16;
    prefetch_block(blk, 136 * 16);
    const kqc::iq4xs_rows16 rows(blk);
    subs = 8;
    for (int s = 0; s < 8; ++s) {
      ws[s] = rows.scale(s);
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_loadu_si512(blk + 128 + 256 * s + 64 * c);
        _mm512_store_si512(u[s][c], _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4)));
        _mm512_store_si512(u[s][4 + c],
                           _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)));
      }
    }
  }

  // NT tokens over the span at 32-value block k32 (x16_tokens' sums, the codes from sp).
  template <int NT>
  static void run(const gemv_args& a, const x16_span& sp, int64_t k32, int64_t n, int64_t t0) {
    const int64_t n32 = a.K / 32;
    __m512 acc[NT];
    for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
    for (int s = 0; s < sp.subs; ++s) {
      const int64_t k = k32 + s;
      for (int j = 0; j < NT; ++j) {
        const int64_t t = t0 + j;
        const int8_t* x = a.xq + t * a.K + k * 32;
        __m512i s0 = _mm512_set1_epi32(-offset * a.xsum[t * n32 + k]), s1 = _mm512_setzero_si512();
        for (int i = 0; i < 8; i += 2) {
          s0 = _mm512_dpbusd_epi32(s0, _mm512_load_si512(sp.u[s][i]), bcast4(x + 4 * i));
          s1 = _mm512_dpbusd_epi32(s1, _mm512_load_si512(sp.u[s][i + 1]), bcast4(x + 4 * i + 4));
        }
        acc[j] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                            _mm512_mul_ps(sp.ws[s], _mm512_set1_ps(a.xd[t * n32 + k])), acc[j]);
      }
    }
    for (int j = 0; j < NT; ++j) add16(a, n, t0 + j, acc[j], k32 == 0);
  }
};

void gemv_q4_0_x16(const gemv_args& a) {
  over_packed<16, block32_rows<pk::q4_0>, x16_span<pk::q4_0, false>>(a);
}
void gemv_q8_0_x16(const gemv_args& a) {
  over_packed<16, block32_rows<pk::q8_0>, x16_span<pk::q8_0, false>>(a);
}
void gemv_iq4_nl_x16(const gemv_args& a) {
  over_packed<16, block32_rows<pk::iq4_nl>, x16_span<pk::iq4_nl, false>>(a);
}

// IQ4_XS from the packed layout (gemv.hpp, pack_iq4_xs with 16 rows): per block of 256 the 16
// rows' d, scales_h and scales_l are one vector each, so each sub-block's 16 scales come out of
// a few lane-wise shifts; then each 32-value sub-block is IQ4_NL's walk above.
template <int NT>
void x16_iq4_xs(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  constexpr int64_t block = 136 * 16;
  const int64_t nb = a.K / 256, n32 = a.K / 32;
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i lut = _mm512_maskz_broadcast_i32x4(0xffff, kqc::table16(kqc::iq4_unsigned));
  __m512 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * block;
    prefetch_block(blk, block);
    const kqc::iq4xs_rows16 rows(blk);
    for (int s = 0; s < 8; ++s) {
      const __m512 ws = rows.scale(s);
      const uint8_t* codes = blk + 128 + 256 * s;
      __m512i u[8];
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_loadu_si512(codes + 64 * c);
        u[c] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
        u[4 + c] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
      }
      for (int j = 0; j < NT; ++j) {
        const int64_t t = t0 + j, k = b * 8 + s;
        const int8_t* x = a.xq + t * a.K + k * 32;
        __m512i s0 = _mm512_set1_epi32(-128 * a.xsum[t * n32 + k]), s1 = _mm512_setzero_si512();
        for (int i = 0; i < 8; i += 2) {
          s0 = _mm512_dpbusd_epi32(s0, u[i], bcast4(x + 4 * i));
          s1 = _mm512_dpbusd_epi32(s1, u[i + 1], bcast4(x + 4 * i + 4));
        }
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                                 _mm512_mul_ps(ws, _mm512_set1_ps(a.xd[t * n32 + k])), acc[j]);
      }
    }
  }
  for (int j = 0; j < NT; ++j) store16(a, n, t0 + j, acc[j]);
}

struct iq4_xs_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    x16_iq4_xs<NT>(a, grp, n, t0);
  }
};

void gemv_iq4_xs_x16(const gemv_args& a) {
  over_packed<16, iq4_xs_rows, x16_span<pk::iq4_nl, true>>(a);
}

// Q4_K from the packed layout (pack_q4_k with 16 rows): 16 rows in the lanes. Per block the 16
// rows' scales and minimums are decoded at once (each lane holds one row's 12 scale bytes over
// 3 chunks), each 32-value group's codes meet the broadcast activations in vpdpbusd, the group
// sums are weighted by the rows' scales and the group's activation scale, and the minimums
// come through the activations' per-16 sums (gemv_args::xs). Q5_K (Q5) takes the same walk
// with each code vector's fifth bits (bit g of a qh byte for group g) or'ed in as 16.
template <bool Q5, int NT>
void k4x16_tokens(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  const int64_t nb = a.K / 256;
  const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f);
  const __m512i m2 = _mm512_set1_epi8(0x03), byte = _mm512_set1_epi32(0xff);
  const __m512i b4 = _mm512_set1_epi8(0x10);
  constexpr int64_t block = Q5 ? 2816 : 2304;
  __m512 acc[NT], off[NT];
  for (int j = 0; j < NT; ++j) acc[j] = off[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * block;
    prefetch_block(blk, block);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    const __m512i c0 = _mm512_loadu_si512(blk + 64), c1 = _mm512_loadu_si512(blk + 128);
    const __m512i c2 = _mm512_loadu_si512(blk + 192);
    // byte i of a lane: scale (minimum) i of the row's groups 0-3, and of 4-7
    const __m512i sc_lo = _mm512_and_si512(c0, m6), mn_lo = _mm512_and_si512(c1, m6);
    const __m512i sc_hi =
        _mm512_or_si512(_mm512_and_si512(c2, m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(c0, 6), m2), 4));
    const __m512i mn_hi =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c2, 4), m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(c1, 6), m2), 4));
    __m512 sc[8], mn[8];
    for (int g = 0; g < 4; ++g) {
      sc[g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc_lo, 8 * g), byte));
      sc[4 + g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc_hi, 8 * g), byte));
      mn[g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(mn_lo, 8 * g), byte));
      mn[4 + g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(mn_hi, 8 * g), byte));
    }
    // each code vector is loaded and split once for the NT tokens
    const uint8_t* qh = blk + 256; // Q5_K
    const uint8_t* codes = blk + (Q5 ? 768 : 256);
    const int8_t* x[NT];
    __m512 blockacc[NT], mins[NT];
    for (int j = 0; j < NT; ++j) {
      x[j] = a.xq + (t0 + j) * a.K + b * 256;
      blockacc[j] = mins[j] = _mm512_setzero_ps();
    }
    for (int p = 0; p < 4; ++p) { // groups 2p (low nibbles) and 2p + 1 (high)
      __m512i slo[NT], shi[NT];
      for (int j = 0; j < NT; ++j) slo[j] = shi[j] = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) {
        const __m512i v = _mm512_loadu_si512(codes + 512 * p + 64 * c);
        __m512i lo = _mm512_and_si512(v, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (Q5) { // bits 2p and 2p + 1 of each qh byte to bit 4
          const __m512i h = _mm512_loadu_si512(qh + 64 * c);
          const __m512i hl =
              p < 2 ? _mm512_slli_epi16(h, 4 - 2 * p) : _mm512_srli_epi16(h, 2 * p - 4);
          const __m512i hh =
              p < 2 ? _mm512_slli_epi16(h, 3 - 2 * p) : _mm512_srli_epi16(h, 2 * p - 3);
          lo = _mm512_or_si512(lo, _mm512_and_si512(hl, b4));
          hi = _mm512_or_si512(hi, _mm512_and_si512(hh, b4));
        }
        for (int j = 0; j < NT; ++j) {
          slo[j] = _mm512_dpbusd_epi32(slo[j], lo, bcast4(x[j] + 64 * p + 4 * c));
          shi[j] = _mm512_dpbusd_epi32(shi[j], hi, bcast4(x[j] + 64 * p + 32 + 4 * c));
        }
      }
      for (int j = 0; j < NT; ++j) {
        const float* xd = a.xd + (t0 + j) * (a.K / 32) + b * 8;
        const float* xs = a.xs + (t0 + j) * (a.K / 16) + b * 16;
        blockacc[j] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(slo[j]),
                            _mm512_mul_ps(sc[2 * p], _mm512_set1_ps(xd[2 * p])), blockacc[j]);
        blockacc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(shi[j]),
                                      _mm512_mul_ps(sc[2 * p + 1], _mm512_set1_ps(xd[2 * p + 1])),
                                      blockacc[j]);
        mins[j] = _mm512_fmadd_ps(mn[2 * p], _mm512_set1_ps(xs[4 * p] + xs[4 * p + 1]), mins[j]);
        mins[j] =
            _mm512_fmadd_ps(mn[2 * p + 1], _mm512_set1_ps(xs[4 * p + 2] + xs[4 * p + 3]), mins[j]);
      }
    }
    for (int j = 0; j < NT; ++j) {
      acc[j] = _mm512_fmadd_ps(d, blockacc[j], acc[j]);
      off[j] = _mm512_fmadd_ps(dmin, mins[j], off[j]);
    }
  }
  for (int j = 0; j < NT; ++j) store16(a, n, t0 + j, _mm512_sub_ps(acc[j], off[j]));
}

template <bool Q5>
struct q4_or_q5_k_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    k4x16_tokens<Q5, NT>(a, grp, n, t0);
  }
};

// Prefill (8+ tokens) of Q4_K / Q5_K, block by block: one block of a group's 16 rows is
// decoded once (scales and minimums as floats, the codes with Q5_K's fifth bits or'ed in) and
// every token passes over it, adding its share into y; k4x16_tokens decodes each block again
// for every 4 tokens (as the AVX2 file's k4x8_block explains).
template <bool Q5>
struct k4x16_block {
  __m512 d, dmin, sc[8], mn[8];
  alignas(64) uint8_t code[4][8][2][64]; // [p][chunk][groups 2p, 2p + 1][16 rows x 4 codes]

  void decode(const uint8_t* grp, int64_t k32, int) {
    const uint8_t* blk = grp + (k32 / 8) * (Q5 ? 2816 : 2304);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f);
    const __m512i m2 = _mm512_set1_epi8(0x03), byte = _mm512_set1_epi32(0xff);
    const __m512i b4 = _mm512_set1_epi8(0x10);
    prefetch_block(blk, Q5 ? 2816 : 2304);
    d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    const __m512i c0 = _mm512_loadu_si512(blk + 64), c1 = _mm512_loadu_si512(blk + 128);
    const __m512i c2 = _mm512_loadu_si512(blk + 192);
    const __m512i sc_lo = _mm512_and_si512(c0, m6), mn_lo = _mm512_and_si512(c1, m6);
    const __m512i sc_hi =
        _mm512_or_si512(_mm512_and_si512(c2, m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(c0, 6), m2), 4));
    const __m512i mn_hi =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c2, 4), m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(c1, 6), m2), 4));
    for (int g = 0; g < 4; ++g) {
      sc[g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc_lo, 8 * g), byte));
      sc[4 + g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc_hi, 8 * g), byte));
      mn[g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(mn_lo, 8 * g), byte));
      mn[4 + g] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(mn_hi, 8 * g), byte));
    }
    const uint8_t* qh = blk + 256;
    const uint8_t* codes = blk + (Q5 ? 768 : 256);
    for (int p = 0; p < 4; ++p)
      for (int c = 0; c < 8; ++c) {
        const __m512i v = _mm512_loadu_si512(codes + 512 * p + 64 * c);
        __m512i lo = _mm512_and_si512(v, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (Q5) {
          const __m512i h = _mm512_loadu_si512(qh + 64 * c);
          const __m512i hl =
              p < 2 ? _mm512_slli_epi16(h, 4 - 2 * p) : _mm512_srli_epi16(h, 2 * p - 4);
          const __m512i hh =
              p < 2 ? _mm512_slli_epi16(h, 3 - 2 * p) : _mm512_srli_epi16(h, 2 * p - 3);
          lo = _mm512_or_si512(lo, _mm512_and_si512(hl, b4));
          hi = _mm512_or_si512(hi, _mm512_and_si512(hh, b4));
        }
        _mm512_store_si512(code[p][c][0], lo);
        _mm512_store_si512(code[p][c][1], hi);
      }
  }

  // NT tokens over block k32 / 8 of a group decoded into w (k4x16_tokens' sums, the codes from w).
  template <int NT>
  static void run(const gemv_args& a, const k4x16_block& w, int64_t k32, int64_t n, int64_t t0) {
    const int64_t b = k32 / 8;
    const int8_t* x[NT];
    __m512 blockacc[NT], mins[NT];
    for (int j = 0; j < NT; ++j) {
      x[j] = a.xq + (t0 + j) * a.K + b * 256;
      blockacc[j] = mins[j] = _mm512_setzero_ps();
    }
    for (int p = 0; p < 4; ++p) {
      __m512i slo[NT], shi[NT];
      for (int j = 0; j < NT; ++j) slo[j] = shi[j] = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) {
        const __m512i lo = _mm512_load_si512(w.code[p][c][0]);
        const __m512i hi = _mm512_load_si512(w.code[p][c][1]);
        for (int j = 0; j < NT; ++j) {
          slo[j] = _mm512_dpbusd_epi32(slo[j], lo, bcast4(x[j] + 64 * p + 4 * c));
          shi[j] = _mm512_dpbusd_epi32(shi[j], hi, bcast4(x[j] + 64 * p + 32 + 4 * c));
        }
      }
      for (int j = 0; j < NT; ++j) {
        const float* xd = a.xd + (t0 + j) * (a.K / 32) + b * 8;
        const float* xs = a.xs + (t0 + j) * (a.K / 16) + b * 16;
        blockacc[j] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(slo[j]),
                            _mm512_mul_ps(w.sc[2 * p], _mm512_set1_ps(xd[2 * p])), blockacc[j]);
        blockacc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(shi[j]),
                                      _mm512_mul_ps(w.sc[2 * p + 1], _mm512_set1_ps(xd[2 * p + 1])),
                                      blockacc[j]);
        mins[j] = _mm512_fmadd_ps(w.mn[2 * p], _mm512_set1_ps(xs[4 * p] + xs[4 * p + 1]), mins[j]);
        mins[j] = _mm512_fmadd_ps(w.mn[2 * p + 1], _mm512_set1_ps(xs[4 * p + 2] + xs[4 * p + 3]),
                                  mins[j]);
      }
    }
    for (int j = 0; j < NT; ++j)
      add16(a, n, t0 + j, _mm512_fnmadd_ps(w.dmin, mins[j], _mm512_mul_ps(w.d, blockacc[j])),
            b == 0);
  }
};

void gemv_q4_k_x16(const gemv_args& a) {
  over_packed<16, q4_or_q5_k_rows<false>, k4x16_block<false>>(a);
}
void gemv_q5_k_x16(const gemv_args& a) {
  over_packed<16, q4_or_q5_k_rows<true>, k4x16_block<true>>(a);
}

// Q6_K from the packed layout (pack_q6_k with 16 rows): 16 rows in the lanes. Per block the 16
// rows' scales times d are made once (16 vectors); per half and 4 positions the 4 groups'
// 6-bit codes are rebuilt from one ql chunk pair and one qh chunk (the same bytes as
// published, rearranged), each 16-value sub-block sums in its own vpdpbusd chain, and the -32
// comes through the activations' per-16 sums (gemv_args::xs).
template <int NT>
void k6x16_tokens(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  const int64_t nb = a.K / 256;
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  __m512 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * 3360;
    prefetch_block(blk, 3360);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512 dsc[16];
    for (int i = 0; i < 4; ++i) {
      const __m512i c = _mm512_loadu_si512(blk + 32 + 64 * i);
      for (int q = 0; q < 4; ++q)
        dsc[4 * i + q] = _mm512_mul_ps(
            d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(c, 24 - 8 * q), 24)));
    }
    const uint8_t* ql = blk + 288;
    const uint8_t* qh = blk + 2336;
    for (int j = 0; j < NT; ++j) {
      const int64_t t = t0 + j;
      const int8_t* x = a.xq + t * a.K + b * 256;
      const float* xd = a.xd + t * (a.K / 32) + b * 8;
      const float* xs = a.xs + t * (a.K / 16) + b * 16;
      __m512 r = _mm512_setzero_ps();
      for (int h = 0; h < 2; ++h) {
        __m512i s[8]; // sub-block 8h + 2k + part: group k's positions 0-15 and 16-31
        for (int i = 0; i < 8; ++i) s[i] = _mm512_setzero_si512();
        for (int c = 0; c < 8; ++c) {
          const __m512i A = _mm512_loadu_si512(ql + 64 * (16 * h + c));
          const __m512i B = _mm512_loadu_si512(ql + 64 * (16 * h + 8 + c));
          const __m512i H = _mm512_loadu_si512(qh + 64 * (8 * h + c));
          const __m512i q[4] = {_mm512_or_si512(_mm512_and_si512(A, m4),
                                                _mm512_and_si512(_mm512_slli_epi16(H, 4), m30)),
                                _mm512_or_si512(_mm512_and_si512(B, m4),
                                                _mm512_and_si512(_mm512_slli_epi16(H, 2), m30)),
                                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(A, 4), m4),
                                                _mm512_and_si512(H, m30)),
                                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(B, 4), m4),
                                                _mm512_and_si512(_mm512_srli_epi16(H, 2), m30))};
          const int part = c / 4;
          for (int k = 0; k < 4; ++k)
            s[2 * k + part] =
                _mm512_dpbusd_epi32(s[2 * k + part], q[k], bcast4(x + 128 * h + 32 * k + 4 * c));
        }
        for (int i = 0; i < 8; ++i) { // i = 2k + part: sub-block 8h + i, group 4h + k
          const int sb = 8 * h + i;
          const __m512 v = _mm512_fmsub_ps(_mm512_cvtepi32_ps(s[i]), _mm512_set1_ps(xd[sb / 2]),
                                           _mm512_set1_ps(32.0f * xs[sb]));
          r = _mm512_fmadd_ps(dsc[sb], v, r);
        }
      }
      acc[j] = _mm512_add_ps(acc[j], r);
    }
  }
  for (int j = 0; j < NT; ++j) store16(a, n, t0 + j, acc[j]);
}

struct q6_k_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    k6x16_tokens<NT>(a, grp, n, t0);
  }
};

void gemv_q6_k_x16(const gemv_args& a) {
  over_packed_groups<16, q6_k_rows>(a);
}

} // namespace troupe::kernels::cpu::packed_avx512
