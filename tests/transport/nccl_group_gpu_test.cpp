// nccl_group_gpu_test.cpp (label gpu): the NCCL group's operations on two GPUs (skipped,
// saying why, with fewer). Each rank runs on its own thread with its own stream, as the shards
// of a stage do; results are compared with the sums taken on the host.
#include <gtest/gtest.h>

#include <thread>

#include "kernels/device.hpp"
#include "transport/nccl_group.hpp"

using namespace troupe;
using transport::nccl_group;

namespace {

int gpus() {
  int n = 0;
  while (kernels::get_device(kernels::backend::cuda, n)) ++n;
  return n;
}

// Runs body(rank, device, stream, member) on one thread per rank.
template <class Body>
void on_ranks(const std::shared_ptr<nccl_group>& g, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < g->size(); ++r)
    threads.emplace_back([&, r] {
      kernels::device* d = kernels::get_device(kernels::backend::cuda, r);
      ASSERT_TRUE(d->make_current());
      auto s = d->stream_create();
      ASSERT_TRUE(s);
      auto m = g->join(r);
      ASSERT_TRUE(m);
      EXPECT_TRUE(m->device_memory());
      m->set_stream(*s);
      m->arm(g->epoch(), 1);
      body(r, *d, *s, *m);
      d->stream_destroy(*s);
    });
  for (auto& t : threads) t.join();
}

} // namespace

// One rank (what a machine with one GPU can run): every operation is a copy, or nothing.
TEST(NcclGroupOnGpus, OneRankRunsEveryOperation) {
  if (gpus() < 1) GTEST_SKIP() << "needs a GPU (" << kernels::cuda_summary() << ")";
  auto g = nccl_group::create({0});
  ASSERT_TRUE(g) << g.error().to_string();
  on_ranks(*g, [&](int, kernels::device& d, void* s, collective& m) {
    std::vector<float> x = {1, 2, 3, 4}, back(4);
    auto buf = kernels::device_buffer::allocate(d, 64);
    ASSERT_TRUE(buf);
    auto* p = static_cast<float*>(buf->data());
    ASSERT_TRUE(d.upload(p, x.data(), 16));
    ASSERT_TRUE(m.all_reduce_sum(p, 4, dtype::f32));
    const std::vector<int64_t> one = {4};
    ASSERT_TRUE(m.all_gather(p, p + 4, one, dtype::f32));
    ASSERT_TRUE(m.broadcast(p, 4, dtype::f32, 0));
    ASSERT_TRUE(d.stream_synchronize(s));
    ASSERT_TRUE(d.download(back.data(), p + 4, 16));
    EXPECT_EQ(back, x);
  });
  (*g)->abort("test");
  (*g)->reset(3);
  on_ranks(*g, [&](int, kernels::device& d, void* s, collective& m) {
    auto buf = kernels::device_buffer::allocate(d, 64);
    ASSERT_TRUE(buf);
    EXPECT_TRUE(m.all_reduce_sum(buf->data(), 4, dtype::f32));
    EXPECT_TRUE(d.stream_synchronize(s));
  });
}

TEST(NcclGroupOnGpus, EveryOperationAgreesWithTheHost) {
  if (gpus() < 2) GTEST_SKIP() << "needs two GPUs (" << kernels::cuda_summary() << ")";
  auto g = nccl_group::create({0, 1});
  ASSERT_TRUE(g) << g.error().to_string();
  const int64_t n = 1000;
  on_ranks(*g, [&](int r, kernels::device& d, void* s, collective& m) {
    std::vector<float> x(n), back(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((r + 1) * i);
    auto buf = kernels::device_buffer::allocate(d, 4 * n * sizeof(float));
    ASSERT_TRUE(buf);
    auto* p = static_cast<float*>(buf->data());
    ASSERT_TRUE(d.upload(p, x.data(), n * sizeof(float)));
    // all-reduce: (1 + 2) i
    ASSERT_TRUE(m.all_reduce_sum(p, n, dtype::f32));
    ASSERT_TRUE(d.stream_synchronize(s));
    ASSERT_TRUE(d.download(back.data(), p, n * sizeof(float)));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 3.0f * i) << i;
    // all-gather of unequal slices: rank 0 gives 3 values, rank 1 gives 5
    const std::vector<int64_t> counts = {3, 5};
    std::vector<float> mine(counts[r], static_cast<float>(10 + r)), all(8);
    ASSERT_TRUE(d.upload(p, mine.data(), mine.size() * sizeof(float)));
    ASSERT_TRUE(m.all_gather(p, p + n, counts, dtype::f32));
    ASSERT_TRUE(d.stream_synchronize(s));
    ASSERT_TRUE(d.download(all.data(), p + n, all.size() * sizeof(float)));
    EXPECT_EQ(all, (std::vector<float>{10, 10, 10, 11, 11, 11, 11, 11}));
    // broadcast from rank 1
    std::vector<float> b(4, static_cast<float>(r + 7)), got(4);
    ASSERT_TRUE(d.upload(p, b.data(), 4 * sizeof(float)));
    ASSERT_TRUE(m.broadcast(p, 4, dtype::f32, 1));
    ASSERT_TRUE(d.stream_synchronize(s));
    ASSERT_TRUE(d.download(got.data(), p, 4 * sizeof(float)));
    EXPECT_EQ(got, std::vector<float>(4, 8.0f));
  });
  // an aborted group fails its members with the reason; reset brings it back
  (*g)->abort("a member died");
  on_ranks(*g, [&](int, kernels::device& d, void*, collective& m) {
    auto buf = kernels::device_buffer::allocate(d, 64);
    ASSERT_TRUE(buf);
    auto st = m.all_reduce_sum(buf->data(), 4, dtype::f32);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, errc::unavailable);
    EXPECT_NE(st.error().message.find("a member died"), std::string::npos);
  });
  (*g)->reset(7);
  EXPECT_EQ((*g)->epoch(), 7u);
  on_ranks(*g, [&](int, kernels::device& d, void* s, collective& m) {
    auto buf = kernels::device_buffer::allocate(d, 64);
    ASSERT_TRUE(buf);
    EXPECT_TRUE(m.all_reduce_sum(buf->data(), 4, dtype::f32));
    EXPECT_TRUE(d.stream_synchronize(s));
  });
}

