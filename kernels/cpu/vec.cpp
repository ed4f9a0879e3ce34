// vec.cpp (cpu): the shared inner loops: f32 dot product with 16 partial sums and row
// dequantization for every stored dtype (cpu.hpp). Dispatched by CPU flags at run time.
#include <cstring>

#include "kernels/cpu/cpu.hpp"
#include "runtime/half.hpp"

namespace troupe::kernels::cpu {

bool contiguous_args(const op_args& a) {
  for (const auto& s : a.src)
    if (s.data && !s.contiguous()) return false;
  return a.dst.contiguous() && (!a.dst2.data || a.dst2.contiguous());
}

TROUPE_CPU_DISPATCH
float dot_f32(const float* x, const float* y, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j] * y[i + j];
  float s = 0.0f;
  for (; i < n; ++i) s += x[i] * y[i];
  for (int j = 0; j < 16; ++j) s += acc[j];
  return s;
}

TROUPE_CPU_DISPATCH
void dequant_row(dtype type, const void* w, int64_t k0, int64_t n, float* out) {
  switch (type) {
  case dtype::f32:
    std::memcpy(out, static_cast<const float*>(w) + k0, n * sizeof(float));
    break;
  case dtype::f16: {
    const uint16_t* p = static_cast<const uint16_t*>(w) + k0;
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
    break;
  }
  case dtype::bf16: {
    const uint16_t* p = static_cast<const uint16_t*>(w) + k0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u = static_cast<uint32_t>(p[i]) << 16;
      std::memcpy(out + i, &u, 4);
    }
    break;
  }
  case dtype::q8_0: {
    const block_q8_0* b = static_cast<const block_q8_0*>(w) + k0 / qk;
    for (int64_t blk = 0; blk < n / qk; ++blk) {
      const float d = f16_to_f32(b[blk].d);
      for (int j = 0; j < qk; ++j) out[blk * qk + j] = d * b[blk].qs[j];
    }
    break;
  }
  case dtype::q4_0: {
    const block_q4_0* b = static_cast<const block_q4_0*>(w) + k0 / qk;
    for (int64_t blk = 0; blk < n / qk; ++blk) {
      const float d = f16_to_f32(b[blk].d);
      for (int j = 0; j < qk / 2; ++j) {
        out[blk * qk + j] = d * ((b[blk].qs[j] & 0x0f) - 8);
        out[blk * qk + j + qk / 2] = d * ((b[blk].qs[j] >> 4) - 8);
      }
    }
    break;
  }
  default:
    break;
  }
}

} // namespace troupe::kernels::cpu
