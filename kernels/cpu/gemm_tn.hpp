// gemm_tn.hpp: the float prefill GEMM with the tokens in the vector lanes, written once over a
// vector type V and included by each per-ISA file (gemm_avx512.cpp with V = 16 lanes of a zmm,
// gemm_avx2.cpp with V = 8 lanes of a ymm), which compiles it with its own -m flags; everything
// here has internal linkage, so the copies never merge. No standard-library templates (see
// gemv.hpp).
//
// x is laid out once per call in k-major tiles of V::lanes tokens (matmul.cpp's pack_tokens).
// A tile of TT token tiles x NR output features keeps TT x NR accumulators, each the tokens of
// one feature: per k, TT activation vectors and NR weight values broadcast from the rows as
// the caller hands them (f32 in place, other dtypes converted), one FMA each, no horizontal
// sum anywhere. While the first tiles run, the next group's weight rows are prefetched into
// L2 a few lines every 4 k (the caller would otherwise convert or read them from DRAM).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {
namespace gtn {

// The TT token tiles at xt (K * V::lanes floats apart) times the NR weight rows B (ldb apart)
// into C: lane l of tile i is token i * V::lanes + l, of which the first `valid` are stored,
// nn <= NR features each (rows past nn are read but not stored: the caller pads them);
// prefetches `lines` cache lines from pf, `per` every 4 k.
template <class V, int TT, int NR>
inline void tile(const float* xt, int64_t K, const float* B, int64_t ldb, int64_t valid, int64_t nn,
                 float* C, int64_t ldc, const char* pf, int64_t lines, int64_t per) {
  constexpr int L = V::lanes;
  typename V::vf acc[TT][NR];
  for (int i = 0; i < TT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  for (int64_t k = 0; k < K; ++k) {
    if ((k & 3) == 0 && lines > 0) {
      for (int64_t p = 0; p < per && p < lines; ++p) _mm_prefetch(pf + p * 64, _MM_HINT_T1);
      pf += per * 64;
      lines -= per;
    }
    typename V::vf x[TT];
    for (int i = 0; i < TT; ++i) x[i] = V::load(xt + (i * K + k) * L);
    for (int j = 0; j < NR; ++j) {
      const typename V::vf w = V::set1(B[j * ldb + k]);
      for (int i = 0; i < TT; ++i) acc[i][j] = V::fma(x[i], w, acc[i][j]);
    }
  }
  // each ISA its own way out (V::store): through one float array GCC kept AVX2's
  // accumulators in memory too, storing them on every k (half the speed)
  for (int i = 0; i < TT; ++i) {
    const int64_t left = valid - i * L;
    V::template store<NR>(acc[i], C + i * L * ldc, ldc, left < L ? left : L, nn);
  }
}

// C[T, n] = x . B[n, K]^T for n <= NR rows of B (the rows up to NR readable), in tiles of two
// token tiles, then one.
template <class V, int NR>
void gemm(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb, int64_t n, float* C,
          int64_t ldc, const void* next, int64_t next_bytes) {
  constexpr int L = V::lanes;
  const int64_t lines = (next_bytes + 63) / 64, steps = (K + 3) / 4;
  const int64_t per = (lines + steps - 1) / steps;
  const char* pf = static_cast<const char*>(next);
  int64_t t = 0;
  for (; t + L < T; t += 2 * L)
    tile<V, 2, NR>(xt + t * K, K, B, ldb, T - t, n, C + t * ldc, ldc, pf, t == 0 ? lines : 0, per);
  if (t < T)
    tile<V, 1, NR>(xt + t * K, K, B, ldb, T - t, n, C + t * ldc, ldc, pf, t == 0 ? lines : 0, per);
}

} // namespace gtn
} // namespace
} // namespace troupe::kernels::cpu
