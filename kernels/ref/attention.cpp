// attention.cpp (ref): causal scaled-dot-product attention with GQA (query head h reads KV
// head h / (H / Hkv)), contiguous and paged, optionally over a sliding window of the last W
// positions and / or within chunks (a query sees its chunk's keys only), with an optional sink
// logit per head (in the softmax's denominator only) and Llama 4's attention temperature (the
// scores of a query times a factor growing with its position), and the KV-cache store. Scores,
// softmax and the weighted sum in f64. Caches may be f32, f16 or bf16.
#include "kernels/ref/ref.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::kernels::ref {
namespace {

// The first key a query at position `last` sees: 0, the start of its sliding window, or of
// its chunk (the keys at positions c C .. with c = floor(last / C)), whichever is latest.
int64_t first_key(int64_t last, const op_params& p) {
  int64_t first = 0;
  if (p.window > 0) first = std::max<int64_t>(first, last - p.window + 1);
  if (p.chunk > 0) first = std::max<int64_t>(first, last / p.chunk * p.chunk);
  return first;
}

// The scores' scale for a query at position `last`: p.scale, times Llama 4's temperature
// 1 + temp_scale log(floor((last + temp_offset) / temp_floor) + 1) when temp_floor > 0.
double score_scale(int64_t last, const op_params& p) {
  if (p.temp_floor <= 0) return p.scale;
  const double steps =
      std::floor(static_cast<double>(last + p.temp_offset) / static_cast<double>(p.temp_floor));
  return p.scale * (std::log(steps + 1.0) * p.temp_scale + 1.0);
}

// What changes a score besides the dot product (attention_cases in the harness).
struct score_mods {
  double softcap = 0; // c tanh(s / c)
  double slope = 0;   // ALiBi: + slope * (key - query)
  bool has_sink = false;
  double sink = 0;            // a logit in the denominator that weighs no value
  const float* rel = nullptr; // + rel[last - s] where last - s < rel_n (relative biases)
  int64_t rel_n = 0;
};

// One query vector against keys first..last through `key(s)` / `value(s)` accessors.
template <class KeyFn, class ValFn>
void attend(const float* q, int64_t D, int64_t first, int64_t last, double scale, KeyFn key,
            ValFn value, float* out, score_mods m = {}) {
  std::vector<double> score(last + 1, -INFINITY);
  double mx = -INFINITY;
  std::vector<float> kv(D);
  for (int64_t s = first; s <= last; ++s) {
    key(s, kv.data());
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * kv[d];
    score[s] = dot * scale;
    if (m.softcap > 0) score[s] = m.softcap * std::tanh(score[s] / m.softcap);
    if (m.slope != 0) score[s] += m.slope * static_cast<double>(s - last);
    if (m.rel && last - s < m.rel_n) score[s] += m.rel[last - s];
    mx = std::max(mx, score[s]);
  }
  if (m.has_sink) mx = std::max(mx, m.sink);
  double sum = m.has_sink ? std::exp(m.sink - mx) : 0.0;
  for (int64_t s = first; s <= last; ++s) sum += score[s] = std::exp(score[s] - mx);
  std::vector<double> acc(D, 0.0);
  for (int64_t s = first; s <= last; ++s) {
    value(s, kv.data());
    for (int64_t d = 0; d < D; ++d) acc[d] += score[s] / sum * kv[d];
  }
  for (int64_t d = 0; d < D; ++d) out[d] = static_cast<float>(acc[d]);
}

// sinks: src3 of attention, src4 of paged_attention (absent: none)
score_mods mods(const op_args& a, int64_t h, const tensor_view& sinks) {
  score_mods m;
  m.softcap = a.p.softcap;
  if (sinks.data) m.has_sink = true, m.sink = sinks.as<float>()[h];
  if (a.p.alibi_max_bias > 0)
    m.slope = alibi_slope(a.p.head0 + h, a.p.alibi_heads > 0 ? a.p.alibi_heads : a.src[0].dims[1],
                          a.p.alibi_max_bias);
  return m;
}

void attention(const op_args& a, const exec_ctx&) {
  const auto& q = a.src[0];
  const auto& k = a.src[1];
  const auto& v = a.src[2];
  const int64_t T = q.dims[0], H = q.dims[1], D = q.dims[2], Hkv = k.dims[1];
  const int64_t group = H / Hkv;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / group;
      auto row = [D, Hkv, kh](const tensor_view& c, int64_t s, float* out) {
        to_f32(c.type, static_cast<const char*>(c.data) + row_bytes(c.type, (s * Hkv + kh) * D),
               out, D);
      };
      attend(
          q.as<float>() + (t * H + h) * D, D, first_key(a.p.pos0 + t, a.p), a.p.pos0 + t,
          score_scale(a.p.pos0 + t, a.p), [&](int64_t s, float* o) { row(k, s, o); },
          [&](int64_t s, float* o) { row(v, s, o); }, a.dst.as<float>() + (t * H + h) * D,
          mods(a, h, a.src[3]));
    }
  }
}

