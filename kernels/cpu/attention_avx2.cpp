// attention_avx2.cpp: the attention inner loops for AVX2 + FMA + F16C (KV cache in f32,
// f16 or bf16, widened to f32 in registers; head dim a multiple of 8), built with -mavx2
// -mfma -mf16c and called only when the CPU has them (attention.cpp). Each key row is read
// once for every query head of its GQA group; scores of eight keys come out of one 8x8
// transpose-reduce; the softmax uses a vectorised exp (Cephes-style polynomial, within 2 ulp
// of expf); V rows are accumulated into registers 64 values at a time. Row addresses follow
// the block table with a cursor, no division per key. Decode rows of many sequences with all
// their KV heads run attend_tile: keys and values stream through in blocks of 16 with an
// online softmax (running max, sum and rescaled accumulators per query head), so a block's rows
// are read once and nothing of size S is kept. Prefill tiles run attention_rows.hpp's tile
// with 8 query rows in the lanes of a ymm (y8 below; 1.35x the attend_tile it replaced at a
// 2000-token prompt). No standard-library templates here (see gemv.hpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention_rows.hpp"

namespace troupe::kernels::cpu {

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

// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) <= 1 (exp8's range); absolute error
// a few ulp of 1, which is what a soft-capped score needs
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, x);
  const __m256 e = exp8(_mm256_mul_ps(a, _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  return _mm256_or_ps(t, _mm256_and_ps(x, sign));
}

// kv's score modifiers on eight scores of query head h at position qpos, keys s0 .. s0 + 7
inline __m256 modify8(__m256 v, const kv_layout& kv, int64_t s0, int64_t h, int64_t qpos) {
  if (kv.softcap > 0) {
    const __m256 c = _mm256_set1_ps(kv.softcap);
    v = _mm256_mul_ps(c, tanh8(_mm256_mul_ps(v, _mm256_set1_ps(1.0f / kv.softcap))));
  }
  if (kv.slopes) {
    const __m256 d = _mm256_add_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7),
                                   _mm256_set1_ps(static_cast<float>(kv.first + s0 - qpos)));
    v = _mm256_fmadd_ps(_mm256_set1_ps(kv.slopes[h]), d, v);
  }
  return v;
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

