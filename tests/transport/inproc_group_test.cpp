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
  g->reset();
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  std::thread t0([&] { EXPECT_TRUE(g->member(0)->all_reduce_sum(a.data(), 4)); });
  std::thread t1([&] { EXPECT_TRUE(g->member(1)->all_reduce_sum(b.data(), 4)); });
  t0.join();
  t1.join();
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[3], 3.0f);
}
