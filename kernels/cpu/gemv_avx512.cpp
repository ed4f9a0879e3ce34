// gemv_avx512.cpp: decode matmul kernels for AVX-512 F/BW/VL + VNNI (gemv.hpp). Built with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c; only called when the CPU has
// them. Accumulation in f32 (float weights) or int32 per 32-value block scaled into f32.
#include <immintrin.h>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_f8.hpp"
#include "kernels/cpu/gemv_kquant.hpp"
#include "kernels/cpu/gemv_lookup4.hpp"
#include "kernels/cpu/gemv_packed.hpp"

namespace troupe::kernels::cpu {

namespace {

constexpr int prefetch_distance = 4096; // bytes ahead of the weights being read

inline float hsum(__m512 v) {
  return _mm512_reduce_add_ps(v);
}
inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Loads 16 weights as f32 from a row of type W, masked at the tail.
template <int W>
inline __m512 load_w(const uint8_t* row, int64_t k, __mmask16 m) {
  if constexpr (W == 0) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  } else if constexpr (W == 1) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Decode with float weights: two rows at a time, so two weight streams are in flight and
// their conversions overlap (one row alone leaves the load ports waiting on the stream). The
// rows are n and n2, one from each half of the range: two adjacent rows are one stream, and on
// AMD's cores read at half the bandwidth (f16 rows of 768 values, TROUPE_ISA=avx512: 18 ms
// adjacent, 11.5 ms from the two halves). TC (1 or 2) tokens from t0, the weights loaded once
// for both: one token keeps two chains per row, two tokens one per pair. Every line of both
// streams is prefetched (f32 with one line a row prefetched per 32 values, as it first was,
// decoded bench-134m 13-16% slower than with every line on an Intel Xeon, one and two threads).
template <int W, int TC>
inline void float_two_rows(const gemv_args& a, int64_t n, int64_t n2, int64_t t0) {
  const int64_t K = a.K, K32 = K / 32 * 32;
  const uint8_t* r0 = a.w + n * a.row_bytes;
  const uint8_t* r1 = a.w + n2 * a.row_bytes;
  const float* x = a.x + t0 * K;
  const float* x2 = x + K; // the second token's
  constexpr int64_t wbytes = W == 0 ? 4 : 2;
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, e0 = c0, e1 = c0;
  int64_t k = 0;
  if constexpr (TC == 1)
    for (; k < K32; k += 32) {
      const char* p0 = reinterpret_cast<const char*>(r0) + k * wbytes + prefetch_distance;
      const char* p1 = reinterpret_cast<const char*>(r1) + k * wbytes + prefetch_distance;
      _mm_prefetch(p0, _MM_HINT_T0);
      _mm_prefetch(p1, _MM_HINT_T0);
      if constexpr (W == 0) { // 32 f32 values are two lines a row
        _mm_prefetch(p0 + 64, _MM_HINT_T0);
        _mm_prefetch(p1 + 64, _MM_HINT_T0);
      }
      const __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
      c0 = _mm512_fmadd_ps(x0, load_w<W>(r0, k, 0xffff), c0);
      c1 = _mm512_fmadd_ps(x1, load_w<W>(r0, k + 16, 0xffff), c1);
      e0 = _mm512_fmadd_ps(x0, load_w<W>(r1, k, 0xffff), e0);
      e1 = _mm512_fmadd_ps(x1, load_w<W>(r1, k + 16, 0xffff), e1);
    }
  for (; k < K; k += 16) { // c: row n, e: row n2; 0: token t0, 1: token t0 + 1
    const __mmask16 m = K - k >= 16 ? 0xffff : static_cast<__mmask16>((1u << (K - k)) - 1u);
    if constexpr (TC == 2) {
      _mm_prefetch(reinterpret_cast<const char*>(r0) + k * wbytes + prefetch_distance, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r1) + k * wbytes + prefetch_distance, _MM_HINT_T0);
    }
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
    const __m512 w0 = load_w<W>(r0, k, m), w1 = load_w<W>(r1, k, m);
    c0 = _mm512_fmadd_ps(xv, w0, c0);
    e0 = _mm512_fmadd_ps(xv, w1, e0);
    if constexpr (TC == 2) {
      const __m512 xv2 = _mm512_maskz_loadu_ps(m, x2 + k);
      c1 = _mm512_fmadd_ps(xv2, w0, c1);
      e1 = _mm512_fmadd_ps(xv2, w1, e1);
    }
  }
  const float bn = a.bias ? a.bias[n] : 0.0f, bm = a.bias ? a.bias[n2] : 0.0f;
  float* y = a.y + t0 * a.ldy - a.ycol0;
  if constexpr (TC == 1) {
    y[n] = hsum(_mm512_add_ps(c0, c1)) + bn;
    y[n2] = hsum(_mm512_add_ps(e0, e1)) + bm;
  } else {
    y[n] = hsum(c0) + bn, y[n2] = hsum(e0) + bm;
    y[a.ldy + n] = hsum(c1) + bn, y[a.ldy + n2] = hsum(e1) + bm;
  }
}

// Decode with bf16 weights: 32 weights (one 64-byte load) become two f32 vectors with one
// instruction each, the even elements (shifted up) and the odd ones (masked), dotted with x
// split the same way once per call (xe, xo: K / 2 values each, K a multiple of 32).
inline void bf16_two_rows_split(const gemv_args& a, int64_t n, int64_t n2, const float* xe,
                                const float* xo) {
  const int64_t K = a.K;
  const uint8_t* r0 = a.w + n * a.row_bytes;
  const uint8_t* r1 = a.w + n2 * a.row_bytes;
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, e0 = c0, e1 = c0;
  for (int64_t k = 0; k < K; k += 32) {
    _mm_prefetch(reinterpret_cast<const char*>(r0) + k * 2 + prefetch_distance, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(r1) + k * 2 + prefetch_distance, _MM_HINT_T0);
    const __m512 xev = _mm512_loadu_ps(xe + k / 2), xod = _mm512_loadu_ps(xo + k / 2);
    const __m512i w0 = _mm512_loadu_si512(r0 + k * 2), w1 = _mm512_loadu_si512(r1 + k * 2);
    c0 = _mm512_fmadd_ps(xev, _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), c0);
    c1 = _mm512_fmadd_ps(xod, _mm512_castsi512_ps(_mm512_and_si512(w0, high)), c1);
    e0 = _mm512_fmadd_ps(xev, _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), e0);
    e1 = _mm512_fmadd_ps(xod, _mm512_castsi512_ps(_mm512_and_si512(w1, high)), e1);
  }
  a.y[n - a.ycol0] = hsum(_mm512_add_ps(c0, c1)) + (a.bias ? a.bias[n] : 0.0f);
  a.y[n2 - a.ycol0] = hsum(_mm512_add_ps(e0, e1)) + (a.bias ? a.bias[n2] : 0.0f);
}