namespace {

constexpr int64_t prefetch_ahead = 16; // positions (12-40 measured the same at B = 64)

template <kv_elem E>
inline __m256 load8(const uint8_t* p) {
  if constexpr (E == kv_elem::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (E == kv_elem::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
}

template <kv_elem E>
constexpr int64_t elem_bytes = E == kv_elem::f32 ? 4 : 2;

template <kv_elem E>
void attend(const float* q, int64_t G, int64_t D, int64_t S, float scale, const kv_layout& kv,
            float* out, float* scores) {
  constexpr int64_t eb = elem_bytes<E>;
  const int64_t S8 = S / 8 * 8;
  const __m256 vscale = _mm256_set1_ps(scale);
  // scores: each key row once for all G query heads
  row_cursor kc(kv.k, kv, S);
  const int64_t row_bytes = D * eb;
  const int64_t ahead = prefetch_ahead;
  for (int64_t s = 0; s < S8; s += 8) {
    const uint8_t* k[8];
    for (int j = 0; j < 8; ++j) {
      prefetch_row(kc, ahead, row_bytes);
      k[j] = kc.next();
    }
    for (int64_t g = 0; g < G; ++g) {
      const float* qg = q + g * D;
      __m256 acc[8];
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
      for (int64_t d = 0; d < D; d += 8) {
        const __m256 qv = _mm256_loadu_ps(qg + d);
        for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(qv, load8<E>(k[j] + d * eb), acc[j]);
      }
      _mm256_storeu_ps(scores + g * S + s, _mm256_mul_ps(hsum8x8(acc[0], acc[1], acc[2], acc[3],
                                                                 acc[4], acc[5], acc[6], acc[7]),
                                                         vscale));
    }
  }
  for (int64_t s = S8; s < S; ++s) {
    const uint8_t* kr = kc.next();
    for (int64_t g = 0; g < G; ++g) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t d = 0; d < D; d += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * D + d), load8<E>(kr + d * eb), acc);
      scores[g * S + s] = hsum8(acc) * scale;
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    float* sc = scores + g * S;
    if (kv.softcap > 0 || kv.slopes) {
      const int64_t qpos = kv.first + S - 1;
      for (int64_t s = 0; s < S8; s += 8)
        _mm256_storeu_ps(sc + s, modify8(_mm256_loadu_ps(sc + s), kv, s, g, qpos));
      modify_scores(sc + S8, S8, S - S8, kv, g, qpos);
    }
    // softmax, normalised in place
    __m256 mx = _mm256_set1_ps(-3.0e38f);
    for (int64_t s = 0; s < S8; s += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(sc + s));
    float m = hmax8(mx);
    for (int64_t s = S8; s < S; ++s) m = sc[s] > m ? sc[s] : m;
    if (kv.sinks && kv.sinks[g] > m) m = kv.sinks[g];
    __m256 sum = _mm256_setzero_ps();
    const __m256 mv = _mm256_set1_ps(m);
    for (int64_t s = 0; s < S8; s += 8) {
      const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + s), mv));
      _mm256_storeu_ps(sc + s, e);
      sum = _mm256_add_ps(sum, e);
    }
    float total = hsum8(sum);
    if (kv.sinks) total += _mm256_cvtss_f32(exp8(_mm256_set1_ps(kv.sinks[g] - m)));
    for (int64_t s = S8; s < S; ++s) {
      sc[s] = _mm256_cvtss_f32(exp8(_mm256_set1_ps(sc[s] - m)));
      total += sc[s];
    }
    const __m256 inv = _mm256_set1_ps(1.0f / total);
    for (int64_t s = 0; s < S8; s += 8)
      _mm256_storeu_ps(sc + s, _mm256_mul_ps(_mm256_loadu_ps(sc + s), inv));
    for (int64_t s = S8; s < S; ++s) sc[s] *= 1.0f / total;
    // weighted sum of V rows, 64 output values held in registers per pass
    float* og = out + g * D;
    for (int64_t d0 = 0; d0 < D; d0 += 64) {
      row_cursor vc(kv.v + d0 * eb, kv, S);
      if (D - d0 >= 64) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t s = 0; s < S; ++s) {
          prefetch_row(vc, ahead, 64 * eb);
          const uint8_t* vr = vc.next();
          const __m256 p = _mm256_set1_ps(sc[s]);
          a0 = _mm256_fmadd_ps(p, load8<E>(vr + 0 * eb), a0);
          a1 = _mm256_fmadd_ps(p, load8<E>(vr + 8 * eb), a1);
          a2 = _mm256_fmadd_ps(p, load8<E>(vr + 16 * eb), a2);
          a3 = _mm256_fmadd_ps(p, load8<E>(vr + 24 * eb), a3);
          a4 = _mm256_fmadd_ps(p, load8<E>(vr + 32 * eb), a4);
          a5 = _mm256_fmadd_ps(p, load8<E>(vr + 40 * eb), a5);
          a6 = _mm256_fmadd_ps(p, load8<E>(vr + 48 * eb), a6);
          a7 = _mm256_fmadd_ps(p, load8<E>(vr + 56 * eb), a7);
        }
        _mm256_storeu_ps(og + d0 + 0, a0);
        _mm256_storeu_ps(og + d0 + 8, a1);
        _mm256_storeu_ps(og + d0 + 16, a2);
        _mm256_storeu_ps(og + d0 + 24, a3);
        _mm256_storeu_ps(og + d0 + 32, a4);
        _mm256_storeu_ps(og + d0 + 40, a5);
        _mm256_storeu_ps(og + d0 + 48, a6);
        _mm256_storeu_ps(og + d0 + 56, a7);
      } else {
        const int64_t n = D - d0; // 8..56
        for (int64_t d = 0; d < n; d += 8) _mm256_storeu_ps(og + d0 + d, _mm256_setzero_ps());
        for (int64_t s = 0; s < S; ++s) {
          const uint8_t* vr = vc.next();
          const __m256 p = _mm256_set1_ps(sc[s]);
          for (int64_t d = 0; d < n; d += 8)
            _mm256_storeu_ps(og + d0 + d, _mm256_fmadd_ps(p, load8<E>(vr + d * eb),
                                                          _mm256_loadu_ps(og + d0 + d)));
        }
      }
    }
  }
}

