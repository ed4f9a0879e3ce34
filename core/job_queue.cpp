// job_queue.cpp: the worker loop (job_queue.hpp).
#include "core/job_queue.hpp"

#include <utility>

namespace troupe {

job_queue::job_queue(int threads, size_t max_queued)
    : max_queued_(max_queued) {
  for (int i = 0; i < (threads < 1 ? 1 : threads); ++i) threads_.emplace_back([this] { loop(); });
}

job_queue::~job_queue() {
  stop();
}

bool job_queue::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ || jobs_.size() >= max_queued_) return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void job_queue::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

size_t job_queue::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return jobs_.size();
}

void job_queue::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

} // namespace troupe
