// packed_avx2.cpp: the AVX2 kernels over the layouts made at load (gemv.hpp, pack_q4_0 /
// pack_q4_k / pack_q5_k / pack_q6_k / pack_iq4_xs with groups of 8 interleaved rows, a row in
// each 32-bit lane): decode of 1-7 tokens walks a group for 4 tokens at a time (the tokens
// share each block's code vectors); prefill (8+ tokens) decodes 256 values of a group once
// and lets every token pass over them (k4x8_block, iq4x8_span). Built with -mavx2 -mfma
// -mf16c; the AVX2 table (gemv_avx2.cpp) names them. Internals live in namespace packed_avx2
// (not an anonymous one, so the table can name the entry points; the name keeps them apart
// from the AVX-512 file's, which are built with other flags).
#include <immintrin.h>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_packed.hpp"
#include "kernels/cpu/kquant_codes.hpp"

namespace troupe::kernels::cpu::packed_avx2 {

// q4_0 from the packed layout (gemv.hpp, pack_q4_0, 8 rows): 8 rows in the 32-bit lanes. Per block
// the 8 code vectors (low and high nibbles of 4 chunks) multiply the broadcast activations,
// summed in int16 (8 products of at most 2 x 15 x 128 fit), one madd to int32 per row, the
// nibbles' offset 8 x sum(x) taken off, and the 8 rows' scales in one vector: no horizontal
// sums, no scalar scale per row. NT tokens share each block's code vectors.
inline __m256i bcast4(const int8_t* x) {
  int32_t v;
  __builtin_memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// A group's 8 outputs for token t: acc plus the bias, into y.
inline void store8(const gemv_args& a, int64_t n, int64_t t, __m256 acc) {
  if (a.bias) acc = _mm256_add_ps(acc, _mm256_loadu_ps(a.bias + n));
  _mm256_storeu_ps(a.y + t * a.ldy + n - a.ycol0, acc);
}

// A group's 8 outputs for token t: v added into y, or, for the first block, v plus the bias.
inline void add8(const gemv_args& a, int64_t n, int64_t t, __m256 v, bool first) {
  float* y = a.y + t * a.ldy + n - a.ycol0;
  if (!first)
    v = _mm256_add_ps(v, _mm256_loadu_ps(y));
  else if (a.bias)
    v = _mm256_add_ps(v, _mm256_loadu_ps(a.bias + n));
  _mm256_storeu_ps(y, v);
}

template <int NT>
void x8_tokens(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  const int64_t nb = a.K / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * 144;
    prefetch_block(blk, 144);
    const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    __m256i lo[4], hi[4];
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c));
      lo[c] = _mm256_and_si256(v, m4);
      hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    for (int j = 0; j < NT; ++j) {
      const int64_t t = t0 + j;
      const int8_t* x = a.xq + t * a.K + b * 32;
      __m256i s = _mm256_maddubs_epi16(lo[0], bcast4(x));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[0], bcast4(x + 16)));
      for (int c = 1; c < 4; ++c) {
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[c], bcast4(x + 4 * c)));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[c], bcast4(x + 16 + 4 * c)));
      }
      const __m256i s32 =
          _mm256_sub_epi32(_mm256_madd_epi16(s, ones), _mm256_set1_epi32(8 * a.xsum[t * nb + b]));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32),
                               _mm256_mul_ps(wd, _mm256_set1_ps(a.xd[t * nb + b])), acc[j]);
    }
  }
  for (int j = 0; j < NT; ++j) store8(a, n, t0 + j, acc[j]);
}

struct q4_0_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    x8_tokens<NT>(a, grp, n, t0);
  }
};

