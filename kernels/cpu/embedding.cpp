// embedding.cpp (cpu): rows of the table (any stored dtype) to f32, threaded over tokens.
// Out-of-range ids give zero rows (another shard's vocabulary slice), or row 0 with p.ids_row0.
#include <cstring>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

void embedding(const op_args& a, const exec_ctx& ctx) {
  const auto& table = a.src[0];
  const int32_t* ids = a.src[1].as<int32_t>();
  const int64_t V = table.rows(), C = table.cols();
  parallel(ctx, a.src[1].numel(), 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* out = a.dst.row<float>(t);
      const bool in = ids[t] >= 0 && ids[t] < V;
      if (!in && (!a.p.ids_row0 || V == 0))
        std::memset(out, 0, C * sizeof(float));
      else
        dequant_row(table.type, table.row(in ? ids[t] : 0), 0, C, out);
    }
  });
}

} // namespace

void register_embedding(registry& r) {
  r.add(
      op::embedding, backend::cpu, "any",
      [](const op_args& a) {
        return contiguous_args(a) && a.src[0].type != dtype::i8 && a.src[0].type != dtype::i32;
      },
      embedding);
}

} // namespace troupe::kernels::cpu