// A group spanning processes, one rank per thread here (each thread joins with the id as a
// worker process would): what one GPU can run is one rank; two ranks need two GPUs.
TEST(NcclGroupOnGpus, RanksOfAGroupSpanningProcessesJoinByTheirId) {
  if (gpus() < 1) GTEST_SKIP() << "needs a GPU (" << kernels::cuda_summary() << ")";
  const int n = gpus() >= 2 ? 2 : 1;
  auto id = nccl_group::make_id();
  ASSERT_TRUE(id) << id.error().to_string();
  std::vector<std::shared_ptr<nccl_group>> groups(n);
  std::vector<std::thread> joining;
  for (int r = 0; r < n; ++r)
    joining.emplace_back([&, r] {
      auto g = nccl_group::create_rank(r, r, n, *id, std::chrono::seconds(60));
      ASSERT_TRUE(g) << g.error().to_string();
      groups[r] = *g;
    });
  for (auto& t : joining) t.join();
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      ASSERT_TRUE(groups[r]);
      EXPECT_EQ(groups[r]->size(), n);
      EXPECT_TRUE(groups[r]->holds(r));
      kernels::device* d = kernels::get_device(kernels::backend::cuda, r);
      ASSERT_TRUE(d->make_current());
      auto s = d->stream_create();
      ASSERT_TRUE(s);
      auto m = groups[r]->join(r);
      ASSERT_TRUE(m);
      EXPECT_EQ(m->rank(), r);
      m->set_stream(*s);
      m->arm(0, 1);
      std::vector<float> x = {1, 2, 3, 4}, back(4);
      for (auto& v : x) v *= static_cast<float>(r + 1);
      auto buf = kernels::device_buffer::allocate(*d, 16);
      ASSERT_TRUE(buf);
      ASSERT_TRUE(d->upload(buf->data(), x.data(), 16));
      ASSERT_TRUE(m->all_reduce_sum(buf->data(), 4, dtype::f32));
      ASSERT_TRUE(d->stream_synchronize(*s));
      ASSERT_TRUE(d->download(back.data(), buf->data(), 16));
      const float times = n == 2 ? 3.0f : 1.0f; // 1x + 2x
      EXPECT_EQ(back, (std::vector<float>{times, 2 * times, 3 * times, 4 * times}));
      d->stream_destroy(*s);
    });
  for (auto& t : ranks) t.join();
  // a new epoch needs a new id: reset stops the group, its members fail with the reason
  groups[0]->reset(1);
  auto m = groups[0]->join(0);
  auto buf = kernels::device_buffer::allocate(*kernels::get_device(kernels::backend::cuda, 0), 16);
  ASSERT_TRUE(buf);
  m->arm(1, 1);
  auto st = m->all_reduce_sum(buf->data(), 4, dtype::f32);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, errc::unavailable);
}

// Rank 0 of two, whose peer never comes, gives up after its timeout instead of waiting.
TEST(NcclGroupOnGpus, ARankWhosePeersNeverComeGivesUp) {
  if (gpus() < 1) GTEST_SKIP() << "needs a GPU (" << kernels::cuda_summary() << ")";
  auto id = nccl_group::make_id();
  ASSERT_TRUE(id) << id.error().to_string();
  const auto t0 = std::chrono::steady_clock::now();
  auto g = nccl_group::create_rank(0, 0, 2, *id, std::chrono::milliseconds(1500));
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, errc::unavailable) << g.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}
