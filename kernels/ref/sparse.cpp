// sparse.cpp (ref): DeepSeek Sparse Attention's parts (op.hpp): dsa_select, each query's top-k
// keys by the lightning indexer's score sum_h w_h relu(scale q_h . k_s) over the keys of its
// sequence up to its position, or over the compressed entries its position has closed
// (DeepSeek-V4; ties: the earlier position first), or each head's best blocks of positions
// (MiniMax M3), and paged_attention over such a selection (src5: the positions a query attends
// over, or each KV head's). Scores and sums in f64.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {
namespace {

// MiniMax M3's: each head's top p.k blocks of positions by their best score, the query's own
// block and the p.local_blocks - 1 before it first
void block_select(const op_args& a) {
  const auto &q = a.src[0], &kc = a.src[1];
  const int64_t H = q.dims[1], D = q.dims[2], b = a.p.block, K = a.p.k;
  std::vector<float> k(static_cast<size_t>(D));
  for_each_query(a.src[2], [&](int64_t t, int64_t p, const int32_t* blocks) {
    const int64_t nb = p / b + 1, own = p / b;
    int32_t* out = a.dst.row<int32_t>(t);
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> best(static_cast<size_t>(nb), -INFINITY);
      for (int64_t s = 0; s <= p; ++s) {
        paged_row(kc, blocks, s, 0, k.data());
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += static_cast<double>(q.as<float>()[(t * H + h) * D + d]) * k[d];
        best[static_cast<size_t>(s / b)] =
            std::max(best[static_cast<size_t>(s / b)], a.p.scale * dot);
      }
      for (int64_t i = 0; i < a.p.local_blocks && own - i >= 0; ++i)
        best[static_cast<size_t>(own - i)] = INFINITY;
      std::vector<int64_t> order(static_cast<size_t>(nb));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t x, int64_t y) { return best[x] > best[y]; });
      for (int64_t j = 0; j < K; ++j)
        for (int64_t i = 0; i < b; ++i) {
          const int64_t s = j < nb ? order[static_cast<size_t>(j)] * b + i : -1;
          out[(h * K + j) * b + i] = s >= 0 && s <= p ? static_cast<int32_t>(s) : -1;
        }
    }
  });
}

void dsa_select(const op_args& a, const exec_ctx&) {
  if (a.p.block > 0) return block_select(a);
  const auto &q = a.src[0], &kc = a.src[1], &w = a.src[3];
  const int64_t H = q.dims[1], D = q.dims[2], K = a.dst.cols();
  std::vector<float> k(static_cast<size_t>(D));
  for_each_query(a.src[2], [&](int64_t t, int64_t p, const int32_t* blocks) {
    // the candidates: positions 0..p, or the compressed entries p's position has closed
    const int64_t n = a.p.compress > 0 ? (p + 1) / a.p.compress : p + 1;
    std::vector<double> score(static_cast<size_t>(n));
    for (int64_t s = 0; s < n; ++s) {
      paged_row(kc, blocks, s, 0, k.data());
      double sum = 0;
      for (int64_t h = 0; h < H; ++h) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += static_cast<double>(q.as<float>()[(t * H + h) * D + d]) * k[d];
        sum += static_cast<double>(w.as<float>()[t * H + h]) * std::max(0.0, a.p.scale * dot);
      }
      score[static_cast<size_t>(s)] = sum;
    }
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return score[x] > score[y]; });
    int32_t* out = a.dst.row<int32_t>(t);
    if (a.p.expand) { // each entry's positions, then the incomplete window's (GLM-5.3)
      const int64_t m = a.p.compress, k = a.p.k, tail = (p + 1) % m;
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < m; ++i)
          out[j * m + i] = j < n ? static_cast<int32_t>(order[static_cast<size_t>(j)] * m + i) : -1;
      for (int64_t i = 0; i < m - 1; ++i)
        out[k * m + i] = i < tail ? static_cast<int32_t>(p + 1 - tail + i) : -1;
      return;
    }
    for (int64_t j = 0; j < K; ++j)
      out[j] = j < n ? static_cast<int32_t>(order[static_cast<size_t>(j)]) : -1;
  });
}

void paged_sparse(const op_args& a, const exec_ctx&) {
  const auto &q = a.src[0], &kc = a.src[1], &vc = a.src[2], &sel = a.src[5];
  const int64_t H = q.dims[1], D = q.dims[2], Hkv = kc.dims[2], group = H / Hkv;
  // (a selection per KV head: head h reads its KV head's K)
  const int64_t G = a.p.sel_per_kv ? Hkv : 1, K = sel.cols() / G;
  std::vector<float> row(static_cast<size_t>(D));
  for_each_query(a.src[3], [&](int64_t t, int64_t p, const int32_t* blocks) {
    for (int64_t h = 0; h < H; ++h) {
      const int32_t* picked = sel.row<int32_t>(t) + h / (H / G) * K;
      const int64_t kh = h / group;
      std::vector<double> score;
      std::vector<int64_t> at;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t s = picked[j];
        if (s < 0 || s > p) continue;
        paged_row(kc, blocks, s, kh, row.data());
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += static_cast<double>(q.as<float>()[(t * H + h) * D + d]) * row[d];
        double sc = dot * a.p.scale;
        if (a.p.softcap > 0) sc = a.p.softcap * std::tanh(sc / a.p.softcap);
        score.push_back(sc);
        at.push_back(s);
      }
      std::vector<double> acc(static_cast<size_t>(D), 0.0);
      // the sink (src4: a logit per head in the denominator only; HY-V4)
      const double sink = a.src[4].data ? double{a.src[4].as<float>()[h]} : -INFINITY;
      double mx = sink;
      for (double s : score) mx = std::max(mx, s);
      if (mx == -INFINITY) mx = 0;
      double sum = a.src[4].data ? std::exp(sink - mx) : 0;
      for (double& s : score) sum += (s = std::exp(s - mx));
      for (size_t j = 0; j < at.size(); ++j) {
        paged_row(vc, blocks, at[j], kh, row.data());
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += score[j] / sum * row[d];
      }
      for (int64_t d = 0; d < D; ++d)
        a.dst.as<float>()[(t * H + h) * D + d] = static_cast<float>(acc[static_cast<size_t>(d)]);
    }
  });
}

bool float_type(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
}

} // namespace

void register_sparse(registry& r) {
  r.add(
      op::dsa_select, backend::ref, "any",
      [](const op_args& a) { return all_contiguous(a) && float_type(a.src[1].type); }, dsa_select);
  r.add(
      op::paged_attention, backend::ref, "sparse",
      [](const op_args& a) {
        return a.src[5].data && !a.src[6].data && !a.src[7].data && all_contiguous(a) &&
               a.src[0].type == dtype::f32 && float_type(a.src[1].type) &&
               float_type(a.src[2].type) &&
               (!a.src[4].data ||
                (a.src[4].type == dtype::f32 && a.src[4].numel() == a.src[0].dims[1]));
      },
      paged_sparse);
}

} // namespace troupe::kernels::ref
