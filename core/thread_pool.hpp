// thread_pool.hpp: the compute threads of one shard. The caller thread is worker 0 and
// `n - 1` helper threads wait for work; `parallel_for(n, fn)` splits [0, n) into chunks that
// workers claim from an atomic counter, so a descheduled vCPU delays only the chunk it holds
// (the others take the rest). Waiting spins briefly, then sleeps on a futex (std::atomic::wait),
// so an idle pool burns no CPU. Threads can be pinned to a CPU list. One parallel_for at a time
// per pool (a shard runs one op at a time); results must not depend on which worker ran which
// chunk. Tests: tests/core/thread_pool_test.cpp
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace troupe {

class thread_pool {
 public:
  /// fn(begin, end): processes items [begin, end).
  using range_fn = std::function<void(int64_t, int64_t)>;

  /// `threads` >= 1 workers in total (the caller counts as one). `cpus`, when not empty,
  /// pins worker i to cpus[i % cpus.size()] (the caller thread is pinned on first use).
  explicit thread_pool(int threads = 1, std::vector<int> cpus = {});
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs fn over [0, n) in chunks of at least `grain` items; returns when all are done.
  void parallel_for(int64_t n, int64_t grain, const range_fn& fn);

 private:
  void worker_loop(int index);
  void run_chunks();

  std::vector<std::thread> workers_;
  std::vector<int> cpus_;
  bool caller_pinned_ = false;
  const range_fn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> busy_{0};
  std::atomic<bool> stop_{false};
};

/// Pins the calling thread to `cpu` (no-op where unsupported); returns false on failure.
bool pin_current_thread(int cpu);

} // namespace troupe
