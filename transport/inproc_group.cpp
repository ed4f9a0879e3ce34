// inproc_group.cpp: barrier-based in-process collectives (inproc_group.hpp).
#include "transport/inproc_group.hpp"

#include <algorithm>
#include <cstring>

namespace troupe::transport {

class inproc_group::rank_view final : public collective {
public:
  rank_view(inproc_group* g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size_; }
  status all_reduce_sum(float* data, int64_t n) override { return g_->all_reduce(rank_, data, n); }
  status all_gather(const float* in, float* out, std::span<const int64_t> counts) override {
    return g_->all_gather(rank_, in, out, counts);
  }

private:
  inproc_group* g_;
  int rank_;
};

std::shared_ptr<inproc_group> inproc_group::create(int size) {
  return std::shared_ptr<inproc_group>(new inproc_group(size));
}

inproc_group::inproc_group(int size) : size_(size), slots_(size), inputs_(size), armed_(size, 0) {
  for (int r = 0; r < size; ++r) views_.push_back(std::make_unique<rank_view>(this, r));
}

collective* inproc_group::member(int rank) { return views_.at(rank).get(); }

void inproc_group::abort(std::string reason) {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  reason_ = std::move(reason);
  cv_.notify_all();
}

void inproc_group::arm(int rank, uint64_t epoch) {
  std::lock_guard<std::mutex> lk(mu_);
  armed_.at(rank) = epoch;
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

bool inproc_group::aborted() const {
  std::lock_guard<std::mutex> lk(mu_);
  return aborted_;
}

status inproc_group::barrier(int rank) {
  std::unique_lock<std::mutex> lk(mu_);
  if (aborted_) return make_error(errc::unavailable, "collective aborted: {}", reason_);
  if (armed_[rank] != epoch_)
    return make_error(errc::unavailable, "collective epoch {} is over (now {})", armed_[rank], epoch_);
  const uint64_t gen = generation_, resets = resets_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return {};
  }
  cv_.wait(lk, [&] { return generation_ != gen || aborted_ || resets_ != resets; });
  if (resets_ != resets || (aborted_ && generation_ == gen))
    return make_error(errc::unavailable, "collective aborted: {}", reason_.empty() ? "the group was reset" : reason_);
  return {};
}

status inproc_group::all_reduce(int rank, float* data, int64_t n) {
  if (size_ == 1) return {};
  {
    std::lock_guard<std::mutex> lk(mu_);
    slots_[rank] = data;
    if (rank == 0 && static_cast<int64_t>(scratch_.size()) < n) scratch_.resize(n);
  }
  TROUPE_TRY(barrier(rank)); // every rank's input is registered; scratch is sized
  const int64_t chunk = (n + size_ - 1) / size_;
  const int64_t b = std::min<int64_t>(n, rank * chunk), e = std::min<int64_t>(n, b + chunk);
  for (int64_t i = b; i < e; ++i) {
    float acc = slots_[0][i];
    for (int k = 1; k < size_; ++k) acc += slots_[k][i]; // fixed order 0..N-1
    scratch_[i] = acc;
  }
  TROUPE_TRY(barrier(rank)); // every chunk is summed
  std::memcpy(data, scratch_.data(), n * sizeof(float));
  return {};
}

status inproc_group::all_gather(int rank, const float* in, float* out, std::span<const int64_t> counts) {
  if (static_cast<int>(counts.size()) != size_)
    return make_error(errc::invalid_argument, "all_gather: {} counts for {} ranks", counts.size(), size_);
  if (size_ == 1) {
    std::memcpy(out, in, counts[0] * sizeof(float));
    return {};
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    inputs_[rank] = in;
  }
  TROUPE_TRY(barrier(rank));
  int64_t off = 0;
  for (int k = 0; k < size_; ++k) {
    std::memcpy(out + off, inputs_[k], counts[k] * sizeof(float));
    off += counts[k];
  }
  return barrier(rank); // inputs stay valid until everyone has copied
}

} // namespace troupe::transport
