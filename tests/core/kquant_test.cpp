// kquant_test.cpp: GGUF's K-quant blocks (and q4_1 / q5_0 / q5_1 / MXFP4 / IQ4_NL / IQ4_XS) expand
// to the values gguf-py's own dequantization gives (tests/fixtures/make_kquant_fixtures.py: random
// blocks, one with a negative factor), through core/kquant and through to_f32 over several blocks;
// every K-quant has its GGUF block size, and its rows come in whole blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "core/convert.hpp"
#include "core/kquant.hpp"

using namespace troupe;

namespace {

std::vector<uint8_t> from_hex(const std::string& h) {
  std::vector<uint8_t> out(h.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(std::stoi(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

} // namespace

TEST(KQuant, BlocksExpandAsGgufPyExpandsThem) {
  std::ifstream in(test::fixture_path("kquant/blocks.json"));
  ASSERT_TRUE(in);
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 11u);
  for (const auto& [name, c] : j.items()) {
    const auto type = parse_dtype(name);
    ASSERT_TRUE(type && is_expanded(*type)) << name;
    const int64_t be = block_elems(*type);
    const auto bytes = from_hex(c["hex"].get<std::string>());
    const auto want = c["values"].get<std::vector<float>>();
    const int64_t blocks = static_cast<int64_t>(want.size()) / be;
    ASSERT_EQ(static_cast<int64_t>(bytes.size()), blocks * info(*type).block_bytes) << name;
    ASSERT_EQ(row_bytes(*type, blocks * be), static_cast<int64_t>(bytes.size())) << name;
    std::vector<float> got(want.size()), one(be);
    to_f32(*type, bytes.data(), got.data(), static_cast<int64_t>(got.size()));
    for (int64_t b = 0; b < blocks; ++b) {
      dequant_block(*type, bytes.data() + b * info(*type).block_bytes, one.data());
      for (int64_t i = 0; i < be; ++i) EXPECT_EQ(one[i], got[b * be + i]) << name;
    }
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      // the same products; a compiler may fuse one multiply-add (one rounding less)
      const double tol = 1e-6 * std::max(1.0, std::fabs(static_cast<double>(want[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]) / tol);
      EXPECT_NEAR(got[i], want[i], tol) << name << " value " << i;
    }
    bool negative = false;
    for (float v : want) negative |= v < 0;
    EXPECT_TRUE(negative) << name; // the fixture exercises signs
  }
}

// DeepSeek's FP8 as Troupe stores it (f8_b128: an f32 scale, then 128 E4M3FN bytes): the
// codes' values from the format's definition (bias 7, subnormals below exponent 1, S.1111.111
// NaN, no infinities), times the block's scale.
TEST(KQuant, F8BlocksExpandE4m3TimesTheScale) {
  std::vector<uint8_t> blk(132, 0);
  const float d = 0.5f;
  std::memcpy(blk.data(), &d, 4);
  const std::pair<uint8_t, float> codes[] = {
      {0x38, 1.0f}, {0x7e, 448.0f}, {0x01, 0x1p-9f},     {0x08, 0x1p-6f}, {0xb8, -1.0f},
      {0x40, 2.0f}, {0x3c, 1.5f},   {0x07, 7 * 0x1p-9f}, {0x80, -0.0f},   {0x77, 240.0f}};
  for (size_t i = 0; i < std::size(codes); ++i) blk[4 + i] = codes[i].first;
  blk[4 + 127] = 0x7f;
  std::vector<float> out(128);
  dequant_block(dtype::f8_b128, blk.data(), out.data());
  for (size_t i = 0; i < std::size(codes); ++i)
    EXPECT_EQ(out[i], d * codes[i].second) << "code " << int(codes[i].first);
  EXPECT_TRUE(std::isnan(out[127]));
  EXPECT_EQ(block_elems(dtype::f8_b128), 128);
  EXPECT_EQ(row_bytes(dtype::f8_b128, 256), 264);
}

// BitNet's ternary weights as Troupe stores them (t2_32: an f32 scale, then 8 bytes of 2-bit
// codes w + 1, value 8 i + j in bits 2 i of byte j): written from the definition, read back.
TEST(KQuant, TernaryBlocksExpandTheirCodesTimesTheScale) {
  std::vector<int> w(32);
  for (int v = 0; v < 32; ++v) w[static_cast<size_t>(v)] = (v * 7 + 3) % 3 - 1;
  std::vector<uint8_t> blk(12, 0);
  const float d = 0.037f;
  std::memcpy(blk.data(), &d, 4);
  for (int v = 0; v < 32; ++v)
    blk[static_cast<size_t>(4 + v % 8)] |=
        static_cast<uint8_t>((w[static_cast<size_t>(v)] + 1) << (2 * (v / 8)));
  std::vector<float> out(32);
  dequant_block(dtype::t2_32, blk.data(), out.data());
  for (int v = 0; v < 32; ++v)
    EXPECT_EQ(out[static_cast<size_t>(v)], d * static_cast<float>(w[static_cast<size_t>(v)])) << v;
  EXPECT_EQ(row_bytes(dtype::t2_32, 64), 24);
}
