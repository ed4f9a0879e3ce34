// gemm_avx512.cpp: the prefill GEMM for AVX-512 (matmul.cpp), built with -mavx512f -mfma.
// Tokens in the lanes (`gemm_tn_avx512`): the activations are laid out once per call in tiles
// of 16 tokens, k-major (matmul.cpp's `pack_tokens`), and a tile of 32 tokens x 12 output features
// keeps 24 zmm accumulators, each the 16 tokens of one feature: per k two activation vectors
// and twelve weight values broadcast from the rows as published (f32 in place; f16 / bf16
// rows converted by the caller), no horizontal sum anywhere. The dot-product form before it
// (4 tokens x 6 features along k, one 16-lane sum per output) spent
// a third of a 64-token GEMM at K 768 in those sums (bench/README, "tokens in the lanes").
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace troupe::kernels::cpu {
namespace {

// The 16-token tiles `xt` (TT of them, K * 16 floats apart) times the NR weight rows B (ldb
// apart) into C: lane l of tile i is token i * 16 + l, of which the first `valid` are stored,
// nn <= NR features of each (rows past nn are read but not stored: the caller pads them).
// While it runs it prefetches `lines` cache lines from `pf` into L2, `per` every 4 k.
template <int TT, int NR>
inline void tn_tile(const float* xt, int64_t K, const float* B, int64_t ldb, int64_t valid,
                    int64_t nn, float* C, int64_t ldc, const char* pf, int64_t lines, int64_t per) {
  __m512 acc[TT][NR];
  for (int i = 0; i < TT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    if ((k & 3) == 0 && lines > 0) {
      for (int64_t p = 0; p < per && p < lines; ++p) _mm_prefetch(pf + p * 64, _MM_HINT_T1);
      pf += per * 64;
      lines -= per;
    }
    __m512 x[TT];
    for (int i = 0; i < TT; ++i) x[i] = _mm512_load_ps(xt + (i * K + k) * 16);
    for (int j = 0; j < NR; ++j) {
      const __m512 w = _mm512_set1_ps(B[j * ldb + k]);
      for (int i = 0; i < TT; ++i) acc[i][j] = _mm512_fmadd_ps(x[i], w, acc[i][j]);
    }
  }
  alignas(64) float out[NR][16];
  for (int i = 0; i < TT; ++i) {
    for (int j = 0; j < NR; ++j) _mm512_store_ps(out[j], acc[i][j]);
    const int64_t lanes = std::min<int64_t>(16, valid - i * 16);
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t j = 0; j < nn; ++j) C[(i * 16 + l) * ldc + j] = out[j][l];
  }
}

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
/// (matmul.cpp's pack_tokens).
/// The first tiles prefetch `next_bytes` from `next` into L2 (the next group's weights, which
/// the caller would otherwise convert or read straight from memory: 11% of a 64-token f16
/// prefill went to that conversion waiting on DRAM).
void gemm_tn_avx512(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb, int64_t n,
                    float* C, int64_t ldc, const void* next, int64_t next_bytes) {
  const int64_t lines = (next_bytes + 63) / 64, steps = (K + 3) / 4;
  const int64_t per = (lines + steps - 1) / steps;
  const char* pf = static_cast<const char*>(next);
  int64_t t = 0;
  for (; t + 16 < T; t += 32) {
    tn_tile<2, 12>(xt + t * K, K, B, ldb, T - t, n, C + t * ldc, ldc, pf, t == 0 ? lines : 0, per);
  }
  if (t < T)
    tn_tile<1, 12>(xt + t * K, K, B, ldb, T - t, n, C + t * ldc, ldc, pf, t == 0 ? lines : 0, per);
}

} // namespace troupe::kernels::cpu
