// inproc_group.hpp: a communication group of N ranks inside one process (the tensor shards
// of one stage, each on its own thread), implementing core/collective.hpp through shared
// memory. Each collective registers every rank's buffers, meets at a barrier, lets each rank
// do its part reading the others' buffers directly, and meets again: all_reduce_sum is a
// reduce-scatter + all-gather (rank r sums chunk r over ranks 0..N-1 in that fixed order into
// a group buffer, then every rank copies the whole result), so all ranks hold bit-identical
// sums. send / recv go through a mailbox per (sender, receiver) pair (one copy). Waits spin
// briefly, then sleep (no spinning that starves a descheduled vCPU). abort() wakes every waiter
// with `unavailable` (a member died); reset() re-arms the group for the restarted member.
// Thread-safe: one operation at a time per rank, every rank calls the same operations in the same
// order. Tests: tests/transport/inproc_group_test.cpp
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "core/collective.hpp"

namespace troupe::transport {

class inproc_group : public std::enable_shared_from_this<inproc_group> {
 public:
  /// One member's view of the group. Each shard instance joins with its own handle, so a
  /// replaced instance that wakes up late cannot pass for its successor: its handle keeps
  /// the epoch it was armed with.
  class handle final : public collective {
   public:
    handle(std::shared_ptr<inproc_group> g, int rank)
        : g_(std::move(g))
        , rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return g_->size_; }
    void arm(uint64_t epoch, uint64_t step) override {
      epoch_ = epoch;
      step_ = step;
      ops_ = 0;
    }
    /// The whole group's (every member's).
    void abort(std::string reason) override { g_->abort(std::move(reason)); }
    void reset(uint64_t epoch) override { g_->reset(epoch); }
    using collective::all_gather;
    using collective::all_reduce_sum;
    status all_reduce_sum(void* data, int64_t n, dtype type) override {
      return g_->all_reduce(*this, data, n, type);
    }
    status all_gather(const void* in, void* out, std::span<const int64_t> counts,
                      dtype type) override {
      return g_->all_gather(*this, in, out, counts, type);
    }
    status reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                          dtype type) override {
      return g_->reduce_scatter(*this, in, out, counts, type);
    }
    status all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                      std::span<const int64_t> recv_counts, dtype type) override {
      return g_->all_to_all(*this, in, send_counts, out, recv_counts, type);
    }
    status broadcast(void* data, int64_t n, dtype type, int root) override {
      return g_->broadcast(*this, data, n, type, root);
    }
    status send(int peer, const void* data, int64_t bytes) override {
      return g_->send(*this, peer, data, bytes);
    }
    status recv(int peer, void* data, int64_t bytes) override {
      return g_->recv(*this, peer, data, bytes);
    }

   private:
    friend class inproc_group;
    std::shared_ptr<inproc_group> g_;
    int rank_;
    uint64_t epoch_ = 0, step_ = 0, ops_ = 0;
  };

  static std::shared_ptr<inproc_group> create(int size);
  int size() const { return size_; }
  /// A new member handle for `rank` (one per shard instance).
  std::unique_ptr<handle> join(int rank);
  /// A handle per rank owned by the group (tests and single-instance use).
  collective* member(int rank);
  /// Wakes every waiting rank with `unavailable`; later calls fail until reset().
  void abort(std::string reason);
  /// Re-arms an aborted group for `epoch`: only operations armed with it may proceed.
  void reset(uint64_t epoch = 0);
  // An operation whose member epoch is not the group's fails with `unavailable` instead of
  // waiting for ranks that moved on; ranks that meet in operations of different steps (a lost
  // message) all fail with `unavailable` rather than sum unrelated data.
  bool aborted() const;
  /// The epoch of the last reset().
  uint64_t epoch() const;
  /// True while `rank` waits in a collective for the others (it is not the one that hangs).
  bool waiting(int rank) const;

 private:
  explicit inproc_group(int size);
  status barrier(const handle& h);
  status check_tags(int rank, uint64_t tag);
  // Registers this rank's buffers and operation tag, then meets the others: after it
  // returns ok every rank's registration is visible (ins_, outs_, counts_).
  status enter(handle& h, uint64_t kind, int64_t n, const void* in, void* out,
               std::span<const int64_t> counts);
  status all_reduce(handle& h, void* data, int64_t n, dtype type);
  status all_gather(handle& h, const void* in, void* out, std::span<const int64_t> counts,
                    dtype type);
  status reduce_scatter(handle& h, const void* in, void* out, std::span<const int64_t> counts,
                        dtype type);
  status all_to_all(handle& h, const void* in, std::span<const int64_t> send_counts, void* out,
                    std::span<const int64_t> recv_counts, dtype type);
  status broadcast(handle& h, void* data, int64_t n, dtype type, int root);
  status send(handle& h, int peer, const void* data, int64_t bytes);
  status recv(handle& h, int peer, void* data, int64_t bytes);

  int size_;
  std::vector<std::unique_ptr<handle>> views_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  uint64_t resets_ = 0;
  std::atomic<uint64_t> gen_atomic_{0}; // generation_, readable without the lock
  int spin_ = 200;                      // pause iterations before sleeping in a barrier
  bool aborted_ = false;
  std::string reason_;
  std::vector<const void*> ins_;                 // per rank: its input of this operation
  std::vector<void*> outs_;                      // per rank: its output
  std::vector<std::span<const int64_t>> counts_; // per rank: its counts argument
  std::vector<uint8_t> scratch_;                 // all-reduce sums
  struct letter {
    uint64_t epoch, step;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::deque<letter>> mail_; // [src * size + dst]: sent, not yet received
  uint64_t epoch_ = 0;
  std::vector<uint64_t> tags_; // per rank: the operation it is in
  std::vector<uint8_t> waiting_;
};

} // namespace troupe::transport
