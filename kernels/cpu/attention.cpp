// attention.cpp (cpu): causal attention with GQA, contiguous and paged, and the KV store.
// With a sliding window (p.window) a query reads only the keys of its window, so decode
// costs O(W), not O(position); with chunks (p.chunk) only its chunk's, and tiles of query rows
// never span a chunk's start, so a tile's rows share their first key (and, with temperature
// tuning, the factor on their scores). Work is split over (tile of a sequence's query rows, KV
// head); each task computes every query head of the GQA group that reads that KV head, so a K or V
// row is fetched once per group, not once per query head. Decode rows (one per sequence) compute
// their scores into a buffer, softmax, then the weighted sum of V rows; prefill tiles use an online
// softmax (keys read once per tile, no per-row score buffer) with the tile's query rows in the
// vector lanes (attention_rows.hpp: 16 on AVX-512, 8 on AVX2); a sink logit per head
// (GPT-OSS) starts each softmax's maximum and sum. f32 math; caches in f32, f16 or bf16. With
// AVX2 the inner loops are in attention_avx2.cpp (rows widened in registers); otherwise a
// portable path converts rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/convert.hpp"
#include "kernels/cpu/attention_kv.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemv.hpp"

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

// the AVX-512 prefill tile where the kernel table is AVX-512's (TROUPE_ISA=avx2 turns it off)
bool have_avx512() {
  static const bool yes = std::strncmp(gemv_kernels().isa, "avx512", 6) == 0;
  return yes;
}

