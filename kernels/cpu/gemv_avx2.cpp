// gemv_avx2.cpp: decode matmul kernels for AVX2 + FMA + F16C (gemv.hpp). Built with
// -mavx2 -mfma -mf16c; only called when the CPU has them. int8 dot products through
// maddubs (|w| . sign(x, w)) and madd with ones.
#include <immintrin.h>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_f8.hpp"
#include "kernels/cpu/gemv_kquant.hpp"
#include "kernels/cpu/gemv_lookup4.hpp"
#include "kernels/cpu/gemv_packed.hpp"

namespace troupe::kernels::cpu {

namespace {

inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

template <int W>
inline __m256 load_w(const uint8_t* row, int64_t k) {
  if constexpr (W == 0)
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  else if constexpr (W == 1)
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  else {
    const __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <int W>
inline float load_w1(const uint8_t* row, int64_t k) {
  if constexpr (W == 0)
    return reinterpret_cast<const float*>(row)[k];
  else if constexpr (W == 1)
    return _cvtsh_ss(reinterpret_cast<const uint16_t*>(row)[k]);
  else {
    const uint32_t u = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[k]) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
  }
}

// TC (1 or 2) tokens from t0 against rows n and m (the weights loaded once for both tokens):
// the two halves of a range are read as two streams at once. One core's single sequential stream
// fell short of its DRAM bandwidth (f16 rows of 5632 values: 17-19 GB/s one row at a time, 26 with
// two streams; a 1 B f16 model decodes 15-20% faster). One token keeps two chains per row, two
// tokens one per pair. Each stream is also prefetched 4 KB ahead, as the AVX-512 kernels do: on
// rows of 5632 values that took f16 / bf16 from 17-23 ms to 10-12 (`kernels_bench
// BM_matmul/f16/1/5632/32768/1`, TROUPE_ISA=avx2) and 4 tokens from 42-47 to 27-30 ms;
// bench/README.md "Prefetching the AVX2 float decode kernels".
constexpr int64_t float_prefetch = 4096; // bytes ahead of each row's stream
constexpr int64_t quant_prefetch = 2048; // the q8_0 / q4_0 kernels' (see gemv_avx512.cpp)

template <int W, int TC>
inline void float_two_rows(const gemv_args& a, int64_t n, int64_t m, int64_t t0) {
  const int64_t K = a.K, K8 = K / 8 * 8;
  const uint8_t* r0 = a.w + n * a.row_bytes;
  const uint8_t* r1 = a.w + m * a.row_bytes;
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, d0 = c0, d1 = c0;
  const float* x = a.x + t0 * K;
  const float* x2 = x + K; // the second token's
  int64_t k = 0;
  constexpr int64_t wbytes = W == 0 ? 4 : 2;
  if constexpr (TC == 1)
    for (; k + 16 <= K8; k += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(r0) + k * wbytes + float_prefetch, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r1) + k * wbytes + float_prefetch, _MM_HINT_T0);
      const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
      c0 = _mm256_fmadd_ps(x0, load_w<W>(r0, k), c0);
      c1 = _mm256_fmadd_ps(x1, load_w<W>(r0, k + 8), c1);
      d0 = _mm256_fmadd_ps(x0, load_w<W>(r1, k), d0);
      d1 = _mm256_fmadd_ps(x1, load_w<W>(r1, k + 8), d1);
    }
  for (; k < K8; k += 8) { // c: row n, d: row m; 0: token t0, 1: token t0 + 1
    if constexpr (TC == 2) {
      _mm_prefetch(reinterpret_cast<const char*>(r0) + k * wbytes + float_prefetch, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r1) + k * wbytes + float_prefetch, _MM_HINT_T0);
    }
    const __m256 x0 = _mm256_loadu_ps(x + k), w0 = load_w<W>(r0, k), w1 = load_w<W>(r1, k);
    c0 = _mm256_fmadd_ps(x0, w0, c0);
    d0 = _mm256_fmadd_ps(x0, w1, d0);
    if constexpr (TC == 2) {
      const __m256 x1 = _mm256_loadu_ps(x2 + k);
      c1 = _mm256_fmadd_ps(x1, w0, c1);
      d1 = _mm256_fmadd_ps(x1, w1, d1);
    }
  }
  float s[4];
  if constexpr (TC == 1) {
    s[0] = hsum256(_mm256_add_ps(c0, c1)), s[1] = hsum256(_mm256_add_ps(d0, d1));
  } else {
    s[0] = hsum256(c0), s[1] = hsum256(d0), s[2] = hsum256(c1), s[3] = hsum256(d1);
  }
  for (; k < K; ++k) {
    const float w0 = load_w1<W>(r0, k), w1 = load_w1<W>(r1, k);
    s[0] += x[k] * w0, s[1] += x[k] * w1;
    if constexpr (TC == 2) s[2] += x2[k] * w0, s[3] += x2[k] * w1;
  }
  const float bn = a.bias ? a.bias[n] : 0.0f, bm = a.bias ? a.bias[m] : 0.0f;
  for (int j = 0; j < TC; ++j) {
    a.y[(t0 + j) * a.ldy + n - a.ycol0] = s[2 * j] + bn;
    a.y[(t0 + j) * a.ldy + m - a.ycol0] = s[2 * j + 1] + bm;
  }
}

