// hyper.cpp (ref): DeepSeek-V4's manifold-constrained hyper-connections (op.hpp): hc_pre turns a
// token's N residual streams into the block's input (their mix by `pre`) and, for a layer, the
// `post` and `comb` weights hc_post mixes the block's output and the streams back with (comb a
// Sinkhorn-Knopp projection towards a doubly stochastic matrix); hc_post also makes Gemma 3n's
// AltUp prediction (each stream plus its per-token mix of all). In f64.
#include <cmath>

#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {
namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

void hc_pre(const op_args& a, const exec_ctx&) {
  const auto &x = a.src[0], &fn = a.src[1], &base = a.src[2], &sc = a.src[3];
  const int64_t T = x.rows(), C = a.dst.cols(), N = x.cols() / C, M = fn.data ? fn.rows() : 0;
  if (!fn.data) { // the streams' mean
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double s = 0;
        for (int64_t n = 0; n < N; ++n) s += x.row<float>(t)[n * C + c];
        a.dst.row<float>(t)[c] = static_cast<float>(s / static_cast<double>(N));
      }
    return;
  }
  const bool layer = M == N * (N + 2), independent = M == 2 * N && N > 1;
  const double eps = a.p.bias;
  std::vector<double> z(static_cast<size_t>(M)), comb(static_cast<size_t>(N * N));
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x.row<float>(t);
    double ss = 0;
    for (int64_t i = 0; i < N * C; ++i) ss += double{xr[i]} * xr[i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(N * C) + a.p.eps);
    for (int64_t m = 0; m < M; ++m) {
      double dot = 0;
      for (int64_t i = 0; i < N * C; ++i) dot += double{fn.row<float>(m)[i]} * xr[i];
      z[static_cast<size_t>(m)] = dot * inv;
    }
    const float* b = base.as<float>();
    const float* s = sc.as<float>();
    float* out = a.dst.row<float>(t);
    for (int64_t c = 0; c < C; ++c) out[c] = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double pre = sigmoid(s[0] * z[static_cast<size_t>(n)] + b[n]) + eps;
      for (int64_t c = 0; c < C; ++c) out[c] = static_cast<float>(out[c] + pre * xr[n * C + c]);
    }
    if (independent) { // post alone: p.scale sigmoid(.) + eps
      for (int64_t n = 0; n < N; ++n)
        a.dst2.row<float>(t)[n] = static_cast<float>(
            a.p.scale * sigmoid(s[1] * z[static_cast<size_t>(N + n)] + b[N + n]) + eps);
      continue;
    }
    if (!layer) continue;
    float* mix = a.dst2.row<float>(t);
    for (int64_t n = 0; n < N; ++n)
      mix[n] = static_cast<float>(2.0 * sigmoid(s[1] * z[static_cast<size_t>(N + n)] + b[N + n]));
    auto at = [&](int64_t j, int64_t k) -> double& { return comb[static_cast<size_t>(j * N + k)]; };
    for (int64_t j = 0; j < N; ++j) { // softmax over each row, plus eps
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < N; ++k) {
        at(j, k) = s[2] * z[static_cast<size_t>(2 * N + j * N + k)] + b[2 * N + j * N + k];
        mx = std::max(mx, at(j, k));
      }
      for (int64_t k = 0; k < N; ++k) sum += at(j, k) = std::exp(at(j, k) - mx);
      for (int64_t k = 0; k < N; ++k) at(j, k) = at(j, k) / sum + eps;
    }
    auto columns = [&] {
      for (int64_t k = 0; k < N; ++k) {
        double sum = 0;
        for (int64_t j = 0; j < N; ++j) sum += at(j, k);
        for (int64_t j = 0; j < N; ++j) at(j, k) /= sum + eps;
      }
    };
    columns();
    for (int it = 1; it < a.p.k; ++it) {
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < N; ++k) sum += at(j, k);
        for (int64_t k = 0; k < N; ++k) at(j, k) /= sum + eps;
      }
      columns();
    }
    for (int64_t i = 0; i < N * N; ++i)
      mix[N + i] = static_cast<float>(comb[static_cast<size_t>(i)]);
  }
}

void hc_post(const op_args& a, const exec_ctx&) {
  const auto &x = a.src[0], &y = a.src[1], &mix = a.src[2];
  const int64_t T = x.rows(), C = y.cols(), N = x.cols() / C;
  std::vector<double> row(static_cast<size_t>(N * C)); // (dst may be x)
  for (int64_t t = 0; t < T; ++t) {
    const float *xr = x.row<float>(t), *yr = y.row<float>(t), *m = mix.row<float>(t);
    for (int64_t k = 0; k < N; ++k)
      for (int64_t c = 0; c < C; ++c) {
        double v = 0;
        if (mix.cols() == N * N && N > 1) { // AltUp's prediction: x_k + sum_j m[k N + j] x_j
          v = xr[k * C + c];
          for (int64_t j = 0; j < N; ++j) v += double{m[k * N + j]} * xr[j * C + c];
        } else if (mix.cols() == N) { // independent: each stream its own residual
          v = double{m[k]} * yr[c] + xr[k * C + c];
        } else {
          v = double{m[k]} * yr[c];
          for (int64_t j = 0; j < N; ++j) v += double{m[N + j * N + k]} * xr[j * C + c];
        }
        row[static_cast<size_t>(k * C + c)] = v;
      }
    float* out = a.dst.row<float>(t);
    for (int64_t i = 0; i < N * C; ++i) out[i] = static_cast<float>(row[static_cast<size_t>(i)]);
  }
}

} // namespace

void register_hyper(registry& r) {
  r.add(op::hc_pre, backend::ref, "f32", all_contiguous, hc_pre);
  r.add(op::hc_post, backend::ref, "f32", all_contiguous, hc_post);
}

} // namespace troupe::kernels::ref
