// attention.cpp (cpu): causal attention with GQA, contiguous and paged, and the KV store.
// Work is split over (sequence token, KV head); each task computes every query head of the
// GQA group that reads that KV head, so a K or V row is fetched once per group, not once
// per query head. Scores for one query row are computed into a buffer (softmax needs them
// all; decoding has one row per sequence, prefill chunks a few), then the weighted sum of V
// rows. f32 math; caches in f32, f16 or bf16. With AVX2 the inner loops are in
// attention_avx2.cpp (rows widened in registers); otherwise a portable path converts rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention_kv.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemv.hpp"
#include "runtime/convert.hpp"

namespace troupe::kernels::cpu {

namespace {

// Inlined into attend_group's per-ISA clones; `omp simd` lets the reduction vectorise
// (built with -fopenmp-simd: no OpenMP runtime).
inline float dot_d(const float* a, const float* b, int64_t D) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

inline void axpy_d(float* y, const float* x, float a, int64_t D) {
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) y[d] += a * x[d];
}

// One KV head (kh of Hkv) of a cache with rows of D values of `type`.
kv_layout layout(const void* k, const void* v, const int32_t* blocks, int64_t P, int64_t Hkv,
                 int64_t kh, int64_t D, dtype type) {
  const int64_t rb = row_bytes(type, D);
  const kv_elem e = type == dtype::f16    ? kv_elem::f16
                    : type == dtype::bf16 ? kv_elem::bf16
                                          : kv_elem::f32;
  return {static_cast<const uint8_t*>(k) + kh * rb,
          static_cast<const uint8_t*>(v) + kh * rb,
          blocks,
          P,
          Hkv * rb,
          e};
}

// AVX2 + FMA + F16C, unless TROUPE_ISA=portable chose the portable kernels (the decode
// kernel table is picked with the same flags)
bool have_avx2() {
  static const bool yes = std::strcmp(gemv_kernels().isa, "portable") != 0;
  return yes;
}

// The G query heads of one KV head for one query position `last` (keys 0..last).
TROUPE_CPU_DISPATCH
void attend_group(const float* q, int64_t G, int64_t D, int64_t last, float scale, dtype type,
                  const kv_layout& kv, float* out, std::vector<float>& scores,
                  std::vector<float>& row) {
  const int64_t S = last + 1;
  scores.resize(G * S + 8);
  if (D % 8 == 0 && have_avx2()) {
    attend_group_avx2(q, G, D, S, scale, kv, out, scores.data());
    return;
  }
  row.resize(D);
  for (int64_t s = 0; s < S; ++s) {
    const float* k = reinterpret_cast<const float*>(kv.key(s));
    if (type != dtype::f32) {
      to_f32(type, kv.key(s), row.data(), D);
      k = row.data();
    }
    for (int64_t g = 0; g < G; ++g) scores[g * S + s] = dot_d(q + g * D, k, D) * scale;
  }
  for (int64_t g = 0; g < G; ++g) {
    float* sc = scores.data() + g * S;
    const float mx = *std::max_element(sc, sc + S);
    float sum = 0;
    for (int64_t s = 0; s < S; ++s) sum += sc[s] = std::exp(sc[s] - mx);
    const float inv = 1.0f / sum;
    for (int64_t s = 0; s < S; ++s) sc[s] *= inv;
    std::fill(out + g * D, out + (g + 1) * D, 0.0f);
  }
  for (int64_t s = 0; s < S; ++s) {
    const float* v = reinterpret_cast<const float*>(kv.val(s));
    if (type != dtype::f32) {
      to_f32(type, kv.val(s), row.data(), D);
      v = row.data();
    }
    for (int64_t g = 0; g < G; ++g) axpy_d(out + g * D, v, scores[g * S + s], D);
  }
}

void attention(const op_args& a, const exec_ctx& ctx) {
  const auto& q = a.src[0];
  const auto& k = a.src[1];
  const int64_t T = q.dims[0], H = q.dims[1], D = q.dims[2], Hkv = k.dims[1];
  const int64_t G = H / Hkv;
  parallel(ctx, T * Hkv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores, row;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / Hkv, kh = i % Hkv;
      const kv_layout kv = layout(k.data, a.src[2].data, nullptr, 1, Hkv, kh, D, k.type);
      attend_group(q.as<float>() + (t * H + kh * G) * D, G, D, a.p.pos0 + t, a.p.scale, k.type, kv,
                   a.dst.as<float>() + (t * H + kh * G) * D, scores, row);
    }
  });
}

void paged_attention(const op_args& a, const exec_ctx& ctx) {
  const auto& q = a.src[0];
  const auto& kc = a.src[1];
  const auto& seqs = a.src[3];
  const int64_t T = q.dims[0], H = q.dims[1], D = q.dims[2];
  const int64_t P = kc.dims[1], Hkv = kc.dims[2];
  const int64_t G = H / Hkv;
  std::vector<int32_t> seq_of(T, -1);
  for (int64_t si = 0; si < seqs.rows(); ++si) {
    const int32_t* info = seqs.row<int32_t>(si);
    for (int64_t i = 0; i < info[1]; ++i) seq_of[info[0] + i] = static_cast<int32_t>(si);
  }
  parallel(ctx, T * Hkv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores, row;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / Hkv, kh = i % Hkv;
      if (seq_of[t] < 0) continue;
      const int32_t* info = seqs.row<int32_t>(seq_of[t]);
      const kv_layout kv = layout(kc.data, a.src[2].data, info + 3, P, Hkv, kh, D, kc.type);
      const int64_t pos = info[2] + (t - info[0]);
      attend_group(q.as<float>() + (t * H + kh * G) * D, G, D, pos, a.p.scale, kc.type, kv,
                   a.dst.as<float>() + (t * H + kh * G) * D, scores, row);
    }
  });
}

void kv_store(const op_args& a, const exec_ctx&) {
  const auto& x = a.src[0];
  const int64_t row = x.numel() / x.dims[0];
  const int32_t* slots = a.src[1].as<int32_t>();
  for (int64_t t = 0; t < x.dims[0]; ++t)
    from_f32(a.dst.type, x.as<float>() + t * row,
             static_cast<char*>(a.dst.data) + row_bytes(a.dst.type, slots[t] * row), row);
}

bool cache_type(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
}

} // namespace

void register_attention(registry& r) {
  auto ok = [](const op_args& a) {
    return contiguous_args(a) && a.src[0].type == dtype::f32 && cache_type(a.src[1].type) &&
           a.src[2].type == a.src[1].type;
  };
  r.add(op::attention, backend::cpu, "gqa-grouped", ok, attention);
  r.add(op::paged_attention, backend::cpu, "gqa-grouped", ok, paged_attention);
  r.add(
      op::kv_store, backend::cpu, "any",
      [](const op_args& a) {
        return contiguous_args(a) && a.src[0].type == dtype::f32 && cache_type(a.dst.type);
      },
      kv_store);
}

} // namespace troupe::kernels::cpu
