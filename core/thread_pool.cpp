// thread_pool.cpp: chunked parallel_for with spin-then-futex waits (thread_pool.hpp).
#include "core/thread_pool.hpp"

#include <algorithm>
#include <pthread.h>
#include <sched.h>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#define TROUPE_CPU_RELAX() _mm_pause()
#else
#define TROUPE_CPU_RELAX() ((void)0)
#endif

namespace troupe {
namespace {
// About 20 µs of polling before sleeping: long enough to catch the next op of a decode step,
// short enough that a waiting thread gives its vCPU back to a worker that was descheduled.
constexpr int spin_iterations = 2000;
} // namespace

bool pin_current_thread(int cpu) {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
#else
  (void)cpu;
  return false;
#endif
}

thread_pool::thread_pool(int threads, std::vector<int> cpus)
    : cpus_(std::move(cpus)) {
  threads = std::max(threads, 1);
  workers_.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

thread_pool::~thread_pool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::run_chunks() {
  const auto& fn = *job_;
  for (;;) {
    int64_t begin = next_.fetch_add(job_chunk_, std::memory_order_relaxed);
    if (begin >= job_n_) break;
    fn(begin, std::min(begin + job_chunk_, job_n_));
  }
}

void thread_pool::parallel_for(int64_t n, int64_t grain, const range_fn& fn) {
  if (n <= 0) return;
  if (!caller_pinned_) {
    if (!cpus_.empty()) pin_current_thread(cpus_[0]);
    caller_pinned_ = true;
  }
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  // Four chunks per worker: enough slack for one slow worker without much claiming traffic.
  const int64_t chunks = static_cast<int64_t>(size()) * 4;
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = std::max(grain, (n + chunks - 1) / chunks);
  next_.store(0, std::memory_order_relaxed);
  busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_chunks();
  for (int i = 0; busy_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < spin_iterations) {
      TROUPE_CPU_RELAX();
    } else {
      int b = busy_.load(std::memory_order_acquire);
      if (b != 0) busy_.wait(b, std::memory_order_acquire);
    }
  }
  job_ = nullptr;
}

void thread_pool::worker_loop(int index) {
  if (!cpus_.empty()) pin_current_thread(cpus_[index % cpus_.size()]);
  // Workers are created before the first job, when the generation is 0: starting from 0 (not
  // from a fresh load) means a worker that starts late still sees the first job.
  uint32_t seen = 0;
  for (;;) {
    for (int i = 0;; ++i) {
      uint32_t g = generation_.load(std::memory_order_acquire);
      if (g != seen) {
        seen = g;
        break;
      }
      if (i < spin_iterations)
        TROUPE_CPU_RELAX();
      else
        generation_.wait(seen, std::memory_order_acquire);
    }
    if (stop_.load()) return;
    run_chunks();
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
  }
}

} // namespace troupe
