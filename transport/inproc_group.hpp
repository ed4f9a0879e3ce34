// inproc_group.hpp: a communication group of N ranks inside one process (the tensor shards
// of one stage, each on its own thread). all_reduce_sum is a reduce-scatter + all-gather
// through shared memory: rank r sums chunk r over ranks 0..N-1 in that fixed order into a
// group buffer, then every rank copies the whole result, so all ranks hold bit-identical
// sums. Two barriers per operation. Waits spin briefly, then sleep (no spinning that starves
// a descheduled vCPU). abort() wakes every waiter with `unavailable` (a member died); reset()
// re-arms the group for the restarted member. Thread-safe: one operation at a time per rank,
// every rank calls the same operations in the same order.
// Tests: tests/transport/inproc_group_test.cpp
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/collective.hpp"

namespace troupe::transport {

class inproc_group : public std::enable_shared_from_this<inproc_group> {
public:
  static std::shared_ptr<inproc_group> create(int size);
  int size() const { return size_; }
  /// The collective seen by `rank` (owned by the group; valid while the group lives).
  collective* member(int rank);
  /// Wakes every waiting rank with `unavailable`; later calls fail until reset().
  void abort(std::string reason);
  /// Re-arms an aborted group for `epoch`: only operations armed with it may proceed.
  void reset(uint64_t epoch = 0);
  /// The epoch `rank`'s next operations belong to; an operation whose epoch is not the
  /// group's fails with `unavailable` instead of waiting for ranks that moved on.
  void arm(int rank, uint64_t epoch);
  bool aborted() const;

private:
  class rank_view;
  friend class rank_view;
  explicit inproc_group(int size);
  status barrier(int rank);
  status all_reduce(int rank, float* data, int64_t n);
  status all_gather(int rank, const float* in, float* out, std::span<const int64_t> counts);

  int size_;
  std::vector<std::unique_ptr<rank_view>> views_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  uint64_t resets_ = 0;
  bool aborted_ = false;
  std::string reason_;
  std::vector<float*> slots_;
  std::vector<const float*> inputs_;
  std::vector<float> scratch_;
  uint64_t epoch_ = 0;
  std::vector<uint64_t> armed_;
};

} // namespace troupe::transport
