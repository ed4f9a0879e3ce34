// gemm_avx512.cpp: the prefill GEMM for AVX-512 (matmul.cpp), built with -mavx512f -mfma:
// gemm_tn.hpp's tokens in the lanes in zmm, a tile of 32 tokens x 12 output features (24
// accumulators, each the 16 tokens of one feature), and the layout of x in 16 x 16 blocks. The
// dot-product form before it (4 tokens x 6 features along k, one 16-lane sum per output) spent
// a third of a 64-token GEMM at K 768 in those sums (bench/README, "tokens in the lanes"). No
// standard-library templates here (see gemv.hpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemm_tn.hpp"

namespace troupe::kernels::cpu {
namespace {

// gemm_tn.hpp's vector type: 16 tokens in the lanes of a zmm
struct z16 {
  using vf = __m512;
  static constexpr int lanes = 16;
  static vf zero() { return _mm512_setzero_ps(); }
  static vf load(const float* p) { return _mm512_load_ps(p); }
  static vf set1(float v) { return _mm512_set1_ps(v); }
  static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  // the first `lanes` tokens of features 0 .. nn - 1 into C (ldc apart), row by row through
  // one array (column stores were 35% slower here)
  template <int NR>
  static void store(const vf* acc, float* C, int64_t ldc, int64_t lanes, int64_t nn) {
    alignas(64) float out[NR][16];
    for (int j = 0; j < NR; ++j) _mm512_store_ps(out[j], acc[j]);
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t j = 0; j < nn; ++j) C[l * ldc + j] = out[j][l];
  }
};

} // namespace

/// matmul.cpp's pack_tokens for full tiles of 16 tokens: 16 x 16 blocks transposed in
/// registers (unpacks of 32 and 64 bits, then two rounds of 128-bit lane shuffles), k from 0
/// in steps of 16 while they fit; returns where it stopped (the caller finishes the rows).
int64_t pack_tile16_avx512(const float* x, int64_t K, float* tile) {
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 r[16], t[16];
    for (int l = 0; l < 16; ++l) r[l] = _mm512_loadu_ps(x + l * K + k);
    for (int i = 0; i < 16; i += 2) { // 32-bit interleave of row pairs
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { // 64-bit interleave: 4 rows' values together
      for (int j = 0; j < 2; ++j) {
        const __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
        r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      }
    }
    // r[4m + c], 128-bit lane q: rows 4m..4m+3 at k = 4q + c; gather the lanes q of the
    // four groups m into one vector per (q, c)
    for (int c = 0; c < 4; ++c) {
      const __m512 a01lo = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44); // m0 q0,q1 | m1 q0,q1
      const __m512 a01hi = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xee); // m0 q2,q3 | m1 q2,q3
      const __m512 a23lo = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
      const __m512 a23hi = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xee);
      t[0 * 4 + c] = _mm512_shuffle_f32x4(a01lo, a23lo, 0x88); // q0: m0 m1 m2 m3
      t[1 * 4 + c] = _mm512_shuffle_f32x4(a01lo, a23lo, 0xdd); // q1
      t[2 * 4 + c] = _mm512_shuffle_f32x4(a01hi, a23hi, 0x88); // q2
      t[3 * 4 + c] = _mm512_shuffle_f32x4(a01hi, a23hi, 0xdd); // q3
    }
    for (int i = 0; i < 16; ++i) _mm512_store_ps(tile + (k + i) * 16, t[i]);
  }
  return k;
}

/// C[T, n] = x . B[n, K]^T for n <= 12 rows of B (f32, k-contiguous, ldb apart; with n < 12
/// the rows up to 12 must be readable: matmul.cpp pads them), x in k-major tiles of 16 tokens
/// (matmul.cpp's pack_tokens); prefetches `next_bytes` from `next` into L2 during the first
/// tiles (11% of a 64-token f16 prefill went to converting rows that waited on DRAM).
void gemm_tn_avx512(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb, int64_t n,
                    float* C, int64_t ldc, const void* next, int64_t next_bytes) {
  gtn::gemm<z16, 12>(xt, T, K, B, ldb, n, C, ldc, next, next_bytes);
}

} // namespace troupe::kernels::cpu
