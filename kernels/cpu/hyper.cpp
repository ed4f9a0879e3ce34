// hyper.cpp (cpu): DeepSeek-V4's hyper-connections (op.hpp hc_pre, hc_post) in f32: a token's
// streams' RMS, the fn rows' dots with them (the vectorised dot_f32), the small pre / post / comb
// maps and the Sinkhorn-Knopp steps in double, the streams' mix; hc_post's mix of the block's
// output and the streams by post and comb (or, Gemma 3n's AltUp, the streams' own prediction).
// The work split over the tokens.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

void hc_pre(const op_args& a, const exec_ctx& ctx) {
  const auto &x = a.src[0], &fn = a.src[1];
  const int64_t T = x.rows(), C = a.dst.cols(), N = x.cols() / C;
  if (!fn.data) { // the streams' mean
    parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* xr = x.row<float>(t);
        float* out = a.dst.row<float>(t);
        for (int64_t c = 0; c < C; ++c) {
          float s = 0;
          for (int64_t n = 0; n < N; ++n) s += xr[n * C + c];
          out[c] = s / static_cast<float>(N);
        }
      }
    });
    return;
  }
  const int64_t M = fn.rows();
  const bool layer = M == N * (N + 2), independent = M == 2 * N && N > 1;
  const double eps = a.p.bias;
  const float* b = a.src[2].as<float>();
  const float* s = a.src[3].as<float>();
  parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<double> z(static_cast<size_t>(M)), comb(static_cast<size_t>(N * N));
    std::vector<float> pre(static_cast<size_t>(N));
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x.row<float>(t);
      const double ss = dot_f32(xr, xr, N * C);
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(N * C) + a.p.eps);
      for (int64_t m = 0; m < M; ++m)
        z[static_cast<size_t>(m)] = dot_f32(fn.row<float>(m), xr, N * C) * inv;
      for (int64_t n = 0; n < N; ++n)
        pre[static_cast<size_t>(n)] =
            static_cast<float>(sigmoid(s[0] * z[static_cast<size_t>(n)] + b[n]) + eps);
      float* out = a.dst.row<float>(t);
      for (int64_t c = 0; c < C; ++c) {
        float v = 0;
        for (int64_t n = 0; n < N; ++n) v += pre[static_cast<size_t>(n)] * xr[n * C + c];
        out[c] = v;
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
      auto at = [&](int64_t j, int64_t k) -> double& {
        return comb[static_cast<size_t>(j * N + k)];
      };
      for (int64_t j = 0; j < N; ++j) {
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < N; ++k) {
          at(j, k) = s[2] * z[static_cast<size_t>(2 * N + j * N + k)] + b[2 * N + j * N + k];
          mx = std::max(mx, at(j, k));
        }
        for (int64_t k = 0; k < N; ++k) sum += at(j, k) = std::exp(at(j, k) - mx);
        for (int64_t k = 0; k < N; ++k) at(j, k) = at(j, k) / sum + eps;
      }
      for (int it = 0; it < std::max(a.p.k, 1);
           ++it) { // columns, then rows and columns p.k - 1 times
        if (it > 0)
          for (int64_t j = 0; j < N; ++j) {
            double sum = 0;
            for (int64_t k = 0; k < N; ++k) sum += at(j, k);
            for (int64_t k = 0; k < N; ++k) at(j, k) /= sum + eps;
          }
        for (int64_t k = 0; k < N; ++k) {
          double sum = 0;
          for (int64_t j = 0; j < N; ++j) sum += at(j, k);
          for (int64_t j = 0; j < N; ++j) at(j, k) /= sum + eps;
        }
      }
      for (int64_t i = 0; i < N * N; ++i)
        mix[N + i] = static_cast<float>(comb[static_cast<size_t>(i)]);
    }
  });
}

void hc_post(const op_args& a, const exec_ctx& ctx) {
  const auto &x = a.src[0], &y = a.src[1], &mix = a.src[2];
  const int64_t T = x.rows(), C = y.cols(), N = x.cols() / C;
  parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> row(static_cast<size_t>(N * C)); // (dst may be x)
    for (int64_t t = t0; t < t1; ++t) {
      const float *xr = x.row<float>(t), *yr = y.row<float>(t), *m = mix.row<float>(t);
      for (int64_t k = 0; k < N; ++k) {
        float* o = row.data() + k * C;
        if (mix.cols() == N * N && N > 1) { // AltUp's prediction: x_k + sum_j m[k N + j] x_j
          std::copy_n(xr + k * C, C, o);
          for (int64_t j = 0; j < N; ++j) {
            const float w = m[k * N + j];
            const float* xj = xr + j * C;
            for (int64_t c = 0; c < C; ++c) o[c] += w * xj[c];
          }
          continue;
        }
        for (int64_t c = 0; c < C; ++c) o[c] = m[k] * yr[c];
        if (mix.cols() == N) { // independent: each stream its own residual
          for (int64_t c = 0; c < C; ++c) o[c] += xr[k * C + c];
          continue;
        }
        for (int64_t j = 0; j < N; ++j) {
          const float w = m[N + j * N + k];
          const float* xj = xr + j * C;
          for (int64_t c = 0; c < C; ++c) o[c] += w * xj[c];
        }
      }
      std::copy(row.begin(), row.end(), a.dst.row<float>(t));
    }
  });
}

} // namespace

void register_hyper(registry& r) {
  r.add(op::hc_pre, backend::cpu, "f32", contiguous_args, hc_pre);
  r.add(op::hc_post, backend::cpu, "f32", contiguous_args, hc_post);
}

} // namespace troupe::kernels::cpu
