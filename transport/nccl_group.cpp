// nccl_group.cpp: the NCCL group (nccl_group.hpp). NCCL errors become troupe errors here,
// with the call that failed and NCCL's message.
#include "transport/nccl_group.hpp"

#include <nccl.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>

namespace troupe::transport {

struct nccl_group::state {
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;
  // guards comms, epoch and why: an operation holds it shared while it enqueues, abort and
  // reset take it alone (a communicator is never freed under a call that uses it)
  mutable std::shared_mutex mu;
  std::atomic<bool> aborted{false};
  std::string why;
  uint64_t epoch = 0;
};

namespace {

error nccl_error(ncclResult_t r, const char* what) {
  return make_error(r == ncclUnhandledCudaError || r == ncclSystemError ? errc::io_error
                                                                        : errc::unavailable,
                    "nccl: {}: {}", what, ncclGetErrorString(r));
}

status ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) return nccl_error(r, what);
  return {};
}

// Inside ncclGroupStart / End: the first call's error is kept, and the group is still ended.
void keep(ncclResult_t& first, ncclResult_t r) {
  if (first == ncclSuccess) first = r;
}
status ended(ncclResult_t first, const char* what) {
  const ncclResult_t end = ncclGroupEnd();
  return ok(first != ncclSuccess ? first : end, what);
}

expected<ncclDataType_t> nccl_type(dtype t) {
  switch (t) {
  case dtype::f32:
    return ncclFloat32;
  case dtype::f16:
    return ncclFloat16;
  case dtype::bf16:
    return ncclBfloat16;
  case dtype::i32:
    return ncclInt32;
  case dtype::i8:
    return ncclInt8;
  default:
    return make_error(errc::unsupported, "nccl: element type {}", name(t));
  }
}

