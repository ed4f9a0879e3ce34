// fault_plan_test.cpp: the --inject grammar for worker-process faults (kill-worker,
// partition, slow-link): what each needs, what it refuses, and when each fires.
#include <gtest/gtest.h>

#include "engine/fault_plan.hpp"

using namespace troupe;

TEST(FaultPlan, WorkerFaultsFireForTheirRankAndStep) {
  fault_plan f;
  ASSERT_TRUE(f.add("kill-worker:rank=2,step=15"));
  ASSERT_TRUE(f.add("partition:rank=1,ms=2000,step=30"));
  ASSERT_TRUE(f.add("slow-link:rank=3,ms=5"));
  EXPECT_TRUE(f.kill_worker(2, 15));
  EXPECT_FALSE(f.kill_worker(2, 16));
  EXPECT_FALSE(f.kill_worker(1, 15));
  EXPECT_EQ(f.partition_ms(1, 30), 2000);
  EXPECT_EQ(f.partition_ms(1, 31), 0);
  EXPECT_EQ(f.partition_ms(2, 30), 0);
  EXPECT_EQ(f.slow_link_ms(3), 5);
  EXPECT_EQ(f.slow_link_ms(0), 0);
  EXPECT_EQ(f.specs().size(), 3u); // what a worker process is sent to parse again
  EXPECT_FALSE(f.kill(0, 0, 15));  // not a shard fault
}

TEST(FaultPlan, WorkerFaultsRefuseWhatTheyCannotMean) {
  for (const char* bad :
       {"kill-worker:step=3", "kill-worker:rank=1", "partition:rank=1,step=3", "slow-link:rank=1",
        "kill-worker:stage=0,rank=1,step=2", "partition:rank=1,ms=-5,step=1"}) {
    fault_plan f;
    auto st = f.add(bad);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().code, errc::invalid_argument) << bad;
  }
}
