// attention_kv.hpp: how the attention kernels find one KV head's rows, shared by
// attention.cpp (the dispatch and the portable path) and attention_avx2.cpp (the AVX2 inner
// loops). A plain struct of pointers and strides, so the vector loops compute addresses
// inline instead of calling back per key. No standard-library templates (see gemv.hpp).
#pragma once

#include <math.h>

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

} // namespace

/// G query heads (q: [G, D], D a multiple of 8) over keys 0..S-1 (positions first ..
/// first + S - 1) of one KV head, with AVX2
/// and FMA (and F16C for f16 rows); out: [G, D]; scores: at least G * S + 8 floats.
void attend_group_avx2(const float* q, int64_t G, int64_t D, int64_t S, float scale,
                       const kv_layout& kv, float* out, float* scores);

/// Prefill tile: R query rows at positions p0 .. p0 + R - 1 (causal; with window W > 0 row r
/// sees positions p0 + r - W + 1 .. p0 + r only, and kv.first must be max(0, p0 - W + 1);
/// with W = 0 kv.first must be 0), G heads each, for nh
/// consecutive KV heads starting at kv's (head kh's G query heads at + kh * G * D, its rows
/// D elements after head kh - 1's); row r, head h of q and out at + r * qs + h * D; D a
/// multiple of 8. Online softmax over blocks of 16 keys; a block's rows of all nh heads are
/// read together. Decode rows of many sequences use it with R = 1, nh = every KV head.
/// work: at least nh * R * G * (D + 2) floats.
void attend_tile_avx2(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
                      int64_t window, float scale, const kv_layout& kv, float* out, float* work,
                      int64_t nh);

} // namespace troupe::kernels::cpu
