// nccl_group.cpp: the NCCL group (nccl_group.hpp). NCCL errors become troupe errors here,
// with the call that failed and NCCL's message.
#include "transport/nccl_group.hpp"

#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <thread>

namespace troupe::transport {

struct nccl_group::state {
  std::vector<int> devices; // this process's GPUs, one per communicator
  std::vector<int> ranks;   // each communicator's rank in the group
  int world = 0;            // the group's size (every process's ranks)
  bool spanning = false;    // made by create_rank: non-blocking, one id per epoch
  std::vector<ncclComm_t> comms;
  // guards comms, epoch and why: an operation holds it shared while it enqueues, abort and
  // reset take it alone (a communicator is never freed under a call that uses it)
  mutable std::shared_mutex mu;
  std::atomic<bool> aborted{false};
  std::atomic<bool> stopping{false}; // set by abort() before it waits for the lock: a call
                                     // polling an in-progress enqueue gives up
  std::string why;
  uint64_t epoch = 0;
};

namespace {

error nccl_error(ncclResult_t r, const char* what) {
  return make_error(r == ncclUnhandledCudaError || r == ncclSystemError ? errc::io_error
                                                                        : errc::unavailable,
                    "nccl: {}: {}", what, ncclGetErrorString(r));
}

// A non-blocking communicator (a group spanning processes) may answer ncclInProgress while it
// enqueues: polled here until the call is done, or until abort() says stop (it waits for the
// caller's lock, so the caller must let go).
ncclResult_t settled(ncclComm_t c, ncclResult_t r, const std::atomic<bool>* stop) {
  while (r == ncclInProgress && c) {
    if (stop && stop->load(std::memory_order_acquire)) return ncclInvalidUsage;
    std::this_thread::yield();
    if (ncclCommGetAsyncError(c, &r) != ncclSuccess) break;
  }
  return r;
}

status ok(ncclResult_t r, const char* what, ncclComm_t c = nullptr,
          const std::atomic<bool>* stop = nullptr) {
  r = settled(c, r, stop);
  if (r != ncclSuccess) return nccl_error(r, what);
  return {};
}

// Inside ncclGroupStart / End: the first call's error is kept, and the group is still ended.
void keep(ncclResult_t& first, ncclResult_t r) {
  if (first == ncclSuccess && r != ncclInProgress) first = r;
}
status ended(ncclResult_t first, const char* what, ncclComm_t c, const std::atomic<bool>* stop) {
  const ncclResult_t end = ncclGroupEnd();
  return ok(first != ncclSuccess ? first : end, what, c, stop);
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
  member(std::shared_ptr<nccl_group> g, nccl_group::state& s, int rank, size_t index)
      : g_(std::move(g))
      , s_(s)
      , rank_(rank)
      , index_(index) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.world; }
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
              "all-reduce", c, &s_.stopping);
  }
  status all_gather(const void* in, void* out, std::span<const int64_t> counts,
                    dtype type) override {
    TROUPE_TRY(check_counts(counts, size(), "all_gather"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    // counts may differ per rank: one broadcast from each, grouped
    TROUPE_TRY(ok(ncclGroupStart(), "group start", c, &s_.stopping));
    ncclResult_t first = ncclSuccess;
    int64_t at = 0;
    for (int r = 0; r < size(); ++r) {
      void* dst = static_cast<char*>(out) + row_bytes(type, at);
      keep(first, ncclBroadcast(r == rank_ ? in : dst, dst, static_cast<size_t>(counts[r]), t, r, c,
                                stream_));
      at += counts[r];
    }
    return ended(first, "all-gather", c, &s_.stopping);
  }
  status reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                        dtype type) override {
    TROUPE_TRY(check_counts(counts, size(), "reduce_scatter"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    TROUPE_TRY(ok(ncclGroupStart(), "group start", c, &s_.stopping));
    ncclResult_t first = ncclSuccess;
    int64_t at = 0;
    for (int r = 0; r < size(); ++r) { // block r summed onto rank r
      keep(first, ncclReduce(static_cast<const char*>(in) + row_bytes(type, at), out,
                             static_cast<size_t>(counts[r]), t, ncclSum, r, c, stream_));
      at += counts[r];
    }
    return ended(first, "reduce-scatter", c, &s_.stopping);
  }
  status all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                    std::span<const int64_t> recv_counts, dtype type) override {
    TROUPE_TRY(check_counts(send_counts, size(), "all_to_all"));
    TROUPE_TRY(check_counts(recv_counts, size(), "all_to_all"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    TROUPE_TRY(ok(ncclGroupStart(), "group start", c, &s_.stopping));
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
    return ended(first, "all-to-all", c, &s_.stopping);
  }
  status broadcast(void* data, int64_t n, dtype type, int root) override {
    if (root < 0 || root >= size())
      return make_error(errc::invalid_argument, "broadcast from rank {} of {}", root, size());
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    TROUPE_TRY_ASSIGN(t, nccl_type(type));
    return ok(ncclBroadcast(data, data, static_cast<size_t>(n), t, root, c, stream_), "broadcast",
              c, &s_.stopping);
  }
  status send(int peer, const void* data, int64_t bytes) override {
    TROUPE_TRY(check_peer(peer, rank_, size(), bytes, "send"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    return ok(ncclSend(data, static_cast<size_t>(bytes), ncclUint8, peer, c, stream_), "send", c,
              &s_.stopping);
  }
  status recv(int peer, void* data, int64_t bytes) override {
    TROUPE_TRY(check_peer(peer, rank_, size(), bytes, "recv"));
    TROUPE_TRY_ASSIGN(h, comm());
    ncclComm_t c = h.comm;
    return ok(ncclRecv(data, static_cast<size_t>(bytes), ncclUint8, peer, c, stream_), "recv", c,
              &s_.stopping);
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
    ncclComm_t c = s_.comms[index_];
    if (!c) return make_error(errc::unavailable, "nccl group: no communicator ({})", s_.why);
    return held{std::move(lk), c};
  }
  std::shared_ptr<nccl_group> g_;
  nccl_group::state& s_;
  int rank_;
  size_t index_; // its communicator in state::comms
  uint64_t epoch_ = 0;
  cudaStream_t stream_ = nullptr;
};

status init_all(nccl_group::state& s) {
  s.comms.assign(s.devices.size(), nullptr);
  return ok(ncclCommInitAll(s.comms.data(), static_cast<int>(s.devices.size()), s.devices.data()),
            "ncclCommInitAll");
}

// Why `devices` cannot hold ranks here (no GPU, an index past the last), or nothing.
status have_gpus(const std::vector<int>& devices) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return make_error(errc::unavailable, "nccl: no usable GPU");
  }
  for (int d : devices)
    if (d >= n)
      return make_error(errc::unavailable, "nccl: no cuda:{} (this machine has {})", d, n);
  return {};
}

} // namespace

nccl_group::nccl_group(std::unique_ptr<state> s)
    : s_(std::move(s)) {}

nccl_group::~nccl_group() {
  for (auto c : s_->comms)                                       // aborted ones are null already
    if (c) s_->spanning ? ncclCommAbort(c) : ncclCommDestroy(c); // a peer process may be gone
}

expected<std::shared_ptr<nccl_group>> nccl_group::create(std::vector<int> devices) {
  if (devices.empty()) return make_error(errc::invalid_argument, "an NCCL group of no GPU");
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (devices[i] == devices[j] || devices[i] < 0)
        return make_error(errc::invalid_argument,
                          "an NCCL group takes one rank per GPU (cuda:{} twice or negative)",
                          devices[i]);
  TROUPE_TRY(have_gpus(devices));
  auto s = std::make_unique<state>();
  s->world = static_cast<int>(devices.size());
  for (int r = 0; r < s->world; ++r) s->ranks.push_back(r);
  s->devices = std::move(devices);
  TROUPE_TRY(init_all(*s));
  return std::shared_ptr<nccl_group>(new nccl_group(std::move(s)));
}

expected<std::vector<uint8_t>> nccl_group::make_id() {
  ncclUniqueId id;
  TROUPE_TRY(ok(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  std::vector<uint8_t> out(sizeof id.internal);
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

expected<std::shared_ptr<nccl_group>> nccl_group::create_rank(int device, int rank, int size,
                                                              std::span<const uint8_t> id,
                                                              std::chrono::milliseconds timeout) {
  ncclUniqueId uid;
  if (id.size() != sizeof uid.internal)
    return make_error(errc::invalid_argument, "nccl: an id of {} bytes (NCCL's are {})", id.size(),
                      sizeof uid.internal);
  if (size < 1 || rank < 0 || rank >= size || device < 0)
    return make_error(errc::invalid_argument, "nccl: rank {} of {} on cuda:{}", rank, size, device);
  TROUPE_TRY(have_gpus({device}));
  std::memcpy(uid.internal, id.data(), id.size());
  if (cudaSetDevice(device) != cudaSuccess) { // NCCL makes the communicator on this GPU
    const char* why = cudaGetErrorString(cudaGetLastError());
    return make_error(errc::io_error, "nccl: cuda:{}: {}", device, why);
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0; // the join is polled against the timeout instead of waiting for a peer
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&c, size, uid, rank, &cfg);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (r == ncclInProgress && c) {
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(c);
      return make_error(errc::unavailable,
                        "nccl: rank {} of {}: the other ranks did not join within {} ms", rank,
                        size, timeout.count());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (ncclCommGetAsyncError(c, &r) != ncclSuccess) break;
  }
  if (r != ncclSuccess) {
    if (c) ncclCommAbort(c);
    return nccl_error(r, "ncclCommInitRankConfig");
  }
  auto s = std::make_unique<state>();
  s->devices = {device};
  s->ranks = {rank};
  s->world = size;
  s->spanning = true;
  s->comms = {c};
  return std::shared_ptr<nccl_group>(new nccl_group(std::move(s)));
}

int nccl_group::size() const {
  return s_->world;
}

bool nccl_group::holds(int rank) const {
  for (int r : s_->ranks)
    if (r == rank) return true;
  return false;
}

std::unique_ptr<collective> nccl_group::join(int rank) {
  for (size_t i = 0; i < s_->ranks.size(); ++i)
    if (s_->ranks[i] == rank) return std::make_unique<member>(shared_from_this(), *s_, rank, i);
  return nullptr;
}

uint64_t nccl_group::epoch() const {
  std::shared_lock<std::shared_mutex> lk(s_->mu);
  return s_->epoch;
}

void nccl_group::abort(std::string reason) {
  s_->stopping.store(true, std::memory_order_release);
  std::unique_lock<std::shared_mutex> lk(s_->mu);
  s_->stopping.store(false, std::memory_order_release);
  if (s_->aborted) return;
  s_->aborted = true;
  s_->why = std::move(reason);
  for (auto& c : s_->comms) // a kernel waiting for a peer that is gone returns
    if (c) ncclCommAbort(c), c = nullptr;
}

void nccl_group::reset(uint64_t epoch) {
  s_->stopping.store(true, std::memory_order_release);
  std::unique_lock<std::shared_mutex> lk(s_->mu);
  s_->stopping.store(false, std::memory_order_release);
  if (!s_->aborted && epoch == s_->epoch) return;
  for (auto& c : s_->comms) // abort, not destroy: destroy waits for work a dead peer never ends
    if (c) ncclCommAbort(c), c = nullptr;
  if (s_->spanning) { // the ranks of other processes need a new id: the owner makes a new group
    s_->aborted = true;
    s_->why = "a group spanning processes is made again for a new epoch";
    return;
  }
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