constexpr int64_t split_max_k = 8192; // x halves on the stack: 32 KiB

// A row from each half of the range at a time (float_two_rows), tokens in pairs (f32 too since
// December 2026: 4 tokens on rows of 5632 values 62-68 -> 41 ms, one token unchanged,
// TROUPE_ISA=avx512 on an AMD EPYC; on an Intel Xeon one token decodes bench-134m f32 7% faster
// than the one-row kernel it replaced, with every line prefetched). Split: bf16 single tokens
// through bf16_two_rows_split (measured ahead on Intel); AMD's mix (gemv.cpp) takes the unsplit
// conversion, which was ahead there end to end (bench-134m bf16 decode, one thread, five
// alternating rounds: 127-156 tok/s against 107-112 split).
template <int W, bool Split = true>
void gemv_float(const gemv_args& a) {
  const int64_t K = a.K;
  // a row from each half of the range at a time; an odd last row paired with itself (its
  // values computed twice, stored twice)
  const int64_t half = (a.n1 - a.n0) / 2, mid = a.n0 + half;
  const bool odd = (a.n1 - a.n0) % 2;
  if (Split && W == 2 && a.T == 1 && K % 32 == 0 && K <= split_max_k) {
    alignas(64) float xe[split_max_k / 2], xo[split_max_k / 2];
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd_lanes = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int64_t k = 0; k < K; k += 32) {
      const __m512 lo = _mm512_loadu_ps(a.x + k), hi = _mm512_loadu_ps(a.x + k + 16);
      _mm512_store_ps(xe + k / 2, _mm512_permutex2var_ps(lo, even, hi));
      _mm512_store_ps(xo + k / 2, _mm512_permutex2var_ps(lo, odd_lanes, hi));
    }
    for (int64_t i = 0; i < half; ++i) bf16_two_rows_split(a, a.n0 + i, mid + i, xe, xo);
    if (odd) bf16_two_rows_split(a, a.n1 - 1, a.n1 - 1, xe, xo);
    return;
  }
  auto rows = [&](int64_t n, int64_t m) { // any number of tokens: in pairs over the two rows
    int64_t t0 = 0;
    for (; t0 + 2 <= a.T; t0 += 2) float_two_rows<W, 2>(a, n, m, t0);
    if (t0 < a.T) float_two_rows<W, 1>(a, n, m, t0);
  };
  for (int64_t i = 0; i < half; ++i) rows(a.n0 + i, mid + i);
  if (odd) rows(a.n1 - 1, a.n1 - 1);
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