// Prefill: R query rows at positions p0 .. p0 + R - 1 (row r sees keys 0 .. p0 + r, or with a
// window W the last W of them), the G heads of one KV head each; keys are read from
// kv.first on. q / out: row r, head g at + r * qs + g * D. work: R * G * (D + 2) floats.
constexpr int64_t key_block = 16;

template <kv_elem E>
void attend_tile(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                 int64_t window, float scale, const kv_layout& kv, float* out, float* work,
                 int64_t nh) {
  constexpr int64_t eb = elem_bytes<E>;
  // S keys from position kv.first; hb: bytes from one head to the next
  const int64_t M = nh * R * G, S = p0 + R - kv.first, hb = D * eb;
  float* acc = work;        // [M, D]
  float* mx = work + M * D; // [M] running max
  float* sum = mx + M;      // [M] running sum of exp
  for (int64_t i = 0; i < M * D; ++i) acc[i] = 0.0f;
  for (int64_t i = 0; i < M; ++i) mx[i] = -3.0e38f, sum[i] = 0.0f;
  if (kv.sinks) // a sink starts the softmax: its logit is the first maximum, exp(0) the sum
    for (int64_t kh = 0; kh < nh; ++kh)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t g = 0; g < G; ++g) {
          const int64_t row = (kh * R + r) * G + g;
          mx[row] = kv.sinks[kh * G + g], sum[row] = 1.0f;
        }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 low = _mm256_set1_ps(-3.0e38f);
  row_cursor kc(kv.k, kv, S), vc(kv.v, kv, S);
  for (int64_t s0 = 0; s0 < S; s0 += key_block) {
    const int64_t n = S - s0 < key_block ? S - s0 : key_block;
    const uint8_t* k[key_block];
    const uint8_t* v[key_block];
    for (int64_t j = 0; j < n; ++j) {
      // the rows a block ahead, every head of them (they sit side by side in a slot)
      prefetch_row(kc, key_block, nh * hb);
      prefetch_row(vc, key_block, nh * hb);
      k[j] = kc.next(), v[j] = vc.next();
    }
    for (int64_t j = n; j < key_block; ++j) k[j] = k[0], v[j] = v[0]; // masked below
    const int64_t a0 = kv.first + s0; // position of the block's first key
    for (int64_t kh = 0; kh < nh; ++kh)
      for (int64_t r = 0; r < R; ++r) {
        const int64_t valid = p0 + r - a0 + 1 < n ? p0 + r - a0 + 1 : n; // causal
        // sliding window: keys before position p0 + r - W + 1 are masked
        const int64_t lo0 = window > 0 ? p0 + r - window + 1 - a0 : 0;
        const int64_t lo = lo0 > 0 ? lo0 : 0;
        if (valid <= lo) continue;
        const __m256i lim = _mm256_set1_epi32(static_cast<int>(valid));
        const __m256i below = _mm256_set1_epi32(static_cast<int>(lo - 1));
        const __m256i lane8 = _mm256_add_epi32(lane, _mm256_set1_epi32(8));
        const __m256 m0 = _mm256_castsi256_ps(
            _mm256_and_si256(_mm256_cmpgt_epi32(lim, lane), _mm256_cmpgt_epi32(lane, below)));
        const __m256 m1 = _mm256_castsi256_ps(
            _mm256_and_si256(_mm256_cmpgt_epi32(lim, lane8), _mm256_cmpgt_epi32(lane8, below)));
        for (int64_t g = 0; g < G; ++g) {
          const float* qg = q + r * qs + (kh * G + g) * D;
          const int64_t row = (kh * R + r) * G + g;
          __m256 sc[2];
          for (int h = 0; h < (valid > 8 ? 2 : 1); ++h) {
            __m256 c[8];
            for (int j = 0; j < 8; ++j) c[j] = _mm256_setzero_ps();
            for (int64_t d = 0; d < D; d += 8) {
              const __m256 qv = _mm256_loadu_ps(qg + d);
              for (int j = 0; j < 8; ++j)
                c[j] = _mm256_fmadd_ps(qv, load8<E>(k[h * 8 + j] + kh * hb + d * eb), c[j]);
            }
            sc[h] = _mm256_mul_ps(hsum8x8(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]),
                                  _mm256_set1_ps(scale));
            if (kv.softcap > 0 || kv.slopes)
              sc[h] = modify8(sc[h], kv, s0 + h * 8, kh * G + g, p0 + r);
          }
          sc[0] = _mm256_blendv_ps(low, sc[0], m0);
          sc[1] = valid > 8 ? _mm256_blendv_ps(low, sc[1], m1) : low;
          const float m_new_ = hmax8(_mm256_max_ps(sc[0], sc[1]));
          const float m_new = m_new_ > mx[row] ? m_new_ : mx[row];
          const float corr = _mm256_cvtss_f32(exp8(_mm256_set1_ps(mx[row] - m_new)));
          const __m256 mv = _mm256_set1_ps(m_new);
          alignas(32) float p[key_block];
          const __m256 e0 = _mm256_and_ps(exp8(_mm256_sub_ps(sc[0], mv)), m0);
          const __m256 e1 = _mm256_and_ps(exp8(_mm256_sub_ps(sc[1], mv)), m1);
          _mm256_store_ps(p, e0);
          _mm256_store_ps(p + 8, e1);
          sum[row] = sum[row] * corr + hsum8(_mm256_add_ps(e0, e1));
          mx[row] = m_new;
          // acc = acc * corr + sum_j p_j v_j, 64 values in registers per pass
          float* ar = acc + row * D;
          const __m256 cv = _mm256_set1_ps(corr);
          for (int64_t d0 = 0; d0 < D; d0 += 64) {
            const int64_t w = D - d0 < 64 ? D - d0 : 64; // a multiple of 8
            __m256 a[8];
            for (int64_t i = 0; i < w / 8; ++i)
              a[i] = _mm256_mul_ps(_mm256_loadu_ps(ar + d0 + i * 8), cv);
            for (int64_t j = lo; j < valid; ++j) {
              const __m256 pj = _mm256_set1_ps(p[j]);
              const uint8_t* vr = v[j] + kh * hb + d0 * eb;
              for (int64_t i = 0; i < w / 8; ++i)
                a[i] = _mm256_fmadd_ps(pj, load8<E>(vr + i * 8 * eb), a[i]);
            }
            for (int64_t i = 0; i < w / 8; ++i) _mm256_storeu_ps(ar + d0 + i * 8, a[i]);
          }
        }
      }
  }
  for (int64_t kh = 0; kh < nh; ++kh)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t row = (kh * R + r) * G + g;
        const __m256 inv = _mm256_set1_ps(1.0f / sum[row]);
        float* o = out + r * qs + (kh * G + g) * D;
        for (int64_t d = 0; d < D; d += 8)
          _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(acc + row * D + d), inv));
      }
}

