// collective.hpp: a communication group as an interface, the one contract that the
// in-process group (transport/inproc_group), the UCX group between processes
// (transport/ucx_group) and NCCL between the GPUs of one process (transport/nccl_group: device
// memory, on the member's stream) implement. Every rank of a group calls the same
// collective operations in the same order; point-to-point send/recv pair up per (sender,
// receiver) in call order.
//   all_reduce_sum   in place, f32 or bf16; every rank ends with bit-identical sums, taken in
//                    the fixed order rank 0, 1, ..., N-1 (bf16 accumulates in f32 and rounds
//                    once), so one process and N processes give the same bits (NCCL: the
//                    same bits on every rank, in NCCL's order of summation)
//   all_gather       rank r contributes counts[r] elements; out holds them in rank order
//   reduce_scatter   in holds N blocks (counts[k] elements for rank k); rank r gets the sum,
//                    in rank order, of every rank's block r
//   all_to_all       rank r sends send_counts[k] elements to rank k (blocks in rank order) and
//                    receives recv_counts[k] from rank k, placed in rank order (MoE dispatch)
//   broadcast        root's n elements to every rank
//   send / recv      bytes to / from one peer (stage boundaries)
// arm(epoch, step) says which step the member's next operations belong to; abort / reset
// stop a group and move it to a new epoch (a replaced member, a lost step). A member left over
// from an older epoch, or ranks meeting in different steps (a lost message), fail with
// `unavailable` instead of combining unrelated data. A group whose member dies answers
// `unavailable` to the others instead of hanging. `solo_group` is the size-1 group.
// Tests: tests/transport/inproc_group_test.cpp, tests/transport/ucx_group_test.cpp
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "core/dtype.hpp"
#include "core/expected.hpp"

namespace troupe {

/// The argument checks every implementation makes (one place, one wording).
inline status check_counts(std::span<const int64_t> counts, int size, const char* op) {
  if (static_cast<int>(counts.size()) != size)
    return make_error(errc::invalid_argument, "{}: {} counts for {} ranks", op, counts.size(),
                      size);
  for (int64_t c : counts)
    if (c < 0) return make_error(errc::invalid_argument, "{}: negative count {}", op, c);
  return {};
}
inline status check_peer(int peer, int rank, int size, int64_t bytes, const char* op) {
  if (peer < 0 || peer >= size || peer == rank || bytes < 0)
    return make_error(errc::invalid_argument, "{} with rank {} from rank {} of {} ({} bytes)", op,
                      peer, rank, size, bytes);
  return {};
}

class collective {
 public:
  virtual ~collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The epoch and step this member's next operations belong to.
  virtual void arm(uint64_t epoch, uint64_t step) = 0;
  /// Fails the group's waiting and later operations with `unavailable` (any thread): a member
  /// died or a step was lost. reset() moves the group to `epoch` and lets it run again.
  virtual void abort(std::string reason) = 0;
  virtual void reset(uint64_t epoch) = 0;
  /// True when the operations take the member's device memory and are enqueued on the stream
  /// given by set_stream (NCCL); false: host memory, done when the call returns.
  virtual bool device_memory() const { return false; }
  virtual void set_stream(void* stream) {}

  /// `type` is f32 or bf16 for the reductions; any scalar type for the moves.
  virtual status all_reduce_sum(void* data, int64_t n, dtype type) = 0;
  virtual status all_gather(const void* in, void* out, std::span<const int64_t> counts,
                            dtype type) = 0;
  virtual status reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                                dtype type) = 0;
  virtual status all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                            std::span<const int64_t> recv_counts, dtype type) = 0;
  virtual status broadcast(void* data, int64_t n, dtype type, int root) = 0;
  virtual status send(int peer, const void* data, int64_t bytes) = 0;
  virtual status recv(int peer, void* data, int64_t bytes) = 0;

  status all_reduce_sum(float* data, int64_t n) { return all_reduce_sum(data, n, dtype::f32); }
  status all_gather(const float* in, float* out, std::span<const int64_t> counts) {
    return all_gather(in, out, counts, dtype::f32);
  }
};

class solo_group final : public collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void arm(uint64_t, uint64_t) override {}
  void abort(std::string) override {}
  void reset(uint64_t) override {}
  using collective::all_gather;
  using collective::all_reduce_sum;
  status all_reduce_sum(void*, int64_t, dtype) override { return {}; }
  status all_gather(const void* in, void* out, std::span<const int64_t> counts,
                    dtype type) override {
    return copy(in, out, counts[0], type);
  }
  status reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                        dtype type) override {
    return copy(in, out, counts[0], type);
  }
  status all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                    std::span<const int64_t>, dtype type) override {
    return copy(in, out, send_counts[0], type);
  }
  status broadcast(void*, int64_t, dtype, int) override { return {}; }
  status send(int peer, const void*, int64_t) override { return no_peer(peer); }
  status recv(int peer, void*, int64_t) override { return no_peer(peer); }

 private:
  static status copy(const void* in, void* out, int64_t n, dtype type) {
    if (n > 0 && in != out) std::memcpy(out, in, static_cast<size_t>(row_bytes(type, n)));
    return {};
  }
  static status no_peer(int peer) {
    return make_error(errc::invalid_argument, "a group of one has no peer {}", peer);
  }
};

} // namespace troupe