// int8 x int8 dot of one 32-value block, as 8 int32 partial sums: |w| (u8) . sign(x, w) (s8)
inline __m256i dot_block(__m256i w, __m256i x) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w),
                             _mm256_sign_epi8(x, w));
}

inline __m256i q4_unpack(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
}

// One weight row against TC tokens (TC known at compile time, so the accumulators live in
// registers). Two chains per token: even and odd blocks.
template <bool Q4, int TC>
inline void quant_row(const gemv_args& a, const uint8_t* row, int64_t t0, int64_t n, float bias) {
  const int64_t nb = a.K / 32;
  const int64_t bb = Q4 ? 18 : 34; // block bytes
  __m256 c[TC], c2[TC];
  for (int j = 0; j < TC; ++j) c[j] = c2[j] = _mm256_setzero_ps();
  const int8_t* xq = a.xq + t0 * a.K;
  const float* xd = a.xd + t0 * nb;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* blk0 = row + b * bb;
    const uint8_t* blk1 = blk0 + bb;
    // int8 blocks take several instructions per cache line, so the out-of-order window alone
    // keeps too few misses in flight: ask for the weights well ahead
    _mm_prefetch(reinterpret_cast<const char*>(blk0) + prefetch_distance, _MM_HINT_T0);
    if constexpr (!Q4) // 68 bytes per step can cross two lines
      _mm_prefetch(reinterpret_cast<const char*>(blk0) + prefetch_distance + 64, _MM_HINT_T0);
    const float d0 = _cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk0));
    const float d1 = _cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk1));
    const __m256i w0 =
        Q4 ? q4_unpack(blk0 + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + 2));
    const __m256i w1 =
        Q4 ? q4_unpack(blk1 + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk1 + 2));
    const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
    for (int j = 0; j < TC; ++j) {
      const int8_t* x = xq + j * a.K + b * 32;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
      const __m256i p0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), a0, _mm256_sign_epi8(x0, w0));
      const __m256i p1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), a1, _mm256_sign_epi8(x1, w1));
      c[j] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * xd[j * nb + b]), _mm256_cvtepi32_ps(p0), c[j]);
      c2[j] =
          _mm256_fmadd_ps(_mm256_set1_ps(d1 * xd[j * nb + b + 1]), _mm256_cvtepi32_ps(p1), c2[j]);
    }
  }
  for (; b < nb; ++b) {
    const uint8_t* blk = row + b * bb;
    const float d = _cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk));
    const __m256i w =
        Q4 ? q4_unpack(blk + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    for (int j = 0; j < TC; ++j) {
      const __m256i p =
          dot_block(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j * a.K + b * 32)));
      c[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * xd[j * nb + b]), _mm256_cvtepi32_ps(p), c[j]);
    }
  }
  for (int j = 0; j < TC; ++j)
    a.y[(t0 + j) * a.ldy + n - a.ycol0] = hsum256(_mm256_add_ps(c[j], c2[j])) + bias;
}

