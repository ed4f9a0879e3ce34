// convert.cpp: scalar row conversions and GGUF-compatible q8_0 / q4_0 (convert.hpp).
#include "core/convert.hpp"

#include <algorithm>
#include <cmath>

#include "core/half.hpp"
#include "core/kquant.hpp"

namespace troupe {

void to_f32(dtype type, const void* src, float* dst, int64_t n) {
  switch (type) {
  case dtype::f32: {
    auto* s = static_cast<const float*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
    break;
  }
  case dtype::f16: {
    auto* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
    break;
  }
  case dtype::bf16: {
    auto* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
    break;
  }
  case dtype::i8: {
    auto* s = static_cast<const int8_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
    break;
  }
  case dtype::i32: {
    auto* s = static_cast<const int32_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
    break;
  }
  case dtype::q8_0: {
    auto* b = static_cast<const block_q8_0*>(src);
    for (int64_t i = 0; i < n / qk; ++i) {
      const float d = f16_to_f32(b[i].d);
      for (int j = 0; j < qk; ++j) dst[i * qk + j] = d * b[i].qs[j];
    }
    break;
  }
  case dtype::q4_0: {
    auto* b = static_cast<const block_q4_0*>(src);
    for (int64_t i = 0; i < n / qk; ++i) {
      const float d = f16_to_f32(b[i].d);
      for (int j = 0; j < qk / 2; ++j) {
        dst[i * qk + j] = d * ((b[i].qs[j] & 0x0f) - 8);
        dst[i * qk + j + qk / 2] = d * ((b[i].qs[j] >> 4) - 8);
      }
    }
    break;
  }
  default: // the formats expanded block by block
    if (is_expanded(type)) {
      const int64_t bytes = info(type).block_bytes, be = block_elems(type);
      for (int64_t i = 0; i < n / be; ++i)
        dequant_block(type, static_cast<const uint8_t*>(src) + i * bytes, dst + i * be);
    }
    break;
  }
}

namespace {

// std::lround without the libm call where |v| < 2^22 (a code's range, and far beyond):
// truncate, then step away from zero when the dropped part is a half or more (v - t is exact)
inline int round_away(float v) {
  if (!(std::fabs(v) < 4194304.0f)) return static_cast<int>(std::lround(v));
  const int t = static_cast<int>(v);
  const float r = v - static_cast<float>(t);
  return t + (r >= 0.5f ? 1 : 0) - (r <= -0.5f ? 1 : 0);
}

} // namespace

void from_f32(dtype type, const float* src, void* dst, int64_t n) {
  switch (type) {
  case dtype::f32: {
    auto* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = src[i];
    break;
  }
  case dtype::f16: {
    auto* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
    break;
  }
  case dtype::bf16: {
    auto* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
    break;
  }
  case dtype::i8: {
    auto* d = static_cast<int8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int8_t>(src[i]);
    break;
  }
  case dtype::i32: {
    auto* d = static_cast<int32_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(src[i]);
    break;
  }
  case dtype::q8_0: {
    auto* b = static_cast<block_q8_0*>(dst);
    for (int64_t i = 0; i < n / qk; ++i) {
      const float* x = src + i * qk;
      float amax = 0.0f;
      for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[j])); // NaN: as fmax
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      b[i].d = f32_to_f16(d);
      for (int j = 0; j < qk; ++j) b[i].qs[j] = static_cast<int8_t>(round_away(x[j] * id));
    }
    break;
  }
  case dtype::q4_0: {
    auto* b = static_cast<block_q4_0*>(dst);
    for (int64_t i = 0; i < n / qk; ++i) {
      const float* x = src + i * qk;
      float amax = 0.0f, max = 0.0f;
      for (int j = 0; j < qk; ++j) {
        if (std::fabs(x[j]) > amax) {
          amax = std::fabs(x[j]);
          max = x[j];
        }
      }
      const float d = max / -8.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      b[i].d = f32_to_f16(d);
      for (int j = 0; j < qk / 2; ++j) {
        const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
        const int q1 = std::min(15, static_cast<int>(x[j + qk / 2] * id + 8.5f));
        b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    }
    break;
  }
  default: // the expanded formats are read, never written (convert.hpp)
    break;
  }
}

} // namespace troupe
