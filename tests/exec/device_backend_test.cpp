// device_backend_test.cpp: the backend a shard gets for its device. Without a GPU (CI) a CUDA
// backend is refused with the reason; with one (the gpu-labelled device_test runs there) its
// copies round-trip. The CPU backends are the host's. And the device code paths of the
// executor, emulated over host memory, against the plain CPU shard.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "../test_paths.hpp"
#include "core/batch.hpp"
#include "exec/backend.hpp"
#include "exec/executor.hpp"
#include "greedy_util.hpp"
#include "transport/inproc_group.hpp"

using namespace troupe;
using namespace troupe::exec;

TEST(DeviceBackend, CudaIsRefusedWithTheReasonWhereThereIsNoGpu) {
  if (kernels::cuda_available()) GTEST_SKIP() << "a GPU is here: device_test covers it";
  auto b = make_backend(kernels::backend::cuda, 0, 1);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, errc::unavailable);
  EXPECT_NE(b.error().message.find(kernels::cuda_summary()), std::string::npos)
      << b.error().message;
}

TEST(DeviceBackend, HostBackendsCopyAndKeepHostMemory) {
  for (auto where : {kernels::backend::cpu, kernels::backend::ref}) {
    auto b = make_backend(where, 0, 1);
    ASSERT_TRUE(b);
    EXPECT_TRUE((*b)->host_memory());
    auto buf = (*b)->allocate(64);
    ASSERT_TRUE(buf);
    const char text[] = "abcdefgh";
    ASSERT_TRUE((*b)->upload(buf->data(), text, 8));
    ASSERT_TRUE((*b)->copy(static_cast<char*>(buf->data()) + 8, buf->data(), 8));
    char back[16] = {};
    ASSERT_TRUE((*b)->download(back, buf->data(), 16));
    EXPECT_EQ(std::string(back, 16), "abcdefghabcdefgh");
  }
}

// The device code paths (weights uploaded, a step's inputs in one copy, the hidden rows up and
// down, collectives and logits through host memory) over host memory and the CPU kernels:
// what a GPU shard does, minus the GPU, against the plain CPU shard.
namespace {

std::unique_ptr<exec::executor> shard_of(std::shared_ptr<const model_source> m, int begin, int end,
                                         bool emulated, int tp_rank = 0, int tp = 1,
                                         collective* comm = nullptr) {
  exec::exec_options o;
  o.kv_blocks = 16;
  o.max_rows = 64;
  o.host_as_device = emulated;
  return test::shard_executor(std::move(m), begin, end, o, tp_rank, tp, comm);
}

} // namespace

TEST(EmulatedDevice, ShardsAndMixedPipelinesGiveTheHostTokens) {
  for (const char* path : {"stories260K/stories260K.gguf", "stories260K-hf"}) {
    auto m = open_model(test::model_path(path));
    ASSERT_TRUE(m) << m.error().to_string();
    const int L = static_cast<int>((*m)->config.n_layer);
    const int64_t V = (*m)->config.V;
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 30, 90, 12, 5};
    auto cpu = shard_of(*m, 0, L, false), dev = shard_of(*m, 0, L, true);
    ASSERT_TRUE(cpu && dev);
    const auto want = test::greedy_through({cpu.get()}, prompt, 20, V);
    EXPECT_EQ(test::greedy_through({dev.get()}, prompt, 20, V), want) << path;
    // a device stage, then a CPU stage; and the other way round
    auto d0 = shard_of(*m, 0, L / 2, true), c1 = shard_of(*m, L / 2, L, false);
    auto c0 = shard_of(*m, 0, L / 2, false), d1 = shard_of(*m, L / 2, L, true);
    ASSERT_TRUE(d0 && c1 && c0 && d1);
    EXPECT_EQ(test::greedy_through({d0.get(), c1.get()}, prompt, 20, V), want) << path;
    EXPECT_EQ(test::greedy_through({c0.get(), d1.get()}, prompt, 20, V), want) << path;
  }
}

TEST(EmulatedDevice, TensorParallelSumsAndLogitsGoThroughTheHost) {
  auto m = open_model(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_TRUE(m);
  const int L = static_cast<int>((*m)->config.n_layer);
  const int64_t V = (*m)->config.V;
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  auto cpu = shard_of(*m, 0, L, false);
  ASSERT_TRUE(cpu);
  const auto want = test::greedy_through({cpu.get()}, prompt, 12, V);
  auto group = transport::inproc_group::create(2);
  std::vector<std::unique_ptr<collective>> members;
  for (int r = 0; r < 2; ++r) members.push_back(group->join(r));
  std::vector<std::vector<int32_t>> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      auto s = shard_of(*m, 0, L, true, r, 2, members[static_cast<size_t>(r)].get());
      if (s) got[static_cast<size_t>(r)] = test::greedy_through({s.get()}, prompt, 12, V);
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[1], want);
}
