// attention.cpp (cpu): causal attention with GQA, contiguous and paged, by online softmax
// (one pass over the keys, never materialising the T x S score matrix), and the KV store.
// Threaded over (query token, head) pairs. Caches in f32, f16 or bf16.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.hpp"
#include "runtime/convert.hpp"

namespace troupe::kernels::cpu {
namespace {

// Attends one query over keys 0..last whose rows `key_row(s)` / `val_row(s)` point at D values
// of dtype `type`. `tmp` holds 2 * D floats.
template <class RowFn>
void attend(const float* q, int64_t D, int64_t last, float scale, dtype type, RowFn key_row,
            RowFn val_row, float* out, float* tmp) {
  float m = -INFINITY, l = 0.0f;
  for (int64_t d = 0; d < D; ++d) out[d] = 0.0f;
  float* kbuf = tmp;
  float* vbuf = tmp + D;
  for (int64_t s = 0; s <= last; ++s) {
    const float* k;
    if (type == dtype::f32) {
      k = static_cast<const float*>(key_row(s));
    } else {
      dequant_row(type, key_row(s), 0, D, kbuf);
      k = kbuf;
    }
    const float score = dot_f32(q, k, D) * scale;
    const float m_new = std::max(m, score);
    const float correction = std::exp(m - m_new);
    const float p = std::exp(score - m_new);
    l = l * correction + p;
    const float* v;
    if (type == dtype::f32) {
      v = static_cast<const float*>(val_row(s));
    } else {
      dequant_row(type, val_row(s), 0, D, vbuf);
      v = vbuf;
    }
    for (int64_t d = 0; d < D; ++d) out[d] = out[d] * correction + p * v[d];
    m = m_new;
  }
  const float inv = 1.0f / l;
  for (int64_t d = 0; d < D; ++d) out[d] *= inv;
}

void attention(const op_args& a, const exec_ctx& ctx) {
  const auto& q = a.src[0];
  const auto& k = a.src[1];
  const auto& v = a.src[2];
  const int64_t T = q.dims[0], H = q.dims[1], D = q.dims[2], Hkv = k.dims[1];
  const int64_t group = H / Hkv;
  const int64_t row = row_bytes(k.type, D);
  parallel(ctx, T * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> tmp(2 * D);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, kh = h / group;
      auto krow = [&](int64_t s) -> const void* {
        return static_cast<const char*>(k.data) + (s * Hkv + kh) * row;
      };
      auto vrow = [&](int64_t s) -> const void* {
        return static_cast<const char*>(v.data) + (s * Hkv + kh) * row;
      };
      std::function<const void*(int64_t)> kf = krow, vf = vrow;
      attend(q.as<float>() + i * D, D, a.p.pos0 + t, a.p.scale, k.type, kf, vf,
             a.dst.as<float>() + i * D, tmp.data());
    }
  });
}

void paged_attention(const op_args& a, const exec_ctx& ctx) {
  const auto& q = a.src[0];
  const auto& kc = a.src[1];
  const auto& vc = a.src[2];
  const auto& seqs = a.src[3];
  const int64_t T = q.dims[0], H = q.dims[1], D = q.dims[2];
  const int64_t P = kc.dims[1], Hkv = kc.dims[2];
  const int64_t group = H / Hkv;
  const int64_t row = row_bytes(kc.type, D);
  // token -> (sequence, index in sequence)
  std::vector<int32_t> seq_of(T, -1);
  for (int64_t si = 0; si < seqs.rows(); ++si) {
    const int32_t* info = seqs.row<int32_t>(si);
    for (int64_t i = 0; i < info[1]; ++i) seq_of[info[0] + i] = static_cast<int32_t>(si);
  }
  parallel(ctx, T * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> tmp(2 * D);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, kh = h / group;
      if (seq_of[t] < 0) continue;
      const int32_t* info = seqs.row<int32_t>(seq_of[t]);
      const int32_t* blocks = info + 3;
      const int64_t pos = info[2] + (t - info[0]);
      std::function<const void*(int64_t)> kf = [&](int64_t s) -> const void* {
        const int64_t slot = static_cast<int64_t>(blocks[s / P]) * P + s % P;
        return static_cast<const char*>(kc.data) + (slot * Hkv + kh) * row;
      };
      std::function<const void*(int64_t)> vf = [&](int64_t s) -> const void* {
        const int64_t slot = static_cast<int64_t>(blocks[s / P]) * P + s % P;
        return static_cast<const char*>(vc.data) + (slot * Hkv + kh) * row;
      };
      attend(q.as<float>() + i * D, D, pos, a.p.scale, kc.type, kf, vf, a.dst.as<float>() + i * D,
             tmp.data());
    }
  });
}

void kv_store(const op_args& a, const exec_ctx&) {
  const auto& x = a.src[0];
  const int64_t row = x.numel() / x.dims[0];
  const int32_t* slots = a.src[1].as<int32_t>();
  for (int64_t t = 0; t < x.dims[0]; ++t)
    from_f32(a.dst.type, x.as<float>() + t * row,
             static_cast<char*>(a.dst.data) + row_bytes(a.dst.type, slots[t] * row), row);
}

bool cache_type(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

} // namespace

void register_attention(registry& r) {
  auto ok = [](const op_args& a) {
    return contiguous_args(a) && a.src[0].type == dtype::f32 && cache_type(a.src[1].type) &&
           a.src[2].type == a.src[1].type;
  };
  r.add(op::attention, backend::cpu, "online-softmax", ok, attention);
  r.add(op::paged_attention, backend::cpu, "online-softmax", ok, paged_attention);
  r.add(op::kv_store, backend::cpu, "any",
        [](const op_args& a) {
          return contiguous_args(a) && a.src[0].type == dtype::f32 && cache_type(a.dst.type);
        },
        kv_store);
}

} // namespace troupe::kernels::cpu
