// rope.cpp (ref): rotary embedding of x [T, H, D] at positions pos [T]. For each rotated pair
// (a, b) with inverse frequency f: angle = pos * f, a' = a cos - b sin, b' = a sin + b cos,
// cos and sin scaled by the table's attention factor. Pairs are (2i, 2i+1) for the
// interleaved layout and (i, i + rot_dim/2) for neox, counted from rot_offset; the other
// dimensions pass through. An inverse spec turns by minus the angle.
#include "kernels/ref/ref.hpp"

#include <cmath>

namespace troupe::kernels::ref {

void rotate_head(const rope_spec& spec, const rope_table& table, int64_t pos, double* x) {
  const int half = spec.rot_dim / 2;
  const bool neox = spec.layout == rope_layout::neox;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * table.inv_freq[static_cast<size_t>(i)];
    const double c = std::cos(angle) * table.attn_factor;
    const double s = std::sin(angle) * table.attn_factor * (spec.inverse ? -1 : 1);
    const int ia = spec.rot_offset + (neox ? i : 2 * i);
    const int ib = spec.rot_offset + (neox ? i + half : 2 * i + 1);
    const double xa = x[ia], xb = x[ib];
    x[ia] = xa * c - xb * s;
    x[ib] = xa * s + xb * c;
  }
}

namespace {

void rope(const op_args& a, const exec_ctx&) {
  const auto table = rope_inv_freq(a.p.rope);
  const int64_t T = a.src[0].dims[0], H = a.src[0].dims[1], D = a.src[0].dims[2];
  const int32_t* pos = a.src[1].as<int32_t>();
  const float* x = a.src[0].as<float>();
  float* y = a.dst.as<float>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const float* xv = x + (t * H + h) * D;
      std::vector<double> out(xv, xv + D);
      rotate_head(a.p.rope, table, pos[t], out.data());
      float* yv = y + (t * H + h) * D;
      for (int64_t d = 0; d < D; ++d) yv[d] = static_cast<float>(out[d]);
    }
  }
}

} // namespace

void register_rope(registry& r) {
  r.add(
      op::rope, backend::ref, "f32",
      [](const op_args& a) {
        return all_contiguous(a) && a.src[0].type == dtype::f32 && a.dst.type == dtype::f32;
      },
      rope);
}

} // namespace troupe::kernels::ref