// The two halves of the range side by side, tokens in pairs; an odd last row paired with
// itself (its values computed twice, stored twice).
template <int W>
void gemv_float(const gemv_args& a) {
  const int64_t half = (a.n1 - a.n0) / 2, mid = a.n0 + half;
  auto rows = [&](int64_t n, int64_t m) {
    int64_t t0 = 0;
    for (; t0 + 2 <= a.T; t0 += 2) float_two_rows<W, 2>(a, n, m, t0);
    if (t0 < a.T) float_two_rows<W, 1>(a, n, m, t0);
  };
  for (int64_t i = 0; i < half; ++i) rows(a.n0 + i, mid + i);
  if ((a.n1 - a.n0) % 2) rows(a.n1 - 1, a.n1 - 1);
}

void gemv_f32(const gemv_args& a) {
  gemv_float<0>(a);
}
void gemv_f16(const gemv_args& a) {
  gemv_float<1>(a);
}
void gemv_bf16(const gemv_args& a) {
  gemv_float<2>(a);
}

inline __m256i dot_block(__m256i w, __m256i x) {
  return kqc::signed_dot(w, x);
}

inline __m256i q4_unpack(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
}

// One token's dot with rows n and m (one from each half of the range: two streams, as the
// float kernels), two blocks at a time per row; a row paired with itself for an odd last row.
// In kernels_bench (TROUPE_ISA=avx2) 4 tokens on rows of 5632 values took 27-33 -> 22-25 ms,
// one token 9.0-9.4 -> 7.3-8.1; end to end one token is at the memory either way (bench/README.md
// "q8_0 decode on two streams").
template <bool Q4>
inline void quant_two_rows(const gemv_args& a, int64_t n, int64_t m, int64_t t) {
  const int64_t nb = a.K / 32;
  const int64_t bb = Q4 ? 18 : 34;
  const uint8_t* r0 = a.w + n * a.row_bytes;
  const uint8_t* r1 = a.w + m * a.row_bytes;
  const int8_t* xq = a.xq + t * a.K;
  const float* xd = a.xd + t * nb;
  auto codes = [](const uint8_t* blk) {
    return Q4 ? q4_unpack(blk + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  };
  auto scale = [&](const uint8_t* blk, int64_t b) {
    return _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk)) * xd[b]);
  };
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, d0 = c0, d1 = c0;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* p0 = r0 + b * bb;
    const uint8_t* p1 = r1 + b * bb;
    _mm_prefetch(reinterpret_cast<const char*>(p0) + quant_prefetch, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p1) + quant_prefetch, _MM_HINT_T0);
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32 + 32));
    c0 = _mm256_fmadd_ps(scale(p0, b), _mm256_cvtepi32_ps(dot_block(codes(p0), x0)), c0);
    c1 = _mm256_fmadd_ps(scale(p0 + bb, b + 1), _mm256_cvtepi32_ps(dot_block(codes(p0 + bb), x1)),
                         c1);
    d0 = _mm256_fmadd_ps(scale(p1, b), _mm256_cvtepi32_ps(dot_block(codes(p1), x0)), d0);
    d1 = _mm256_fmadd_ps(scale(p1 + bb, b + 1), _mm256_cvtepi32_ps(dot_block(codes(p1 + bb), x1)),
                         d1);
  }
  if (b < nb) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32));
    c0 = _mm256_fmadd_ps(scale(r0 + b * bb, b),
                         _mm256_cvtepi32_ps(dot_block(codes(r0 + b * bb), x)), c0);
    d0 = _mm256_fmadd_ps(scale(r1 + b * bb, b),
                         _mm256_cvtepi32_ps(dot_block(codes(r1 + b * bb), x)), d0);
  }
  a.y[t * a.ldy + n - a.ycol0] = hsum256(_mm256_add_ps(c0, c1)) + (a.bias ? a.bias[n] : 0.0f);
  a.y[t * a.ldy + m - a.ycol0] = hsum256(_mm256_add_ps(d0, d1)) + (a.bias ? a.bias[m] : 0.0f);
}

