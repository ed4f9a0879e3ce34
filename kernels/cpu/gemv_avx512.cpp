// gemv_avx512.cpp: decode matmul kernels for AVX-512 F/BW/VL + VNNI (gemv.hpp). Built with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c; only called when the CPU has
// them. Accumulation in f32 (float weights) or int32 per 32-value block scaled into f32.
// The kernels over the layouts made at load are packed_avx512.cpp's; the table at the end names
// both.
#include <immintrin.h>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_f8.hpp"
#include "kernels/cpu/gemv_kquant.hpp"
#include "kernels/cpu/gemv_lookup4.hpp"
#include "kernels/cpu/gemv_t2.hpp"

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
                          .t2_32 = gemv_t2_32,
                          .q8_0_packed = packed_avx512::gemv_q8_0_x16,
                          .q4_0_packed = packed_avx512::gemv_q4_0_x16,
                          .q4_k_packed = packed_avx512::gemv_q4_k_x16,
                          .q5_k_packed = packed_avx512::gemv_q5_k_x16,
                          .q6_k_packed = packed_avx512::gemv_q6_k_x16,
                          .iq4_nl_packed = packed_avx512::gemv_iq4_nl_x16,
                          .iq4_xs_packed = packed_avx512::gemv_iq4_xs_x16,
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
