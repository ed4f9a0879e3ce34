// attention_avx512.cpp: the prefill attention tile for AVX-512 (KV cache in f32, f16 or bf16,
// any head dim), built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c and called
// only where the CPU's kernel table is the AVX-512 one (attention.cpp). The tile's query rows
// of one head sit in the 16 lanes of a zmm ("rows in lanes"): a block of 16 keys gives 16 score
// vectors, each the sum over d of the rows' q[d] (transposed once per tile, the scale folded
// in) times key j's value d broadcast from its cache row, one FMA with a broadcast operand
// each; so the online softmax needs no horizontal operation: the running maximum, the exp, the
// sums and the rescaling are all lane-wise, and a key a row must not see (causal, a window, a
// row past a partial tile) is one mask bit. The weighted sum of V rows accumulates the output
// transposed ([D][16 rows], in L1), 8 values of d in registers at a time against the block's
// 16 probability vectors, V values broadcast as K's. Every query head of the GQA group shares
// the block's K and V rows (converted to f32 once per block for f16 / bf16 caches). The
// AVX2 tile (attention_avx2.cpp) computed each score as a dot product and a horizontal sum,
// and ran at half the FMA rate of this one. No standard-library templates here (see gemv.hpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention_kv.hpp"

namespace troupe::kernels::cpu {

namespace {

// exp(x) for x <= 0 (softmax after max subtraction): 2^n * P(r), |r| <= ln2/2, within 2 ulp of
// expf (the polynomial of attention_avx2.cpp's exp8)
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i n =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(n));
}

// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|)
inline __m512 tanh16(__m512 x) {
  const __m512 a = _mm512_abs_ps(x);
  const __m512 e = exp16(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  return _mm512_or_ps(t, _mm512_and_ps(x, _mm512_set1_ps(-0.0f)));
}

template <kv_elem E>
constexpr int64_t elem_bytes = E == kv_elem::f32 ? 4 : 2;

// D values of a cache row as f32
template <kv_elem E>
void row_to_f32(const uint8_t* src, float* dst, int64_t D) {
  int64_t d = 0;
  for (; d + 16 <= D; d += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * d));
    if constexpr (E == kv_elem::f16)
      _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(h));
    else
      _mm512_storeu_ps(dst + d,
                       _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
  for (; d < D; ++d) {
    uint16_t h;
    __builtin_memcpy(&h, src + 2 * d, 2);
    if constexpr (E == kv_elem::f16) {
      dst[d] = _cvtsh_ss(h);
    } else {
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      __builtin_memcpy(dst + d, &u, 4);
    }
  }
}

constexpr int key_block = 16;

