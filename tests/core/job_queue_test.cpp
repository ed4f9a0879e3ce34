// job_queue_test.cpp: jobs run on the queue's threads in FIFO order per thread, post() refuses
// when full or stopped and never blocks, stop() joins.
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "core/job_queue.hpp"

using namespace troupe;

TEST(JobQueue, RunsJobsOffTheCallerThread) {
  job_queue q(2, 100);
  std::promise<std::thread::id> where;
  ASSERT_TRUE(q.post([&] { where.set_value(std::this_thread::get_id()); }));
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  std::atomic<int> n{0};
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(q.post([&] { ++n; }));
  for (int i = 0; i < 1000 && n.load() < 50; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(n.load(), 50);
}

TEST(JobQueue, RefusesWhenFullOrStopped) {
  job_queue q(1, 2);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  ASSERT_TRUE(q.post([&] {
    started.set_value();
    gate.wait();
  }));
  started.get_future().wait(); // the worker is busy; the queue holds 2 more
  EXPECT_TRUE(q.post([] {}));
  EXPECT_TRUE(q.post([] {}));
  EXPECT_FALSE(q.post([] {})); // full: refused at once
  EXPECT_EQ(q.queued(), 2u);
  release.set_value();
  q.stop();
  EXPECT_FALSE(q.post([] {}));
}
