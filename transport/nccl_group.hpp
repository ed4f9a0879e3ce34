// nccl_group.hpp: a communication group of the GPUs of one process (a tensor-parallel stage
// whose shards each own a GPU) over NCCL, implementing core/collective.hpp on device memory:
// every operation is enqueued on the member's stream (set_stream: the shard's), so the stage's
// sums never leave the GPUs. The communicators are made together (ncclCommInitAll) for the
// group's devices, one per rank; abort() aborts them (a kernel stuck waiting for a dead peer
// returns) and reset() makes new ones for the next epoch, as the in-process group's abort /
// reset do for host memory. Variable counts (vocabulary slices of different widths) go as
// grouped broadcasts / reduces; all_to_all and send / recv as grouped point-to-point.
// Built when CUDA and NCCL are (TROUPE_HAVE_NCCL); nothing here includes a CUDA header into
// its users. Thread-safe: one thread per rank, every rank calls the same operations in the
// same order. Tests: tests/transport/nccl_group_test.cpp (two GPUs; skipped otherwise)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/collective.hpp"

namespace troupe::transport {

class nccl_group : public std::enable_shared_from_this<nccl_group> {
 public:
  /// Rank r on GPU devices[r] (distinct GPUs: NCCL takes one rank per device).
  static expected<std::shared_ptr<nccl_group>> create(std::vector<int> devices);
  ~nccl_group();
  int size() const;
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