// IQ4_NL (XS false: q4_0's layout) and IQ4_XS (pack_iq4_xs) from the packed layout, 8 rows in
// the 32-bit lanes: the nibbles looked up as their signed values, whose sign moves onto the
// broadcast activations (maddubs takes |w|; a pair of 127 x 127 products fills an int16, so
// each widens at once). IQ4_XS's 8 rows' sub-block scales come out of lane-wise shifts of
// their scales_l and scales_h, once per sub-block.
template <bool XS, int NT>
void x8_iq4(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  constexpr int64_t block = XS ? 136 * 8 : 144, subs = XS ? 8 : 1;
  const int64_t nb = a.K / (32 * subs), n32 = a.K / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  const __m256i lut = _mm256_broadcastsi128_si256(kqc::table16(kq::iq4_values));
  __m256 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * block;
    prefetch_block(blk, block);
    // IQ4_NL: the rows' f16 d; IQ4_XS: d x each sub-block's scale - 32
    const kqc::iq4xs_rows8 rows(blk);
    for (int s = 0; s < subs; ++s) {
      const __m256 ws = XS ? rows.scale(s) : rows.d;
      const uint8_t* codes = XS ? blk + 64 + 128 * s : blk + 16;
      __m256i w[8], aw[8]; // values 4c..4c+3 of each row, then 16 + 4c..
      for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * c));
        w[c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
        w[4 + c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      }
      for (int c = 0; c < 8; ++c) aw[c] = _mm256_abs_epi8(w[c]);
      for (int j = 0; j < NT; ++j) {
        const int64_t t = t0 + j, k = b * subs + s;
        const int8_t* x = a.xq + t * a.K + k * 32;
        __m256i s32 = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
          const __m256i p = _mm256_maddubs_epi16(aw[c], _mm256_sign_epi8(bcast4(x + 4 * c), w[c]));
          s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(p, ones));
        }
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32),
                                 _mm256_mul_ps(ws, _mm256_set1_ps(a.xd[t * n32 + k])), acc[j]);
      }
    }
  }
  for (int j = 0; j < NT; ++j) store8(a, n, t0 + j, acc[j]);
}

template <bool XS>
struct iq4_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    x8_iq4<XS, NT>(a, grp, n, t0);
  }
};

// Prefill (8+ tokens) of IQ4_NL / IQ4_XS, 256 values at a time (an IQ4_XS block, or up to 8
// IQ4_NL blocks): their codes looked up once (the signed values and their magnitudes) with
// each sub-block's scale, then every token passes over them and adds its share into y (as
// k4x8_block does; x8_iq4 looks each block up again for every 4 tokens).
template <bool XS>
struct iq4x8_span {
  int subs = 0;
  __m256 ws[8];
  alignas(32) int8_t w[8][8][32], aw[8][8][32]; // [sub-block][chunk][8 rows x 4 values]

  void decode(const uint8_t* grp, int64_t k32, int n32) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lut = _mm256_broadcastsi128_si256(kqc::table16(kq::iq4_values));
    subs = n32;
    for (int s = 0; s < n32; ++s) {
      const uint8_t* blk = XS ? grp + (k32 / 8) * 136 * 8 : grp + (k32 + s) * 144;
      if (!XS || s == 0) prefetch_block(blk, XS ? 136 * 8 : 144);
      if constexpr (XS) {
        ws[s] = kqc::iq4xs_rows8(blk).scale(s);
      } else {
        ws[s] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
      }
      const uint8_t* codes = XS ? blk + 64 + 128 * s : blk + 16;
      for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * c));
        const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
        const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        _mm256_store_si256(reinterpret_cast<__m256i*>(w[s][c]), lo);
        _mm256_store_si256(reinterpret_cast<__m256i*>(w[s][4 + c]), hi);
        _mm256_store_si256(reinterpret_cast<__m256i*>(aw[s][c]), _mm256_abs_epi8(lo));
        _mm256_store_si256(reinterpret_cast<__m256i*>(aw[s][4 + c]), _mm256_abs_epi8(hi));
      }
    }
  }

  // NT tokens over the span at 32-value block k32 (x8_iq4's sums, the codes from sp).
  template <int NT>
  static void run(const gemv_args& a, const iq4x8_span& sp, int64_t k32, int64_t n, int64_t t0) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t n32 = a.K / 32;
    __m256 acc[NT];
    for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
    for (int s = 0; s < sp.subs; ++s) {
      __m256i aw[8]; // the magnitudes stay in registers for the NT tokens
      for (int c = 0; c < 8; ++c)
        aw[c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.aw[s][c]));
      for (int j = 0; j < NT; ++j) {
        const int64_t t = t0 + j, k = k32 + s;
        const int8_t* x = a.xq + t * a.K + k * 32;
        __m256i s32 = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
          const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(sp.w[s][c]));
          const __m256i p = _mm256_maddubs_epi16(aw[c], _mm256_sign_epi8(bcast4(x + 4 * c), w));
          s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(p, ones));
        }
        acc[j] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32),
                            _mm256_mul_ps(sp.ws[s], _mm256_set1_ps(a.xd[t * n32 + k])), acc[j]);
      }
    }
    for (int j = 0; j < NT; ++j) add8(a, n, t0 + j, acc[j], k32 == 0);
  }
};