// The G query heads of one KV head for one query position `last` (keys kv.first..last); with
// `rel`, head g's score of key s plus rel[g * E + last - s] where last - s < E (relative biases;
// the scalar loop: the vector paths know no such term).
TROUPE_CPU_DISPATCH
void attend_group(const float* q, int64_t G, int64_t D, int64_t last, float scale, dtype type,
                  const kv_layout& kv, float* out, std::vector<float>& scores,
                  std::vector<float>& row, const float* rel = nullptr, int64_t E = 0) {
  const int64_t S = last + 1 - kv.first;
  scores.resize(G * S + 8);
  if (D % 8 == 0 && have_avx2() && !rel) {
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
    if (kv.softcap > 0 || kv.slopes) modify_scores(sc, 0, S, kv, g, last);
    if (rel) // (key s at position kv.first + s: distance last - kv.first - s)
      for (int64_t d = 0, s = last - kv.first; d < E && s >= 0; ++d, --s) sc[s] += rel[g * E + d];
    float mx = *std::max_element(sc, sc + S);
    if (kv.sinks) mx = std::max(mx, kv.sinks[g]);
    float sum = kv.sinks ? std::exp(kv.sinks[g] - mx) : 0.0f;
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

// A unit of work: R consecutive query rows of one sequence (positions p0 ..) and one KV head.
struct task {
  int64_t t0, R, p0, kh0, kh1; // query rows [t0, t0 + R) at positions p0.., KV heads [kh0, kh1)
  const int32_t* blocks;       // null: contiguous cache
};

// prefill query rows per tile (keys read once per tile), the lanes of the rows tile: 16 in a
// zmm (AVX-512 table), 8 in a ymm (AVX2)
int64_t tile_rows() {
  return have_avx512() ? 16 : 8;
}
// K + V bytes of one decode row above which all its heads go in one pass (measured: 64 rows
// at 128 positions f32 (0.8 MB each) are faster head by head, at 512 (3 MB) in one pass)
constexpr int64_t all_heads_from = 1 << 20;

// What a query's position decides (op.hpp): its first key (the later of its sliding window's
// start and its chunk's) and the scale of its scores (times the temperature factor).
struct query_rule {
  int64_t window, chunk, floor, offset;
  float scale, temp;
  explicit query_rule(const op_params& p)
      : window(p.window)
      , chunk(p.chunk)
      , floor(p.temp_floor)
      , offset(p.temp_offset)
      , scale(p.scale)
      , temp(p.temp_scale) {}
  int64_t first(int64_t p) const {
    const int64_t w = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    return chunk > 0 ? std::max(w, p - p % chunk) : w;
  }
  float scale_at(int64_t p) const {
    if (floor <= 0) return scale;
    const double f = 1.0 + temp * std::log1p(static_cast<double>((p + offset) / floor));
    return static_cast<float>(scale * f);
  }
  // how many of the n rows from position p on share first()'s chunk and scale_at()
  int64_t run(int64_t p, int64_t n) const {
    if (chunk > 0) n = std::min(n, chunk - p % chunk);
    if (floor > 0) n = std::min(n, floor - (p + offset) % floor);
    return n;
  }
};

// Cuts each sequence's rows into tiles (decode rows stay single) for every KV head; a tile
// ends where the rule's chunk or temperature changes. With `whole_rows`, a decode row takes all
// its KV heads in one task: the heads' rows interleave in the cache, so one thread walking them
// in turn finds its neighbours' lines in cache.
void add_tasks(std::vector<task>& out, int64_t t0, int64_t count, int64_t p0, int64_t Hkv,
               const int32_t* blocks, bool whole_rows, const query_rule& rule) {
  if (count == 1 && whole_rows) {
    out.push_back({t0, 1, p0, 0, Hkv, blocks});
    return;
  }
  const int64_t rows = tile_rows();
  for (int64_t i = 0, n = 0; i < count; i += n) {
    n = rule.run(p0 + i, std::min(rows, count - i));
    for (int64_t kh = 0; kh < Hkv; ++kh) out.push_back({t0 + i, n, p0 + i, kh, kh + 1, blocks});
  }
}

void run_tasks(const op_args& a, const exec_ctx& ctx, std::vector<task>& tasks, int64_t P,
               int64_t Hkv) {
  const auto& q = a.src[0];
  const auto& kc = a.src[1];
  const int64_t H = q.dims[1], D = q.dims[2], G = H / Hkv, W = a.p.window;
  const query_rule rule(a.p);
  // KV head by KV head, so one head's K and V rows stay in L2 while its tiles pass (tile by
  // tile with every head inner, a prompt of 1024 tokens cycled 6 MB of rows through L2 for
  // each tile); within a head the most expensive tasks (most keys) first, so the pool's
  // dynamic chunks balance
  auto cost = [&rule](const task& x) { return (x.p0 + x.R - rule.first(x.p0)) * (x.kh1 - x.kh0); };
  std::stable_sort(tasks.begin(), tasks.end(), [&](const task& x, const task& y) {
    return x.kh0 != y.kh0 ? x.kh0 < y.kh0 : cost(x) > cost(y);
  });
  const bool tiled = D % 8 == 0 && have_avx2();
  // ALiBi slopes of this call's query heads (global heads head0 ..), per KV head at + kh * G;
  // the caller's buffer, read by the pool's threads through this pointer while it waits
  thread_local std::vector<float> slope_buf;
  slope_buf.assign(a.p.alibi_max_bias > 0 ? static_cast<size_t>(H) : 0, 0.0f);
  for (int64_t h = 0; h < static_cast<int64_t>(slope_buf.size()); ++h)
    slope_buf[static_cast<size_t>(h)] = static_cast<float>(
        alibi_slope(a.p.head0 + h, a.p.alibi_heads > 0 ? a.p.alibi_heads : H, a.p.alibi_max_bias));
  const float* slopes = slope_buf.empty() ? nullptr : slope_buf.data();
  const float softcap = a.p.softcap;
  const tensor_view& sink_src = a.src[a.kind == op::attention ? 3 : 4];
  const float* sinks = sink_src.data ? sink_src.as<float>() : nullptr;
  // relative biases [T, H, E] (paged only): every row through the scalar loop with them
  const bool has_rel = a.kind == op::paged_attention && a.src[7].data;
  const float* rel = has_rel ? a.src[7].as<float>() : nullptr;
  const int64_t E = has_rel ? a.src[7].dims[2] : 0;
  auto mods = [slopes, softcap, sinks, G](kv_layout& kv, int64_t kh) {
    kv.softcap = softcap;
    kv.slopes = slopes ? slopes + kh * G : nullptr;
    kv.sinks = sinks ? sinks + kh * G : nullptr;
  };
  parallel(ctx, static_cast<int64_t>(tasks.size()), 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> scores, row, work;
    for (int64_t i = i0; i < i1; ++i) {
      const task& w = tasks[i];
      const int64_t first = rule.first(w.p0);  // of the tile's first row (its chunk: every row's)
      const float scale = rule.scale_at(w.p0); // every row's (tiles end where it changes)
      const int64_t kv_bytes = 2 * (w.p0 + w.R - first) * Hkv * row_bytes(kc.type, D);
      if (tiled && !rel && w.kh1 - w.kh0 > 1 && kv_bytes > all_heads_from) {
        // a decode row with all its KV heads and a cache too big for L2: one pass over its
        // blocks, every head of a row read together (they sit side by side), online softmax
        // per head. Smaller caches stay in L2 between heads, and there the plain per-head
        // pass (scores, then one softmax, then V in registers) is faster.
        const int64_t nh = w.kh1 - w.kh0;
        kv_layout kv = layout(kc.data, a.src[2].data, w.blocks, P, Hkv, w.kh0, D, kc.type);
        kv.first = first;
        mods(kv, w.kh0);
        work.resize(nh * w.R * G * (D + 2));
        attend_tile_avx2(q.as<float>() + (w.t0 * H + w.kh0 * G) * D, H * D, w.R, G, D, w.p0, W,
                         scale, kv, a.dst.as<float>() + (w.t0 * H + w.kh0 * G) * D, work.data(),
                         nh);
        continue;
      }
      for (int64_t kh = w.kh0; kh < w.kh1; ++kh) {
        kv_layout kv = layout(kc.data, a.src[2].data, w.blocks, P, Hkv, kh, D, kc.type);
        kv.first = first;
        mods(kv, kh);
        const float* qp = q.as<float>() + (w.t0 * H + kh * G) * D;
        float* op = a.dst.as<float>() + (w.t0 * H + kh * G) * D;
        if (w.R > 1 && have_avx2() && !rel) { // a prefill tile with its rows in the vector lanes
          work.resize(static_cast<size_t>(attend_rows_floats(tile_rows(), G, D)));
          (have_avx512() ? attend_rows_avx512 : attend_rows_avx2)(qp, H * D, w.R, G, D, w.p0, W,
                                                                  scale, kv, op, work.data());
          continue;
        }
        for (int64_t r = 0; r < w.R; ++r) {
          kv.first = rule.first(w.p0 + r);
          attend_group(qp + r * H * D, G, D, w.p0 + r, rule.scale_at(w.p0 + r), kc.type, kv,
                       op + r * H * D, scores, row,
                       rel ? rel + ((w.t0 + r) * H + kh * G) * E : nullptr, E);
        }
      }
    }
  });
}

void attention(const op_args& a, const exec_ctx& ctx) {
  const int64_t T = a.src[0].dims[0], Hkv = a.src[1].dims[1];
  thread_local std::vector<task> tasks;
  tasks.clear();
  add_tasks(tasks, 0, T, a.p.pos0, Hkv, nullptr, false, query_rule(a.p));
  run_tasks(a, ctx, tasks, 1, Hkv);
}

void paged_attention(const op_args& a, const exec_ctx& ctx) {
  const auto& seqs = a.src[3];
  const int64_t P = a.src[1].dims[1], Hkv = a.src[1].dims[2];
  thread_local std::vector<task> tasks;
  tasks.clear();
  // enough decode rows to keep every thread busy with whole rows
  const int64_t threads = ctx.pool ? ctx.pool->size() : 1;
  const bool whole_rows = seqs.rows() >= 4 * threads;
  const query_rule rule(a.p);
  for (int64_t si = 0; si < seqs.rows(); ++si) {
    const int32_t* info = seqs.row<int32_t>(si);
    add_tasks(tasks, info[0], info[1], info[2], Hkv, info + 3, whole_rows, rule);
  }
  run_tasks(a, ctx, tasks, P, Hkv);
}

void kv_store(const op_args& a, const exec_ctx&) {
  const auto& x = a.src[0];
  const int64_t row = x.numel() / x.dims[0];
  const int32_t* slots = a.src[1].as<int32_t>();
  for (int64_t t = 0; t < x.dims[0]; ++t)
    store_row(a.dst.type, x.as<float>() + t * row,
              static_cast<char*>(a.dst.data) + row_bytes(a.dst.type, slots[t] * row), row);
}

bool cache_type(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
}

} // namespace

void register_attention(registry& r) {
  auto ok = [](const op_args& a) {
    const tensor_view& sinks = a.src[a.kind == op::attention ? 3 : 4];
    return contiguous_args(a) && a.src[0].type == dtype::f32 && cache_type(a.src[1].type) &&
           a.src[2].type == a.src[1].type &&
           !(a.kind == op::paged_attention && (a.src[5].data || a.src[6].data)) && // sparse.cpp

           (!sinks.data || (sinks.type == dtype::f32 && sinks.numel() == a.src[0].dims[1]));
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
