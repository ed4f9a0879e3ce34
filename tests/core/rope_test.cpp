// rope_test.cpp: inverse frequencies for each scaling (core/rope.hpp), checked against
// values worked out by hand from the published formulas.
#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "core/rope.hpp"

using namespace troupe;

TEST(Rope, PlainFrequencies) {
  rope_spec s;
  s.rot_dim = 8;
  s.theta = 10000;
  auto t = rope_inv_freq(s);
  ASSERT_EQ(t.inv_freq.size(), 4u);
  EXPECT_DOUBLE_EQ(t.inv_freq[0], 1.0);
  EXPECT_NEAR(t.inv_freq[1], 0.1, 1e-15);
  EXPECT_NEAR(t.inv_freq[3], 0.001, 1e-15);
  EXPECT_EQ(t.attn_factor, 1.0);
}

TEST(Rope, LinearDividesByFactor) {
  rope_spec s;
  s.rot_dim = 4;
  s.scaling = rope_scaling::linear;
  s.factor = 4;
  auto t = rope_inv_freq(s);
  EXPECT_DOUBLE_EQ(t.inv_freq[0], 0.25);
}

// Llama 4 Scout publishes low_freq_factor = high_freq_factor = 1: no band between them, so
// each frequency is kept or divided (transformers' torch.where order), never smoothed.
TEST(Rope, Llama3WithEqualFactorsIsAStep) {
  rope_spec s;
  s.rot_dim = 128;
  s.theta = 500000;
  s.scaling = rope_scaling::llama3;
  s.factor = 16;
  s.low_freq_factor = 1;
  s.high_freq_factor = 1;
  s.orig_ctx = 8192;
  rope_spec plain = s;
  plain.scaling = rope_scaling::none;
  auto t = rope_inv_freq(s), p = rope_inv_freq(plain);
  int kept = 0, scaled = 0;
  for (size_t i = 0; i < t.inv_freq.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / p.inv_freq[i];
    if (wavelen > 8192) {
      EXPECT_DOUBLE_EQ(t.inv_freq[i], p.inv_freq[i] / 16);
      ++scaled;
    } else {
      EXPECT_DOUBLE_EQ(t.inv_freq[i], p.inv_freq[i]);
      ++kept;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(scaled, 0);
}

// high_freq_factor below low_freq_factor: transformers divides every wavelength past
// low_wavelen first, so the band between the two wavelengths is divided, not kept.
TEST(Rope, Llama3WithFactorsReversedDividesTheBandBetween) {
  rope_spec s;
  s.rot_dim = 128;
  s.theta = 500000;
  s.scaling = rope_scaling::llama3;
  s.factor = 8;
  s.low_freq_factor = 4;
  s.high_freq_factor = 2;
  s.orig_ctx = 8192;
  rope_spec plain = s;
  plain.scaling = rope_scaling::none;
  auto t = rope_inv_freq(s), p = rope_inv_freq(plain);
  int between = 0;
  for (size_t i = 0; i < t.inv_freq.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / p.inv_freq[i];
    const bool divided = wavelen > 8192 / 4.0;
    EXPECT_DOUBLE_EQ(t.inv_freq[i], divided ? p.inv_freq[i] / 8 : p.inv_freq[i]) << i;
    between += wavelen > 8192 / 4.0 && wavelen < 8192 / 2.0;
  }
  EXPECT_GT(between, 0);
}

TEST(Rope, Llama3KeepsHighScalesLowSmoothsMiddle) {
  rope_spec s;
  s.rot_dim = 128;
  s.theta = 500000;
  s.scaling = rope_scaling::llama3;
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.orig_ctx = 8192;
  rope_spec plain = s;
  plain.scaling = rope_scaling::none;
  auto t = rope_inv_freq(s), p = rope_inv_freq(plain);
  int kept = 0, scaled = 0, smoothed = 0;
  for (size_t i = 0; i < t.inv_freq.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / p.inv_freq[i];
    if (wavelen < 8192 / 4.0) {
      EXPECT_DOUBLE_EQ(t.inv_freq[i], p.inv_freq[i]);
      ++kept;
    } else if (wavelen > 8192) {
      EXPECT_DOUBLE_EQ(t.inv_freq[i], p.inv_freq[i] / 8);
      ++scaled;
    } else {
      EXPECT_LT(t.inv_freq[i], p.inv_freq[i]);
      EXPECT_GT(t.inv_freq[i], p.inv_freq[i] / 8);
      ++smoothed;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(smoothed, 0);
}

TEST(Rope, YarnRampsAndScalesAttention) {
  rope_spec s;
  s.rot_dim = 64;
  s.theta = 10000;
  s.scaling = rope_scaling::yarn;
  s.factor = 4;
  s.orig_ctx = 4096;
  auto t = rope_inv_freq(s);
  EXPECT_NEAR(t.attn_factor, 0.1 * std::log(4.0) + 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(t.inv_freq[0], 1.0);                                  // fastest: extrapolated
  EXPECT_NEAR(t.inv_freq[31], std::pow(10000.0, -62.0 / 64) / 4, 1e-18); // slowest: interpolated
}

// Proportional RoPE (LFM3's full layers): the whole head's pairs at theta^(-2i / D), only the
// first `turning` turning (partial_rotary_factor 0.5 of a head of 8: 2 of its 4 pairs); the
// factor divides the turning ones.
TEST(Rope, ProportionalTurnsTheFirstPairsOnly) {
  rope_spec s;
  s.rot_dim = 8;
  s.theta = 10000;
  s.turning = 2;
  auto t = rope_inv_freq(s);
  ASSERT_EQ(t.inv_freq.size(), 4u);
  EXPECT_DOUBLE_EQ(t.inv_freq[0], 1.0);
  EXPECT_NEAR(t.inv_freq[1], 0.1, 1e-15);
  EXPECT_EQ(t.inv_freq[2], 0.0);
  EXPECT_EQ(t.inv_freq[3], 0.0);
  s.scaling = rope_scaling::linear;
  s.factor = 2;
  t = rope_inv_freq(s);
  EXPECT_NEAR(t.inv_freq[1], 0.05, 1e-15);
  EXPECT_EQ(t.inv_freq[3], 0.0);
  rope_spec all = s;
  all.turning = 0;
  EXPECT_FALSE(all == s);
}
