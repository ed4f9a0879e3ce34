// kquant.cpp: expanding GGUF K-quant blocks to f32 (kquant.hpp). Written from the format's
// description; the test checks every format against gguf-py's own dequantization.
#include "core/kquant.hpp"

#include <algorithm>
#include <cstring>

#include "core/half.hpp"

namespace troupe {
namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q4_K / Q5_K: the 6-bit scale and minimum of sub-block j (0..7) from the 12 packed bytes:
// bytes 0-3 hold scales 0-3 (low 6 bits), bytes 4-7 minimums 0-3; scales and minimums 4-7
// take their low 4 bits from bytes 8-11 and their high 2 bits from the top of bytes 0-7.
void scale_min(const uint8_t* q, int j, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int g = 0; g < 8; ++g) { // groups of 32: half g / 4, bit pair g % 4
    const uint8_t* q = qs + (g / 4) * 32;
    const int shift = 2 * (g % 4);
    for (int l = 0; l < 32; ++l) {
      const int i = g * 32 + l, s = scales[i / 16];
      y[i] = d * (s & 0x0f) * ((q[l] >> shift) & 3) - dmin * (s >> 4);
    }
  }
}

void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = f16_at(b + 108);
  int scale[16];
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? sc[i] & 0x0f : sc[i - 8] >> 4;
    const int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    scale[i] = (lo | (hi << 4)) - 32;
  }
  for (int g = 0; g < 8; ++g) {
    const uint8_t* q = qs + (g / 4) * 32;
    const int shift = 2 * (g % 4);
    for (int l = 0; l < 32; ++l) {
      const int i = g * 32 + l;
      const int v = ((q[l] >> shift) & 3) - (((hmask[l] >> g) & 1) ? 0 : 4);
      y[i] = d * scale[i / 16] * v;
    }
  }
}

void q4_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int g = 0; g < 8; ++g) { // sub-block g: low nibbles of qs[32 (g / 2) ..] or high ones
    int sc, m;
    scale_min(scales, g, sc, m);
    const float dl = d * sc, ml = dmin * m;
    const uint8_t* q = qs + (g / 2) * 32;
    const int shift = 4 * (g % 2);
    for (int l = 0; l < 32; ++l) y[g * 32 + l] = dl * ((q[l] >> shift) & 0x0f) - ml;
  }
}

void q5_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int g = 0; g < 8; ++g) { // as Q4_K, with bit g of qh[l] as the 5th bit
    int sc, m;
    scale_min(scales, g, sc, m);
    const float dl = d * sc, ml = dmin * m;
    const uint8_t* q = qs + (g / 2) * 32;
    const int shift = 4 * (g % 2);
    for (int l = 0; l < 32; ++l)
      y[g * 32 + l] = dl * (((q[l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4)) - ml;
  }
}

void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int g = 0; g < 8; ++g) { // half g / 4; k = g % 4 picks the nibble and the bit pair
    const int h = g / 4, k = g % 4;
    const uint8_t* lo = ql + h * 64 + (k % 2) * 32;
    const uint8_t* hi = qh + h * 32;
    for (int l = 0; l < 32; ++l) {
      const int i = g * 32 + l;
      const int q = (((lo[l] >> (4 * (k / 2))) & 0x0f) | (((hi[l] >> (2 * k)) & 3) << 4)) - 32;
      y[i] = d * sc[i / 16] * q;
    }
  }
}

} // namespace

void dequant_block(dtype t, const void* block, float* out) {
  const auto* b = static_cast<const uint8_t*>(block);
  switch (t) {
  case dtype::q2_k:
    return q2_k(b, out);
  case dtype::q3_k:
    return q3_k(b, out);
  case dtype::q4_k:
    return q4_k(b, out);
  case dtype::q5_k:
    return q5_k(b, out);
  case dtype::q6_k:
    return q6_k(b, out);
  default:
    return;
  }
}

void random_blocks(dtype t, int64_t blocks, float sigma, const std::function<uint64_t()>& next,
                   uint8_t* out) {
  const int64_t bytes = info(t).block_bytes;
  for (int64_t i = 0; i < blocks * bytes; i += 8) {
    const uint64_t x = next();
    std::memcpy(out + i, &x, static_cast<size_t>(std::min<int64_t>(8, blocks * bytes - i)));
  }
  auto put = [](uint8_t* b, int at, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(b + at, &h, 2);
  };
  // largest |code x scale| of each format: the factor that maps it to 5 sigma (minimums half)
  const float r = 5 * sigma;
  for (int64_t k = 0; k < blocks; ++k) {
    uint8_t* b = out + k * bytes;
    const float j = 0.5f + static_cast<float>(next() >> 40) / static_cast<float>(1 << 24);
    switch (t) {
    case dtype::q2_k:
      put(b, 80, j * r / 45), put(b, 82, j * r / 30);
      break;
    case dtype::q3_k:
      put(b, 108, j * r / 128);
      break;
    case dtype::q4_k:
      put(b, 0, j * r / 945), put(b, 2, j * r / 126);
      break;
    case dtype::q5_k:
      put(b, 0, j * r / 1953), put(b, 2, j * r / 126);
      break;
    case dtype::q6_k:
      put(b, 208, j * r / 4096);
      break;
    default:
      break;
    }
  }
}

} // namespace troupe
