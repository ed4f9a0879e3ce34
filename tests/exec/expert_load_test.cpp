// expert_load_test.cpp: the expert counters' wire form and the coordinator's merge of every
// process's counts (the counting itself is tested on a model in forward_test.cpp).
#include <gtest/gtest.h>
#include <tuple>

#include "exec/expert_load.hpp"

using namespace troupe;
using namespace troupe::exec;

TEST(ExpertLoad, TriplesRoundTripAndHostileOnesAreRefused) {
  const std::vector<expert_count> c = {{0, 0, 5}, {0, 1, 0}, {3, 7, 12}};
  const auto flat = flatten(c);
  ASSERT_EQ(flat.size(), 9u);
  auto back = unflatten(flat);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[2].layer, 3);
  EXPECT_EQ((*back)[2].expert, 7);
  EXPECT_EQ((*back)[2].tokens, 12);
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{1, 2}, {-1, 0, 1}, {0, -3, 1}, {0, 0, -1}, {int64_t{1} << 40, 0, 1}}) {
    auto r = unflatten(bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, errc::protocol_error);
  }
}

TEST(ExpertLoad, MergeSumsEachLayersExpertsAcrossProcesses) {
  // the coordinator counts layers 0-1, a worker layers 2-3, another worker layer 1 again (an
  // expert-parallel stage's counts arrive once, but a merge must still add, never overwrite)
  const std::vector<expert_count> here = {{1, 0, 4}, {0, 1, 2}, {1, 1, 0}};
  const std::vector<expert_count> there = {{2, 0, 7}, {1, 0, 3}, {3, 5, 1}};
  const auto m = merge_counts(here, there);
  ASSERT_EQ(m.size(), 5u);
  const std::vector<std::tuple<int, int, int64_t>> want = {
      {0, 1, 2}, {1, 0, 7}, {1, 1, 0}, {2, 0, 7}, {3, 5, 1}};
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(m[i].layer, std::get<0>(want[i])) << i;
    EXPECT_EQ(m[i].expert, std::get<1>(want[i])) << i;
    EXPECT_EQ(m[i].tokens, std::get<2>(want[i])) << i;
  }
}
