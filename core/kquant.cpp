// kquant.cpp: expanding GGUF K-quant blocks to f32 (kquant.hpp; the expansions themselves are
// kquant_blocks.hpp), and random blocks. Written from the format's description; the test
// checks every format against gguf-py's own dequantization.
#include "core/kquant.hpp"

#include <algorithm>
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
    case dtype::q4_1:
      put(b, 0, j * r / 15), put(b, 2, -j * r / 2);
      break;
    case dtype::q5_0:
      put(b, 0, j * r / 16);
      break;
    case dtype::q5_1:
      put(b, 0, j * r / 31), put(b, 2, -j * r / 2);
      break;
    default:
      break;
    }
  }
}

} // namespace troupe
