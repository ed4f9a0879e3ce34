// compress.cpp (ref): DeepSeek-V4's compressed attention (op.hpp): kv_compress turns each window
// of m tokens' cached kv and gate rows into one entry (a softmax-gated sum per channel, over two
// overlapping windows for the sparse layers, normed and rotated at the window's first position),
// and paged_attention over a sliding window of the cache plus those entries (all that the query's
// position has closed, or the ones an indexer picked), with sinks, in one softmax. In f64.
#include <algorithm>
#include <cmath>

#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {
namespace {

// KV head kh's row `s` of a sequence's paged cache, as f64
void cache_row(const tensor_view& c, const int32_t* blocks, int64_t s, int64_t kh,
               std::vector<double>& out) {
  std::vector<float> f(static_cast<size_t>(c.dims[3]));
  paged_row(c, blocks, s, kh, f.data());
  out.assign(f.begin(), f.end());
}

void kv_compress(const op_args& a, const exec_ctx&) {
  const auto &src = a.src[0], &ape = a.src[1], &nw = a.src[2], &seqs = a.src[3];
  const int64_t W = src.dims[3] / 2, Dc = a.dst.dims[3], m = a.p.compress, P = a.dst.dims[1];
  const bool overlap = W == 2 * Dc;
  const auto table = rope_inv_freq(a.p.rope);
  std::vector<double> row, e(static_cast<size_t>(Dc));
  for_each_query(seqs, [&](int64_t, int64_t p, const int32_t* blocks) {
    if ((p + 1) % m) return;
    const int64_t w = (p + 1) / m - 1;
    // the candidates of each channel: (gate logit, value), over one or two windows
    std::vector<std::vector<std::pair<double, double>>> cand(static_cast<size_t>(Dc));
    auto take = [&](int64_t first, int64_t half) { // window starting at `first`, values half
      for (int64_t j = 0; j < m; ++j) {
        cache_row(src, blocks, first + j, 0, row);
        for (int64_t c = 0; c < Dc; ++c) {
          const int64_t ch = half * Dc + c;
          cand[static_cast<size_t>(c)].emplace_back(row[static_cast<size_t>(W + ch)] +
                                                        ape.row<float>(j)[ch],
                                                    row[static_cast<size_t>(ch)]);
        }
      }
    };
    if (overlap && w > 0) take((w - 1) * m, 0);
    take(w * m, overlap ? 1 : 0);
    double ss = 0;
    for (int64_t c = 0; c < Dc; ++c) {
      const auto& cs = cand[static_cast<size_t>(c)];
      double mx = -INFINITY, sum = 0, acc = 0;
      for (const auto& [g, v] : cs) mx = std::max(mx, g);
      for (const auto& [g, v] : cs) {
        const double pr = std::exp(g - mx);
        sum += pr;
        acc += pr * v;
      }
      e[static_cast<size_t>(c)] = acc / sum;
      ss += e[static_cast<size_t>(c)] * e[static_cast<size_t>(c)];
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(Dc) + a.p.eps);
    if (nw.data) // (none: the entries as they are, GLM-5.3's pooled keys)
      for (int64_t c = 0; c < Dc; ++c) e[static_cast<size_t>(c)] *= inv * nw.as<float>()[c];
    rotate_head(a.p.rope, table, w * m, e.data()); // at the window's first position
    std::vector<float> f(e.begin(), e.end());
    const int64_t slot = static_cast<int64_t>(blocks[w / P]) * P + w % P;
    from_f32(a.dst.type, f.data(),
             static_cast<char*>(a.dst.data) + row_bytes(a.dst.type, slot * Dc), Dc);
  });
}

// attention over the window of the cache (src1 keys, src2 values) and compressed entries (src6,
// each key and value), all picked (src5: the entries a query attends over) or all closed
void paged_compressed(const op_args& a, const exec_ctx&) {
  const auto &q = a.src[0], &kc = a.src[1], &vc = a.src[2], &sinks = a.src[4], &sel = a.src[5],
             &cc = a.src[6];
  const int64_t H = q.dims[1], D = q.dims[2], group = H / kc.dims[2], m = a.p.compress;
  std::vector<double> row;
  for_each_query(a.src[3], [&](int64_t t, int64_t p, const int32_t* blocks) {
    const int64_t closed = (p + 1) / m;
    std::vector<int64_t> entries;
    if (sel.data) {
      for (int64_t j = 0; j < sel.cols(); ++j) {
        const int64_t w = sel.row<int32_t>(t)[j];
        if (w >= 0 && w < closed) entries.push_back(w);
      }
    } else {
      for (int64_t w = 0; w < closed; ++w) entries.push_back(w);
    }
    const int64_t first = a.p.window > 0 ? std::max<int64_t>(0, p - a.p.window + 1) : 0;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / group;
      const float* qh = q.as<float>() + (t * H + h) * D;
      auto dot = [&] {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += double{qh[d]} * row[static_cast<size_t>(d)];
        return s * a.p.scale;
      };
      std::vector<double> score;
      for (int64_t s = first; s <= p; ++s) {
        cache_row(kc, blocks, s, kh, row);
        score.push_back(dot());
      }
      for (int64_t w : entries) {
        cache_row(cc, blocks, w, 0, row);
        score.push_back(dot());
      }
      double mx = sinks.data ? double{sinks.as<float>()[h]} : -INFINITY;
      for (double s : score) mx = std::max(mx, s);
      double sum = sinks.data ? std::exp(sinks.as<float>()[h] - mx) : 0;
      for (double& s : score) sum += (s = std::exp(s - mx));
      std::vector<double> acc(static_cast<size_t>(D), 0.0);
      size_t j = 0;
      auto add = [&] {
        for (int64_t d = 0; d < D; ++d)
          acc[static_cast<size_t>(d)] += score[j] / sum * row[static_cast<size_t>(d)];
        ++j;
      };
      for (int64_t s = first; s <= p; ++s) {
        cache_row(vc, blocks, s, kh, row);
        add();
      }
      for (int64_t w : entries) {
        cache_row(cc, blocks, w, 0, row);
        add();
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

void register_compress(registry& r) {
  r.add(
      op::kv_compress, backend::ref, "any",
      [](const op_args& a) {
        return all_contiguous(a) && float_type(a.src[0].type) && float_type(a.dst.type);
      },
      kv_compress);
  r.add(
      op::paged_attention, backend::ref, "compressed",
      [](const op_args& a) {
        return a.src[6].data && !a.src[7].data && all_contiguous(a) &&
               a.src[0].type == dtype::f32 && float_type(a.src[1].type) &&
               float_type(a.src[2].type) && float_type(a.src[6].type) &&
               (!a.src[4].data ||
                (a.src[4].type == dtype::f32 && a.src[4].numel() == a.src[0].dims[1]));
      },
      paged_compressed);
}

} // namespace troupe::kernels::ref
