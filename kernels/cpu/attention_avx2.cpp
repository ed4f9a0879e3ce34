// attention_avx2.cpp: the decode-attention inner loops for AVX2 + FMA (f32 KV cache, head
// dim a multiple of 8), built with -mavx2 -mfma and called only when the CPU has them
// (attention.cpp). Scores of eight keys come out of one 8x8 transpose-reduce, the softmax
// uses a vectorised exp (Cephes-style polynomial, within 2 ulp of expf), and V rows are
// accumulated with broadcast FMAs. No standard-library templates here (see gemv.hpp).
#include <immintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {

struct kv_row_source {
  // row(s) -> pointer to key (or value) s of one KV head
  const float* (*key)(const void* ctx, int64_t s);
  const float* (*val)(const void* ctx, int64_t s);
  const void* ctx;
};

namespace {

inline __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
                      __m256 a7) {
  const __m256 s01 = _mm256_hadd_ps(a0, a1), s23 = _mm256_hadd_ps(a2, a3);
  const __m256 s45 = _mm256_hadd_ps(a4, a5), s67 = _mm256_hadd_ps(a6, a7);
  const __m256 s0123 = _mm256_hadd_ps(s01, s23), s4567 = _mm256_hadd_ps(s45, s67);
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20),
                       _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// exp(x) for x <= 0 (softmax after max subtraction): 2^n * P(r), |r| <= ln2/2
inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i n =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(n));
}

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float hsum8(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

} // namespace

/// G query heads (q: [G, D]) over keys 0..S-1 of one KV head; out: [G, D]; scores: G*S + 8.
void attend_group_avx2(const float* q, int64_t G, int64_t D, int64_t S, float scale,
                       const kv_row_source& kv, float* out, float* scores) {
  const int64_t S8 = S / 8 * 8;
  for (int64_t g = 0; g < G; ++g) {
    const float* qg = q + g * D;
    float* sc = scores + g * S;
    for (int64_t s = 0; s < S8; s += 8) {
      __m256 acc[8];
      const float* k[8];
      for (int j = 0; j < 8; ++j) {
        acc[j] = _mm256_setzero_ps();
        k[j] = kv.key(kv.ctx, s + j);
      }
      for (int64_t d = 0; d < D; d += 8) {
        const __m256 qv = _mm256_loadu_ps(qg + d);
        for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[j] + d), acc[j]);
      }
      _mm256_storeu_ps(sc + s, _mm256_mul_ps(hsum8x8(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5],
                                                     acc[6], acc[7]),
                                             _mm256_set1_ps(scale)));
    }
    for (int64_t s = S8; s < S; ++s) {
      const float* kr = kv.key(kv.ctx, s);
      __m256 acc = _mm256_setzero_ps();
      for (int64_t d = 0; d < D; d += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(qg + d), _mm256_loadu_ps(kr + d), acc);
      sc[s] = hsum8(acc) * scale;
    }
    // softmax
    __m256 mx = _mm256_set1_ps(-3.0e38f);
    for (int64_t s = 0; s < S8; s += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(sc + s));
    float m = hmax8(mx);
    for (int64_t s = S8; s < S; ++s) m = sc[s] > m ? sc[s] : m;
    __m256 sum = _mm256_setzero_ps();
    const __m256 mv = _mm256_set1_ps(m);
    for (int64_t s = 0; s < S8; s += 8) {
      const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + s), mv));
      _mm256_storeu_ps(sc + s, e);
      sum = _mm256_add_ps(sum, e);
    }
    float total = hsum8(sum);
    for (int64_t s = S8; s < S; ++s) {
      __m256 e = exp8(_mm256_set1_ps(sc[s] - m));
      sc[s] = _mm256_cvtss_f32(e);
      total += sc[s];
    }
    const float inv = 1.0f / total;
    // weighted sum of V rows
    for (int64_t d = 0; d < D; d += 8) _mm256_storeu_ps(out + g * D + d, _mm256_setzero_ps());
    for (int64_t s = 0; s < S; ++s) {
      const float* vr = kv.val(kv.ctx, s);
      const __m256 p = _mm256_set1_ps(sc[s] * inv);
      for (int64_t d = 0; d < D; d += 8)
        _mm256_storeu_ps(out + g * D + d, _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + d),
                                                          _mm256_loadu_ps(out + g * D + d)));
    }
  }
}

} // namespace troupe::kernels::cpu