void paged_attention(const op_args& a, const exec_ctx&) {
  const auto& q = a.src[0];
  const auto& kc = a.src[1];
  const auto& vc = a.src[2];
  const auto& seqs = a.src[3];
  const int64_t H = q.dims[1], D = q.dims[2];
  const int64_t P = kc.dims[1], Hkv = kc.dims[2];
  const int64_t group = H / Hkv;
  for (int64_t si = 0; si < seqs.rows(); ++si) {
    const int32_t* info = seqs.row<int32_t>(si);
    const int64_t begin = info[0], count = info[1], pos0 = info[2];
    const int32_t* blocks = info + 3;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t t = begin + i;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kh = h / group;
        auto row = [&](const tensor_view& c, int64_t s, float* out) {
          const int64_t slot = static_cast<int64_t>(blocks[s / P]) * P + s % P;
          to_f32(c.type,
                 static_cast<const char*>(c.data) + row_bytes(c.type, (slot * Hkv + kh) * D), out,
                 D);
        };
        attend(
            q.as<float>() + (t * H + h) * D, D, first_key(pos0 + i, a.p), pos0 + i,
            score_scale(pos0 + i, a.p), [&](int64_t s, float* o) { row(kc, s, o); },
            [&](int64_t s, float* o) { row(vc, s, o); }, a.dst.as<float>() + (t * H + h) * D,
            [&] {
              score_mods m = mods(a, h, a.src[4]);
              if (const tensor_view& rel = a.src[7]; rel.data) { // (Inkling's)
                m.rel_n = rel.dims[2];
                m.rel = rel.as<float>() + (t * H + h) * m.rel_n;
              }
              return m;
            }());
      }
    }
  }
}

void kv_store(const op_args& a, const exec_ctx&) {
  const auto& x = a.src[0];
  const int64_t row = x.numel() / x.dims[0]; // Hkv * D values per token
  const int32_t* slots = a.src[1].as<int32_t>();
  for (int64_t t = 0; t < x.dims[0]; ++t) {
    from_f32(a.dst.type, x.as<float>() + t * row,
             static_cast<char*>(a.dst.data) + row_bytes(a.dst.type, slots[t] * row), row);
  }
}

bool float_cache(const op_args& a) {
  auto ok = [](dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; };
  const tensor_view& sinks = a.src[a.kind == op::attention ? 3 : 4];
  return all_contiguous(a) && a.src[0].type == dtype::f32 && ok(a.src[1].type) &&
         (a.kind == op::kv_store ? ok(a.dst.type) : ok(a.src[2].type)) &&
         !(a.kind == op::paged_attention && (a.src[5].data || a.src[6].data)) && // sparse.cpp,
                                                                                 // compress.cpp
         (!sinks.data || (sinks.type == dtype::f32 && sinks.numel() == a.src[0].dims[1]));
}

} // namespace

void register_attention(registry& r) {
  r.add(op::attention, backend::ref, "any", float_cache, attention);
  r.add(op::paged_attention, backend::ref, "any", float_cache, paged_attention);
  r.add(
      op::kv_store, backend::ref, "any",
      [](const op_args& a) {
        auto ok = [](dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; };
        return all_contiguous(a) && a.src[0].type == dtype::f32 && ok(a.dst.type);
      },
      kv_store);
}

} // namespace troupe::kernels::ref
