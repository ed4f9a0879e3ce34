// compress.cpp (cpu): DeepSeek-V4's compressed attention (op.hpp): kv_compress (each closing
// window's entry: a running softmax per channel over its rows' gate logits, in f32, then the RMS
// norm and the rotation) and paged_attention over a sliding window of the cache plus compressed
// entries (all those the query's position has closed, or those src5 picks) with sinks. The
// attention gathers a query's rows once (f32, the shared key-value head's), then every head reads
// them as keys and as values; the work split over the queries, or over the heads of one query.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/paged_rows.hpp"

namespace troupe::kernels::cpu {
namespace {

// the one-head row of position (or entry) s of a sequence in cache c [NB, P, 1, W]
const char* slot_row(const tensor_view& c, const int32_t* blocks, int64_t s) {
  return row_at(c, blocks, s, 0);
}

void kv_compress(const op_args& a, const exec_ctx& ctx) {
  const auto &src = a.src[0], &ape = a.src[1];
  const int64_t W = src.dims[3] / 2, Dc = a.dst.dims[3], m = a.p.compress;
  const bool overlap = W == 2 * Dc;
  const float* nw = a.src[2].data ? a.src[2].as<float>() : nullptr; // (none: no norm)
  std::vector<query_ref> closing; // the step's positions that close a window
  for (const query_ref& r : queries(a.src[3]))
    if ((r.pos + 1) % m == 0) closing.push_back(r);
  parallel(ctx, static_cast<int64_t>(closing.size()), 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> row(static_cast<size_t>(2 * W)), mx(static_cast<size_t>(Dc)),
        sum(static_cast<size_t>(Dc)), acc(static_cast<size_t>(Dc)), e(static_cast<size_t>(Dc));
    for (int64_t i = i0; i < i1; ++i) {
      const query_ref& r = closing[static_cast<size_t>(i)];
      const int64_t w = (r.pos + 1) / m - 1;
      std::fill(mx.begin(), mx.end(), -INFINITY);
      std::fill(sum.begin(), sum.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      // one window's rows into the running softmax, values and gates from `half`
      auto take = [&](int64_t first, int64_t half) {
        for (int64_t j = 0; j < m; ++j) {
          dequant_row(src.type, slot_row(src, r.blocks, first + j), 0, 2 * W, row.data());
          const float* kv = row.data() + half * Dc;
          const float* g = row.data() + W + half * Dc;
          const float* ap = ape.row<float>(j) + half * Dc;
          for (int64_t c = 0; c < Dc; ++c) {
            const float logit = g[c] + ap[c];
            if (logit > mx[static_cast<size_t>(c)]) { // rescale what is summed so far
              const float f = std::exp(mx[static_cast<size_t>(c)] - logit);
              sum[static_cast<size_t>(c)] *= f;
              acc[static_cast<size_t>(c)] *= f;
              mx[static_cast<size_t>(c)] = logit;
            }
            const float p = std::exp(logit - mx[static_cast<size_t>(c)]);
            sum[static_cast<size_t>(c)] += p;
            acc[static_cast<size_t>(c)] += p * kv[c];
          }
        }
      };
      if (overlap && w > 0) take((w - 1) * m, 0);
      take(w * m, overlap ? 1 : 0);
      double ss = 0;
      for (int64_t c = 0; c < Dc; ++c) {
        e[static_cast<size_t>(c)] = acc[static_cast<size_t>(c)] / sum[static_cast<size_t>(c)];
        ss += double{e[static_cast<size_t>(c)]} * e[static_cast<size_t>(c)];
      }
      const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(Dc) + a.p.eps));
      if (nw)
        for (int64_t c = 0; c < Dc; ++c) e[static_cast<size_t>(c)] *= inv * nw[c];
      if (a.p.rope.rot_dim > 0) // at the window's first position
        rope_head(a.p.rope, static_cast<int32_t>(w * m), e.data());
      store_row(a.dst.type, e.data(), const_cast<char*>(slot_row(a.dst, r.blocks, w)), Dc);
    }
  });
}

