// attention_kv.hpp: how the attention kernels find one KV head's rows, shared by
// attention.cpp (the dispatch and the portable path), attention_avx2.cpp (the AVX2 inner
// loops) and attention_avx512.cpp (the AVX-512 prefill tile). A plain struct of pointers and
// strides, so the vector loops compute addresses inline instead of calling back per key, and a
// cursor that walks a head's rows through the block table. No standard-library templates (see
// gemv.hpp).
#pragma once

#include <math.h>
#include <xmmintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {

/// Element type of a KV cache row as the vector loops read it.
enum class kv_elem : int { f32, f16, bf16 };

/// Rows of one KV head: position s lives in slot blocks[s / P] * P + s % P (or slot s when
/// blocks is null); a slot's row starts slot * stride bytes after k (or v). The kernels count
/// keys from `first` (the start of a sliding window; 0 for full attention): their key s is
/// position first + s, and positions before `first` (whose block ids may be 0) are never read.
struct kv_layout {
  const uint8_t* k;
  const uint8_t* v;
  const int32_t* blocks; // null: contiguous
  int64_t P;             // tokens per block
  int64_t stride;        // bytes from one slot's row of this head to the next slot's
  kv_elem elem;
  int64_t first = 0; // position of key 0
  // score modifiers, after the scale: s = softcap tanh(s / softcap) when softcap > 0 (Gemma
  // 2), then + slopes[h] * (key position - query position) when slopes is set (ALiBi), h the
  // call's query head (g, or kh * G + g over nh KV heads)
  float softcap = 0;
  const float* slopes = nullptr;
  // GPT-OSS's sinks: sinks[h] is one more logit in query head h's softmax denominator (h as
  // for slopes); null: none
  const float* sinks = nullptr;

  int64_t slot(int64_t s) const {
    s += first;
    return blocks ? int64_t{blocks[s / P]} * P + s % P : s;
  }
  const uint8_t* key(int64_t s) const { return k + slot(s) * stride; }
  const uint8_t* val(int64_t s) const { return v + slot(s) * stride; }
};

namespace { // internal linkage: each file compiles its own copy for its own ISA

/// kv's score modifiers on the n scores of keys s0 .. s0 + n - 1 of query head h at position
/// qpos (key s at position kv.first + s).
inline void modify_scores(float* sc, int64_t s0, int64_t n, const kv_layout& kv, int64_t h,
                          int64_t qpos) {
  if (kv.softcap > 0)
    for (int64_t i = 0; i < n; ++i) sc[i] = kv.softcap * tanhf(sc[i] / kv.softcap);
  if (kv.slopes)
    for (int64_t i = 0; i < n; ++i)
      sc[i] += kv.slopes[h] * static_cast<float>(kv.first + s0 + i - qpos);
}

// Walks the rows of positions first, first + 1, ... (S of them) of one KV head through the
// block table.
struct row_cursor {
  const uint8_t* base;
  const int32_t* blocks;
  int64_t P, stride, end; // end: one past the last position
  int64_t b = 0, i = 0;   // paged: block of the next row, rows of it already returned;
                          // contiguous: the next position
  const uint8_t* cur;
  row_cursor(const uint8_t* base_, const kv_layout& kv, int64_t S_)
      : base(base_)
      , blocks(kv.blocks)
      , P(kv.P)
      , stride(kv.stride)
      , end(kv.first + S_) {
    if (blocks) {
      b = kv.first / P;
      i = kv.first % P;
      cur = base + (int64_t{blocks[b]} * P + i) * stride;
    } else {
      i = kv.first;
      cur = base + kv.first * stride;
    }
  }
  // the next position's row; the block table is read only for positions that exist
  const uint8_t* next() {
    if (blocks && i == P) {
      i = 0;
      ++b;
      cur = base + int64_t{blocks[b]} * P * stride;
    }
    ++i;
    const uint8_t* r = cur;
    cur += stride;
    return r;
  }
  // the row k positions after the next one, or null past the last position
  const uint8_t* peek(int64_t k) const {
    if (!blocks) return i + k < end ? base + (i + k) * stride : nullptr;
    const int64_t p = b * P + i + k; // its position
    if (p >= end) return nullptr;
    return base + (int64_t{blocks[p / P]} * P + p % P) * stride;
  }
};

// Asks for the row `ahead` positions on (both of its cache lines for D = 64 halves)
inline void prefetch_row(const row_cursor& c, int64_t ahead, int64_t bytes) {
  if (const uint8_t* p = c.peek(ahead))
    for (int64_t o = 0; o < bytes; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p) + o, _MM_HINT_T0);
}

} // namespace

/// G query heads (q: [G, D], D a multiple of 8) over keys 0..S-1 (positions first ..
/// first + S - 1) of one KV head, with AVX2
/// and FMA (and F16C for f16 rows); out: [G, D]; scores: at least G * S + 8 floats.
void attend_group_avx2(const float* q, int64_t G, int64_t D, int64_t S, float scale,
                       const kv_layout& kv, float* out, float* scores);

/// A tile of R query rows at positions p0 .. p0 + R - 1 (causal; with window W > 0 row r
/// sees positions p0 + r - W + 1 .. p0 + r only; kv.first is the first row's first key: max(0,
/// p0 - W + 1), or later where every row's chunk starts later), G heads each, for nh
/// consecutive KV heads starting at kv's (head kh's G query heads at + kh * G * D, its rows
/// D elements after head kh - 1's); row r, head h of q and out at + r * qs + h * D; D a
/// multiple of 8. Online softmax over blocks of 16 keys; a block's rows of all nh heads are
/// read together. Decode rows of many sequences use it with R = 1, nh = every KV head (prefill
/// tiles take attend_rows_* below, 1.3-4.4x faster). work: at least nh * R * G * (D + 2) floats.
void attend_tile_avx2(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                      int64_t window, float scale, const kv_layout& kv, float* out, float* work,
                      int64_t nh);

/// The prefill tile with the query rows in the vector lanes (attention_rows.hpp): R query rows
/// at positions p0 .. p0 + R - 1 (up to 16 on AVX-512, attention_avx512.cpp; up to 8 on AVX2,
/// attention_avx2.cpp), the G query heads of kv's KV head, as attend_tile_avx2 with nh = 1
/// (causal, the window, the score modifiers and sinks alike); any head dim D. work: at least
/// attend_rows_floats(16 or 8, G, D) floats.
void attend_rows_avx512(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                        int64_t window, float scale, const kv_layout& kv, float* out, float* work);
void attend_rows_avx2(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                      int64_t window, float scale, const kv_layout& kv, float* out, float* work);
inline int64_t attend_rows_floats(int64_t lanes, int64_t G, int64_t D) {
  return 2 * G * D * lanes + 2 * G * lanes + 2 * lanes * D;
}

} // namespace troupe::kernels::cpu
