// inproc_group.cpp: barrier-based in-process collectives (inproc_group.hpp).
#include "transport/inproc_group.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace troupe::transport {

std::shared_ptr<inproc_group> inproc_group::create(int size) {
  return std::shared_ptr<inproc_group>(new inproc_group(size));
}

inproc_group::inproc_group(int size)
    : size_(size)
    , slots_(size)
    , inputs_(size)
    , tags_(size, 0)
    , waiting_(size, 0) {
  // Spin long (~0.5 ms) before sleeping when every rank can have a core to itself: a sleep
  // and wake-up per barrier costs more than the imbalance it waits out. With more ranks than
  // cores a spinning rank would keep the one it waits for off the CPU, so barely spin.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  spin_ = static_cast<unsigned>(size) <= cores ? 16000 : 200;
}

std::unique_ptr<inproc_group::handle> inproc_group::join(int rank) {
  return std::make_unique<handle>(shared_from_this(), rank);
}

collective* inproc_group::member(int rank) {
  std::lock_guard<std::mutex> lk(mu_);
  if (views_.empty())
    for (int r = 0; r < size_; ++r) {
      views_.push_back(std::make_unique<handle>(shared_from_this(), r));
      views_.back()->arm(epoch_, 0);
    }
  return views_.at(rank).get();
}

void inproc_group::abort(std::string reason) {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  reason_ = std::move(reason);
  cv_.notify_all();
}

status inproc_group::check_tags(int rank, uint64_t tag) {
  // called after the barrier that follows every rank storing its tag
  std::lock_guard<std::mutex> lk(mu_);
  for (int k = 0; k < size_; ++k)
    if (tags_[k] != tag)
      return make_error(errc::unavailable,
                        "collective mismatch: rank {} is in another step or operation than rank {}",
                        k, rank);
  return {};
}

void inproc_group::reset(uint64_t epoch) {
  std::lock_guard<std::mutex> lk(mu_);
  epoch_ = epoch;
  aborted_ = false;
  arrived_ = 0;
  ++resets_;
  reason_.clear();
  cv_.notify_all();
}

bool inproc_group::waiting(int rank) const {
  std::lock_guard<std::mutex> lk(mu_);
  return waiting_.at(rank) != 0;
}

bool inproc_group::aborted() const {
  std::lock_guard<std::mutex> lk(mu_);
  return aborted_;
}

status inproc_group::barrier(const handle& h) {
  const int rank = h.rank_;
  // ranks of a stage usually arrive within microseconds of each other: a short spin on the
  // generation counter saves the sleep and wake-up (tens of microseconds each) per barrier
  std::unique_lock<std::mutex> lk(mu_);
  if (aborted_) return make_error(errc::unavailable, "collective aborted: {}", reason_);
  if (h.epoch_ != epoch_)
    return make_error(errc::unavailable, "collective epoch {} is over (now {})", h.epoch_, epoch_);
  const uint64_t gen = generation_, resets = resets_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    gen_atomic_.store(generation_, std::memory_order_release);
    cv_.notify_all();
    return {};
  }
  lk.unlock();
  for (int i = 0; i < spin_ && gen_atomic_.load(std::memory_order_acquire) == gen; ++i) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  lk.lock();
  if (generation_ != gen && resets_ == resets && !aborted_) return {};
  waiting_[rank] = 1;
  cv_.wait(lk, [&] { return generation_ != gen || aborted_ || resets_ != resets; });
  waiting_[rank] = 0;
  if (resets_ != resets || (aborted_ && generation_ == gen))
    return make_error(errc::unavailable, "collective aborted: {}",
                      reason_.empty() ? "the group was reset" : reason_);
  return {};
}

namespace {
uint64_t op_tag(uint64_t step, uint64_t op, int64_t n, uint64_t kind) {
  return (step * 0x9e3779b97f4a7c15ull) ^ (op << 48) ^ (static_cast<uint64_t>(n) << 8) ^ kind;
}
} // namespace

status inproc_group::all_reduce(handle& h, float* data, int64_t n) {
  if (size_ == 1) return {};
  const int rank = h.rank_;
  const uint64_t tag = op_tag(h.step_, h.ops_++, n, 1);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (h.epoch_ != epoch_)
      return make_error(errc::unavailable, "collective epoch {} is over (now {})", h.epoch_,
                        epoch_);
    slots_[rank] = data;
    tags_[rank] = tag;
    if (static_cast<int64_t>(scratch_.size()) < n) scratch_.resize(n);
  }
  TROUPE_TRY(barrier(h)); // every rank's input and tag are registered; scratch is sized
  TROUPE_TRY(check_tags(rank, tag));
  const int64_t chunk = (n + size_ - 1) / size_;
  const int64_t b = std::min<int64_t>(n, rank * chunk), e = std::min<int64_t>(n, b + chunk);
  for (int64_t i = b; i < e; ++i) {
    float acc = slots_[0][i];
    for (int k = 1; k < size_; ++k) acc += slots_[k][i]; // fixed order 0..N-1
    scratch_[i] = acc;
  }
  TROUPE_TRY(barrier(h)); // every chunk is summed
  std::memcpy(data, scratch_.data(), n * sizeof(float));
  return {};
}

status inproc_group::all_gather(handle& h, const float* in, float* out,
                                std::span<const int64_t> counts) {
  const int rank = h.rank_;
  if (static_cast<int>(counts.size()) != size_)
    return make_error(errc::invalid_argument, "all_gather: {} counts for {} ranks", counts.size(),
                      size_);
  if (size_ == 1) {
    std::memcpy(out, in, counts[0] * sizeof(float));
    return {};
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const uint64_t tag = op_tag(h.step_, h.ops_++, total, 2);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (h.epoch_ != epoch_)
      return make_error(errc::unavailable, "collective epoch {} is over (now {})", h.epoch_,
                        epoch_);
    inputs_[rank] = in;
    tags_[rank] = tag;
  }
  TROUPE_TRY(barrier(h));
  TROUPE_TRY(check_tags(rank, tag));
  int64_t off = 0;
  for (int k = 0; k < size_; ++k) {
    std::memcpy(out + off, inputs_[k], counts[k] * sizeof(float));
    off += counts[k];
  }
  return barrier(h); // inputs stay valid until everyone has copied
}

} // namespace troupe::transport
