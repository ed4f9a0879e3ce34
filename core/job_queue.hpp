// job_queue.hpp: a few worker threads taking jobs from one FIFO queue, for work that must
// not run on the thread that received it (the HTTP gateway parses and tokenizes request
// bodies here, so its I/O threads only move bytes and /health answers at once). post()
// never blocks: it refuses a job when `max_queued` are waiting or the queue is stopped.
// stop() lets the jobs already started finish, drops the ones not started, and joins.
// Thread-safe. Tests: tests/core/job_queue_test.cpp
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe {

class job_queue {
 public:
  job_queue(int threads, size_t max_queued);
  ~job_queue();
  job_queue(const job_queue&) = delete;
  job_queue& operator=(const job_queue&) = delete;

  /// Queues `job`; false (and the job is not run) when the queue is full or stopped.
  bool post(std::function<void()> job);
  void stop();
  size_t queued() const;

 private:
  void loop();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t max_queued_;
  bool stopping_ = false;
};

} // namespace troupe
