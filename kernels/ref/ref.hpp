// ref.hpp: the reference backend: plain loops over contiguous tensors with f64 accumulation.
// It is the specification every other backend is tested against (kernels/test harness), so
// it favours obviousness over speed. Each family file registers its ops here.
#pragma once

#include <vector>

#include "core/convert.hpp"
#include "kernels/registry.hpp"

namespace troupe::kernels::ref {

void register_embedding(registry& r);
void register_matmul(registry& r);
void register_norm(registry& r);
void register_rope(registry& r);
void register_elementwise(registry& r);
void register_softmax(registry& r);
void register_reduce(registry& r);
void register_attention(registry& r);
void register_convert(registry& r);
void register_moe(registry& r);
void register_latent(registry& r);
void register_recurrent(registry& r);
void register_sparse(registry& r);
void register_hyper(registry& r);
void register_compress(registry& r);

/// Row i of a contiguous [rows, cols] view as f32 values.
inline std::vector<float> row_f32(const tensor_view& t, int64_t i) {
  std::vector<float> out(t.cols());
  to_f32(t.type, t.row(i), out.data(), t.cols());
  return out;
}

/// Any contiguous float-typed view, flattened to f32.
inline std::vector<float> all_f32(const tensor_view& t) {
  std::vector<float> out(t.numel());
  to_f32(t.type, t.data, out.data(), t.numel());
  return out;
}

inline bool all_contiguous(const op_args& a) {
  for (const auto& s : a.src)
    if (s.data && !s.contiguous()) return false;
  return a.dst.contiguous();
}

} // namespace troupe::kernels::ref
