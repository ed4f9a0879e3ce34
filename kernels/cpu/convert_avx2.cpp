// convert_avx2.cpp: row conversions on the hot path, with AVX2 + F16C (built with -mavx2
// -mfma -mf16c, called only when the CPU has them; see store_row in cpu.hpp): f32 -> f16 and
// bf16, rounded to nearest even as core/half.hpp does. They write the KV cache rows.
// (q8_0 rows use the decode kernels' quantize_q8.) No standard-library templates (gemv.hpp).
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

} // namespace troupe::kernels::cpu
