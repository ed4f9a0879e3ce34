// kquant_blocks.hpp: the K-quant block expansions themselves, inline, so that a kernel
// compiled for a wider ISA (kernels/cpu's dispatch clones) expands blocks with its own vector
// instructions; core/kquant.cpp is the one caller outside kernels/cpu. Each inner loop runs
// over 16 or 32 values with one scale and loop-invariant shifts, so it vectorises. Layouts:
// kquant.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/dtype.hpp"
#include "core/half.hpp"

namespace troupe::kq {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q4_K / Q5_K: the 6-bit scale and minimum of sub-block j (0..7) from the 12 packed bytes:
// bytes 0-3 hold scales 0-3 (low 6 bits), bytes 4-7 minimums 0-3; scales and minimums 4-7
// take their low 4 bits from bytes 8-11 and their high 2 bits from the top of bytes 0-7.
inline void scale_min(const uint8_t* q, int j, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

inline void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int s = 0; s < 16; ++s) { // 16 values a scale: group s / 2 of 32 (half, bit pair)
    const int g = s / 2, shift = 2 * (g % 4);
    const uint8_t* q = b + 16 + (g / 4) * 32 + (s % 2) * 16;
    const float dl = d * (scales[s] & 0x0f), ml = dmin * (scales[s] >> 4);
    float* o = y + s * 16;
    for (int l = 0; l < 16; ++l) o[l] = dl * static_cast<float>((q[l] >> shift) & 3) - ml;
  }
}

inline void q3_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b + 96;
  const float d = f16_at(b + 108);
  for (int s = 0; s < 16; ++s) {
    const int lo = s < 8 ? sc[s] & 0x0f : sc[s - 8] >> 4;
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = d * static_cast<float>((lo | (hi << 4)) - 32);
    const int g = s / 2, shift = 2 * (g % 4), half = (s % 2) * 16;
    const uint8_t* q = b + 32 + (g / 4) * 32 + half;
    const uint8_t* h = b + half;
    float* o = y + s * 16;
    for (int l = 0; l < 16; ++l) // the 3rd bit set: no offset; clear: -4
      o[l] = dl * static_cast<float>(((q[l] >> shift) & 3) - 4 + 4 * ((h[l] >> g) & 1));
  }
}

inline void q4_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  for (int g = 0; g < 8; ++g) { // sub-block g: low nibbles of qs[32 (g / 2) ..] or high ones
    int sc, m;
    scale_min(b + 4, g, sc, m);
    const float dl = d * sc, ml = dmin * m;
    const uint8_t* q = b + 16 + (g / 2) * 32;
    const int shift = 4 * (g % 2);
    float* o = y + g * 32;
    for (int l = 0; l < 32; ++l) o[l] = dl * static_cast<float>((q[l] >> shift) & 0x0f) - ml;
  }
}

inline void q5_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* qh = b + 16;
  for (int g = 0; g < 8; ++g) { // as Q4_K, with bit g of qh[l] as the 5th bit
    int sc, m;
    scale_min(b + 4, g, sc, m);
    const float dl = d * sc, ml = dmin * m;
    const uint8_t* q = b + 48 + (g / 2) * 32;
    const int shift = 4 * (g % 2);
    float* o = y + g * 32;
    for (int l = 0; l < 32; ++l)
      o[l] = dl * static_cast<float>(((q[l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4)) - ml;
  }
}

inline void q6_k(const uint8_t* b, float* y) {
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int s = 0; s < 16; ++s) { // 16 values a scale; group s / 2: half g / 4, k = g % 4
    const int g = s / 2, h = g / 4, k = g % 4, part = (s % 2) * 16;
    const uint8_t* lo = b + h * 64 + (k % 2) * 32 + part;
    const uint8_t* hi = b + 128 + h * 32 + part;
    const int ls = 4 * (k / 2), hs = 2 * k;
    const float dl = d * sc[s];
    float* o = y + s * 16;
    for (int l = 0; l < 16; ++l)
      o[l] = dl * static_cast<float>((((lo[l] >> ls) & 0x0f) | (((hi[l] >> hs) & 3) << 4)) - 32);
  }
}

// q4_1: f16 d, f16 m, qs[16]: value j < 16 the low nibble of qs[j], j + 16 its high one.
inline void q4_1(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>(b[4 + l] & 0x0f) + m;
    y[l + 16] = d * static_cast<float>(b[4 + l] >> 4) + m;
  }
}

