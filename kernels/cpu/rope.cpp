// rope.cpp (cpu): rotary embedding with a per-token cos/sin table computed in double and
// applied in f32; works in place (dst may alias src0). Threaded over tokens. rope_kv_store
// rotates each token's K row into an L1 buffer and writes it straight to its cache slot in
// the cache's dtype, so the rotated K never makes a round trip through memory; given v and q
// too (the attention's whole prologue), it stores v and rotates q with the same angles.
// Angles are remembered per thread for a few rope specs (Gemma 3 alternates two) and the
// last position of each: every layer of a decode step rotates at the same position, so the
// inverse frequencies and the cos / sin of a step are computed once, not once per call.
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/convert.hpp"
#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

// y = 2 * half values of a head rotated (x and y do not overlap): each layout in a
// loop of its own, which the compiler vectorizes (the pairs of the interleaved layout with a
// permute per vector)
TROUPE_CPU_DISPATCH
void rotate_head(const float* __restrict x, float* __restrict y, int half, bool neox,
                 const float* __restrict cs, const float* __restrict sn) {
  if (neox) {
    for (int i = 0; i < half; ++i) {
      y[i] = x[i] * cs[i] - x[i + half] * sn[i];
      y[i + half] = x[i] * sn[i] + x[i + half] * cs[i];
    }
  } else {
    for (int i = 0; i < half; ++i) {
      y[2 * i] = x[2 * i] * cs[i] - x[2 * i + 1] * sn[i];
      y[2 * i + 1] = x[2 * i] * sn[i] + x[2 * i + 1] * cs[i];
    }
  }
}

// Rotates the H heads of one token (x -> y, may alias) with that token's cos/sin: dimensions
// [rot_offset, rot_offset + rot_dim) of each; a head rotated in place goes through an L1 copy.
void rotate_token(const float* x, float* y, int64_t H, int64_t D, const rope_spec& spec,
                  const float* cs, const float* sn) {
  const int half = spec.rot_dim / 2, off = spec.rot_offset;
  const bool neox = spec.layout == rope_layout::neox;
  thread_local std::vector<float> copy;
  copy.resize(static_cast<size_t>(spec.rot_dim));
  for (int64_t h = 0; h < H; ++h) {
    const float* xh = x + h * D;
    float* yh = y + h * D;
    const bool in_place = xh == yh;
    if (!in_place)
      for (int64_t d = 0; d < D; ++d)
        if (d < off || d >= off + spec.rot_dim) yh[d] = xh[d];
    const float* xr = xh + off;
    if (in_place) {
      std::memcpy(copy.data(), xr, static_cast<size_t>(spec.rot_dim) * sizeof(float));
      xr = copy.data();
    }
    rotate_head(xr, yh + off, half, neox, cs, sn);
  }
}

// The cos / sin of one position under one spec, remembered: a few specs per thread (least
// recently used out), each with its inverse frequencies and its last position's angles. A
// kernel finds its spec's entry once per range of tokens, then asks it per position.
class angle_cache {
 public:
  struct entry {
    rope_spec spec;
    rope_table table;
    std::vector<float> cs, sn;
    int64_t pos = -1; // none yet
    uint64_t used = 0;

    // cs, sn: rot_dim / 2 values each, valid until the next call on this entry
    void at(int32_t p, const float*& c, const float*& s) {
      if (pos != p) {
        const int half = spec.rot_dim / 2;
        for (int i = 0; i < half; ++i) {
          const double angle = static_cast<double>(p) * table.inv_freq[i];
          cs[i] = static_cast<float>(std::cos(angle) * table.attn_factor);
          sn[i] = static_cast<float>(std::sin(angle) * table.attn_factor * (spec.inverse ? -1 : 1));
        }
        pos = p;
      }
      c = cs.data();
      s = sn.data();
    }
  };
  /// The entry of `spec` on this thread, valid until the next find() here.
  entry* find(const rope_spec& spec) {
    ++clock_;
    entry* oldest = &entries_[0];
    for (auto& e : entries_) {
      if (e.used && e.spec == spec) {
        e.used = clock_;
        return &e;
      }
      if (e.used < oldest->used) oldest = &e;
    }
    oldest->spec = spec;
    oldest->table = rope_inv_freq(spec);
    oldest->cs.assign(static_cast<size_t>(spec.rot_dim / 2), 0.0f);
    oldest->sn.assign(static_cast<size_t>(spec.rot_dim / 2), 0.0f);
    oldest->pos = -1;
    oldest->used = clock_;
    return oldest;
  }

