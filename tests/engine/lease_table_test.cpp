// lease_table_test.cpp: leases renewed by use, released, revoked by owner, reclaimed when
// expired (engine/lease_table.hpp), and the scheduler keeping its leases and block tables
// in step, returning to an empty table.
#include <gtest/gtest.h>

#include "engine/lease_table.hpp"
#include "engine/scheduler.hpp"

using namespace troupe;

TEST(LeaseTable, GrantRenewReleaseRevokeExpire) {
  lease_table t(10);
  t.add(1, 100, 5, 0.0);
  t.add(1, 100, 6, 1.0);
  t.add(2, 200, 7, 0.0);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.blocks_leased(), 3);
  EXPECT_EQ(t.expired(10.5), std::vector<int64_t>{2});
  t.renew(2, 5.0);
  EXPECT_TRUE(t.expired(10.5).empty());
  EXPECT_EQ(t.holders_of(100), std::vector<int64_t>{1});
  t.drop(1, 5);
  EXPECT_EQ(t.release(1), std::vector<int32_t>{6});
  EXPECT_EQ(t.release(2), std::vector<int32_t>{7});
  EXPECT_EQ(t.size(), 0u);
}

TEST(LeaseTable, SchedulerLeasesFollowBlocks) {
  kv_block_pool pool(64, 4);
  scheduler_config cfg;
  cfg.eos_ids = {0};
  scheduler s(pool, cfg);
  request a;
  a.id = 1;
  a.prompt = {5, 6, 7, 8, 9, 10, 11};
  a.max_tokens = 20;
  a.owner = 77;
  request b = a;
  b.id = 10;
  b.owner = 88;
  ASSERT_TRUE(s.add(a));
  ASSERT_TRUE(s.add(b));
  auto p = s.next_step();
  ASSERT_TRUE(p);
  std::vector<sampled_token> toks = {{1, 3, 0, {}}, {10, 3, 0, {}}};
  s.complete(p->step_id, toks);
  EXPECT_EQ(s.leases().size(), 2u);
  EXPECT_EQ(s.leases().blocks_leased(), pool.used_count());
  // the owner of b dies: its lease goes at once
  EXPECT_EQ(s.revoke_owner(88), std::vector<int64_t>{10});
  EXPECT_EQ(s.leases().size(), 1u);
  // a is not used for longer than the TTL: reclaimed, and recomputed later
  auto hit = s.reclaim_expired(scheduler::now_seconds() + cfg.lease_ttl_s + 1);
  EXPECT_EQ(hit, std::vector<int64_t>{1});
  EXPECT_EQ(s.leases().size(), 0u);
  EXPECT_EQ(pool.free_count(), pool.total());
  s.cancel(1);
  EXPECT_TRUE(s.idle());
}