// q5_0 / q5_1: as q4_0 / q4_1 with bit j of the 32-bit word qh as value j's 5th bit.
inline void q5_x(const uint8_t* b, float* y, bool with_min) {
  const float d = f16_at(b), m = with_min ? f16_at(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  const int off = with_min ? 0 : 16;
  for (int l = 0; l < 16; ++l) {
    const int lo = (qs[l] & 0x0f) | (((qh >> l) & 1) << 4);
    const int hi = (qs[l] >> 4) | (((qh >> (l + 16)) & 1) << 4);
    y[l] = d * static_cast<float>(lo - off) + m;
    y[l + 16] = d * static_cast<float>(hi - off) + m;
  }
}
inline void q5_0(const uint8_t* b, float* y) {
  q5_x(b, y, false);
}
inline void q5_1(const uint8_t* b, float* y) {
  q5_x(b, y, true);
}

// iq4_nl / iq4_xs (kquant.hpp): the 16 values a 4-bit code stands for.
alignas(16) inline constexpr int8_t iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                      1,    13,   25,  38,  53,  69,  89,  113};
inline void iq4_nl(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>(iq4_values[b[2 + l] & 0x0f]);
    y[l + 16] = d * static_cast<float>(iq4_values[b[2 + l] >> 4]);
  }
}
inline void iq4_xs(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const unsigned scales_h = static_cast<unsigned>(b[2]) | (static_cast<unsigned>(b[3]) << 8);
  const uint8_t* qs = b + 8;
  for (int s = 0; s < 8; ++s, qs += 16, y += 32) {
    const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 0x0f) | (((scales_h >> (2 * s)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    for (int l = 0; l < 16; ++l) {
      y[l] = dl * static_cast<float>(iq4_values[qs[l] & 0x0f]);
      y[l + 16] = dl * static_cast<float>(iq4_values[qs[l] >> 4]);
    }
  }
}

// mxfp4: e8m0 e, qs[16] of E2M1 codes (sign, 2-bit exponent, 1-bit mantissa), as GGUF
// stores it: value j < 16 the low nibble of qs[j], j + 16 its high one; x = fp4 2^(e - 127).
// The codes' values doubled are integers (0, 1, 2, 3, 4, 6, 8, 12): x = that 2^(e - 128).
alignas(16) inline constexpr int8_t mxfp4_twice[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                       0, -1, -2, -3, -4, -6, -8, -12};

// Tables of 256 floats, one per byte, built at compile time: a load per scale or code instead
// of a branch and an ldexp (the int8 kernels' block scales, the expansions).
struct byte_table {
  float v[256];
};
// 2^(e - 128) for every e8m0 byte e, exactly (subnormal for e < 2)
constexpr byte_table make_e8m0_half() {
  byte_table t{};
  float p = 0x1p-128f;
  for (int e = 0; e < 256; ++e) {
    t.v[e] = p;
    if (e < 255) p *= 2.0f;
  }
  return t;
}
inline constexpr byte_table e8m0_half_table = make_e8m0_half();
inline float e8m0_half(uint8_t e) {
  return e8m0_half_table.v[e];
}
inline void mxfp4(const uint8_t* b, float* y) {
  const float d = e8m0_half(b[0]);
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>(mxfp4_twice[b[1 + l] & 0x0f]);
    y[l + 16] = d * static_cast<float>(mxfp4_twice[b[1 + l] >> 4]);
  }
}

// f8_b128: f32 d, then 128 E4M3FN bytes (sign, 4-bit exponent of bias 7, 3-bit mantissa;
// exponent 0 subnormal, S.1111.111 NaN, no infinities): x = d e4m3.
constexpr byte_table make_e4m3() {
  byte_table t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 15, m = b & 7;
    float v = static_cast<float>(e == 0 ? m : 8 + m) * 0x1p-9f; // m 2^-9, or (8 + m) 2^(e - 10)
    for (int i = 1; i < e; ++i) v *= 2.0f;
    if (e == 15 && m == 7) v = std::numeric_limits<float>::quiet_NaN();
    t.v[b] = b & 0x80 ? -v : v;
  }
  return t;
}
inline constexpr byte_table e4m3_table = make_e4m3();
inline float e4m3(uint8_t b) {
  return e4m3_table.v[b];
}
inline void f8_b128(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int l = 0; l < 128; ++l) y[l] = d * e4m3(b[4 + l]);
}

// t2_32: f32 d, then 8 bytes of 2-bit codes w + 1: value 8 i + j in bits 2 i of byte j
// (a code of 3, which no writer makes, reads as 2 w)
inline void t2_32(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j)
      y[8 * i + j] = d * static_cast<float>(((b[4 + j] >> (2 * i)) & 3) - 1);
}

/// One block of `t` (an expanded format; others are left alone).
inline void expand(dtype t, const uint8_t* b, float* y) {
  switch (t) {
  case dtype::q2_k:
    return q2_k(b, y);
  case dtype::q3_k:
    return q3_k(b, y);
  case dtype::q4_k:
    return q4_k(b, y);
  case dtype::q5_k:
    return q5_k(b, y);
  case dtype::q6_k:
    return q6_k(b, y);
  case dtype::q4_1:
    return q4_1(b, y);
  case dtype::q5_0:
    return q5_0(b, y);
  case dtype::q5_1:
    return q5_1(b, y);
  case dtype::mxfp4:
    return mxfp4(b, y);
  case dtype::f8_b128:
    return f8_b128(b, y);
  case dtype::t2_32:
    return t2_32(b, y);
  case dtype::iq4_nl:
    return iq4_nl(b, y);
  case dtype::iq4_xs:
    return iq4_xs(b, y);
  default:
    return;
  }
}

} // namespace troupe::kq
