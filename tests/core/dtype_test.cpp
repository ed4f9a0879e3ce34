// dtype_test.cpp: dtype table, f16/bf16 scalar conversions against exact known encodings,
// and q8_0 / q4_0 round trips with GGUF's block layout (core/dtype.hpp, half.hpp, convert.hpp).
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/convert.hpp"
#include "core/dtype.hpp"
#include "core/half.hpp"

using namespace troupe;

TEST(Dtype, SizesMatchGguf) {
  EXPECT_EQ(row_bytes(dtype::f32, 10), 40);
  EXPECT_EQ(row_bytes(dtype::bf16, 10), 20);
  EXPECT_EQ(row_bytes(dtype::q8_0, 64), 68);
  EXPECT_EQ(row_bytes(dtype::q4_0, 64), 36);
  EXPECT_EQ(block_elems(dtype::q4_0), 32);
  EXPECT_EQ(parse_dtype("BF16"), dtype::bf16);
  EXPECT_EQ(parse_dtype("float16"), dtype::f16);
  EXPECT_EQ(parse_dtype("q8_0"), dtype::q8_0);
  // GGUF's K-quants: blocks of 256 values
  EXPECT_EQ(parse_dtype("Q5_K"), dtype::q5_k);
  EXPECT_EQ(row_bytes(dtype::q2_k, 512), 168);
  EXPECT_EQ(row_bytes(dtype::q3_k, 256), 110);
  EXPECT_EQ(row_bytes(dtype::q4_k, 512), 288);
  EXPECT_EQ(row_bytes(dtype::q5_k, 256), 176);
  EXPECT_EQ(row_bytes(dtype::q6_k, 256), 210);
  EXPECT_EQ(block_elems(dtype::q6_k), 256);
  EXPECT_FALSE(parse_dtype("iq2_xxs").has_value());
}

TEST(Half, KnownEncodings) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);           // rounds to inf
  EXPECT_EQ(f32_to_f16(5.9604645e-8f), 0x0001);      // smallest subnormal
  EXPECT_EQ(f32_to_f16(2.9802322e-8f), 0x0000);      // half of it: ties to even -> 0
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); // tie, even stays
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02); // tie, odd rounds up
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80); // tie to even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82); // tie, odd rounds up
  EXPECT_EQ(bf16_to_f32(0xc0a0), -5.0f);
}

TEST(Half, EveryF16RoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(Quant, Q8RoundTripIsClose) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(256), y(256);
  for (auto& v : x) v = d(rng);
  std::vector<block_q8_0> q(256 / 32);
  from_f32(dtype::q8_0, x.data(), q.data(), 256);
  to_f32(dtype::q8_0, q.data(), y.data(), 256);
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    EXPECT_NEAR(f16_to_f32(q[b].d), amax / 127, 1e-3 * amax);
    for (int j = 0; j < 32; ++j)
      EXPECT_NEAR(y[b * 32 + j], x[b * 32 + j], amax / 127 * 0.51 + 1e-3 * amax);
  }
}

TEST(Quant, Q4LayoutIsLowNibbleFirstHalf) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) / 2.0f; // max |x| = 8 at j = 0
  block_q4_0 b{};
  from_f32(dtype::q4_0, x.data(), &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f); // d = max / -8 = -8 / -8
  // x[0] = -8 -> q = 0 (low nibble of qs[0]); x[16] = 0 -> q = 8 (high nibble of qs[0])
  EXPECT_EQ(b.qs[0] & 0x0f, 0);
  EXPECT_EQ(b.qs[0] >> 4, 8);
  std::vector<float> y(32);
  to_f32(dtype::q4_0, &b, y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_NEAR(y[j], x[j], 0.5f + 1e-6f);
}

// q8_0 codes round halves away from zero, as GGUF's reference quantizer (roundf) does: a
// block whose largest magnitude is 127 has scale 1, so its values are its codes' x * id.
TEST(Quant, Q8RoundsHalvesAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  const float vals[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 0.49999997f, -1.5f, 126.5f, 3.4999998f};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; ++i) x[i] = vals[i];
  std::vector<uint8_t> b(34);
  from_f32(dtype::q8_0, x.data(), b.data(), 32);
  const int want[] = {127, 3, -4, 1, -1, 0, -2, 127, 3};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i)
    EXPECT_EQ(static_cast<int8_t>(b[2 + i]), want[i]) << vals[i];
  // random blocks: every code as std::lround gives it
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int k = 0; k < 200; ++k) {
    for (auto& v : x) v = nd(rng) * (k % 7 == 0 ? 1e-3f : 1.0f);
    from_f32(dtype::q8_0, x.data(), b.data(), 32);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j)
      ASSERT_EQ(static_cast<int8_t>(b[2 + j]), static_cast<int8_t>(std::lround(x[j] * id)));
  }
}
