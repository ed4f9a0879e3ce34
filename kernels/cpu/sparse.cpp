// sparse.cpp (cpu): DeepSeek Sparse Attention's parts (op.hpp): dsa_select (the lightning
// indexer's scores of every key up to a query's position, or of every compressed entry it has
// closed (DeepSeek-V4), relu'd per head and summed with the query's head weights, and its top k;
// ties: the earlier position first; or each head's best blocks of positions, MiniMax M3's) and
// paged_attention over such a selection (src5; or one per KV head). f32 sums (the vectorised
// dot_f32 / dequant_row of vec.cpp); the work split over the queries. The selection reads every key
// of the sequence once per query.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/paged_rows.hpp"

namespace troupe::kernels::cpu {
namespace {

// MiniMax M3's: each head's top p.k blocks of positions by their best score, the query's own
// block and the p.local_blocks - 1 before it first (ties: the earlier block)
void block_select(const op_args& a, const exec_ctx& ctx) {
  const auto &q = a.src[0], &kc = a.src[1];
  const int64_t H = q.dims[1], D = q.dims[2], b = a.p.block, K = a.p.k;
  const auto qs = queries(a.src[2]);
  parallel(ctx, static_cast<int64_t>(qs.size()), 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> k(static_cast<size_t>(D)), best;
    std::vector<int32_t> order;
    for (int64_t i = i0; i < i1; ++i) {
      const query_ref& r = qs[static_cast<size_t>(i)];
      const float* qt = q.as<float>() + r.t * H * D;
      const int64_t nb = r.pos / b + 1, own = r.pos / b;
      best.assign(static_cast<size_t>(H * nb), -INFINITY);
      for (int64_t s = 0; s <= r.pos; ++s) {
        dequant_row(kc.type, row_at(kc, r.blocks, s, 0), 0, D, k.data());
        for (int64_t h = 0; h < H; ++h) {
          float& m = best[static_cast<size_t>(h * nb + s / b)];
          m = std::max(m, a.p.scale * dot_f32(qt + h * D, k.data(), D));
        }
      }
      int32_t* out = a.dst.row<int32_t>(r.t);
      for (int64_t h = 0; h < H; ++h) {
        float* bh = best.data() + h * nb;
        for (int64_t j = 0; j < a.p.local_blocks && own - j >= 0; ++j) bh[own - j] = INFINITY;
        order.resize(static_cast<size_t>(nb));
        std::iota(order.begin(), order.end(), 0);
        const int64_t n = std::min(K, nb);
        std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t x, int32_t y) {
          return bh[x] > bh[y] || (bh[x] == bh[y] && x < y);
        });
        for (int64_t j = 0; j < K; ++j)
          for (int64_t e = 0; e < b; ++e) {
            const int64_t s = j < n ? order[static_cast<size_t>(j)] * b + e : -1;
            out[(h * K + j) * b + e] = s >= 0 && s <= r.pos ? static_cast<int32_t>(s) : -1;
          }
      }
    }
  });
}

void dsa_select(const op_args& a, const exec_ctx& ctx) {
  if (a.p.block > 0) return block_select(a, ctx);
  const auto &q = a.src[0], &kc = a.src[1], &w = a.src[3];
  const int64_t H = q.dims[1], D = q.dims[2], K = a.dst.cols();
  const auto qs = queries(a.src[2]);
  parallel(ctx, static_cast<int64_t>(qs.size()), 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> k(static_cast<size_t>(D));
    std::vector<float> score;
    std::vector<int32_t> order;
    for (int64_t i = i0; i < i1; ++i) {
      const query_ref& r = qs[static_cast<size_t>(i)];
      const float* qt = q.as<float>() + r.t * H * D;
      const float* wt = w.as<float>() + r.t * H;
      // the candidates: positions 0..pos, or the compressed entries pos has closed (V4)
      const int64_t cand = a.p.compress > 0 ? (r.pos + 1) / a.p.compress : r.pos + 1;
      score.assign(static_cast<size_t>(cand), 0.0f);
      for (int64_t s = 0; s < cand; ++s) {
        dequant_row(kc.type, row_at(kc, r.blocks, s, 0), 0, D, k.data());
        float sum = 0;
        for (int64_t h = 0; h < H; ++h)
          sum += wt[h] * std::max(0.0f, a.p.scale * dot_f32(qt + h * D, k.data(), D));
        score[static_cast<size_t>(s)] = sum;
      }
      order.resize(score.size());
      std::iota(order.begin(), order.end(), 0);
      const auto by_score = [&](int32_t x, int32_t y) {
        return score[x] > score[y] || (score[x] == score[y] && x < y);
      };
      const int64_t picks = a.p.expand ? a.p.k : K; // (expanded: entries, then their positions)
      const int64_t n = std::min<int64_t>(picks, cand);
      std::partial_sort(order.begin(), order.begin() + n, order.end(), by_score);
      int32_t* out = a.dst.row<int32_t>(r.t);
      if (a.p.expand) { // each entry's positions, then the incomplete window's (GLM-5.3)
        const int64_t m = a.p.compress, tail = (r.pos + 1) % m;
        for (int64_t j = 0; j < picks; ++j)
          for (int64_t i = 0; i < m; ++i)
            out[j * m + i] =
                j < n ? static_cast<int32_t>(order[static_cast<size_t>(j)] * m + i) : -1;
        for (int64_t i = 0; i < m - 1; ++i)
          out[picks * m + i] = i < tail ? static_cast<int32_t>(r.pos + 1 - tail + i) : -1;
        continue;
      }
      for (int64_t j = 0; j < K; ++j) out[j] = j < n ? order[static_cast<size_t>(j)] : -1;
    }
  });
}

