// gemm_avx512.cpp: the prefill GEMM for AVX-512 (matmul.cpp), built with -mavx512f -mfma.
// Dot-product form for weights stored [N, K] (k-contiguous, like the activations): a tile of
// 4 tokens x 6 output features keeps 24 zmm accumulators along k, so each weight vector
// feeds 4 FMAs and each activation vector 6; one horizontal sum per output at the end. No
// packing pass: f32 weights are read in place.
#include <immintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {

// C[MR x NR] = A[MR rows, K] . B[NR rows, K]^T, both operands k-contiguous (no packing):
// MR x NR accumulators of 16 lanes along k, one horizontal sum per output at the end.
template <int MR, int NR>
inline void nt_tile(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, float* C,
                    int64_t ldc) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  const int64_t K16 = K / 16 * 16;
  for (int64_t k = 0; k < K16; k += 16) {
    __m512 b[NR];
    for (int j = 0; j < NR; ++j) b[j] = _mm512_loadu_ps(B + j * ldb + k);
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_loadu_ps(A + i * lda + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
    }
  }
  if (K16 < K) {
    const __mmask16 m = static_cast<__mmask16>((1u << (K - K16)) - 1u);
    __m512 b[NR];
    for (int j = 0; j < NR; ++j) b[j] = _mm512_maskz_loadu_ps(m, B + j * ldb + K16);
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_maskz_loadu_ps(m, A + i * lda + K16);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) C[i * ldc + j] = _mm512_reduce_add_ps(acc[i][j]);
}

template <int NR>
inline void nt_rows(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, int64_t M,
                    float* C, int64_t ldc) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) nt_tile<4, NR>(A + m * lda, lda, B, ldb, K, C + m * ldc, ldc);
  for (; m < M; ++m) nt_tile<1, NR>(A + m * lda, lda, B, ldb, K, C + m * ldc, ldc);
}

} // namespace

/// C[M, n] = A[M, K] . B[n, K]^T for n <= 6 rows of B (f32, k-contiguous).
void gemm_nt_avx512(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, int64_t M,
                    int64_t n, float* C, int64_t ldc) {
  switch (n) {
  case 6:
    nt_rows<6>(A, lda, B, ldb, K, M, C, ldc);
    break;
  case 5:
    nt_rows<5>(A, lda, B, ldb, K, M, C, ldc);
    break;
  case 4:
    nt_rows<4>(A, lda, B, ldb, K, M, C, ldc);
    break;
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