template <bool Q4>
void gemv_quant(const gemv_args& a) {
  const int64_t half = (a.n1 - a.n0) / 2, mid = a.n0 + half;
  for (int64_t i = 0; i < half; ++i)
    for (int64_t t = 0; t < a.T; ++t) quant_two_rows<Q4>(a, a.n0 + i, mid + i, t);
  if ((a.n1 - a.n0) % 2)
    for (int64_t t = 0; t < a.T; ++t) quant_two_rows<Q4>(a, a.n1 - 1, a.n1 - 1, t);
}

void gemv_q8_0(const gemv_args& a) {
  gemv_quant<false>(a);
}
void gemv_q4_0(const gemv_args& a) {
  gemv_quant<true>(a);
}

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
// k4x8_blocks does; x8_iq4 looks each block up again for every 4 tokens).
struct iq4x8_span {
  int subs = 0;
  __m256 ws[8];
  alignas(32) int8_t w[8][8][32], aw[8][8][32]; // [sub-block][chunk][8 rows x 4 values]

  template <bool XS>
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
};

// NT tokens over the span at 32-value block k32 (x8_iq4's sums, the codes from sp).
template <int NT>
void iq4x8_span_tokens(const gemv_args& a, const iq4x8_span& sp, int64_t k32, int64_t n,
                       int64_t t0) {
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
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32),
                               _mm256_mul_ps(sp.ws[s], _mm256_set1_ps(a.xd[t * n32 + k])), acc[j]);
    }
  }
  for (int j = 0; j < NT; ++j) add8(a, n, t0 + j, acc[j], k32 == 0);
}

template <bool XS>
void iq4x8_spans(const gemv_args& a) {
  iq4x8_span sp;
  const int64_t n32 = a.K / 32;
  for (int64_t n = a.n0; n < a.n1; n += 8) {
    const uint8_t* grp = a.wp + n * a.row_bytes;
    for (int64_t k32 = 0; k32 < n32; k32 += 8) {
      sp.decode<XS>(grp, k32, static_cast<int>(n32 - k32 < 8 ? n32 - k32 : 8));
      int64_t t = 0;
      for (; t + 4 <= a.T; t += 4) iq4x8_span_tokens<4>(a, sp, k32, n, t);
      switch (a.T - t) {
      case 3:
        iq4x8_span_tokens<3>(a, sp, k32, n, t);
        break;
      case 2:
        iq4x8_span_tokens<2>(a, sp, k32, n, t);
        break;
      case 1:
        iq4x8_span_tokens<1>(a, sp, k32, n, t);
        break;
      default:
        break;
      }
    }
  }
}

void gemv_iq4_nl_x8(const gemv_args& a) {
  if (a.T >= 8)
    iq4x8_spans<false>(a);
  else
    over_packed_groups<8, iq4_rows<false>>(a);
}
void gemv_iq4_xs_x8(const gemv_args& a) {
  if (a.T >= 8)
    iq4x8_spans<true>(a);
  else
    over_packed_groups<8, iq4_rows<true>>(a);
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

  void decode(const uint8_t* blk) {
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
};

// NT tokens over block b of a group decoded into w (k4x8_tokens' sums, the codes from w).
template <bool Q5, int NT>
void k4x8_block_tokens(const gemv_args& a, const k4x8_block<Q5>& w, int64_t b, int64_t n,
                       int64_t t0) {
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
        slo[j] = _mm256_add_epi16(slo[j], _mm256_maddubs_epi16(lo, bcast4(x[j] + 64 * p + 4 * c)));
        shi[j] =
            _mm256_add_epi16(shi[j], _mm256_maddubs_epi16(hi, bcast4(x[j] + 64 * p + 32 + 4 * c)));
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
          _mm256_fmadd_ps(dlo, _mm256_mul_ps(w.sc[2 * p], _mm256_set1_ps(xd[2 * p])), blockacc[j]);
      blockacc[j] = _mm256_fmadd_ps(
          dhi, _mm256_mul_ps(w.sc[2 * p + 1], _mm256_set1_ps(xd[2 * p + 1])), blockacc[j]);
      mins[j] = _mm256_fmadd_ps(w.mn[2 * p], _mm256_set1_ps(xs[4 * p] + xs[4 * p + 1]), mins[j]);
      mins[j] =
          _mm256_fmadd_ps(w.mn[2 * p + 1], _mm256_set1_ps(xs[4 * p + 2] + xs[4 * p + 3]), mins[j]);
    }
  }
  for (int j = 0; j < NT; ++j)
    add8(a, n, t0 + j, _mm256_fnmadd_ps(w.dmin, mins[j], _mm256_mul_ps(w.d, blockacc[j])), b == 0);
}

