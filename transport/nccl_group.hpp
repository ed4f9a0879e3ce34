// nccl_group.hpp: a communication group of GPUs (a tensor-parallel stage whose shards each own
// a GPU) over NCCL, implementing core/collective.hpp on device memory: every operation is
// enqueued on the member's stream (set_stream: the shard's), so the stage's sums never leave
// the GPUs. Two kinds:
//   create(devices)     the GPUs of one process: the communicators are made together
//                       (ncclCommInitAll), one per rank; reset() makes new ones for the next
//                       epoch, as the in-process group's abort / reset do for host memory.
//   create_rank(...)    one rank of a group whose ranks live in different processes (worker
//                       processes, each shard on its own GPU): rank 0 makes the id (make_id)
//                       and the ranks' host channel carries it (the shard's UCX group, which
//                       the coordinator forms); every rank joins with it, or fails after a
//                       timeout when a peer never comes. Its communicator is non-blocking, so
//                       no call waits for a dead peer forever; a new epoch needs a new id,
//                       so reset() only stops it: the owner makes the group again.
// abort() aborts the communicators (a kernel stuck waiting for a dead peer returns). Variable
// counts (vocabulary slices of different widths) go as grouped broadcasts / reduces;
// all_to_all and send / recv as grouped point-to-point.
// Built when CUDA and NCCL are (TROUPE_HAVE_NCCL); nothing here includes a CUDA header into
// its users. Thread-safe: one thread per rank, every rank calls the same operations in the
// same order. Tests: tests/transport/nccl_group_test.cpp (refusals, the id),
// nccl_group_gpu_test.cpp (one or two GPUs; skipped otherwise)
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/collective.hpp"

namespace troupe::transport {

class nccl_group : public std::enable_shared_from_this<nccl_group> {
 public:
  /// Rank r on GPU devices[r] (distinct GPUs: NCCL takes one rank per device).
  static expected<std::shared_ptr<nccl_group>> create(std::vector<int> devices);
  /// The id a group spanning processes meets by (ncclGetUniqueId, 128 bytes). The process
  /// that makes it hosts NCCL's bootstrap root until the group is made: rank 0 makes it.
  static expected<std::vector<uint8_t>> make_id();
  /// This process's rank `rank` of `size` on GPU `device`, made with the others that pass the
  /// same id; `unavailable` when they have not all come within `timeout`.
  static expected<std::shared_ptr<nccl_group>> create_rank(int device, int rank, int size,
                                                           std::span<const uint8_t> id,
                                                           std::chrono::milliseconds timeout);
  ~nccl_group();
  int size() const;
  /// Whether this process holds rank r (join(r) gives its member).
  bool holds(int rank) const;
  /// Rank r's member view (each shard instance its own, armed with its epoch).
  std::unique_ptr<collective> join(int rank);
  /// NCCL enqueues: a member never waits on the host inside a collective.
  bool waiting(int) const { return false; }
  uint64_t epoch() const;
  void abort(std::string reason);
  void reset(uint64_t epoch);

  struct state;

 private:
  explicit nccl_group(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

} // namespace troupe::transport
