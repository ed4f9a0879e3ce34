// gemv_avx2.cpp: decode matmul kernels for AVX2 + FMA + F16C (gemv.hpp). Built with
// -mavx2 -mfma -mf16c; only called when the CPU has them. int8 dot products through
// maddubs (|w| . sign(x, w)) and madd with ones.
// The kernels over the layouts made at load are packed_avx2.cpp's; the table at the end names both.
#include <immintrin.h>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_f8.hpp"
#include "kernels/cpu/gemv_kquant.hpp"
#include "kernels/cpu/gemv_lookup4.hpp"
#include "kernels/cpu/gemv_t2.hpp"

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
                          .t2_32 = gemv_t2_32,
                          .q4_0_packed = packed_avx2::gemv_q4_0_x8,
                          .q4_k_packed = packed_avx2::gemv_q4_k_x8,
                          .q5_k_packed = packed_avx2::gemv_q5_k_x8,
                          .q6_k_packed = packed_avx2::gemv_q6_k_x8,
                          .iq4_nl_packed = packed_avx2::gemv_iq4_nl_x8,
                          .iq4_xs_packed = packed_avx2::gemv_iq4_xs_x8,
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