void paged_sparse(const op_args& a, const exec_ctx& ctx) {
  const auto &q = a.src[0], &kc = a.src[1], &vc = a.src[2], &sel = a.src[5];
  const int64_t H = q.dims[1], D = q.dims[2], Hkv = kc.dims[2], group = H / Hkv;
  // (a selection per KV head: head h reads its KV head's K)
  const int64_t G = a.p.sel_per_kv ? Hkv : 1, K = sel.cols() / G;
  const auto qs = queries(a.src[3]);
  parallel(ctx, static_cast<int64_t>(qs.size()), 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> row(static_cast<size_t>(D)), score(static_cast<size_t>(K)),
        acc(static_cast<size_t>(D));
    for (int64_t i = i0; i < i1; ++i) {
      const query_ref& r = qs[static_cast<size_t>(i)];
      for (int64_t h = 0; h < H; ++h) {
        const int32_t* picked = sel.row<int32_t>(r.t) + h / (H / G) * K;
        const int64_t kh = h / group;
        const float* qh = q.as<float>() + (r.t * H + h) * D;
        // the sink (src4: a logit in the denominator only; HY-V4)
        const float sink = a.src[4].data ? a.src[4].as<float>()[h] : -INFINITY;
        float mx = sink;
        for (int64_t j = 0; j < K; ++j) {
          const int64_t s = picked[j];
          if (s < 0 || s > r.pos) {
            score[static_cast<size_t>(j)] = -INFINITY;
            continue;
          }
          dequant_row(kc.type, row_at(kc, r.blocks, s, kh), 0, D, row.data());
          float sc = dot_f32(qh, row.data(), D) * a.p.scale;
          if (a.p.softcap > 0) sc = a.p.softcap * std::tanh(sc / a.p.softcap);
          score[static_cast<size_t>(j)] = sc;
          mx = std::max(mx, sc);
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        float sum = a.src[4].data && mx > -INFINITY ? std::exp(sink - mx) : 0.0f;
        for (int64_t j = 0; j < K; ++j) {
          if (score[static_cast<size_t>(j)] == -INFINITY) continue;
          const float e = std::exp(score[static_cast<size_t>(j)] - mx);
          sum += e;
          dequant_row(vc.type, row_at(vc, r.blocks, picked[j], kh), 0, D, row.data());
          for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += e * row[d];
        }
        float* out = a.dst.as<float>() + (r.t * H + h) * D;
        for (int64_t d = 0; d < D; ++d) out[d] = sum > 0 ? acc[static_cast<size_t>(d)] / sum : 0;
      }
    }
  });
}

bool float_type(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
}

} // namespace

void register_sparse(registry& r) {
  r.add(
      op::dsa_select, backend::cpu, "scan",
      [](const op_args& a) { return contiguous_args(a) && float_type(a.src[1].type); }, dsa_select);
  r.add(
      op::paged_attention, backend::cpu, "sparse",
      [](const op_args& a) {
        return a.src[5].data && !a.src[6].data && !a.src[7].data && contiguous_args(a) &&
               a.src[0].type == dtype::f32 && float_type(a.src[1].type) &&
               float_type(a.src[2].type) &&
               (!a.src[4].data ||
                (a.src[4].type == dtype::f32 && a.src[4].numel() == a.src[0].dims[1]));
      },
      paged_sparse);
}

} // namespace troupe::kernels::cpu
