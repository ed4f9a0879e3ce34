// nccl_group_test.cpp: the NCCL group's refusals, which run anywhere (label transport); its
// operations are in nccl_group_gpu_test.cpp (two GPUs).
#include <gtest/gtest.h>

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