// One rank's view: its communicator, its stream, the epoch it was armed in.
class member final : public collective {
 public:
  member(std::shared_ptr<nccl_group> g, nccl_group::state& s, int rank)
      : g_(std::move(g))
      , s_(s)
      , rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(s_.devices.size()); }
  void arm(uint64_t epoch, uint64_t) override { epoch_ = epoch; }
  void abort(std::string reason) override { g_->abort(std::move(reason)); }
  void reset(uint64_t epoch) override { g_->reset(epoch); }
  bool device_memory() const override { return true; }
  void set_stream(void* stream) override { stream_ = static_cast<cudaStream_t>(stream); }
  using collective::all_gather;
  using collective::all_reduce_sum;

  status all_reduce_sum(void* data, int64_t n, dtype type) override {
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    return ok(ncclAllReduce(data, data, static_cast<size_t>(n), t, ncclSum, c, stream_),
              "all-reduce");
  }
  status all_gather(const void* in, void* out, std::span<const int64_t> counts,
                    dtype type) override {
    TROUPE_TRY(check_counts(counts, size(), "all_gather"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    // counts may differ per rank: one broadcast from each, grouped
    TROUPE_TRY(ok(ncclGroupStart(), "group start"));
    ncclResult_t first = ncclSuccess;
    int64_t at = 0;
    for (int r = 0; r < size(); ++r) {
      void* dst = static_cast<char*>(out) + row_bytes(type, at);
      keep(first, ncclBroadcast(r == rank_ ? in : dst, dst, static_cast<size_t>(counts[r]), t, r, c,
                                stream_));
      at += counts[r];
    }
    return ended(first, "all-gather");
  }
  status reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                        dtype type) override {
    TROUPE_TRY(check_counts(counts, size(), "reduce_scatter"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    TROUPE_TRY(ok(ncclGroupStart(), "group start"));
    ncclResult_t first = ncclSuccess;
    int64_t at = 0;
    for (int r = 0; r < size(); ++r) { // block r summed onto rank r
      keep(first, ncclReduce(static_cast<const char*>(in) + row_bytes(type, at), out,
                             static_cast<size_t>(counts[r]), t, ncclSum, r, c, stream_));
      at += counts[r];
    }
    return ended(first, "reduce-scatter");
  }
  status all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                    std::span<const int64_t> recv_counts, dtype type) override {
    TROUPE_TRY(check_counts(send_counts, size(), "all_to_all"));
    TROUPE_TRY(check_counts(recv_counts, size(), "all_to_all"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    TROUPE_TRY(ok(ncclGroupStart(), "group start"));
    ncclResult_t first = ncclSuccess;
    int64_t s_at = 0, r_at = 0;
    for (int r = 0; r < size(); ++r) { // to itself too: NCCL pairs a rank's own send and recv
      keep(first, ncclSend(static_cast<const char*>(in) + row_bytes(type, s_at),
                           static_cast<size_t>(send_counts[r]), t, r, c, stream_));
      keep(first, ncclRecv(static_cast<char*>(out) + row_bytes(type, r_at),
                           static_cast<size_t>(recv_counts[r]), t, r, c, stream_));
      s_at += send_counts[r];
      r_at += recv_counts[r];
    }
    return ended(first, "all-to-all");
  }
  status broadcast(void* data, int64_t n, dtype type, int root) override {
    if (root < 0 || root >= size())
      return make_error(errc::invalid_argument, "broadcast from rank {} of {}", root, size());
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    return ok(ncclBroadcast(data, data, static_cast<size_t>(n), t, root, c, stream_), "broadcast");
  }
  status send(int peer, const void* data, int64_t bytes) override {
    TROUPE_TRY(check_peer(peer, rank_, size(), bytes, "send"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    return ok(ncclSend(data, static_cast<size_t>(bytes), ncclUint8, peer, c, stream_), "send");
  }
  status recv(int peer, void* data, int64_t bytes) override {
    TROUPE_TRY(check_peer(peer, rank_, size(), bytes, "recv"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    return ok(ncclRecv(data, static_cast<size_t>(bytes), ncclUint8, peer, c, stream_), "recv");
  }

 private:
  // The communicator for this member's epoch, held (shared) while the caller enqueues on it,
  // or why the group cannot run.
  struct held {
    std::shared_lock<std::shared_mutex> lock;
    ncclComm_t comm;
  };
  expected<held> comm() const {
    std::shared_lock<std::shared_mutex> lk(s_.mu);
    if (s_.aborted) return make_error(errc::unavailable, "nccl group aborted: {}", s_.why);
    if (epoch_ < s_.epoch)
      return make_error(errc::unavailable, "nccl group: a member of epoch {} in epoch {}", epoch_,
                        s_.epoch);
    ncclComm_t c = s_.comms[static_cast<size_t>(rank_)];
    return held{std::move(lk), c};
  }
  std::shared_ptr<nccl_group> g_;
  nccl_group::state& s_;
  int rank_;
  uint64_t epoch_ = 0;
  cudaStream_t stream_ = nullptr;
};

status init_all(nccl_group::state& s) {
  s.comms.assign(s.devices.size(), nullptr);
  return ok(ncclCommInitAll(s.comms.data(), static_cast<int>(s.devices.size()), s.devices.data()),
            "ncclCommInitAll");
}

} // namespace

nccl_group::nccl_group(std::unique_ptr<state> s)
    : s_(std::move(s)) {}

nccl_group::~nccl_group() {
  for (auto c : s_->comms)
    if (c) ncclCommDestroy(c); // aborted ones are null already
}

expected<std::shared_ptr<nccl_group>> nccl_group::create(std::vector<int> devices) {
  if (devices.empty()) return make_error(errc::invalid_argument, "an NCCL group of no GPU");
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (devices[i] == devices[j] || devices[i] < 0)
        return make_error(errc::invalid_argument,
                          "an NCCL group takes one rank per GPU (cuda:{} twice or negative)",
                          devices[i]);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return make_error(errc::unavailable, "nccl: no usable GPU");
  }
  for (int d : devices)
    if (d >= n)
      return make_error(errc::unavailable, "nccl: no cuda:{} (this machine has {})", d, n);
  auto s = std::make_unique<state>();
  s->devices = std::move(devices);
  TROUPE_TRY(init_all(*s));
  return std::shared_ptr<nccl_group>(new nccl_group(std::move(s)));
}

int nccl_group::size() const {
  return static_cast<int>(s_->devices.size());
}

std::unique_ptr<collective> nccl_group::join(int rank) {
  if (rank < 0 || rank >= size()) return nullptr;
  return std::make_unique<member>(shared_from_this(), *s_, rank);
}

uint64_t nccl_group::epoch() const {
  std::shared_lock<std::shared_mutex> lk(s_->mu);
  return s_->epoch;
}

void nccl_group::abort(std::string reason) {
  std::unique_lock<std::shared_mutex> lk(s_->mu);
  if (s_->aborted) return;
  s_->aborted = true;
  s_->why = std::move(reason);
  for (auto& c : s_->comms) // a kernel waiting for a peer that is gone returns
    if (c) ncclCommAbort(c), c = nullptr;
}

void nccl_group::reset(uint64_t epoch) {
  std::unique_lock<std::shared_mutex> lk(s_->mu);
  if (!s_->aborted && epoch == s_->epoch) return;
  for (auto& c : s_->comms) // abort, not destroy: destroy waits for work a dead peer never ends
    if (c) ncclCommAbort(c), c = nullptr;
  if (auto st = init_all(*s_); !st) { // stays aborted: every member fails with the reason
    s_->aborted = true;
    s_->why = st.error().message;
    return;
  }
  s_->aborted = false;
  s_->why.clear();
  s_->epoch = epoch;
}

} // namespace troupe::transport