 private:
  std::array<entry, 4> entries_;
  uint64_t clock_ = 0;
};

thread_local angle_cache angles;

} // namespace

void rope_head(const rope_spec& spec, int32_t pos, float* x) {
  const float *cs, *sn;
  angles.find(spec)->at(pos, cs, sn);
  rotate_token(x, x, 1, spec.rot_offset + spec.rot_dim, spec, cs, sn); // (in place)
}

namespace {

void rope(const op_args& a, const exec_ctx& ctx) {
  const int64_t T = a.src[0].dims[0], H = a.src[0].dims[1], D = a.src[0].dims[2];
  const int32_t* pos = a.src[1].as<int32_t>();
  parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
    auto* e = angles.find(a.p.rope);
    for (int64_t t = t0; t < t1; ++t) {
      const float *cs, *sn;
      e->at(pos[t], cs, sn);
      rotate_token(a.src[0].as<float>() + t * H * D, a.dst.as<float>() + t * H * D, H, D, a.p.rope,
                   cs, sn);
    }
  });
}

void rope_kv_store(const op_args& a, const exec_ctx& ctx) {
  const auto &k = a.src[0], &v = a.src[3], &q = a.src[4];
  const int64_t T = k.dims[0], Hkv = k.dims[1], D = k.dims[2];
  const int64_t Hq = q.data ? q.dims[1] : 0;
  const int32_t* pos = a.src[1].as<int32_t>();
  const int32_t* slots = a.src[2].as<int32_t>();
  const int64_t row = Hkv * D;
  auto slot_of = [&](const tensor_view& cache, int64_t t) {
    return static_cast<char*>(cache.data) + row_bytes(cache.type, slots[t] * row);
  };
  parallel(ctx, T, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> kbuf;
    kbuf.resize(static_cast<size_t>(row));
    auto* e = angles.find(a.p.rope);
    for (int64_t t = t0; t < t1; ++t) {
      const float *cs, *sn;
      e->at(pos[t], cs, sn);
      const bool f32 = a.dst.type == dtype::f32;
      // f16 / bf16: rotate into L1, then convert into the slot
      float* kd = f32 ? reinterpret_cast<float*>(slot_of(a.dst, t)) : kbuf.data();
      rotate_token(k.as<float>() + t * row, kd, Hkv, D, a.p.rope, cs, sn);
      if (!f32) store_row(a.dst.type, kbuf.data(), slot_of(a.dst, t), row);
      if (v.data) store_row(a.dst2.type, v.as<float>() + t * row, slot_of(a.dst2, t), row);
      if (q.data)
        rotate_token(q.as<float>() + t * Hq * D, a.dst3.as<float>() + t * Hq * D, Hq, D, a.p.rope,
                     cs, sn);
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
        const auto &v = a.src[3], &q = a.src[4];
        return contiguous_args(a) && a.src[0].type == dtype::f32 &&
               (c == dtype::f32 || c == dtype::f16 || c == dtype::bf16) &&
               (!v.data || (v.type == dtype::f32 && a.dst2.type == c)) &&
               (!q.data || (q.type == dtype::f32 && a.dst3.type == dtype::f32));
      },
      rope_kv_store);
}

} // namespace troupe::kernels::cpu
