// embedding.cpp (ref): dst[t] = table[ids[t]] converted to f32. Ids outside [0, V) are a
// caller bug caught earlier (the engine validates tokens) or another shard's vocabulary slice;
// here they produce zeros, or row 0 with p.ids_row0.
#include "kernels/ref/ref.hpp"

#include <cstring>

namespace troupe::kernels::ref {
namespace {

void embedding(const op_args& a, const exec_ctx&) {
  const auto& table = a.src[0];
  const int32_t* ids = a.src[1].as<int32_t>();
  const int64_t V = table.rows(), C = table.cols();
  for (int64_t t = 0; t < a.src[1].numel(); ++t) {
    float* out = a.dst.row<float>(t);
    int32_t id = ids[t];
    if (id < 0 || id >= V) {
      if (!a.p.ids_row0 || V == 0) {
        std::memset(out, 0, C * sizeof(float));
        continue;
      }
      id = 0;
    }
    to_f32(table.type, table.row(id), out, C);
  }
}

} // namespace

void register_embedding(registry& r) {
  r.add(
      op::embedding, backend::ref, "any", [](const op_args& a) { return all_contiguous(a); },
      embedding);
}

} // namespace troupe::kernels::ref
