// reduce.cpp (cpu): sum_rows (or each row's largest magnitude), argmax (lowest index on ties),
// top-k via partial selection (descending, ties to the lower index), threaded over rows.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

void sum_rows(const op_args& a, const exec_ctx& ctx) {
  const int64_t N = a.src[0].cols();
  if (a.p.row_absmax) {
    parallel(ctx, a.src[0].rows(), 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* x = a.src[0].row<float>(t);
        float m = 0.0f;
        for (int64_t i = 0; i < N; ++i) m = std::max(m, std::fabs(x[i]));
        a.dst.as<float>()[t] = m;
      }
    });
    return;
  }
  parallel(ctx, a.src[0].rows(), 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* x = a.src[0].row<float>(t);
      float acc[16] = {};
      int64_t i = 0;
      for (; i + 16 <= N; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
      float s = 0.0f;
      for (; i < N; ++i) s += x[i];
      for (float v : acc) s += v;
      a.dst.as<float>()[t] = s;
    }
  });
}

void argmax(const op_args& a, const exec_ctx& ctx) {
  const int64_t N = a.src[0].cols();
  parallel(ctx, a.src[0].rows(), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* x = a.src[0].row<float>(t);
      int64_t best = 0;
      for (int64_t i = 1; i < N; ++i)
        if (x[i] > x[best]) best = i;
      a.dst.as<int32_t>()[t] = static_cast<int32_t>(best);
    }
  });
}

void topk(const op_args& a, const exec_ctx& ctx) {
  const int64_t N = a.src[0].cols();
  const int k = a.p.k;
  parallel(ctx, a.src[0].rows(), 1, [&](int64_t t0, int64_t t1) {
    std::vector<int32_t> idx(N);
    for (int64_t t = t0; t < t1; ++t) {
      const float* x = a.src[0].row<float>(t);
      std::iota(idx.begin(), idx.end(), 0);
      auto better = [x](int32_t l, int32_t r) { return x[l] > x[r] || (x[l] == x[r] && l < r); };
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
      for (int j = 0; j < k; ++j) {
        a.dst.as<int32_t>()[t * k + j] = idx[j];
        a.dst2.as<float>()[t * k + j] = x[idx[j]];
      }
    }
  });
}

bool f32_src(const op_args& a) {
  return contiguous_args(a) && a.src[0].type == dtype::f32;
}

} // namespace

void register_reduce(registry& r) {
  r.add(op::sum_rows, backend::cpu, "f32", f32_src, sum_rows);
  r.add(op::argmax, backend::cpu, "f32", f32_src, argmax);
  r.add(op::topk, backend::cpu, "f32", f32_src, topk);
}

} // namespace troupe::kernels::cpu
