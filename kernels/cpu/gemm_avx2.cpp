// gemm_avx2.cpp: the f32 prefill GEMM for AVX2 + FMA (matmul.cpp's nt path where the kernels
// are AVX2), built with -mavx2 -mfma. gemm_avx512.cpp's tokens in the lanes, in ymm: x laid
// out once per call in k-major tiles of 8 tokens, a tile of 16 tokens x 6 output features
// keeps 12 accumulators next to the two token vectors and one broadcast weight (15 of the 16
// ymm), no horizontal sums. The caller hands f32 rows: f32 weights in place, other dtypes
// expanded six rows at a time (f32_rows), once per call. The 4 x 3 dot-product tile before it
// prefilled 11-25% slower (bench/README, "tokens in the lanes"). The results leave through
// column stores, not a stack copy: with a float array there GCC kept the accumulators in
// memory too, storing all twelve on every k (half the speed).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace troupe::kernels::cpu {
namespace {

// gemm_avx512.cpp's tokens-in-the-lanes tile in ymm: TT tiles of 8 tokens (K * 8 floats
// apart) times NR weight rows, the first `valid` tokens and nn <= NR features stored; while it
// runs it prefetches `lines` cache lines from `pf` into L2, `per` every 4 k.
template <int TT, int NR>
inline void tn_tile(const float* xt, int64_t K, const float* B, int64_t ldb, int64_t valid,
                    int64_t nn, float* C, int64_t ldc, const char* pf, int64_t lines, int64_t per) {
  __m256 acc[TT][NR];
  for (int i = 0; i < TT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    if ((k & 3) == 0 && lines > 0) {
      for (int64_t p = 0; p < per && p < lines; ++p) _mm_prefetch(pf + p * 64, _MM_HINT_T1);
      pf += per * 64;
      lines -= per;
    }
    __m256 x[TT];
    for (int i = 0; i < TT; ++i) x[i] = _mm256_load_ps(xt + (i * K + k) * 8);
    for (int j = 0; j < NR; ++j) {
      const __m256 w = _mm256_set1_ps(B[j * ldb + k]);
      for (int i = 0; i < TT; ++i) acc[i][j] = _mm256_fmadd_ps(x[i], w, acc[i][j]);
    }
  }
  const int64_t lanes0 = std::min<int64_t>(8, valid);
  for (int i = 0; i < TT; ++i) {
    const int64_t lanes = i == 0 ? lanes0 : std::min<int64_t>(8, valid - i * 8);
    for (int j = 0; j < NR; ++j) {
      if (j >= nn) break;
      if (lanes == 8) {
        // one column of C: lane l to row l (no stack copy of the accumulators)
        const __m256 v = acc[i][j];
        const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
        float* c = C + i * 8 * ldc + j;
        _mm_store_ss(c, lo);
        _mm_store_ss(c + ldc, _mm_shuffle_ps(lo, lo, 1));
        _mm_store_ss(c + 2 * ldc, _mm_shuffle_ps(lo, lo, 2));
        _mm_store_ss(c + 3 * ldc, _mm_shuffle_ps(lo, lo, 3));
        _mm_store_ss(c + 4 * ldc, hi);
        _mm_store_ss(c + 5 * ldc, _mm_shuffle_ps(hi, hi, 1));
        _mm_store_ss(c + 6 * ldc, _mm_shuffle_ps(hi, hi, 2));
        _mm_store_ss(c + 7 * ldc, _mm_shuffle_ps(hi, hi, 3));
        continue;
      }
      alignas(32) float out[8];
      _mm256_store_ps(out, acc[i][j]);
      for (int64_t l = 0; l < lanes; ++l) C[(i * 8 + l) * ldc + j] = out[l];
    }
  }
}

} // namespace

/// C[T, n] = x . B[n, K]^T for n <= 6 rows of B (f32, k-contiguous, ldb apart; rows up to 6
/// readable, as gemm_tn_avx512's 12), x in k-major tiles of 8 tokens (matmul.cpp's
/// pack_tokens); prefetches `next_bytes` from `next` into L2 during the first tiles.
void gemm_tn_avx2(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb, int64_t n,
                  float* C, int64_t ldc, const void* next, int64_t next_bytes) {
  const int64_t lines = (next_bytes + 63) / 64, steps = (K + 3) / 4;
  const int64_t per = (lines + steps - 1) / steps;
  const char* pf = static_cast<const char*>(next);
  int64_t t = 0;
  for (; t + 8 < T; t += 16)
    tn_tile<2, 6>(xt + t * K, K, B, ldb, T - t, n, C + t * ldc, ldc, pf, t == 0 ? lines : 0, per);
  if (t < T)
    tn_tile<1, 6>(xt + t * K, K, B, ldb, T - t, n, C + t * ldc, ldc, pf, t == 0 ? lines : 0, per);
}

} // namespace troupe::kernels::cpu
