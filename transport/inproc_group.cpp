// inproc_group.cpp: barrier-based in-process collectives and mailboxes (inproc_group.hpp).
#include "transport/inproc_group.hpp"

#include "transport/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace troupe::transport {

std::shared_ptr<inproc_group> inproc_group::create(int size) {
  return std::shared_ptr<inproc_group>(new inproc_group(size));
}

inproc_group::inproc_group(int size)
    : size_(size)
    , ins_(size)
    , outs_(size)
    , counts_(size)
    , mail_(static_cast<size_t>(size) * size)
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

uint64_t inproc_group::epoch() const {
  std::lock_guard<std::mutex> lk(mu_);
  return epoch_;
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

status inproc_group::enter(handle& h, uint64_t kind, int64_t n, const void* in, void* out,
                           std::span<const int64_t> counts) {
  const int rank = h.rank_;
  const uint64_t tag = op_tag(h.step_, h.ops_++, n, kind);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (h.epoch_ != epoch_)
      return make_error(errc::unavailable, "collective epoch {} is over (now {})", h.epoch_,
                        epoch_);
    ins_[rank] = in;
    outs_[rank] = out;
    counts_[rank] = counts;
    tags_[rank] = tag;
  }
  TROUPE_TRY(barrier(h)); // every rank's buffers and tag are registered
  return check_tags(rank, tag);
}

namespace {
int64_t total(std::span<const int64_t> counts) {
  int64_t t = 0;
  for (int64_t c : counts) t += c;
  return t;
}
} // namespace

status inproc_group::all_reduce(handle& h, void* data, int64_t n, dtype type) {
  TROUPE_TRY(check_reducible(type, "all_reduce"));
  if (size_ == 1) return {};
  const size_t es = static_cast<size_t>(row_bytes(type, 1));
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (scratch_.size() < n * es) scratch_.resize(n * es); // no rank reads it before the barrier
  }
  TROUPE_TRY(enter(h, 1 + (static_cast<uint64_t>(type) << 4), n, data, data, {}));
  const int64_t chunk = (n + size_ - 1) / size_;
  const int64_t b = std::min<int64_t>(n, h.rank_ * chunk), e = std::min<int64_t>(n, b + chunk);
  sum_in_rank_order(ins_.data(), size_, scratch_.data(), b, e, type);
  TROUPE_TRY(barrier(h)); // every chunk is summed
  std::memcpy(data, scratch_.data(), n * es);
  return barrier(h); // nobody resizes scratch_ before everyone has copied
}

status inproc_group::all_gather(handle& h, const void* in, void* out,
                                std::span<const int64_t> counts, dtype type) {
  TROUPE_TRY(check_counts(counts, size_, "all_gather"));
  const int64_t es = row_bytes(type, 1);
  if (size_ == 1) {
    if (in != out) std::memcpy(out, in, counts[0] * es);
    return {};
  }
  TROUPE_TRY(enter(h, 2, total(counts), in, out, counts));
  int64_t off = 0;
  for (int k = 0; k < size_; ++k) {
    if (!(k == h.rank_ && static_cast<const uint8_t*>(in) == static_cast<uint8_t*>(out) + off * es))
      std::memmove(static_cast<uint8_t*>(out) + off * es, ins_[k], counts[k] * es);
    off += counts[k];
  }
  return barrier(h); // inputs stay valid until everyone has copied
}

status inproc_group::reduce_scatter(handle& h, const void* in, void* out,
                                    std::span<const int64_t> counts, dtype type) {
  TROUPE_TRY(check_reducible(type, "reduce_scatter"));
  TROUPE_TRY(check_counts(counts, size_, "reduce_scatter"));
  const int64_t es = row_bytes(type, 1);
  if (size_ == 1) {
    if (in != out) std::memcpy(out, in, counts[0] * es);
    return {};
  }
  TROUPE_TRY(enter(h, 3 + (static_cast<uint64_t>(type) << 4), total(counts), in, out, counts));
  int64_t off = 0;
  for (int k = 0; k < h.rank_; ++k) off += counts[k];
  std::vector<const void*> blocks(size_);
  for (int k = 0; k < size_; ++k) blocks[k] = static_cast<const uint8_t*>(ins_[k]) + off * es;
  sum_in_rank_order(blocks.data(), size_, out, 0, counts[h.rank_], type);
  return barrier(h);
}