// The vector type attention_rows.hpp's tile runs on here: 8 rows in the lanes of a ymm, masks
// as all-ones lanes, 8 keys a block (8 score vectors and the query in 9 of the 16 registers),
// 4 values of d in registers in the V pass (with the 8 probabilities: 13).
struct y8 {
  using vf = __m256;
  using vi = __m256i;
  using mask = __m256;
  static constexpr int lanes = 8, dchunk = 4;
  static vf zero() { return _mm256_setzero_ps(); }
  static vf load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vf v) { _mm256_storeu_ps(p, v); }
  static vf set1(float v) { return _mm256_set1_ps(v); }
  static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
  static vf sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
  static vf div(vf a, vf b) { return _mm256_div_ps(a, b); }
  static vf max(vf a, vf b) { return _mm256_max_ps(a, b); }
  static vf exp(vf x) { return exp8(x); }
  static vf tanh(vf x) { return tanh8(x); }
  static vi positions(int64_t p0) {
    return _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                            _mm256_set1_epi32(static_cast<int>(p0)));
  }
  static vf distance(int a, vi pos) { // a - pos
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_set1_epi32(a), pos));
  }
  static mask first_lanes(int64_t R) {
    return _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(R)), positions(0)));
  }
  static mask all() { return _mm256_castsi256_ps(_mm256_set1_epi32(-1)); }
  static mask none() { return _mm256_setzero_ps(); }
  static mask at_or_before(mask m, int a, vi pos) { // lanes of m with a <= pos
    return _mm256_and_ps(m, _mm256_castsi256_ps(_mm256_cmpgt_epi32(pos, _mm256_set1_epi32(a - 1))));
  }
  static mask after(mask m, int a, vi before) { // lanes of m with a > before
    return _mm256_and_ps(m, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(a), before)));
  }
  static vf select(mask m, vf a, vf b) { return _mm256_blendv_ps(b, a, m); }
  static vf maskz(mask m, vf a) { return _mm256_and_ps(m, a); }
  template <kv_elem E>
  static void to_f32(const uint8_t* src, float* dst, int64_t D) { // D values of a cache row
    int64_t d = 0;
    for (; d + 8 <= D; d += 8) _mm256_storeu_ps(dst + d, load8<E>(src + arows::elem_bytes<E> * d));
    arows::to_f32_tail<E>(src, dst, d, D);
  }
};

} // namespace

