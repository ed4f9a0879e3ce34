// latent.cpp (ref): the ops of DeepSeek's latent attention and routing (op.hpp): concat along
// the last dim (and slice, its inverse), per-head matmuls (head_matmul, both orientations) with
// rows dequantized to f32 and f64 sums, and the group-limited router (moe_router). Plain loops; the
// CPU backend runs the router from here (its buffers are per thread and kept, so a step allocates
// nothing).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {
namespace {

void concat(const op_args& a, const exec_ctx&) {
  const auto &x = a.src[0], &y = a.src[1];
  const int64_t A = x.cols(), B = y.cols();
  for (int64_t r = 0; r < x.rows(); ++r) {
    float* out = a.dst.row<float>(r);
    std::copy_n(x.row<float>(r), A, out);
    std::copy_n(y.row<float>(r), B, out + A);
  }
}

void slice(const op_args& a, const exec_ctx&) {
  for (int64_t r = 0; r < a.src[0].rows(); ++r)
    std::copy_n(a.src[0].row<float>(r) + a.p.col0, a.p.cols, a.dst.row<float>(r));
}

void head_matmul(const op_args& a, const exec_ctx&) {
  const auto &x = a.src[0], &w = a.src[1];
  const int64_t T = x.dims[0], H = x.dims[1], Kx = x.dims[2], N = a.dst.dims[2];
  const bool tr = a.p.k != 0;
  const int64_t K = tr ? w.rows() / H : w.cols();
  std::vector<float> row(static_cast<size_t>(w.cols()));
  std::vector<double> acc(static_cast<size_t>(N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const float* xv = x.as<float>() + (t * H + h) * Kx;
      std::fill(acc.begin(), acc.end(), 0.0);
      if (tr) { // W[h K + k, n]
        for (int64_t k = 0; k < K; ++k) {
          to_f32(w.type, w.row(h * K + k), row.data(), N);
          for (int64_t n = 0; n < N; ++n)
            acc[static_cast<size_t>(n)] += double{xv[k]} * row[static_cast<size_t>(n)];
        }
      } else { // W[h N + n, k]
        for (int64_t n = 0; n < N; ++n) {
          to_f32(w.type, w.row(h * N + n), row.data(), K);
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += double{xv[k]} * row[static_cast<size_t>(k)];
          acc[static_cast<size_t>(n)] = s;
        }
      }
      float* out = a.dst.as<float>() + (t * H + h) * N;
      for (int64_t n = 0; n < N; ++n) out[n] = static_cast<float>(acc[static_cast<size_t>(n)]);
    }
}

// PhiMoE's sparsemixer at inference: two choices, each the best logit m not chosen yet, weighted
// by the softmax at it over the logits l not chosen yet that are within a relative 2 jitter of
// it, (m - l) / max(|l|, m) <= 2 jitter (transformers' mask; a NaN ratio keeps the logit)
status sparsemixer(const op_args& a) {
  const auto& lg = a.src[0];
  const int64_t T = lg.rows(), E = lg.cols();
  if (a.p.k != 2 || E < 2)
    return make_error(errc::invalid_argument, "moe_router: sparsemixer chooses 2 of {} (k {})", E,
                      a.p.k);
  const double limit = 2.0 * static_cast<double>(a.p.router_jitter);
  for (int64_t t = 0; t < T; ++t) {
    const float* l = lg.row<float>(t);
    int64_t first = -1;
    for (int64_t j = 0; j < 2; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)
        if (e != first && (best < 0 || l[e] > l[best])) best = e;
      const double m = l[best];
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) {
        if (e == first) continue;
        const double x = l[e];
        if (!((m - x) / std::max(std::abs(x), m) > limit)) sum += std::exp(x - m);
      }
      a.dst.row<int32_t>(t)[j] = static_cast<int32_t>(best);
      a.dst2.row<float>(t)[j] = static_cast<float>(1.0 / sum * a.p.scale);
      first = best;
    }
  }
  return {};
}

