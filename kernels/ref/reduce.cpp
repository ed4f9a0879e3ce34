// reduce.cpp (ref): sum_rows (or each row's largest magnitude), argmax (lowest index on ties) and
// top-k (descending values, ties broken by the lower index) over the rows of an f32 [T, N] tensor.
#include "kernels/ref/ref.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace troupe::kernels::ref {
namespace {

void sum_rows(const op_args& a, const exec_ctx&) {
  for (int64_t t = 0; t < a.src[0].rows(); ++t) {
    const float* x = a.src[0].row<float>(t);
    double s = 0.0;
    for (int64_t i = 0; i < a.src[0].cols(); ++i)
      s = a.p.row_absmax ? std::max(s, std::fabs(static_cast<double>(x[i]))) : s + x[i];
    a.dst.as<float>()[t] = static_cast<float>(s);
  }
}

void argmax(const op_args& a, const exec_ctx&) {
  for (int64_t t = 0; t < a.src[0].rows(); ++t) {
    const float* x = a.src[0].row<float>(t);
    int64_t best = 0;
    for (int64_t i = 1; i < a.src[0].cols(); ++i)
      if (x[i] > x[best]) best = i;
    a.dst.as<int32_t>()[t] = static_cast<int32_t>(best);
  }
}

void topk(const op_args& a, const exec_ctx&) {
  const int64_t N = a.src[0].cols();
  const int k = a.p.k;
  std::vector<int32_t> idx(N);
  for (int64_t t = 0; t < a.src[0].rows(); ++t) {
    const float* x = a.src[0].row<float>(t);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [x](int32_t l, int32_t r) { return x[l] > x[r]; });
    for (int j = 0; j < k; ++j) {
      a.dst.as<int32_t>()[t * k + j] = idx[j];
      a.dst2.as<float>()[t * k + j] = x[idx[j]];
    }
  }
}

bool f32_src(const op_args& a) {
  return all_contiguous(a) && a.src[0].type == dtype::f32;
}

} // namespace

void register_reduce(registry& r) {
  r.add(op::sum_rows, backend::ref, "f32", f32_src, sum_rows);
  r.add(op::argmax, backend::ref, "f32", f32_src, argmax);
  r.add(op::topk, backend::ref, "f32", f32_src, topk);
}

} // namespace troupe::kernels::ref
