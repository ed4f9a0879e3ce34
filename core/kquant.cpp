// kquant.cpp: expanding GGUF K-quant blocks to f32 (kquant.hpp; the expansions themselves are
// kquant_blocks.hpp), and random blocks. Written from the format's description; the test
// checks every format against gguf-py's own dequantization.
#include "core/kquant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "core/kquant_blocks.hpp"

namespace troupe {

void dequant_block(dtype t, const void* block, float* out) {
  kq::expand(t, static_cast<const uint8_t*>(block), out);
}

void random_blocks(dtype t, int64_t blocks, float sigma, const std::function<uint64_t()>& next,
                   uint8_t* out) {
  const int64_t bytes = info(t).block_bytes;
  for (int64_t i = 0; i < blocks * bytes; i += 8) {
    const uint64_t x = next();
    std::memcpy(out + i, &x, static_cast<size_t>(std::min<int64_t>(8, blocks * bytes - i)));
  }
  // where each format keeps its f16 factor (and minimum), and the largest |code x scale| each
  // multiplies: the factor maps it to 5 sigma, the minimum to half that (negative: added).
  // IQ4_NL's span is twice its largest value: its codes are uniform over values that reach
  // 127 (no sub-block scale spreads them), so 2.5 sigma keeps a block's spread a weight's.
  struct factors {
    dtype t;
    int d_at;
    float d_span;
    int m_at;
    float m_span;
  };
  static constexpr factors table[] = {
      {dtype::q2_k, 80, 45, 82, 30},   {dtype::q3_k, 108, 128, -1, 0},
      {dtype::q4_k, 0, 945, 2, 126},   {dtype::q5_k, 0, 1953, 2, 126},
      {dtype::q6_k, 208, 4096, -1, 0}, {dtype::q4_1, 0, 15, 2, -2},
      {dtype::q5_0, 0, 16, -1, 0},     {dtype::q5_1, 0, 31, 2, -2},
      {dtype::iq4_nl, 0, 254, -1, 0},  {dtype::iq4_xs, 0, 127 * 32, -1, 0},
  };
  if (t == dtype::f8_b128) { // E4M3 codes (NaN codes made 448), f32 scales near 5 sigma / 448
    for (int64_t k = 0; k < blocks; ++k) {
      uint8_t* b = out + k * bytes;
      const float d = 5 * sigma / 448 * (0.5f + static_cast<float>(next() >> 40) / (1 << 24));
      std::memcpy(b, &d, 4);
      for (int l = 0; l < 128; ++l)
        if ((b[4 + l] & 0x7f) == 0x7f) b[4 + l] ^= 1;
    }
    return;
  }
  if (t == dtype::t2_32) { // codes 0..2 (never 3), f32 scales near sigma
    for (int64_t k = 0; k < blocks; ++k) {
      uint8_t* b = out + k * bytes;
      const float d = sigma * (0.5f + static_cast<float>(next() >> 40) / (1 << 24));
      std::memcpy(b, &d, 4);
      for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 4; ++i)
          if (((b[4 + j] >> (2 * i)) & 3) == 3) b[4 + j] ^= static_cast<uint8_t>(1 << (2 * i));
    }
    return;
  }
  if (t == dtype::mxfp4) { // the largest code (6) times 2^(e - 127) near 5 sigma
    const int e = 127 + static_cast<int>(std::lround(std::log2(5 * sigma / 6)));
    for (int64_t k = 0; k < blocks; ++k)
      out[k * bytes] = static_cast<uint8_t>(std::clamp(e - static_cast<int>(next() % 2), 1, 254));
    return;
  }
  const factors* f = nullptr;
  for (const auto& e : table)
    if (e.t == t) f = &e;
  if (!f) return;
  auto put = [](uint8_t* b, int at, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(b + at, &h, 2);
  };
  const float r = 5 * sigma;
  for (int64_t k = 0; k < blocks; ++k) {
    uint8_t* b = out + k * bytes;
    const float j = 0.5f + static_cast<float>(next() >> 40) / static_cast<float>(1 << 24);
    put(b, f->d_at, j * r / f->d_span);
    if (f->m_at >= 0) put(b, f->m_at, j * r / f->m_span);
  }
}

} // namespace troupe