// Decode (one token): two weight rows at a time, four independent chains, so more cache
// lines are in flight and the int8 work per line overlaps with the memory stream.
template <bool Q4>
inline void quant_two_rows(const gemv_args& a, int64_t n) {
  const int64_t nb = a.K / 32;
  const int64_t bb = Q4 ? 18 : 34;
  const uint8_t* r0 = a.w + n * a.row_bytes;
  const uint8_t* r1 = r0 + a.row_bytes;
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, e0 = c0, e1 = c0;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(r0 + b * bb) + prefetch_distance, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(r1 + b * bb) + prefetch_distance, _MM_HINT_T0);
    if constexpr (!Q4) {
      _mm_prefetch(reinterpret_cast<const char*>(r0 + b * bb) + prefetch_distance + 64,
                   _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r1 + b * bb) + prefetch_distance + 64,
                   _MM_HINT_T0);
    }
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + b * 32));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + b * 32 + 32));
    const float s0 = a.xd[b], s1 = a.xd[b + 1];
    for (int r = 0; r < 2; ++r) {
      const uint8_t* blk0 = (r ? r1 : r0) + b * bb;
      const uint8_t* blk1 = blk0 + bb;
      const __m256i w0 =
          Q4 ? q4_unpack(blk0 + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + 2));
      const __m256i w1 =
          Q4 ? q4_unpack(blk1 + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk1 + 2));
      const __m256 p0 = _mm256_cvtepi32_ps(dot_block(w0, x0));
      const __m256 p1 = _mm256_cvtepi32_ps(dot_block(w1, x1));
      const __m256 f0 = _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk0)) * s0);
      const __m256 f1 = _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk1)) * s1);
      if (r) {
        e0 = _mm256_fmadd_ps(f0, p0, e0);
        e1 = _mm256_fmadd_ps(f1, p1, e1);
      } else {
        c0 = _mm256_fmadd_ps(f0, p0, c0);
        c1 = _mm256_fmadd_ps(f1, p1, c1);
      }
    }
  }
  for (; b < nb; ++b) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + b * 32));
    for (int r = 0; r < 2; ++r) {
      const uint8_t* blk = (r ? r1 : r0) + b * bb;
      const __m256i w =
          Q4 ? q4_unpack(blk + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      const __m256 f = _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk)) * a.xd[b]);
      if (r)
        e0 = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(dot_block(w, x)), e0);
      else
        c0 = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(dot_block(w, x)), c0);
    }
  }
  a.y[n - a.ycol0] = hsum256(_mm256_add_ps(c0, c1)) + (a.bias ? a.bias[n] : 0.0f);
  a.y[n + 1 - a.ycol0] = hsum256(_mm256_add_ps(e0, e1)) + (a.bias ? a.bias[n + 1] : 0.0f);
}

// Decode with q4_0 weights, two blocks per 512-bit step: the nibbles stay unsigned (0..15)
// and meet the int8 activations in VPDPBUSD directly; the -8 offset comes off per lane as
// 8 x the sum of the four activations that lane saw (xs8, made once per call). Scales:
// [weight scale x activation scale] of block b in lanes 0-7, of block b + 1 in 8-15.
constexpr int64_t q4_pair_max_k = 16384; // per-call tables on the stack: 32 KiB each

struct q4_call {
  const __m512i* xs8; // [K / 64] per-lane 8 * sum of four activations
  const __m512* dx;   // [K / 64] activation scales, block b in lanes 0-7, b + 1 in 8-15
};

inline void q4_two_rows(const gemv_args& a, const q4_call& c, int64_t n) {
  const int64_t pairs = a.K / 64;
  const uint8_t* r[2] = {a.w + n * a.row_bytes, a.w + (n + 1) * a.row_bytes};
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i twice = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i x = _mm512_loadu_si512(a.xq + p * 64);
    for (int i = 0; i < 2; ++i) {
      const uint8_t* b0 = r[i] + p * 36; // blocks 2p and 2p + 1, 18 bytes each
      _mm_prefetch(reinterpret_cast<const char*>(b0) + prefetch_distance, _MM_HINT_T0);
      const __m256i q = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b0 + 20),
                                            reinterpret_cast<const __m128i*>(b0 + 2));
      __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
      w = _mm512_and_si512(_mm512_shuffle_i64x2(w, w, _MM_SHUFFLE(3, 1, 2, 0)), low4);
      const __m512i dot =
          _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x), c.xs8[p]);
      uint16_t h0, h1;
      __builtin_memcpy(&h0, b0, 2);
      __builtin_memcpy(&h1, b0 + 18, 2);
      const __m128 d2 =
          _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | (uint32_t{h1} << 16))));
      const __m512 dw = _mm512_permutexvar_ps(twice, _mm512_castps128_ps512(d2));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, c.dx[p]), acc[i]);
    }
  }
  a.y[n - a.ycol0] = hsum(acc[0]) + (a.bias ? a.bias[n] : 0.0f);
  a.y[n + 1 - a.ycol0] = hsum(acc[1]) + (a.bias ? a.bias[n + 1] : 0.0f);
}