void gemv_iq4_nl_x8(const gemv_args& a) {
  over_packed<8, iq4_rows<false>, iq4x8_span<false>>(a);
}
void gemv_iq4_xs_x8(const gemv_args& a) {
  over_packed<8, iq4_rows<true>, iq4x8_span<true>>(a);
}

void gemv_q4_0_x8(const gemv_args& a) {
  over_packed_groups<8, q4_0_rows>(a);
}

// Q4_K from the packed layout (gemv.hpp, pack_q4_k, 8 rows): 8 rows in the lanes. Per block the 8
// rows' scales and minimums are decoded at once (each lane holds one row's 12 scale bytes,
// spread over 3 chunks), each 32-value group's codes meet the broadcast activations as q4_0's
// do, and the group sums are weighted by the rows' scales and the group's activation scale;
// the minimums come through the activations' per-16 sums (gemv_args::xs). Q5_K (Q5) takes
// the same walk with each code vector's fifth bits (bit g of a qh byte for group g) or'ed in
// as 16; its maddubs pairs reach 2 x 31 x 127, so its int16 sums go to int32 every 4 chunks.
template <bool Q5, int NT>
void k4x8_tokens(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  const int64_t nb = a.K / 256;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f);
  const __m256i m2 = _mm256_set1_epi8(0x03), byte = _mm256_set1_epi32(0xff);
  const __m256i ones = _mm256_set1_epi16(1), b4 = _mm256_set1_epi8(0x10);
  constexpr int64_t block = Q5 ? 1408 : 1152;
  __m256 acc[NT], off[NT];
  for (int j = 0; j < NT; ++j) acc[j] = off[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * block;
    prefetch_block(blk, block);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
    const __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32));
    const __m256i c1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64));
    const __m256i c2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 96));
    // byte i of a lane: scale (minimum) i of the row's groups 0-3, and of 4-7
    const __m256i sc_lo = _mm256_and_si256(c0, m6), mn_lo = _mm256_and_si256(c1, m6);
    const __m256i sc_hi =
        _mm256_or_si256(_mm256_and_si256(c2, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(c0, 6), m2), 4));
    const __m256i mn_hi =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c2, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(c1, 6), m2), 4));
    __m256 sc[8], mn[8];
    for (int g = 0; g < 4; ++g) {
      sc[g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(sc_lo, 8 * g), byte));
      sc[4 + g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(sc_hi, 8 * g), byte));
      mn[g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(mn_lo, 8 * g), byte));
      mn[4 + g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(mn_hi, 8 * g), byte));
    }
    // each code vector is loaded and split once for the NT tokens
    const uint8_t* qh = blk + 128; // Q5_K
    const uint8_t* codes = blk + (Q5 ? 384 : 128);
    const int8_t* x[NT];
    __m256 blockacc[NT], mins[NT];
    for (int j = 0; j < NT; ++j) {
      x[j] = a.xq + (t0 + j) * a.K + b * 256;
      blockacc[j] = mins[j] = _mm256_setzero_ps();
    }
    for (int p = 0; p < 4; ++p) {                 // groups 2p (low nibbles) and 2p + 1 (high)
      __m256i slo[NT], shi[NT], wlo[NT], whi[NT]; // int16 sums; Q5: int32 ones of 4 chunks
      for (int j = 0; j < NT; ++j) slo[j] = shi[j] = wlo[j] = whi[j] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i v =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 256 * p + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if constexpr (Q5) { // bits 2p and 2p + 1 of each qh byte to bit 4
          if (c == 4)
            for (int j = 0; j < NT; ++j) {
              wlo[j] = _mm256_madd_epi16(slo[j], ones);
              whi[j] = _mm256_madd_epi16(shi[j], ones);
              slo[j] = shi[j] = _mm256_setzero_si256();
            }
          const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * c));
          const __m256i hl =
              p < 2 ? _mm256_slli_epi16(h, 4 - 2 * p) : _mm256_srli_epi16(h, 2 * p - 4);
          const __m256i hh =
              p < 2 ? _mm256_slli_epi16(h, 3 - 2 * p) : _mm256_srli_epi16(h, 2 * p - 3);
          lo = _mm256_or_si256(lo, _mm256_and_si256(hl, b4));
          hi = _mm256_or_si256(hi, _mm256_and_si256(hh, b4));
        }
        for (int j = 0; j < NT; ++j) {
          slo[j] =
              _mm256_add_epi16(slo[j], _mm256_maddubs_epi16(lo, bcast4(x[j] + 64 * p + 4 * c)));
          shi[j] = _mm256_add_epi16(shi[j],
                                    _mm256_maddubs_epi16(hi, bcast4(x[j] + 64 * p + 32 + 4 * c)));
        }
      }
      for (int j = 0; j < NT; ++j) {
        const float* xd = a.xd + (t0 + j) * (a.K / 32) + b * 8;
        const float* xs = a.xs + (t0 + j) * (a.K / 16) + b * 16;
        const __m256 dlo =
            _mm256_cvtepi32_ps(_mm256_add_epi32(wlo[j], _mm256_madd_epi16(slo[j], ones)));
        const __m256 dhi =
            _mm256_cvtepi32_ps(_mm256_add_epi32(whi[j], _mm256_madd_epi16(shi[j], ones)));
        blockacc[j] =
            _mm256_fmadd_ps(dlo, _mm256_mul_ps(sc[2 * p], _mm256_set1_ps(xd[2 * p])), blockacc[j]);
        blockacc[j] = _mm256_fmadd_ps(
            dhi, _mm256_mul_ps(sc[2 * p + 1], _mm256_set1_ps(xd[2 * p + 1])), blockacc[j]);
        mins[j] = _mm256_fmadd_ps(mn[2 * p], _mm256_set1_ps(xs[4 * p] + xs[4 * p + 1]), mins[j]);
        mins[j] =
            _mm256_fmadd_ps(mn[2 * p + 1], _mm256_set1_ps(xs[4 * p + 2] + xs[4 * p + 3]), mins[j]);
      }
    }
    for (int j = 0; j < NT; ++j) {
      acc[j] = _mm256_fmadd_ps(d, blockacc[j], acc[j]);
      off[j] = _mm256_fmadd_ps(dmin, mins[j], off[j]);
    }
  }
  for (int j = 0; j < NT; ++j) store8(a, n, t0 + j, _mm256_sub_ps(acc[j], off[j]));
}