status inproc_group::all_to_all(handle& h, const void* in, std::span<const int64_t> send_counts,
                                void* out, std::span<const int64_t> recv_counts, dtype type) {
  TROUPE_TRY(check_counts(send_counts, size_, "all_to_all"));
  TROUPE_TRY(check_counts(recv_counts, size_, "all_to_all"));
  const int64_t es = row_bytes(type, 1);
  // the tag covers the element type and this rank's receive total; every rank must agree
  TROUPE_TRY(enter(h, 4 + (static_cast<uint64_t>(type) << 4), 0, in, out, send_counts));
  status st;
  int64_t off = 0;
  for (int k = 0; k < size_; ++k) {
    const auto sc = counts_[k];
    int64_t src_off = 0;
    for (int j = 0; j < h.rank_; ++j) src_off += sc[j];
    if (sc[h.rank_] != recv_counts[k] && st)
      st = make_error(errc::invalid_argument,
                      "all_to_all: rank {} sends {} elements to rank {}, which expects {}", k,
                      sc[h.rank_], h.rank_, recv_counts[k]);
    if (st)
      std::memcpy(static_cast<uint8_t*>(out) + off * es,
                  static_cast<const uint8_t*>(ins_[k]) + src_off * es, recv_counts[k] * es);
    off += recv_counts[k];
  }
  TROUPE_TRY(barrier(h));
  return st;
}

status inproc_group::broadcast(handle& h, void* data, int64_t n, dtype type, int root) {
  if (root < 0 || root >= size_)
    return make_error(errc::invalid_argument, "broadcast from rank {} of {}", root, size_);
  if (size_ == 1) return {};
  TROUPE_TRY(
      enter(h, 5 + (static_cast<uint64_t>(root) << 8), n * row_bytes(type, 1), data, data, {}));
  if (h.rank_ != root) std::memcpy(data, ins_[root], n * row_bytes(type, 1));
  return barrier(h);
}

status inproc_group::send(handle& h, int peer, const void* data, int64_t bytes) {
  TROUPE_TRY(check_peer(peer, h.rank_, size_, bytes, "send"));
  std::lock_guard<std::mutex> lk(mu_);
  if (aborted_) return make_error(errc::unavailable, "collective aborted: {}", reason_);
  if (h.epoch_ != epoch_)
    return make_error(errc::unavailable, "collective epoch {} is over (now {})", h.epoch_, epoch_);
  const auto* p = static_cast<const uint8_t*>(data);
  mail_[h.rank_ * size_ + peer].push_back({h.epoch_, h.step_, std::vector<uint8_t>(p, p + bytes)});
  cv_.notify_all();
  return {};
}

status inproc_group::recv(handle& h, int peer, void* data, int64_t bytes) {
  TROUPE_TRY(check_peer(peer, h.rank_, size_, bytes, "recv"));
  std::unique_lock<std::mutex> lk(mu_);
  auto& box = mail_[peer * size_ + h.rank_];
  const uint64_t resets = resets_;
  waiting_[h.rank_] = 1;
  for (;;) {
    while (!box.empty() && box.front().epoch < h.epoch_) box.pop_front(); // an older epoch's
    if (!box.empty() || aborted_ || resets_ != resets || h.epoch_ != epoch_) break;
    cv_.wait(lk);
  }
  waiting_[h.rank_] = 0;
  if (aborted_) return make_error(errc::unavailable, "collective aborted: {}", reason_);
  if (resets_ != resets || h.epoch_ != epoch_)
    return make_error(errc::unavailable, "collective epoch {} is over (now {})", h.epoch_, epoch_);
  letter l = std::move(box.front());
  box.pop_front();
  if (l.epoch != h.epoch_ || l.step != h.step_)
    return make_error(errc::unavailable,
                      "recv: rank {} sent a message of epoch {} step {}, rank {} is in epoch {} "
                      "step {}",
                      peer, l.epoch, l.step, h.rank_, h.epoch_, h.step_);
  if (static_cast<int64_t>(l.bytes.size()) != bytes)
    return make_error(errc::invalid_argument, "recv: rank {} sent {} bytes, rank {} expects {}",
                      peer, l.bytes.size(), h.rank_, bytes);
  std::memcpy(data, l.bytes.data(), l.bytes.size());
  return {};
}

} // namespace troupe::transport
