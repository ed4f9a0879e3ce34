// convert_avx2.cpp: row conversions on the hot path, with AVX2 + F16C (built with -mavx2
// -mfma -mf16c, called only when the CPU has them; see store_row in cpu.hpp): f32 -> f16 and
// bf16 (round to nearest even, as runtime/half.hpp), and f32 -> q8_0 blocks (scale
// max|x| / 127 stored as f16, values rounded to nearest even; runtime/convert.hpp rounds
// halves away from zero, so an exact tie may land one step apart). They write the KV cache
// rows and the norms' quantized activations. No standard-library templates (see gemv.hpp).
#include <immintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {

void f32_to_f16_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

void f32_to_bf16_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u,
                         _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one))),
        16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    // pack the low halves of eight 32-bit lanes
    const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm_packus_epi32(lo, hi));
  }
  for (; i < n; ++i) {
    uint32_t u;
    __builtin_memcpy(&u, x + i, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      y[i] = static_cast<uint16_t>((u >> 16) | 0x40);
      continue;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    y[i] = static_cast<uint16_t>(u >> 16);
  }
}

void f32_to_q8_0_avx2(const float* x, uint8_t* blocks, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    __m256 v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * 32 + i * 8);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float d = _mm_cvtss_f32(h) / 127.0f;
    const __m256 inv = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23),
                                                  _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    uint8_t* blk = blocks + b * 34; // GGUF block_q8_0: f16 scale, 32 int8
    const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    __builtin_memcpy(blk, &dh, 2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 2), p);
  }
}

} // namespace troupe::kernels::cpu