template <bool Q5>
struct q4_or_q5_k_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    k4x8_tokens<Q5, NT>(a, grp, n, t0);
  }
};

// Prefill (8+ tokens) of Q4_K / Q5_K, block by block: one block of a group's 8 rows is decoded
// once (its scales and minimums as floats, its codes as the unsigned bytes maddubs takes, Q5_K's
// fifth bits already or'ed in) and then every token passes over it, adding its share into y.
// k4x8_tokens decodes each block again for every 4 tokens: with Q5_K's fifth bits that was a
// third of the instructions of the inner loop.
template <bool Q5>
struct k4x8_block {
  __m256 d, dmin, sc[8], mn[8];
  alignas(32) uint8_t code[4][8][2][32]; // [p][chunk][groups 2p, 2p + 1][8 rows x 4 codes]

  void decode(const uint8_t* grp, int64_t k32, int) {
    const uint8_t* blk = grp + (k32 / 8) * (Q5 ? 1408 : 1152);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f);
    const __m256i m2 = _mm256_set1_epi8(0x03), byte = _mm256_set1_epi32(0xff);
    const __m256i b4 = _mm256_set1_epi8(0x10);
    prefetch_block(blk, Q5 ? 1408 : 1152);
    d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
    const __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32));
    const __m256i c1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64));
    const __m256i c2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 96));
    const __m256i sc_lo = _mm256_and_si256(c0, m6), mn_lo = _mm256_and_si256(c1, m6);
    const __m256i sc_hi =
        _mm256_or_si256(_mm256_and_si256(c2, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(c0, 6), m2), 4));
    const __m256i mn_hi =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c2, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(c1, 6), m2), 4));
    for (int g = 0; g < 4; ++g) {
      sc[g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(sc_lo, 8 * g), byte));
      sc[4 + g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(sc_hi, 8 * g), byte));
      mn[g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(mn_lo, 8 * g), byte));
      mn[4 + g] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(mn_hi, 8 * g), byte));
    }
    const uint8_t* qh = blk + 128;
    const uint8_t* codes = blk + (Q5 ? 384 : 128);
    for (int p = 0; p < 4; ++p)
      for (int c = 0; c < 8; ++c) {
        const __m256i v =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 256 * p + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if constexpr (Q5) {
          const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * c));
          const __m256i hl =
              p < 2 ? _mm256_slli_epi16(h, 4 - 2 * p) : _mm256_srli_epi16(h, 2 * p - 4);
          const __m256i hh =
              p < 2 ? _mm256_slli_epi16(h, 3 - 2 * p) : _mm256_srli_epi16(h, 2 * p - 3);
          lo = _mm256_or_si256(lo, _mm256_and_si256(hl, b4));
          hi = _mm256_or_si256(hi, _mm256_and_si256(hh, b4));
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(code[p][c][0]), lo);
        _mm256_store_si256(reinterpret_cast<__m256i*>(code[p][c][1]), hi);
      }
  }

  // NT tokens over block k32 / 8 of a group decoded into w (k4x8_tokens' sums, the codes from w).
  template <int NT>
  static void run(const gemv_args& a, const k4x8_block& w, int64_t k32, int64_t n, int64_t t0) {
    const int64_t b = k32 / 8;
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t* x[NT];
    __m256 blockacc[NT], mins[NT];
    for (int j = 0; j < NT; ++j) {
      x[j] = a.xq + (t0 + j) * a.K + b * 256;
      blockacc[j] = mins[j] = _mm256_setzero_ps();
    }
    for (int p = 0; p < 4; ++p) {
      __m256i slo[NT], shi[NT], wlo[NT], whi[NT];
      for (int j = 0; j < NT; ++j) slo[j] = shi[j] = wlo[j] = whi[j] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        if constexpr (Q5) // Q5_K's pairs reach 2 x 31 x 127: to int32 every 4 chunks
          if (c == 4)
            for (int j = 0; j < NT; ++j) {
              wlo[j] = _mm256_madd_epi16(slo[j], ones);
              whi[j] = _mm256_madd_epi16(shi[j], ones);
              slo[j] = shi[j] = _mm256_setzero_si256();
            }
        const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(w.code[p][c][0]));
        const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(w.code[p][c][1]));
        for (int j = 0; j < NT; ++j) {
          slo[j] =
              _mm256_add_epi16(slo[j], _mm256_maddubs_epi16(lo, bcast4(x[j] + 64 * p + 4 * c)));
          shi[j] = _mm256_add_epi16(shi[j],
                                    _mm256_maddubs_epi16(hi, bcast4(x[j] + 64 * p + 32 + 4 * c)));
        }
      }
      for (int j = 0; j < NT; ++j) {
        const float* xd = a.xd + (t0 + j) * (a.K / 32) + b * 8;
        const float* xs = a.xs + (t0 + j) * (a.K / 16) + b * 16;
        const __m256 dlo =
            _mm256_cvtepi32_ps(_mm256_add_epi32(wlo[j], _mm256_madd_epi16(slo[j], ones)));
        const __m256 dhi =
            _mm256_cvtepi32_ps(_mm256_add_epi32(whi[j], _mm256_madd_epi16(shi[j], ones)));
        blockacc[j] = _mm256_fmadd_ps(dlo, _mm256_mul_ps(w.sc[2 * p], _mm256_set1_ps(xd[2 * p])),
                                      blockacc[j]);
        blockacc[j] = _mm256_fmadd_ps(
            dhi, _mm256_mul_ps(w.sc[2 * p + 1], _mm256_set1_ps(xd[2 * p + 1])), blockacc[j]);
        mins[j] = _mm256_fmadd_ps(w.mn[2 * p], _mm256_set1_ps(xs[4 * p] + xs[4 * p + 1]), mins[j]);
        mins[j] = _mm256_fmadd_ps(w.mn[2 * p + 1], _mm256_set1_ps(xs[4 * p + 2] + xs[4 * p + 3]),
                                  mins[j]);
      }
    }
    for (int j = 0; j < NT; ++j)
      add8(a, n, t0 + j, _mm256_fnmadd_ps(w.dmin, mins[j], _mm256_mul_ps(w.d, blockacc[j])),
           b == 0);
  }
};