void attend_group_avx2(const float* q, int64_t G, int64_t D, int64_t S, float scale,
                       const kv_layout& kv, float* out, float* scores) {
  switch (kv.elem) {
  case kv_elem::f32:
    return attend<kv_elem::f32>(q, G, D, S, scale, kv, out, scores);
  case kv_elem::f16:
    return attend<kv_elem::f16>(q, G, D, S, scale, kv, out, scores);
  case kv_elem::bf16:
    return attend<kv_elem::bf16>(q, G, D, S, scale, kv, out, scores);
  }
}

void attend_tile_avx2(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                      int64_t window, float scale, const kv_layout& kv, float* out, float* work,
                      int64_t nh) {
  switch (kv.elem) {
  case kv_elem::f32:
    return attend_tile<kv_elem::f32>(q, qs, R, G, D, p0, window, scale, kv, out, work, nh);
  case kv_elem::f16:
    return attend_tile<kv_elem::f16>(q, qs, R, G, D, p0, window, scale, kv, out, work, nh);
  case kv_elem::bf16:
    return attend_tile<kv_elem::bf16>(q, qs, R, G, D, p0, window, scale, kv, out, work, nh);
  }
}

void attend_rows_avx2(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                      int64_t window, float scale, const kv_layout& kv, float* out, float* work) {
  switch (kv.elem) {
  case kv_elem::f32:
    return arows::tile_any<y8, kv_elem::f32>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  case kv_elem::f16:
    return arows::tile_any<y8, kv_elem::f16>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  case kv_elem::bf16:
    return arows::tile_any<y8, kv_elem::bf16>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  }
}

} // namespace troupe::kernels::cpu
