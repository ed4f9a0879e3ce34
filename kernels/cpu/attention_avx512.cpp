// attention_avx512.cpp: the prefill attention tile for AVX-512 (KV cache in f32, f16 or bf16,
// any head dim), built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c and called
// only where the CPU's kernel table is the AVX-512 one (attention.cpp): attention_rows.hpp's
// tile with 16 query rows in the lanes of a zmm, masks in __mmask16. It runs at 4.4x the AVX2
// tile of 8 rows that computed each score as a dot product and a horizontal sum (bench/README,
// "Prefill attention with the rows in the lanes"). No standard-library templates here (see
// gemv.hpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention_rows.hpp"

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

// The vector type attention_rows.hpp's tile runs on: 16 rows in the lanes of a zmm, masks in
// __mmask16, 16 keys a block, 8 values of d in registers in the V pass.
struct z16 {
  using vf = __m512;
  using vi = __m512i;
  using mask = __mmask16;
  static constexpr int lanes = 16, dchunk = 8;
  static vf zero() { return _mm512_setzero_ps(); }
  static vf load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vf v) { _mm512_storeu_ps(p, v); }
  static vf set1(float v) { return _mm512_set1_ps(v); }
  static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static vf add(vf a, vf b) { return _mm512_add_ps(a, b); }
  static vf sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
  static vf div(vf a, vf b) { return _mm512_div_ps(a, b); }
  static vf max(vf a, vf b) { return _mm512_max_ps(a, b); }
  static vf exp(vf x) { return exp16(x); }
  static vf tanh(vf x) { return tanh16(x); }
  static vi positions(int64_t p0) {
    return _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int>(p0)));
  }
  static vf distance(int a, vi pos) { // a - pos
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_set1_epi32(a), pos));
  }
  static mask first_lanes(int64_t R) {
    return R >= 16 ? mask(0xffff) : static_cast<mask>((1u << R) - 1);
  }
  static mask all() { return 0xffff; }
  static mask none() { return 0; }
  static mask at_or_before(mask m, int a, vi pos) { // lanes of m with a <= pos
    return _mm512_mask_cmple_epi32_mask(m, _mm512_set1_epi32(a), pos);
  }
  static mask after(mask m, int a, vi before) { // lanes of m with a > before
    return _mm512_mask_cmpgt_epi32_mask(m, _mm512_set1_epi32(a), before);
  }
  static vf select(mask m, vf a, vf b) { return _mm512_mask_mov_ps(b, m, a); }
  static vf maskz(mask m, vf a) { return _mm512_maskz_mov_ps(m, a); }
  template <kv_elem E>
  static void to_f32(const uint8_t* src, float* dst,
                     int64_t D) { // D values of a cache row (f32: copied)
    int64_t d = 0;
    for (; d + 16 <= D; d += 16) {
      if constexpr (E == kv_elem::f32) {
        _mm512_storeu_ps(dst + d, _mm512_loadu_ps(src + 4 * d));
        continue;
      }
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * d));
      if constexpr (E == kv_elem::f16)
        _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(h));
      else
        _mm512_storeu_ps(dst + d,
                         _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
    arows::to_f32_tail<E>(src, dst, d, D);
  }
};

} // namespace

void attend_rows_avx512(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                        int64_t window, float scale, const kv_layout& kv, float* out, float* work) {
  switch (kv.elem) {
  case kv_elem::f32:
    return arows::tile_any<z16, kv_elem::f32>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  case kv_elem::f16:
    return arows::tile_any<z16, kv_elem::f16>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  case kv_elem::bf16:
    return arows::tile_any<z16, kv_elem::bf16>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  }
}

} // namespace troupe::kernels::cpu
