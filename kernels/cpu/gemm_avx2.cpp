// gemm_avx2.cpp: the f32 prefill GEMM for AVX2 + FMA (matmul.cpp's nt path where the kernels
// are AVX2), built with -mavx2 -mfma: gemm_tn.hpp's tokens in the lanes in ymm, a tile of 16
// tokens x 6 output features (12 accumulators next to the two token vectors and one broadcast
// weight: 15 of the 16 ymm). The caller hands f32 rows: f32 weights in place, other dtypes
// expanded six rows at a time (f32_rows), once per call. The 4 x 3 dot-product tile before it
// prefilled 11-25% slower (bench/README, "tokens in the lanes"). No standard-library templates
// here (see gemv.hpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemm_tn.hpp"

namespace troupe::kernels::cpu {
namespace {

// gemm_tn.hpp's vector type: 8 tokens in the lanes of a ymm
struct y8 {
  using vf = __m256;
  static constexpr int lanes = 8;
  static vf zero() { return _mm256_setzero_ps(); }
  static vf load(const float* p) { return _mm256_load_ps(p); }
  static vf set1(float v) { return _mm256_set1_ps(v); }
  static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  // the first `lanes` tokens of features 0 .. nn - 1 into C (ldc apart): a column each,
  // lane l stored to row l straight from the register
  template <int NR>
  static void store(const vf* acc, float* C, int64_t ldc, int64_t lanes, int64_t nn) {
    for (int j = 0; j < NR && j < nn; ++j) {
      float* c = C + j;
      if (lanes == 8) {
        const __m128 lo = _mm256_castps256_ps128(acc[j]), hi = _mm256_extractf128_ps(acc[j], 1);
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
      _mm256_store_ps(out, acc[j]);
      for (int64_t l = 0; l < lanes; ++l) c[l * ldc] = out[l];
    }
  }
};

} // namespace

/// C[T, n] = x . B[n, K]^T for n <= 6 rows of B (f32, k-contiguous, ldb apart; rows up to 6
/// readable), x in k-major tiles of 8 tokens (matmul.cpp's pack_tokens); prefetches
/// `next_bytes` from `next` into L2 during the first tiles.
void gemm_tn_avx2(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb, int64_t n,
                  float* C, int64_t ldc, const void* next, int64_t next_bytes) {
  gtn::gemm<y8, 6>(xt, T, K, B, ldb, n, C, ldc, next, next_bytes);
}

} // namespace troupe::kernels::cpu
