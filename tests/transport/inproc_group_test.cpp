// inproc_group_test.cpp: in-process all-reduce gives every rank bit-identical sums in a
// fixed order, all-gather concatenates in rank order, and abort() frees waiting ranks.
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "core/half.hpp"
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

namespace {
// runs fn(rank, member) on one thread per rank of a fresh group
template <class Fn>
void on_ranks(int N, Fn fn) {
  auto g = inproc_group::create(N);
  std::vector<std::thread> ts;
  for (int r = 0; r < N; ++r) ts.emplace_back([&, r] { fn(r, *g->member(r)); });
  for (auto& t : ts) t.join();
}
} // namespace

TEST(InprocGroup, Bf16AllReduceAccumulatesInF32AndRoundsOnce) {
  // 1 + 3 * 2^-9: bf16 (8 bits of mantissa) loses each 2^-9 alone; the f32 sum keeps them
  const int N = 4;
  std::vector<std::vector<uint16_t>> v(N, std::vector<uint16_t>(5));
  for (int r = 0; r < N; ++r)
    for (auto& x : v[r]) x = f32_to_bf16(r == 0 ? 1.0f : 1.0f / 512);
  on_ranks(
      N, [&](int r, collective& c) { ASSERT_TRUE(c.all_reduce_sum(v[r].data(), 5, dtype::bf16)); });
  for (int r = 0; r < N; ++r) EXPECT_EQ(v[r][4], f32_to_bf16(1.0f + 3.0f / 512)) << "rank " << r;
  EXPECT_NE(f32_to_bf16(1.0f + 3.0f / 512), f32_to_bf16(1.0f));
}

TEST(InprocGroup, ReduceScatterSumsEachRanksBlockInRankOrder) {
  const int N = 3;
  const std::vector<int64_t> counts = {2, 1, 3};
  std::vector<std::vector<float>> out(N);
  on_ranks(N, [&](int r, collective& c) {
    std::vector<float> in(6);
    for (int i = 0; i < 6; ++i) in[i] = static_cast<float>((r + 1) * 10 + i);
    out[r].resize(counts[r]);
    ASSERT_TRUE(c.reduce_scatter(in.data(), out[r].data(), counts, dtype::f32));
  });
  // element i summed over ranks: (10 + 20 + 30) + 3 i
  EXPECT_EQ(out[0], (std::vector<float>{60, 63}));
  EXPECT_EQ(out[1], (std::vector<float>{66}));
  EXPECT_EQ(out[2], (std::vector<float>{69, 72, 75}));
}

TEST(InprocGroup, AllToAllRoutesBlocksByRank) {
  // rank r sends (r + 1) copies of 100 r + k to rank k
  const int N = 3;
  std::vector<std::vector<float>> got(N);
  on_ranks(N, [&](int r, collective& c) {
    std::vector<int64_t> sc(N, r + 1), rc(N);
    for (int k = 0; k < N; ++k) rc[k] = k + 1;
    std::vector<float> in;
    for (int k = 0; k < N; ++k)
      for (int j = 0; j <= r; ++j) in.push_back(static_cast<float>(100 * r + k));
    got[r].resize(6);
    ASSERT_TRUE(c.all_to_all(in.data(), sc, got[r].data(), rc, dtype::f32));
  });
  EXPECT_EQ(got[1], (std::vector<float>{1, 101, 101, 201, 201, 201}));
}

TEST(InprocGroup, AllToAllRefusesCountsThatDisagree) {
  std::vector<status> st(2);
  on_ranks(2, [&](int r, collective& c) {
    std::vector<float> in(4, 1.0f), out(4);
    std::vector<int64_t> sc = {2, 2}, rc = {2, r == 1 ? 1 : 2}; // rank 1 expects 1 from itself
    st[r] = c.all_to_all(in.data(), sc, out.data(), rc, dtype::f32);
  });
  EXPECT_TRUE(st[0]);
  ASSERT_FALSE(st[1]);
  EXPECT_EQ(st[1].error().code, errc::invalid_argument);
}

TEST(InprocGroup, BroadcastAndPointToPoint) {
  on_ranks(3, [&](int r, collective& c) {
    std::vector<int32_t> v(4, r == 2 ? 7 : -1);
    ASSERT_TRUE(c.broadcast(v.data(), 4, dtype::i32, 2));
    EXPECT_EQ(v, (std::vector<int32_t>(4, 7)));
    // a ring: r sends to r + 1, receives from r - 1
    const std::string msg = "from " + std::to_string(r);
    ASSERT_TRUE(c.send((r + 1) % 3, msg.data(), static_cast<int64_t>(msg.size())));
    std::string in(6, '\0');
    ASSERT_TRUE(c.recv((r + 2) % 3, in.data(), 6));
    EXPECT_EQ(in, "from " + std::to_string((r + 2) % 3));
    auto wrong = c.send(r, msg.data(), 1);
    EXPECT_FALSE(wrong);
  });
}

TEST(InprocGroup, RecvOfAnotherStepFailsAndAbortFreesIt) {
  auto g = inproc_group::create(2);
  auto a = g->join(0), b = g->join(1);
  a->arm(0, 1);
  b->arm(0, 2);
  float x = 1;
  ASSERT_TRUE(a->send(1, &x, 4));
  auto st = b->recv(0, &x, 4);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, errc::unavailable);
  status waited;
  std::thread t([&] { waited = b->recv(0, &x, 4); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  g->abort("rank 0 died");
  t.join();
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error().code, errc::unavailable);
}
