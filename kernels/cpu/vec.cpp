// vec.cpp (cpu): the shared inner loops: f32 dot product with 16 partial sums, row
// dequantization for every stored dtype, and row stores into f16 / bf16 / q8_0 (cpu.hpp).
// Dispatched by CPU flags at run time.
#include <cstring>

#include "core/convert.hpp"
#include "core/half.hpp"
#include "core/kquant.hpp"
#include "core/kquant_blocks.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemv.hpp"

namespace troupe::kernels::cpu {

// convert_avx2.cpp
void f32_to_f16_avx2(const float* x, uint16_t* y, int64_t n);
void f32_to_bf16_avx2(const float* x, uint16_t* y, int64_t n);

void store_row(dtype type, const float* x, void* dst, int64_t n) {
  // the AVX2 + F16C loops unless TROUPE_ISA=portable chose the portable kernels
  static const bool avx2 = std::strcmp(gemv_kernels().isa, "portable") != 0;
  if (avx2) {
    switch (type) {
    case dtype::f32:
      std::memcpy(dst, x, n * sizeof(float));
      return;
    case dtype::f16:
      return f32_to_f16_avx2(x, static_cast<uint16_t*>(dst), n);
    case dtype::bf16:
      return f32_to_bf16_avx2(x, static_cast<uint16_t*>(dst), n);
    case dtype::q8_0: {
      // the decode kernels' own activation quantizer, block by block into GGUF blocks
      auto* b = static_cast<block_q8_0*>(dst);
      for (int64_t i = 0; i < n / qk; ++i) {
        float d;
        gemv_kernels().quantize_q8(x + i * qk, qk, b[i].qs, &d);
        b[i].d = f32_to_f16(d);
      }
      return;
    }
    default:
      break;
    }
  }
  from_f32(type, x, dst, n);
}

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
  default: { // the expanded formats: k0 and n on block boundaries, with this clone's vectors
    if (!is_expanded(type)) break;
    const int64_t bytes = info(type).block_bytes, be = block_elems(type);
    const auto* b = static_cast<const uint8_t*>(w) + k0 / be * bytes;
    for (int64_t blk = 0; blk < n / be; ++blk) {
      const uint8_t* p = b + blk * bytes;
      float* o = out + blk * be;
      kq::expand(type, p, o); // inlined into this clone
    }
    break;
  }
  }
}

} // namespace troupe::kernels::cpu