template <bool Q4>
void gemv_quant(const gemv_args& a) {
  int64_t first = a.n0;
  if (Q4 && a.T == 1 && a.K % 64 == 0 && a.K <= q4_pair_max_k) {
    alignas(64) __m512i xs8[q4_pair_max_k / 64];
    alignas(64) __m512 dx[q4_pair_max_k / 64];
    const __m512i eights = _mm512_set1_epi8(8);
    for (int64_t p = 0; p < a.K / 64; ++p) {
      xs8[p] =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), eights, _mm512_loadu_si512(a.xq + p * 64));
      dx[p] = _mm512_insertf32x8(_mm512_set1_ps(a.xd[2 * p]), _mm256_set1_ps(a.xd[2 * p + 1]), 1);
    }
    const q4_call c{xs8, dx};
    for (; first + 2 <= a.n1; first += 2) q4_two_rows(a, c, first);
  } else if (a.T == 1) {
    for (; first + 2 <= a.n1; first += 2) quant_two_rows<Q4>(a, first);
  }
  for (int64_t n = first; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    int64_t t0 = 0;
    for (; t0 + 4 <= a.T; t0 += 4) quant_row<Q4, 4>(a, row, t0, n, bias);
    switch (a.T - t0) {
    case 3:
      quant_row<Q4, 3>(a, row, t0, n, bias);
      break;
    case 2:
      quant_row<Q4, 2>(a, row, t0, n, bias);
      break;
    case 1:
      quant_row<Q4, 1>(a, row, t0, n, bias);
      break;
    default:
      break;
    }
  }
}

void gemv_q8_0(const gemv_args& a) {
  gemv_quant<false>(a);
}
void gemv_q4_0(const gemv_args& a) {
  gemv_quant<true>(a);
}

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
struct x16_span {
  int subs = 0;
  __m512 ws[8];
  alignas(64) uint8_t u[8][8][64]; // [32 values][code vector][16 rows x 4 codes]

  // up to 8 blocks of 32 from block k32 of a group laid out as pack_q4_0 / pack_q8_0 do
  template <pk P>
  void decode(const uint8_t* grp, int64_t k32, int n32) {
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
};

// NT tokens over the span at 32-value block k32 (x16_tokens' sums, the codes from sp).
template <int NT>
void x16_span_tokens(const gemv_args& a, const x16_span& sp, int offset, int64_t k32, int64_t n,
                     int64_t t0) {
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
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                               _mm512_mul_ps(sp.ws[s], _mm512_set1_ps(a.xd[t * n32 + k])), acc[j]);
    }
  }
  for (int j = 0; j < NT; ++j) add16(a, n, t0 + j, acc[j], k32 == 0);
}

// P: the layout of x16_tokens' formats; XS: IQ4_XS's instead
template <pk P, bool XS>
void x16_spans(const gemv_args& a) {
  constexpr int offset = P == pk::q4_0 && !XS ? 8 : 128;
  x16_span sp;
  const int64_t n32 = a.K / 32;
  for (int64_t n = a.n0; n < a.n1; n += 16) {
    const uint8_t* grp = a.wp + n * a.row_bytes;
    for (int64_t k32 = 0; k32 < n32; k32 += 8) {
      if constexpr (XS)
        sp.decode_xs(grp, k32);
      else
        sp.decode<P>(grp, k32, static_cast<int>(n32 - k32 < 8 ? n32 - k32 : 8));
      int64_t t = 0;
      for (; t + 4 <= a.T; t += 4) x16_span_tokens<4>(a, sp, offset, k32, n, t);
      switch (a.T - t) {
      case 3:
        x16_span_tokens<3>(a, sp, offset, k32, n, t);
        break;
      case 2:
        x16_span_tokens<2>(a, sp, offset, k32, n, t);
        break;
      case 1:
        x16_span_tokens<1>(a, sp, offset, k32, n, t);
        break;
      default:
        break;
      }
    }
  }
}