// one query's rows (the window's, then the entries'), f32, [n, D]: keys from `kc` (src1, or
// the values' cache src2 when `kc` is that), the entries both
void gather(const op_args& a, const tensor_view& kc, const query_ref& r, std::vector<float>& rows,
            int64_t& n) {
  const auto &sel = a.src[5], &cc = a.src[6];
  const int64_t D = kc.dims[3], m = a.p.compress, closed = (r.pos + 1) / m;
  const int64_t first = a.p.window > 0 ? std::max<int64_t>(0, r.pos - a.p.window + 1) : 0;
  const int64_t most = (r.pos - first + 1) + (sel.data ? sel.cols() : closed);
  rows.resize(static_cast<size_t>(most * D));
  n = 0;
  for (int64_t s = first; s <= r.pos; ++s)
    dequant_row(kc.type, slot_row(kc, r.blocks, s), 0, D, rows.data() + (n++) * D);
  if (sel.data) {
    const int32_t* picked = sel.row<int32_t>(r.t);
    for (int64_t j = 0; j < sel.cols(); ++j)
      if (picked[j] >= 0 && picked[j] < closed)
        dequant_row(cc.type, slot_row(cc, r.blocks, picked[j]), 0, D, rows.data() + (n++) * D);
  } else {
    for (int64_t w = 0; w < closed; ++w)
      dequant_row(cc.type, slot_row(cc, r.blocks, w), 0, D, rows.data() + (n++) * D);
  }
}

// heads [h0, h1) of one query over its gathered keys and values (the same rows where the
// cache is one: DeepSeek-V4's shared key-value head)
void attend_heads(const op_args& a, const query_ref& r, const float* rows, const float* vals,
                  int64_t n, int64_t h0, int64_t h1, std::vector<float>& score) {
  const auto& q = a.src[0];
  const int64_t H = q.dims[1], D = q.dims[2];
  const float* sinks = a.src[4].data ? a.src[4].as<float>() : nullptr;
  score.resize(static_cast<size_t>(n));
  for (int64_t h = h0; h < h1; ++h) {
    const float* qh = q.as<float>() + (r.t * H + h) * D;
    float mx = sinks ? sinks[h] : -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      score[static_cast<size_t>(j)] = dot_f32(qh, rows + j * D, D) * a.p.scale;
      mx = std::max(mx, score[static_cast<size_t>(j)]);
    }
    float sum = sinks ? std::exp(sinks[h] - mx) : 0.0f;
    for (int64_t j = 0; j < n; ++j)
      sum += score[static_cast<size_t>(j)] = std::exp(score[static_cast<size_t>(j)] - mx);
    float* out = a.dst.as<float>() + (r.t * H + h) * D;
    std::fill(out, out + D, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float p = score[static_cast<size_t>(j)] / sum;
      const float* v = vals + j * D;
      for (int64_t d = 0; d < D; ++d) out[d] += p * v[d];
    }
  }
}

void paged_compressed(const op_args& a, const exec_ctx& ctx) {
  const int64_t H = a.src[0].dims[1];
  const bool shared = a.src[1].data == a.src[2].data; // one cache: keys are values
  const auto qs = queries(a.src[3]);
  const int threads = ctx.pool ? ctx.pool->size() : 1;
  auto both = [&](const query_ref& r, std::vector<float>& k, std::vector<float>& v, int64_t& n) {
    gather(a, a.src[1], r, k, n);
    if (!shared) gather(a, a.src[2], r, v, n);
    return shared ? k.data() : v.data();
  };
  if (static_cast<int64_t>(qs.size()) >= threads) { // a query a task
    parallel(ctx, static_cast<int64_t>(qs.size()), 1, [&](int64_t i0, int64_t i1) {
      std::vector<float> k, v, score;
      int64_t n = 0;
      for (int64_t i = i0; i < i1; ++i) {
        const query_ref& r = qs[static_cast<size_t>(i)];
        const float* vals = both(r, k, v, n);
        attend_heads(a, r, k.data(), vals, n, 0, H, score);
      }
    });
    return;
  }
  for (const query_ref& r : qs) { // few queries (decode): their heads split
    std::vector<float> k, v;
    int64_t n = 0;
    const float* vals = both(r, k, v, n);
    parallel(ctx, H, 1, [&](int64_t h0, int64_t h1) {
      std::vector<float> score;
      attend_heads(a, r, k.data(), vals, n, h0, h1, score);
    });
  }
}

bool float_type(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
}

} // namespace

void register_compress(registry& r) {
  r.add(
      op::kv_compress, backend::cpu, "f32|f16|bf16 caches",
      [](const op_args& a) {
        return contiguous_args(a) && float_type(a.src[0].type) && float_type(a.dst.type);
      },
      kv_compress);
  // (one key-value head: V4's, whose src1 is src2, read once for both)
  r.add(
      op::paged_attention, backend::cpu, "compressed",
      [](const op_args& a) {
        return a.src[6].data && !a.src[7].data && contiguous_args(a) &&
               a.src[0].type == dtype::f32 && a.src[1].dims[2] == 1 && float_type(a.src[1].type) &&
               float_type(a.src[2].type) && float_type(a.src[6].type) &&
               (!a.src[4].data ||
                (a.src[4].type == dtype::f32 && a.src[4].numel() == a.src[0].dims[1]));
      },
      paged_compressed);
}

} // namespace troupe::kernels::cpu
