// gemm_avx2.cpp: the f32 prefill GEMM for AVX2 + FMA (matmul.cpp's nt path where the kernels
// are AVX2), built with -mavx2 -mfma. The dot-product form of gemm_avx512.cpp in ymm: weights
// stored [N, K] (k-contiguous, like the activations), a tile of 4 tokens x 3 output features
// keeps 12 accumulators along k next to the 3 weight vectors and one token vector (all 16
// ymm; 3 x 3 left 3 idle and prefilled 8-15% slower), one horizontal sum per output at the
// end. The caller hands f32 rows: f32 weights
// in place, other dtypes expanded a few rows at a time into L1 (f32_rows), once per call.
#include <immintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// C[MR x NR] = A[MR rows, K] . B[NR rows, K]^T
template <int MR, int NR>
inline void nt_tile(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, float* C,
                    int64_t ldc) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t K8 = K / 8 * 8;
  for (int64_t k = 0; k < K8; k += 8) {
    __m256 b[NR];
    for (int j = 0; j < NR; ++j) b[j] = _mm256_loadu_ps(B + j * ldb + k);
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_loadu_ps(A + i * lda + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(a, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[i][j]);
      for (int64_t k = K8; k < K; ++k) s += A[i * lda + k] * B[j * ldb + k];
      C[i * ldc + j] = s;
    }
}

template <int NR>
inline void nt_rows(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, int64_t M,
                    float* C, int64_t ldc) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) nt_tile<4, NR>(A + m * lda, lda, B, ldb, K, C + m * ldc, ldc);
  switch (M - m) {
  case 3:
    nt_tile<3, NR>(A + m * lda, lda, B, ldb, K, C + m * ldc, ldc);
    break;
  case 2:
    nt_tile<2, NR>(A + m * lda, lda, B, ldb, K, C + m * ldc, ldc);
    break;
  case 1:
    nt_tile<1, NR>(A + m * lda, lda, B, ldb, K, C + m * ldc, ldc);
    break;
  default:
    break;
  }
}

} // namespace

/// C[M, n] = A[M, K] . B[n, K]^T for n <= 3 rows of B (f32, k-contiguous).
void gemm_nt_avx2(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, int64_t M,
                  int64_t n, float* C, int64_t ldc) {
  switch (n) {
  case 3:
    nt_rows<3>(A, lda, B, ldb, K, M, C, ldc);
    break;
  case 2:
    nt_rows<2>(A, lda, B, ldb, K, M, C, ldc);
    break;
  case 1:
    nt_rows<1>(A, lda, B, ldb, K, M, C, ldc);
    break;
  default:
    break;
  }
}

} // namespace troupe::kernels::cpu