void gemv_q4_0_x16(const gemv_args& a) {
  if (a.T >= 8)
    x16_spans<pk::q4_0, false>(a);
  else
    over_packed_groups<16, block32_rows<pk::q4_0>>(a);
}
void gemv_q8_0_x16(const gemv_args& a) {
  if (a.T >= 8)
    x16_spans<pk::q8_0, false>(a);
  else
    over_packed_groups<16, block32_rows<pk::q8_0>>(a);
}
void gemv_iq4_nl_x16(const gemv_args& a) {
  if (a.T >= 8)
    x16_spans<pk::iq4_nl, false>(a);
  else
    over_packed_groups<16, block32_rows<pk::iq4_nl>>(a);
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
  if (a.T >= 8)
    x16_spans<pk::iq4_nl, true>(a);
  else
    over_packed_groups<16, iq4_xs_rows>(a);
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
// for every 4 tokens (as the AVX2 file's k4x8_blocks explains).
template <bool Q5>
struct k4x16_block {
  __m512 d, dmin, sc[8], mn[8];
  alignas(64) uint8_t code[4][8][2][64]; // [p][chunk][groups 2p, 2p + 1][16 rows x 4 codes]

  void decode(const uint8_t* blk) {
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
};

// NT tokens over block b of a group decoded into w (k4x16_tokens' sums, the codes from w).
template <bool Q5, int NT>
void k4x16_block_tokens(const gemv_args& a, const k4x16_block<Q5>& w, int64_t b, int64_t n,
                        int64_t t0) {
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
      mins[j] =
          _mm512_fmadd_ps(w.mn[2 * p + 1], _mm512_set1_ps(xs[4 * p + 2] + xs[4 * p + 3]), mins[j]);
    }
  }
  for (int j = 0; j < NT; ++j)
    add16(a, n, t0 + j, _mm512_fnmadd_ps(w.dmin, mins[j], _mm512_mul_ps(w.d, blockacc[j])), b == 0);
}

template <bool Q5>
void k4x16_blocks(const gemv_args& a) {
  constexpr int64_t block = Q5 ? 2816 : 2304;
  k4x16_block<Q5> w;
  for (int64_t n = a.n0; n < a.n1; n += 16) {
    const uint8_t* grp = a.wp + n * a.row_bytes;
    for (int64_t b = 0; b < a.K / 256; ++b) {
      w.decode(grp + b * block);
      int64_t t = 0;
      for (; t + 4 <= a.T; t += 4) k4x16_block_tokens<Q5, 4>(a, w, b, n, t);
      switch (a.T - t) {
      case 3:
        k4x16_block_tokens<Q5, 3>(a, w, b, n, t);
        break;
      case 2:
        k4x16_block_tokens<Q5, 2>(a, w, b, n, t);
        break;
      case 1:
        k4x16_block_tokens<Q5, 1>(a, w, b, n, t);
        break;
      default:
        break;
      }
    }
  }
}

void gemv_q4_k_x16(const gemv_args& a) {
  if (a.T >= 8)
    k4x16_blocks<false>(a);
  else
    over_packed_groups<16, q4_or_q5_k_rows<false>>(a);
}
void gemv_q5_k_x16(const gemv_args& a) {
  if (a.T >= 8)
    k4x16_blocks<true>(a);
  else
    over_packed_groups<16, q4_or_q5_k_rows<true>>(a);
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

void quantize_q8(const float* x, int64_t K, int8_t* q, float* d) {
  for (int64_t b = 0; b < K / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * 32), v1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float scale = amax / 127.0f;
    const __m512 inv = _mm512_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
    const __m512i i0 =
        _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, inv), _MM_FROUND_TO_NEAREST_INT));
    const __m512i i1 =
        _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, inv), _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16), _mm512_cvtsepi32_epi8(i1));
    d[b] = scale;
  }
}

void f16_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(
        dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

const gemv_table table = {.isa = "avx512",
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
                          .q8_0_packed = gemv_q8_0_x16,
                          .q4_0_packed = gemv_q4_0_x16,
                          .q4_k_packed = gemv_q4_k_x16,
                          .q5_k_packed = gemv_q5_k_x16,
                          .q6_k_packed = gemv_q6_k_x16,
                          .iq4_nl_packed = gemv_iq4_nl_x16,
                          .iq4_xs_packed = gemv_iq4_xs_x16,
                          .pack_rows = 16,
                          .unpack_q6_k = unpack_q6_k_x16,
                          .quantize_q8 = quantize_q8,
                          .f16_to_f32 = f16_row,
                          .gemm_q8_0 = gemm_q8_0_avx512,
                          .gemm_q4_0 = gemm_q4_0_avx512,
                          .gemm_q4_k = gemm_q4_k_avx512,
                          .gemm_q5_k = gemm_q5_k_avx512,
                          .gemm_q6_k = gemm_q6_k_avx512,
                          .gemm_mxfp4 = gemm_mxfp4_avx512,
                          .gemm_iq4_nl = gemm_iq4_nl_avx512,
                          .gemm_iq4_xs = gemm_iq4_xs_avx512,
                          .gemm_lanes = 16,
                          .q8_offset = 128,
                          .iq4_offset = 128};

} // namespace

void gemv_bf16_unsplit_avx512(const gemv_args& a) {
  gemv_float<2, false>(a);
}

const gemv_table* gemv_avx512_table() {
  return &table;
}

} // namespace troupe::kernels::cpu