template <kv_elem E>
void tile16(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0, int64_t window,
            float scale, const kv_layout& kv, float* out, float* work) {
  constexpr int64_t eb = elem_bytes<E>;
  const int64_t S = p0 + R - kv.first; // keys from position kv.first
  float* qt = work;                    // [G][D][16]: the rows' q, transposed and scaled
  float* acc = qt + G * D * 16;        // [G][D][16]: the output, transposed
  float* mx = acc + G * D * 16;        // [G][16] running maximum
  float* sum = mx + G * 16;            // [G][16] running sum of exp
  float* kb = sum + G * 16;            // [16][D] f16 / bf16 caches: the block's K rows in f32
  float* vb = kb + key_block * D;      // [16][D] and its V rows
  for (int64_t g = 0; g < G; ++g)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t r = 0; r < 16; ++r)
        qt[(g * D + d) * 16 + r] = r < R ? q[r * qs + g * D + d] * scale : 0.0f;
  for (int64_t i = 0; i < G * D * 16; ++i) acc[i] = 0.0f;
  for (int64_t g = 0; g < G; ++g) { // a sink starts the softmax: its logit the maximum, exp(0)
    _mm512_storeu_ps(mx + g * 16, _mm512_set1_ps(kv.sinks ? kv.sinks[g] : -3.0e38f));
    _mm512_storeu_ps(sum + g * 16, _mm512_set1_ps(kv.sinks ? 1.0f : 0.0f));
  }
  const __m512i pos =
      _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       _mm512_set1_epi32(static_cast<int>(p0))); // each row's position
  const __m512i before = _mm512_sub_epi32(pos, _mm512_set1_epi32(static_cast<int>(window)));
  const __mmask16 active = R >= 16 ? 0xffff : static_cast<__mmask16>((1u << R) - 1);
  const __m512 low = _mm512_set1_ps(-3.0e38f);
  row_cursor kc(kv.k, kv, S), vc(kv.v, kv, S);
  for (int64_t s0 = 0; s0 < S; s0 += key_block) {
    const int64_t n = S - s0 < key_block ? S - s0 : key_block;
    const float* kr[key_block];
    const float* vr[key_block];
    for (int64_t j = 0; j < n; ++j) {
      prefetch_row(kc, key_block, D * eb);
      prefetch_row(vc, key_block, D * eb);
      const uint8_t* k = kc.next();
      const uint8_t* v = vc.next();
      if constexpr (E == kv_elem::f32) {
        kr[j] = reinterpret_cast<const float*>(k);
        vr[j] = reinterpret_cast<const float*>(v);
      } else {
        row_to_f32<E>(k, kb + j * D, D);
        row_to_f32<E>(v, vb + j * D, D);
        kr[j] = kb + j * D;
        vr[j] = vb + j * D;
      }
    }
    for (int64_t j = n; j < key_block; ++j) kr[j] = kr[0], vr[j] = vr[0]; // masked below
    const int64_t a0 = kv.first + s0; // position of the block's first key
    // every key visible to every row: the block's last key at or before the first row, and
    // (with a window) its first key inside the last row's window
    const bool full = n == key_block && R == 16 && a0 + key_block - 1 <= p0 &&
                      (window <= 0 || a0 > p0 + 15 - window);
    __mmask16 m[key_block];
    for (int j = 0; j < key_block; ++j) {
      if (full || j >= n) {
        m[j] = full ? 0xffff : 0;
        continue;
      }
      const __m512i a = _mm512_set1_epi32(static_cast<int>(a0 + j));
      __mmask16 mk = _mm512_mask_cmple_epi32_mask(active, a, pos);
      if (window > 0) mk = _mm512_mask_cmpgt_epi32_mask(mk, a, before);
      m[j] = mk;
    }
    for (int64_t g = 0; g < G; ++g) {
      const float* qg = qt + g * D * 16;
      __m512 s[key_block];
      for (int j = 0; j < key_block; ++j) s[j] = _mm512_setzero_ps();
      for (int64_t d = 0; d < D; ++d) {
        const __m512 qd = _mm512_loadu_ps(qg + d * 16);
        for (int j = 0; j < key_block; ++j)
          s[j] = _mm512_fmadd_ps(qd, _mm512_set1_ps(kr[j][d]), s[j]);
      }
      if (kv.softcap > 0) {
        const __m512 c = _mm512_set1_ps(kv.softcap), ic = _mm512_set1_ps(1.0f / kv.softcap);
        for (int j = 0; j < key_block; ++j)
          s[j] = _mm512_mul_ps(c, tanh16(_mm512_mul_ps(s[j], ic)));
      }
      if (kv.slopes) { // + slope * (key position - query position)
        const __m512 sl = _mm512_set1_ps(kv.slopes[g]);
        for (int j = 0; j < key_block; ++j)
          s[j] = _mm512_fmadd_ps(sl,
                                 _mm512_cvtepi32_ps(_mm512_sub_epi32(
                                     _mm512_set1_epi32(static_cast<int>(a0 + j)), pos)),
                                 s[j]);
      }
      __m512 mb = low;
      for (int j = 0; j < key_block; ++j) {
        if (!full) s[j] = _mm512_mask_mov_ps(low, m[j], s[j]);
        mb = _mm512_max_ps(mb, s[j]);
      }
      const __m512 mold = _mm512_loadu_ps(mx + g * 16);
      const __m512 mnew = _mm512_max_ps(mold, mb);
      const __m512 corr = exp16(_mm512_sub_ps(mold, mnew));
      __m512 ps = _mm512_setzero_ps();
      for (int j = 0; j < key_block; ++j) {
        s[j] = _mm512_maskz_mov_ps(m[j], exp16(_mm512_sub_ps(s[j], mnew))); // now p_j
        ps = _mm512_add_ps(ps, s[j]);
      }
      _mm512_storeu_ps(mx + g * 16, mnew);
      _mm512_storeu_ps(sum + g * 16, _mm512_fmadd_ps(_mm512_loadu_ps(sum + g * 16), corr, ps));
      // acc[d] = acc[d] * corr + sum_j p_j v_j[d], 8 values of d in registers per pass
      float* ag = acc + g * D * 16;
      int64_t d0 = 0;
      for (; d0 + 8 <= D; d0 += 8) {
        __m512 a[8];
        for (int i = 0; i < 8; ++i) a[i] = _mm512_mul_ps(_mm512_loadu_ps(ag + (d0 + i) * 16), corr);
        for (int j = 0; j < key_block; ++j)
          for (int i = 0; i < 8; ++i)
            a[i] = _mm512_fmadd_ps(s[j], _mm512_set1_ps(vr[j][d0 + i]), a[i]);
        for (int i = 0; i < 8; ++i) _mm512_storeu_ps(ag + (d0 + i) * 16, a[i]);
      }
      for (; d0 < D; ++d0) {
        __m512 a = _mm512_mul_ps(_mm512_loadu_ps(ag + d0 * 16), corr);
        for (int j = 0; j < key_block; ++j) a = _mm512_fmadd_ps(s[j], _mm512_set1_ps(vr[j][d0]), a);
        _mm512_storeu_ps(ag + d0 * 16, a);
      }
    }
  }
  alignas(64) float row[16];
  for (int64_t g = 0; g < G; ++g) {
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_loadu_ps(sum + g * 16));
    for (int64_t d = 0; d < D; ++d) {
      _mm512_store_ps(row, _mm512_mul_ps(_mm512_loadu_ps(acc + (g * D + d) * 16), inv));
      for (int64_t r = 0; r < R; ++r) out[r * qs + g * D + d] = row[r];
    }
  }
}

} // namespace

void attend_tile_avx512(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                        int64_t window, float scale, const kv_layout& kv, float* out, float* work) {
  switch (kv.elem) {
  case kv_elem::f32:
    return tile16<kv_elem::f32>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  case kv_elem::f16:
    return tile16<kv_elem::f16>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  case kv_elem::bf16:
    return tile16<kv_elem::bf16>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  }
}

} // namespace troupe::kernels::cpu