template <bool Q5>
void k4x8_blocks(const gemv_args& a) {
  constexpr int64_t block = Q5 ? 1408 : 1152;
  k4x8_block<Q5> w;
  for (int64_t n = a.n0; n < a.n1; n += 8) {
    const uint8_t* grp = a.wp + n * a.row_bytes;
    for (int64_t b = 0; b < a.K / 256; ++b) {
      w.decode(grp + b * block);
      int64_t t = 0;
      for (; t + 4 <= a.T; t += 4) k4x8_block_tokens<Q5, 4>(a, w, b, n, t);
      switch (a.T - t) {
      case 3:
        k4x8_block_tokens<Q5, 3>(a, w, b, n, t);
        break;
      case 2:
        k4x8_block_tokens<Q5, 2>(a, w, b, n, t);
        break;
      case 1:
        k4x8_block_tokens<Q5, 1>(a, w, b, n, t);
        break;
      default:
        break;
      }
    }
  }
}

void gemv_q4_k_x8(const gemv_args& a) {
  if (a.T >= 8)
    k4x8_blocks<false>(a);
  else
    over_packed_groups<8, q4_or_q5_k_rows<false>>(a);
}
void gemv_q5_k_x8(const gemv_args& a) {
  if (a.T >= 8)
    k4x8_blocks<true>(a);
  else
    over_packed_groups<8, q4_or_q5_k_rows<true>>(a);
}

// Q6_K from the packed layout (pack_q6_k with 8 rows): 8 rows in the lanes, as the AVX-512
// kernel does it (gemv_avx512.cpp), with maddubs + madd for vpdpbusd: a 6-bit code times an
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

void quantize_q8(const float* x, int64_t K, int8_t* q, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < K / 32; ++b) {
    __m256 v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * 32 + i * 8);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float scale = _mm_cvtss_f32(h) / 127.0f;
    const __m256 inv = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
    __m256i i32[4];
    for (int i = 0; i < 4; ++i)
      i32[i] = _mm256_cvtps_epi32(
          _mm256_round_ps(_mm256_mul_ps(v[i], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i p01 = _mm256_packs_epi32(i32[0], i32[1]),
                  p23 = _mm256_packs_epi32(i32[2], i32[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(
        p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)); // undo the lane interleave
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * 32), p);
    d[b] = scale;
  }
}

void f16_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

const gemv_table table = {.isa = "avx2",
                          .f32 = gemv_f32,
                          .f16 = gemv_f16,
                          .bf16 = gemv_bf16,
                          .q8_0 = gemv_q8_0,
                          .q4_0 = gemv_q4_0,
                          .q2_k = gemv_q2_k,
                          .q3_k = gemv_q3_k,
                          .q4_k = gemv_q4_k,
                          .q5_k = gemv_q5_k,
                          .q6_k = gemv_q6_k,
                          .mxfp4 = gemv_mxfp4,
                          .iq4_nl = gemv_iq4_nl,
                          .iq4_xs = gemv_iq4_xs,
                          .f8_b128 = gemv_f8_b128,
                          .q4_0_packed = gemv_q4_0_x8,
                          .q4_k_packed = gemv_q4_k_x8,
                          .q5_k_packed = gemv_q5_k_x8,
                          .q6_k_packed = gemv_q6_k_x8,
                          .iq4_nl_packed = gemv_iq4_nl_x8,
                          .iq4_xs_packed = gemv_iq4_xs_x8,
                          .pack_rows = 8,
                          .unpack_q6_k = unpack_q6_k_x8,
                          .quantize_q8 = quantize_q8,
                          .f16_to_f32 = f16_row,
                          .gemm_q8_0 = gemm_q8_0_avx2,
                          .gemm_q4_0 = gemm_q4_0_avx2,
                          .gemm_q4_k = gemm_q4_k_avx2,
                          .gemm_q5_k = gemm_q5_k_avx2,
                          .gemm_q6_k = gemm_q6_k_avx2,
                          .gemm_mxfp4 = gemm_mxfp4_avx2,
                          .gemm_iq4_nl = gemm_iq4_nl_avx2,
                          .gemm_iq4_xs = gemm_iq4_xs_avx2,
                          .gemm_lanes = 8,
                          .q8_offset = 0,
                          .iq4_offset = 0};

} // namespace

const gemv_table* gemv_avx2_table() {
  return &table;
}

} // namespace troupe::kernels::cpu
