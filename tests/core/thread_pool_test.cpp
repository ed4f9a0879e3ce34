// thread_pool_test.cpp: every item is processed exactly once, for many sizes and repeated
// calls, with 1 to 3 workers (core/thread_pool.hpp).
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.hpp"

using namespace troupe;

TEST(ThreadPool, CoversEveryItemOnce) {
  for (int threads : {1, 2, 3}) {
    thread_pool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 4097}) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(ThreadPool, UsesHelperThreads) {
  thread_pool pool(2);
  std::atomic<bool> seen_other{false};
  const auto me = std::this_thread::get_id();
  // the caller dawdles on its chunks, so the helper gets to claim some even on a loaded machine
  pool.parallel_for(64, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != me) seen_other = true;
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  EXPECT_TRUE(seen_other.load());
}
