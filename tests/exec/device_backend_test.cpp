// device_backend_test.cpp: the backend a shard gets for its device. Without a GPU (CI) a CUDA
// backend is refused with the reason; with one (the gpu-labelled device_test runs there) its
// copies round-trip. The CPU backends are the host's.
#include <gtest/gtest.h>

#include "exec/backend.hpp"

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