status moe_router(const op_args& a, const exec_ctx&) {
  const auto& lg = a.src[0];
  const int64_t T = lg.rows(), E = lg.cols(), k = a.p.k;
  const float* bias = a.src[1].data ? a.src[1].as<float>() : nullptr;
  const int64_t G = a.p.n_group > 1 ? a.p.n_group : 1, per = E / G;
  const int64_t keep = a.p.n_group > 1 ? a.p.topk_group : 1;
  // per-thread buffers, kept between calls: the CPU backend runs this kernel every MoE step
  thread_local std::vector<double> score, choice, gscore, top;
  thread_local std::vector<int64_t> order, groups;
  thread_local std::vector<char> allowed;
  score.resize(static_cast<size_t>(E)), choice.resize(static_cast<size_t>(E));
  order.resize(static_cast<size_t>(E)), groups.resize(static_cast<size_t>(G));
  gscore.resize(static_cast<size_t>(G)), allowed.resize(static_cast<size_t>(G));
  if (a.p.router_sparsemixer) return sparsemixer(a);
  for (int64_t t = 0; t < T; ++t) {
    const float* l = lg.row<float>(t);
    if (a.p.router_sqrt_softplus) { // DeepSeek-V4
      for (int64_t e = 0; e < E; ++e) {
        const double x = l[e];
        score[static_cast<size_t>(e)] = std::sqrt(x > 30 ? x : std::log1p(std::exp(x)));
      }
    } else if (a.p.router_sigmoid) {
      for (int64_t e = 0; e < E; ++e)
        score[static_cast<size_t>(e)] = 1.0 / (1.0 + std::exp(-double{l[e]}));
    } else {
      const double mx = *std::max_element(l, l + E);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e)
        sum += score[static_cast<size_t>(e)] = std::exp(double{l[e]} - mx);
      for (auto& v : score) v /= sum;
    }
    for (int64_t e = 0; e < E; ++e) // (Kolibri: the choice by the logits themselves plus the bias)
      choice[static_cast<size_t>(e)] =
          (a.p.router_bias_on_logits ? double{l[e]} : score[static_cast<size_t>(e)]) +
          (bias ? bias[e] : 0.0);
    // groups by the sum of their two best choice scores (one expert per group: itself)
    for (int64_t g = 0; g < G; ++g) {
      top.assign(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(top.begin(), top.end(), std::greater<>());
      gscore[static_cast<size_t>(g)] = top[0] + (per > 1 && !a.p.group_max ? top[1] : 0.0);
    }
    std::iota(groups.begin(), groups.end(), 0);
    std::stable_sort(groups.begin(), groups.end(), [&](int64_t x, int64_t y) {
      return gscore[static_cast<size_t>(x)] > gscore[static_cast<size_t>(y)];
    });
    std::fill(allowed.begin(), allowed.end(), G == 1 ? 1 : 0);
    for (int64_t i = 0; i < keep && G > 1; ++i)
      allowed[static_cast<size_t>(groups[static_cast<size_t>(i)])] = 1;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
      const bool ax = allowed[static_cast<size_t>(x / per)],
                 ay = allowed[static_cast<size_t>(y / per)];
      if (ax != ay) return ax;
      return choice[static_cast<size_t>(x)] > choice[static_cast<size_t>(y)];
    });
    if (a.src[2].data) { // hash routing: the token's row of the table
      const int64_t tok = a.src[2].as<int32_t>()[t];
      if (tok < 0 || tok >= a.src[3].rows())
        return make_error(errc::invalid_argument,
                          "moe_router: token {} outside the table's {} rows", tok, a.src[3].rows());
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = a.src[3].row<int32_t>(tok)[j];
        if (e < 0 || e >= E)
          return make_error(errc::invalid_argument,
                            "moe_router: token {}'s table names expert {} of {}", tok, e, E);
        order[static_cast<size_t>(j)] = e;
      }
    }
    double sum = 0;
    for (int64_t j = 0; j < k; ++j)
      sum += score[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = order[static_cast<size_t>(j)];
      double w = score[static_cast<size_t>(e)];
      if (a.p.router_norm) w /= sum + static_cast<double>(a.p.router_eps);
      a.dst.row<int32_t>(t)[j] = static_cast<int32_t>(e);
      a.dst2.row<float>(t)[j] = static_cast<float>(w * a.p.scale);
    }
  }
  return {};
}

} // namespace

void register_latent(registry& r) {
  auto f32 = [](const op_args& a) { return all_contiguous(a); };
  r.add(op::concat, backend::ref, "f32", f32, concat);
  r.add(op::slice, backend::ref, "f32", f32, slice);
  r.add(op::head_matmul, backend::ref, "any", f32, head_matmul);
  r.add(op::moe_router, backend::ref, "f32", f32, moe_router);
}

} // namespace troupe::kernels::ref