void gemv_q4_k_x8(const gemv_args& a) {
  over_packed<8, q4_or_q5_k_rows<false>, k4x8_block<false>>(a);
}
void gemv_q5_k_x8(const gemv_args& a) {
  over_packed<8, q4_or_q5_k_rows<true>, k4x8_block<true>>(a);
}

// Q6_K from the packed layout (pack_q6_k with 8 rows): 8 rows in the lanes, as the AVX-512
// kernel does it (packed_avx512.cpp), with maddubs + madd for vpdpbusd: a 6-bit code times an
// int8 activation, two of them summed, fits int16.
template <int NT>
void k6x8_tokens(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
  const int64_t nb = a.K / 256;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * 1680;
    prefetch_block(blk, 1680);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    __m256 dsc[16];
    for (int i = 0; i < 4; ++i) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * i));
      for (int q = 0; q < 4; ++q)
        dsc[4 * i + q] = _mm256_mul_ps(
            d, _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 24 - 8 * q), 24)));
    }
    const uint8_t* ql = blk + 144;
    const uint8_t* qh = blk + 1168;
    for (int j = 0; j < NT; ++j) {
      const int64_t t = t0 + j;
      const int8_t* x = a.xq + t * a.K + b * 256;
      const float* xd = a.xd + t * (a.K / 32) + b * 8;
      const float* xs = a.xs + t * (a.K / 16) + b * 16;
      __m256 r = _mm256_setzero_ps();
      for (int h = 0; h < 2; ++h) {
        __m256i s[8]; // sub-block 8h + 2k + part, in int16 pairs of positions
        for (int i = 0; i < 8; ++i) s[i] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c += 2) { // two positions of 4 a step: their int16 sums fit
          __m256i p[8];
          for (int e = 0; e < 2; ++e) {
            const int cc = c + e;
            const __m256i A =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32 * (16 * h + cc)));
            const __m256i B =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32 * (16 * h + 8 + cc)));
            const __m256i H =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * (8 * h + cc)));
            const __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(A, m4),
                                                  _mm256_and_si256(_mm256_slli_epi16(H, 4), m30)),
                                  _mm256_or_si256(_mm256_and_si256(B, m4),
                                                  _mm256_and_si256(_mm256_slli_epi16(H, 2), m30)),
                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
                                                  _mm256_and_si256(H, m30)),
                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                                                  _mm256_and_si256(_mm256_srli_epi16(H, 2), m30))};
            for (int k = 0; k < 4; ++k)
              p[4 * e + k] = _mm256_maddubs_epi16(q[k], bcast4(x + 128 * h + 32 * k + 4 * cc));
          }
          const int part = c / 4;
          for (int k = 0; k < 4; ++k)
            s[2 * k + part] = _mm256_add_epi32(
                s[2 * k + part], _mm256_madd_epi16(_mm256_add_epi16(p[k], p[4 + k]), ones));
        }
        for (int i = 0; i < 8; ++i) { // i = 2k + part: sub-block 8h + i, group 4h + k
          const int sb = 8 * h + i;
          const __m256 v = _mm256_fmsub_ps(_mm256_cvtepi32_ps(s[i]), _mm256_set1_ps(xd[sb / 2]),
                                           _mm256_set1_ps(32.0f * xs[sb]));
          r = _mm256_fmadd_ps(dsc[sb], v, r);
        }
      }
      acc[j] = _mm256_add_ps(acc[j], r);
    }
  }
  for (int j = 0; j < NT; ++j) store8(a, n, t0 + j, acc[j]);
}

struct q6_k_rows {
  template <int NT>
  static void run(const gemv_args& a, const uint8_t* grp, int64_t n, int64_t t0) {
    k6x8_tokens<NT>(a, grp, n, t0);
  }
};

void gemv_q6_k_x8(const gemv_args& a) {
  over_packed_groups<8, q6_k_rows>(a);
}

} // namespace troupe::kernels::cpu::packed_avx2
