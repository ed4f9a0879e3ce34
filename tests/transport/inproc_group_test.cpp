// inproc_group_test.cpp: in-process all-reduce gives every rank bit-identical sums in a
// fixed order, all-gather concatenates in rank order, and abort() frees waiting ranks.
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "transport/inproc_group.hpp"

using namespace troupe;
using namespace troupe::transport;

TEST(InprocGroup, AllReduceIsBitIdenticalAndOrdered) {
  for (int N : {2, 3, 4}) {
    auto g = inproc_group::create(N);
    const int64_t n = 1001;
    std::vector<std::vector<float>> data(N, std::vector<float>(n));
    std::mt19937 rng(N);
    std::normal_distribution<float> d(0, 1e3);
    for (auto& v : data)
      for (auto& x : v) x = d(rng);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      float acc = data[0][i];
      for (int k = 1; k < N; ++k) acc += data[k][i];
      want[i] = acc;
    }
    std::vector<std::thread> ts;
    std::vector<status> st(N);
    for (int r = 0; r < N; ++r)
      ts.emplace_back([&, r] {
        for (int rep = 0; rep < 3 && st[r]; ++rep) {
          auto v = data[r];
          st[r] = g->member(r)->all_reduce_sum(v.data(), n);
          if (rep == 2) data[r] = v;
        }
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < N; ++r) {
      ASSERT_TRUE(st[r]);
      EXPECT_EQ(std::memcmp(data[r].data(), want.data(), n * sizeof(float)), 0) << "rank " << r;
    }
  }
}

TEST(InprocGroup, AllGatherConcatenatesInRankOrder) {
  auto g = inproc_group::create(3);
  const std::vector<int64_t> counts = {2, 3, 1};
  std::vector<std::vector<float>> out(3, std::vector<float>(6));
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      std::vector<float> in(counts[r], static_cast<float>(r + 1));
      ASSERT_TRUE(g->member(r)->all_gather(in.data(), out[r].data(), counts));
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], (std::vector<float>{1, 1, 2, 2, 2, 3}));
}

TEST(InprocGroup, AbortReleasesWaiters) {
  auto g = inproc_group::create(2);
  std::vector<float> v(10, 1.0f);
  status st;
  std::thread t([&] { st = g->member(0)->all_reduce_sum(v.data(), 10); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  g->abort("rank 1 died");
  t.join();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, errc::unavailable);
  g->reset(1); // members re-arm for the new epoch, as restarted shards do
  auto m0 = g->join(0), m1 = g->join(1);
  m0->arm(1, 0);
  m1->arm(1, 0);
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  std::thread t0([&] { EXPECT_TRUE(m0->all_reduce_sum(a.data(), 4)); });
  std::thread t1([&] { EXPECT_TRUE(m1->all_reduce_sum(b.data(), 4)); });
  t0.join();
  t1.join();
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[3], 3.0f);
}

TEST(InprocGroup, MismatchedStepsFailInsteadOfMixingData) {
  auto g = inproc_group::create(2);
  auto a = g->join(0), b = g->join(1);
  a->arm(0, 5);
  b->arm(0, 6); // rank 1 is already in the next step (it never saw step 5)
  std::vector<float> x(8, 1.0f), y(8, 2.0f);
  status sa, sb;
  std::thread t0([&] { sa = a->all_reduce_sum(x.data(), 8); });
  std::thread t1([&] { sb = b->all_reduce_sum(y.data(), 8); });
  t0.join();
  t1.join();
  EXPECT_FALSE(sa);
  EXPECT_FALSE(sb);
  EXPECT_EQ(x[0], 1.0f); // untouched
}

TEST(InprocGroup, AReplacedMemberCannotPassForItsSuccessor) {
  auto g = inproc_group::create(2);
  auto old_member = g->join(1);
  old_member->arm(1, 3);
  g->abort("rank 1 hung");
  g->reset(2); // the group moves on with a new instance of rank 1
  auto fresh = g->join(1), peer = g->join(0);
  fresh->arm(2, 4);
  peer->arm(2, 4);
  std::vector<float> v(4, 1.0f);
  auto late = old_member->all_reduce_sum(v.data(), 4); // wakes up late: must not join
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, errc::unavailable);
  std::vector<float> p(4, 1.0f), q(4, 2.0f);
  std::thread t0([&] { EXPECT_TRUE(peer->all_reduce_sum(p.data(), 4)); });
  std::thread t1([&] { EXPECT_TRUE(fresh->all_reduce_sum(q.data(), 4)); });
  t0.join();
  t1.join();
  EXPECT_EQ(p[0], 3.0f);
}
