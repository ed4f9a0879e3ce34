// ucx_group.hpp: a communication group whose ranks live in different processes (or machines),
// implementing core/collective.hpp over UCX tag matching. Each member owns one ucx_worker and
// an endpoint to every peer (connected by worker address, peer error handling on, so a dead
// peer fails the operations that need it instead of hanging them). Payloads go straight from
// and into the callers' buffers (eager for small messages, UCX's rendezvous protocol with
// registered memory for large ones); only reductions stage what they sum.
//
// Tags (64 bits): group id (8) | sender rank (12) | p2p bit (1) | epoch (11) | operation (32).
// A receive matches on group, sender and channel only; the epoch and operation of what
// arrived are then checked: a message from an older epoch is dropped and the receive posted
// again (a replaced member's late leftovers), one from another step or operation fails the
// call with `unavailable` and marks the group broken until reset() (ranks out of step must
// not sum unrelated data). Sizes are checked too: a peer that sends the wrong length fails the
// call with protocol_error. Limits: 4096 ranks per group, 256 groups per world.
//
// Algorithms (all sums in rank order, reduce.hpp, so every rank and inproc_group agree bit
// for bit): all_reduce_sum of up to 64 KiB exchanges whole vectors in one round (decode
// sizes: latency bound); above, a reduce-scatter then an all-gather (each rank sums one
// chunk). The moves are flat (one message per pair): groups here are a stage's TP or EP
// ranks, a handful. send() returns when the buffer may be reused; above UCX's rendezvous
// threshold that needs the peer's matching recv(), so pair them (no ring of blocking sends).
//
// Threading: one thread at a time drives a member (its shard); abort() may come from any
// thread. Waiting spins briefly, then sleeps on the worker's event fd.
// Tests: tests/transport/ucx_group_test.cpp (ranks as forked processes)
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/collective.hpp"
#include "transport/ucx_context.hpp"

struct ucp_ep;

namespace troupe::transport {

struct ucx_group_options {
  uint8_t id = 0;                           // distinguishes groups that share peers
  std::chrono::milliseconds timeout{60000}; // an operation waiting longer fails (timeout)
  std::chrono::microseconds spin{50};       // busy-polls this long before sleeping
};

class ucx_group final : public collective {
 public:
  /// Connects `worker` (this rank's) to the workers at `addresses` (one per rank, in rank
  /// order; this rank's own entry is ignored). Every rank calls it; it returns once
  /// endpoints exist (they finish wiring up on first use). The worker may outlive the group:
  /// a member whose sibling was replaced connects a new group on the same worker, so its
  /// address stays valid.
  static expected<std::unique_ptr<ucx_group>>
  connect(std::shared_ptr<ucx_worker> worker, int rank,
          const std::vector<std::vector<uint8_t>>& addresses, ucx_group_options opt = {});
  ~ucx_group() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void arm(uint64_t epoch, uint64_t step) override;
  using collective::all_gather;
  using collective::all_reduce_sum;
  status all_reduce_sum(void* data, int64_t n, dtype type) override;
  status all_gather(const void* in, void* out, std::span<const int64_t> counts,
                    dtype type) override;
  status reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                        dtype type) override;
  status all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                    std::span<const int64_t> recv_counts, dtype type) override;
  status broadcast(void* data, int64_t n, dtype type, int root) override;
  status send(int peer, const void* data, int64_t bytes) override;
  /// Starts a send and returns at once: `owner` keeps the bytes alive until UCX is done with
  /// them (a later call, or the group's end, reaps it). Nothing waits for the receiver, so a
  /// receiver that fails its step (and never posts the receive) cannot hold the sender.
  status send_async(int peer, std::shared_ptr<const void> owner, const void* data, int64_t bytes);
  /// Sends started by send_async() still running; progress() drives them (the owner's thread,
  /// between its calls: nothing moves a rendezvous send while nobody progresses the worker).
  bool sending() const { return !inflight_.empty(); }
  void progress() {
    worker_->progress();
    reap();
  }
  status recv(int peer, void* data, int64_t bytes) override;
  /// Every rank returns once all have arrived (also proves the endpoints are wired).
  status barrier();
  /// The same, giving up after `timeout` instead of the group's operation timeout (forming a
  /// group: a member that is not there soon is better retried than waited for).
  status barrier(std::chrono::milliseconds timeout);

  /// Fails the current and later operations with `unavailable` (any thread).
  void abort(std::string reason) override;
  /// Clears an abort or a step mismatch and moves to `epoch`; a peer that died stays dead.
  void reset(uint64_t epoch) override;
  /// Why the group cannot run ("" when it can): a dead peer, an abort, a mismatch.
  std::string broken() const;
  /// Whether some peer's endpoint failed (then only a new group, connect(), can reach it).
  bool lost_peer() const { return any_dead_.load(std::memory_order_acquire); }
  /// True while a call waits for peers (any thread): it is a victim of whoever is slow.
  bool waiting() const { return waiting_.load(std::memory_order_acquire); }
  ucx_worker& worker() { return *worker_; }

  // (internal) called by UCX when the endpoint to `peer` fails
  void peer_failed(int peer, int ucs_status);

 private:
  struct op; // the requests of one call
  ucx_group() = default;
  uint64_t tag(int src, bool p2p, uint32_t opid) const;
  uint32_t next_op(uint64_t kind);
  uint32_t p2p_op(uint64_t seq) const; // the operation id of this step's seq-th message to a peer
  // post a request into o; one UCX refuses at once is kept as failed, for wait() to report
  // after the others posted with it are cleaned up
  void post_send(op& o, int peer, const void* data, size_t bytes, uint64_t tag);
  void post_recv(op& o, int peer, void* data, size_t bytes, bool p2p, uint32_t opid);
  struct entry; // one posted request
  status settle(entry& e, const char* what);
  status request_failed(const entry& e, const char* what); // e ended in e.st
  status wait(op& o, const char* what);
  status usable() const;
  void fail(std::string why);

  std::shared_ptr<ucx_worker> worker_; // a member re-formed after a sibling's restart keeps it
  std::vector<ucp_ep*> eps_;           // [peer], null for self
  int rank_ = 0, size_ = 1;
  ucx_group_options opt_;
  uint64_t epoch_ = 0, step_ = 0, ops_ = 0;
  std::vector<uint64_t> p2p_sent_, p2p_recvd_; // per peer, this step
  std::vector<uint8_t> scratch_;               // staged inputs of a reduction
  std::atomic<bool> aborted_{false};
  std::atomic<bool> any_dead_{false}; // some entry of dead_ is set
  std::atomic<bool> failed_{false};   // broken_ is set
  std::atomic<bool> waiting_{false};  // inside wait()
  mutable std::mutex mu_;             // guards broken_
  std::string broken_;
  std::vector<std::string> dead_; // [peer]: why its endpoint failed, "" while alive
  std::unique_ptr<std::pair<ucx_group*, int>[]> err_args_; // [peer]: the error handler's arg
  struct inflight {
    void* req;
    std::shared_ptr<const void> owner;
  };
  std::vector<inflight> inflight_; // send_async requests still running
  void reap();
};

} // namespace troupe::transport
