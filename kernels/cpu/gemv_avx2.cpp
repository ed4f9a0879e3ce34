// gemv_avx2.cpp: decode matmul kernels for AVX2 + FMA + F16C (gemv.hpp). Built with
// -mavx2 -mfma -mf16c; only called when the CPU has them. int8 dot products through
// maddubs (|w| . sign(x, w)) and madd with ones.
#include <immintrin.h>

#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/gemv_f8.hpp"
#include "kernels/cpu/gemv_kquant.hpp"
#include "kernels/cpu/gemv_mxfp4.hpp"

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

// One row against TC (1 or 2) tokens from t0: the weights are loaded once for both tokens,
// and a single token does single-token work.
template <int W, int TC>
inline void float_row(const gemv_args& a, const uint8_t* row, int64_t t0, int64_t n, float b) {
  const int64_t K = a.K, K8 = K / 8 * 8;
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, d0 = c0, d1 = c0;
  const float* x0 = a.x + t0 * K;
  const float* x1 = x0 + K;
  int64_t k = 0;
  for (; k + 16 <= K8; k += 16) {
    const __m256 w0 = load_w<W>(row, k), w1 = load_w<W>(row, k + 8);
    c0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + k), w0, c0);
    c1 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + k + 8), w1, c1);
    if constexpr (TC == 2) {
      d0 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + k), w0, d0);
      d1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + k + 8), w1, d1);
    }
  }
  for (; k < K8; k += 8) {
    const __m256 w0 = load_w<W>(row, k);
    c0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + k), w0, c0);
    if constexpr (TC == 2) d0 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + k), w0, d0);
  }
  float s0 = hsum256(_mm256_add_ps(c0, c1)), s1 = hsum256(_mm256_add_ps(d0, d1));
  for (; k < K; ++k) {
    const float w = load_w1<W>(row, k);
    s0 += x0[k] * w;
    if constexpr (TC == 2) s1 += x1[k] * w;
  }
  a.y[t0 * a.ldy + n - a.ycol0] = s0 + b;
  if constexpr (TC == 2) a.y[(t0 + 1) * a.ldy + n - a.ycol0] = s1 + b;
}

template <int W>
void gemv_float(const gemv_args& a) {
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float b = a.bias ? a.bias[n] : 0.0f;
    int64_t t0 = 0;
    for (; t0 + 2 <= a.T; t0 += 2) float_row<W, 2>(a, row, t0, n, b);
    if (t0 < a.T) float_row<W, 1>(a, row, t0, n, b);
  }
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

template <bool Q4>
void gemv_quant(const gemv_args& a) {
  const int64_t nb = a.K / 32;
  const int64_t bb = Q4 ? 18 : 34;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    const float bias = a.bias ? a.bias[n] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      __m256 c0 = _mm256_setzero_ps(), c1 = c0;
      const int8_t* xq = a.xq + t * a.K;
      const float* xd = a.xd + t * nb;
      int64_t b = 0;
      for (; b + 2 <= nb; b += 2) {
        const uint8_t* blk0 = row + b * bb;
        const uint8_t* blk1 = blk0 + bb;
        _mm_prefetch(reinterpret_cast<const char*>(blk0) + 2048,
                     _MM_HINT_T0); // see gemv_avx512.cpp
        const __m256i w0 = Q4 ? q4_unpack(blk0 + 2)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + 2));
        const __m256i w1 = Q4 ? q4_unpack(blk1 + 2)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk1 + 2));
        const __m256i p0 =
            dot_block(w0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32)));
        const __m256i p1 =
            dot_block(w1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32 + 32)));
        c0 = _mm256_fmadd_ps(
            _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk0)) * xd[b]),
            _mm256_cvtepi32_ps(p0), c0);
        c1 = _mm256_fmadd_ps(
            _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk1)) * xd[b + 1]),
            _mm256_cvtepi32_ps(p1), c1);
      }
      for (; b < nb; ++b) {
        const uint8_t* blk = row + b * bb;
        const __m256i w =
            Q4 ? q4_unpack(blk + 2) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        const __m256i p =
            dot_block(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32)));
        c0 = _mm256_fmadd_ps(
            _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(blk)) * xd[b]),
            _mm256_cvtepi32_ps(p), c0);
      }
      a.y[t * a.ldy + n - a.ycol0] = hsum256(_mm256_add_ps(c0, c1)) + bias;
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
                          .f8_b128 = gemv_f8_b128,
                          .quantize_q8 = quantize_q8,
                          .f16_to_f32 = f16_row,
                          .gemm_q8_0 = gemm_q8_0_avx2,
                          .gemm_q4_0 = gemm_q4_0_avx2,
                          .gemm_q4_k = gemm_q4_k_avx2,
                          .gemm_q5_k = gemm_q5_k_avx2,
                          .gemm_q6_k = gemm_q6_k_avx2,
                          .gemm_mxfp4 = gemm_mxfp4_avx2,
                          .gemm_lanes = 8,
                          .q8_offset = 0};

} // namespace

const gemv_table* gemv_avx2_table() {
  return &table;
}

} // namespace troupe::kernels::cpu
