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

/// One head's values x (f64) rotated in place at position pos by `spec` (its inverse
/// frequencies `table`): the pairs from rot_offset, by minus the angle when inverse (rope.cpp).
void rotate_head(const rope_spec& spec, const rope_table& table, int64_t pos, double* x);

/// KV head kh's row of position (or compressed entry) s of a sequence in the paged cache c
/// [NB, P, Hkv, D] (the sequence's block table `blocks`), as f32.
inline void paged_row(const tensor_view& c, const int32_t* blocks, int64_t s, int64_t kh,
                      float* out) {
  const int64_t P = c.dims[1], Hkv = c.dims[2], D = c.dims[3];
  const int64_t slot = static_cast<int64_t>(blocks[s / P]) * P + s % P;
  to_f32(c.type, static_cast<const char*>(c.data) + row_bytes(c.type, (slot * Hkv + kh) * D), out,
         D);
}

/// fn(t, p, blocks) for every query of a step's sequence table: its row, position, and its
/// sequence's block table.
template <class F>
void for_each_query(const tensor_view& seqs, F&& fn) {
  for (int64_t si = 0; si < seqs.rows(); ++si) {
    const int32_t* info = seqs.row<int32_t>(si);
    for (int64_t i = 0; i < info[1]; ++i) fn(info[0] + i, info[2] + i, info + 3);
  }
}

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
