// rope.cpp (cpu): rotary embedding with a per-token cos/sin table computed in double and
// applied in f32; works in place (dst may alias src0). Threaded over tokens.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

void rope(const op_args& a, const exec_ctx& ctx) {
  const auto table = rope_inv_freq(a.p.rope);
  const int64_t T = a.src[0].dims[0], H = a.src[0].dims[1], D = a.src[0].dims[2];
  const int half = a.p.rope.rot_dim / 2;
  const bool neox = a.p.rope.layout == rope_layout::neox;
  const int32_t* pos = a.src[1].as<int32_t>();
  parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(half), sn(half);
    for (int64_t t = t0; t < t1; ++t) {
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos[t]) * table.inv_freq[i];
        cs[i] = static_cast<float>(std::cos(angle) * table.attn_factor);
        sn[i] = static_cast<float>(std::sin(angle) * table.attn_factor);
      }
      for (int64_t h = 0; h < H; ++h) {
        const float* x = a.src[0].as<float>() + (t * H + h) * D;
        float* y = a.dst.as<float>() + (t * H + h) * D;
        for (int i = 0; i < half; ++i) {
          const int ia = neox ? i : 2 * i;
          const int ib = neox ? i + half : 2 * i + 1;
          const float xa = x[ia], xb = x[ib];
          y[ia] = xa * cs[i] - xb * sn[i];
          y[ib] = xa * sn[i] + xb * cs[i];
        }
        if (y != x)
          for (int64_t d = a.p.rope.rot_dim; d < D; ++d) y[d] = x[d];
      }
    }
  });
}

} // namespace

void register_rope(registry& r) {
  r.add(
      op::rope, backend::cpu, "f32",
      [](const op_args& a) {
        return contiguous_args(a) && a.src[0].type == dtype::f32 && a.dst.type == dtype::f32;
      },
      rope);
}

} // namespace troupe::kernels::cpu
