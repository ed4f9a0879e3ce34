// nccl_group_test.cpp: the NCCL group's refusals and the id a group spanning processes meets
// by, which run anywhere (label transport); its operations are in nccl_group_gpu_test.cpp.
#include <gtest/gtest.h>

#include <tuple>

#include "kernels/device.hpp"
#include "transport/nccl_group.hpp"

using namespace troupe;
using transport::nccl_group;

TEST(NcclGroup, RefusesTwoRanksOnOneGpuAndAbsentGpus) {
  auto same = nccl_group::create({0, 0});
  ASSERT_FALSE(same);
  EXPECT_EQ(same.error().code, errc::invalid_argument);
  EXPECT_FALSE(nccl_group::create({}));
  if (kernels::cuda_available()) return;
  auto none = nccl_group::create({0, 1});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, errc::unavailable);
}

TEST(NcclGroup, ARankOfAGroupSpanningProcessesRefusesBadArguments) {
  const std::vector<uint8_t> id(128, 1), short_id(16, 1);
  const auto t = std::chrono::milliseconds(100);
  auto bad_id = nccl_group::create_rank(0, 0, 2, short_id, t);
  ASSERT_FALSE(bad_id);
  EXPECT_EQ(bad_id.error().code, errc::invalid_argument);
  EXPECT_NE(bad_id.error().message.find("16 bytes"), std::string::npos) << bad_id.error().message;
  for (auto [rank, size, device] : {std::tuple{2, 2, 0}, {-1, 2, 0}, {0, 0, 0}, {0, 2, -1}}) {
    auto g = nccl_group::create_rank(device, rank, size, id, t);
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().code, errc::invalid_argument) << rank << " " << size << " " << device;
  }
  if (kernels::cuda_available()) return;
  auto none = nccl_group::create_rank(0, 0, 2, id, t);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, errc::unavailable);
}

// The id is NCCL's: 128 bytes, a new one each time (ncclGetUniqueId needs no GPU).
TEST(NcclGroup, IdsAreNcclsAndDifferEachTime) {
  auto a = nccl_group::make_id(), b = nccl_group::make_id();
  ASSERT_TRUE(a) << a.error().to_string();
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_EQ(a->size(), 128u);
  EXPECT_NE(*a, *b);
}
