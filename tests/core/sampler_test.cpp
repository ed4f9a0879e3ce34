// sampler_test.cpp: greedy ties, truncations, penalties, and repeatable seeded draws
// (core/sampler.hpp).
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "core/sampler.hpp"

using namespace troupe;

TEST(Sampler, GreedyTakesLowestIdOnTies) {
  std::vector<float> x = {0.1f, 2.0f, -1.0f, 2.0f};
  sampling_params p;
  EXPECT_EQ(sample(x, p, {}, 0).token, 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  std::vector<float> x = {0.5f, 0.2f, 3.0f, 2.9f};
  sampling_params p;
  p.temperature = 1.5f;
  p.top_k = 1;
  for (uint64_t s = 0; s < 50; ++s) EXPECT_EQ(sample(x, p, {}, s).token, 2);
}

TEST(Sampler, TopPKeepsTheNucleus) {
  // probabilities ~ 0.64, 0.24, 0.09, 0.03: top_p 0.7 keeps the first two only
  std::vector<float> x = {std::log(0.64f), std::log(0.24f), std::log(0.09f), std::log(0.03f)};
  sampling_params p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;
  std::map<int, int> seen;
  for (uint64_t s = 0; s < 2000; ++s) ++seen[sample(x, p, {}, s).token];
  EXPECT_EQ(seen.count(2) + seen.count(3), 0u);
  EXPECT_NEAR(seen[0] / 2000.0, 0.64 / 0.88, 0.04);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  std::vector<float> x = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  sampling_params p;
  p.temperature = 1.0f;
  p.min_p = 0.2f; // floor 0.1: drops 0.05
  for (uint64_t s = 0; s < 1000; ++s) EXPECT_NE(sample(x, p, {}, s).token, 3);
}

TEST(Sampler, SeedMakesDrawsRepeatable) {
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = std::sin(static_cast<float>(i));
  sampling_params p;
  p.temperature = 1.0f;
  p.seed = 1234;
  std::vector<int32_t> a, b, c;
  for (uint64_t s = 0; s < 30; ++s) a.push_back(sample(x, p, {}, s).token);
  for (uint64_t s = 0; s < 30; ++s) b.push_back(sample(x, p, {}, s).token);
  p.seed = 99;
  for (uint64_t s = 0; s < 30; ++s) c.push_back(sample(x, p, {}, s).token);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampler, PenaltiesLowerSeenTokens) {
  std::vector<float> x = {2.0f, 1.9f, 0.0f};
  sampling_params p;
  p.repetition_penalty = 1.5f; // 2.0 / 1.5 < 1.9
  const std::vector<int32_t> hist = {0};
  EXPECT_EQ(sample(x, p, hist, 0).token, 1);
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 0.06f; // twice seen: 2.0 - 0.12 < 1.9
  const std::vector<int32_t> twice = {0, 0};
  EXPECT_EQ(sample(x, p, twice, 0).token, 1);
  EXPECT_EQ(sample(x, p, hist, 0).token, 0);
}

TEST(Sampler, LogprobsComeFromRawLogits) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f};
  sampling_params p;
  p.logprobs = true;
  p.top_logprobs = 2;
  auto r = sample(x, p, {}, 0);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(r.logprob, 3.0 - lse, 1e-5);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[1].first, 1);
}

TEST(Sampler, ValidateRejectsOutOfRange) {
  sampling_params p;
  p.temperature = 3.0f;
  EXPECT_FALSE(p.validate());
  p = {};
  p.top_p = 0.0f;
  EXPECT_FALSE(p.validate());
  p = {};
  EXPECT_TRUE(p.validate());
}

// A grammar's allowed tokens: only those may be picked, greedy or sampled (ids past the bits
// are not allowed), and the logprobs stay those of the raw logits.
TEST(Sampler, OnlyAllowedTokensArePicked) {
  const std::vector<float> logits = {5.0f, 1.0f, 4.0f, 0.5f, 3.0f, 9.0f, 2.0f};
  const std::vector<uint64_t> allow = {(1u << 2) | (1u << 4)}; // tokens 2 and 4; 5 is the best
  sampling_params greedy;
  greedy.logprobs = true;
  const auto g = sample(logits, greedy, {}, 0, {}, allow);
  EXPECT_EQ(g.token, 2);
  const auto raw = score(logits, 2, 0);
  EXPECT_FLOAT_EQ(g.logprob, raw.logprob);
  sampling_params hot;
  hot.temperature = 2.0f;
  hot.seed = 7;
  int seen[7] = {};
  for (uint64_t step = 0; step < 400; ++step)
    ++seen[sample(logits, hot, {}, step, {}, allow).token];
  EXPECT_GT(seen[2], 0);
  EXPECT_GT(seen[4], 0);
  EXPECT_EQ(seen[2] + seen[4], 400);
  // bits shorter than the vocabulary: the ids past them are not allowed
  const std::vector<uint64_t> none_past = {uint64_t{1} << 6};
  EXPECT_EQ(sample(std::vector<float>(70, 0.0f), greedy, {}, 0, {}, none_past).token, 6);
}
