// rope.cpp (cpu): rotary embedding with a per-token cos/sin table computed in double and
// applied in f32; works in place (dst may alias src0). Threaded over tokens. rope_kv_store
// rotates each token's K row into an L1 buffer and writes it straight to its cache slot in
// the cache's dtype, so the rotated K never makes a round trip through memory.
#include <cmath>
#include <vector>

#include "core/convert.hpp"
#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

// Rotates the H heads of one token (x -> y, may alias) with that token's cos/sin.
void rotate_token(const float* x, float* y, int64_t H, int64_t D, const rope_spec& spec,
                  const float* cs, const float* sn) {
  const int half = spec.rot_dim / 2;
  const bool neox = spec.layout == rope_layout::neox;
  for (int64_t h = 0; h < H; ++h) {
    const float* xh = x + h * D;
    float* yh = y + h * D;
    for (int i = 0; i < half; ++i) {
      const int ia = neox ? i : 2 * i;
      const int ib = neox ? i + half : 2 * i + 1;
      const float xa = xh[ia], xb = xh[ib];
      yh[ia] = xa * cs[i] - xb * sn[i];
      yh[ib] = xa * sn[i] + xb * cs[i];
    }
    if (yh != xh)
      for (int64_t d = spec.rot_dim; d < D; ++d) yh[d] = xh[d];
  }
}

void angles(const rope_table& table, int32_t pos, int half, float* cs, float* sn) {
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * table.inv_freq[i];
    cs[i] = static_cast<float>(std::cos(angle) * table.attn_factor);
    sn[i] = static_cast<float>(std::sin(angle) * table.attn_factor);
  }
}

void rope(const op_args& a, const exec_ctx& ctx) {
  const auto table = rope_inv_freq(a.p.rope);
  const int64_t T = a.src[0].dims[0], H = a.src[0].dims[1], D = a.src[0].dims[2];
  const int half = a.p.rope.rot_dim / 2;
  const int32_t* pos = a.src[1].as<int32_t>();
  parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> cs, sn;
    cs.resize(half), sn.resize(half);
    for (int64_t t = t0; t < t1; ++t) {
      angles(table, pos[t], half, cs.data(), sn.data());
      rotate_token(a.src[0].as<float>() + t * H * D, a.dst.as<float>() + t * H * D, H, D, a.p.rope,
                   cs.data(), sn.data());
    }
  });
}

void rope_kv_store(const op_args& a, const exec_ctx& ctx) {
  const auto table = rope_inv_freq(a.p.rope);
  const int64_t T = a.src[0].dims[0], H = a.src[0].dims[1], D = a.src[0].dims[2];
  const int half = a.p.rope.rot_dim / 2;
  const int32_t* pos = a.src[1].as<int32_t>();
  const int32_t* slots = a.src[2].as<int32_t>();
  const int64_t row = H * D;
  parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> cs, sn, k;
    cs.resize(half), sn.resize(half), k.resize(row);
    for (int64_t t = t0; t < t1; ++t) {
      angles(table, pos[t], half, cs.data(), sn.data());
      float* dst = a.dst.type == dtype::f32
                       ? static_cast<float*>(a.dst.data) + slots[t] * row
                       : k.data(); // f16 / bf16: rotate into L1, then convert into the slot
      rotate_token(a.src[0].as<float>() + t * row, dst, H, D, a.p.rope, cs.data(), sn.data());
      if (a.dst.type != dtype::f32)
        store_row(a.dst.type, k.data(),
                  static_cast<char*>(a.dst.data) + row_bytes(a.dst.type, slots[t] * row), row);
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
  r.add(
      op::rope_kv_store, backend::cpu, "f32|f16|bf16 cache",
      [](const op_args& a) {
        const dtype c = a.dst.type;
        return contiguous_args(a) && a.src[0].type == dtype::f32 &&
               (c == dtype::f32 || c == dtype::f16 || c == dtype::bf16);
      },
      rope_kv_store);
}

} // namespace troupe::kernels::cpu
