// ucx_group.cpp: collectives over UCX tag matching (ucx_group.hpp): posting, waiting, tag
// checks and the algorithms.
#include "transport/ucx_group.hpp"

#include <algorithm>
#include <cstring>

#include <boost/container/small_vector.hpp>
#include <ucp/api/ucp.h>

#include "transport/reduce.hpp"

namespace troupe::transport {

namespace {

constexpr uint64_t match_mask = ~((uint64_t{1} << 43) - 1); // group | sender | p2p bit
constexpr int epoch_bits = 11;
constexpr uint64_t epoch_mask = (uint64_t{1} << epoch_bits) - 1;
constexpr int max_ranks = 4096;

uint64_t mix(uint64_t x) { // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* a = static_cast<std::pair<ucx_group*, int>*>(arg);
  a->first->peer_failed(a->second, status);
}

enum op_kind : uint64_t {
  k_barrier = 1,
  k_all_reduce,
  k_all_reduce_gather,
  k_all_gather,
  k_reduce_scatter,
  k_all_to_all,
  k_broadcast,
};

} // namespace

struct ucx_group::entry {
  void* req = nullptr; // null once complete
  bool recv = false;
  int peer = 0;
  void* buf = nullptr;
  size_t bytes = 0;
  bool p2p = false;
  uint32_t opid = 0;
  ucp_tag_recv_info_t info{};
  ucs_status_t st = UCS_OK;
  bool arrived = false; // completed (or failed) when posted: info and st already set
};
struct ucx_group::op {
  boost::container::small_vector<entry, 8> e; // no allocation for groups of up to 9 ranks
};

expected<std::unique_ptr<ucx_group>>
ucx_group::connect(std::shared_ptr<ucx_worker> worker, int rank,
                   const std::vector<std::vector<uint8_t>>& addresses, ucx_group_options opt) {
  const int n = static_cast<int>(addresses.size());
  if (n < 1 || n > max_ranks || rank < 0 || rank >= n)
    return make_error(errc::invalid_argument, "ucx_group: rank {} of {} (at most {} ranks)", rank,
                      n, max_ranks);
  std::unique_ptr<ucx_group> g(new ucx_group());
  g->worker_ = std::move(worker);
  g->rank_ = rank;
  g->size_ = n;
  g->opt_ = opt;
  g->eps_.assign(n, nullptr);
  g->p2p_sent_.assign(n, 0);
  g->p2p_recvd_.assign(n, 0);
  g->dead_.assign(n, "");
  g->err_args_ = std::make_unique<std::pair<ucx_group*, int>[]>(n);
  for (int k = 0; k < n; ++k) {
    if (k == rank) continue;
    if (addresses[k].empty())
      return make_error(errc::invalid_argument, "ucx_group: no address for rank {}", k);
    g->err_args_[k] = {g.get(), k};
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[k].data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = on_ep_error;
    ep.err_handler.arg = &g->err_args_[k];
    const ucs_status_t st = ucp_ep_create(g->worker_->get(), &ep, &g->eps_[k]);
    if (st != UCS_OK) return ucx_error(st, fmt::format("endpoint to rank {}", k));
  }
  return g;
}

void ucx_group::reap() {
  auto done = [](inflight& f) {
    if (ucp_request_check_status(f.req) == UCS_INPROGRESS) return false;
    ucp_request_free(f.req);
    return true;
  };
  inflight_.erase(std::remove_if(inflight_.begin(), inflight_.end(), done), inflight_.end());
}

ucx_group::~ucx_group() {
  std::vector<void*> closing;
  for (ucp_ep* ep : eps_) {
    if (!ep) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE; // peers may be gone already: no flush handshake
    void* r = ucp_ep_close_nbx(ep, &p);
    if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (void* r : closing) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < until)
      worker_->progress();
    ucp_request_free(r);
  }
}

void ucx_group::peer_failed(int peer, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  if (dead_[peer].empty())
    dead_[peer] = fmt::format("rank {} is lost ({})", peer,
                              ucs_status_string(static_cast<ucs_status_t>(status)));
  any_dead_.store(true, std::memory_order_release);
}

void ucx_group::arm(uint64_t epoch, uint64_t step) {
  epoch_ = epoch;
  step_ = step;
  ops_ = 0;
  std::fill(p2p_sent_.begin(), p2p_sent_.end(), 0);
  std::fill(p2p_recvd_.begin(), p2p_recvd_.end(), 0);
}

void ucx_group::abort(std::string reason) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (broken_.empty()) broken_ = "aborted: " + reason;
    failed_.store(true, std::memory_order_release);
  }
  aborted_.store(true, std::memory_order_release);
}

void ucx_group::reset(uint64_t epoch) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    broken_.clear();
    failed_.store(false, std::memory_order_release);
  }
  aborted_.store(false, std::memory_order_release);
  arm(epoch, 0);
}

std::string ucx_group::broken() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!broken_.empty()) return broken_;
  for (const auto& d : dead_)
    if (!d.empty()) return d;
  return "";
}

void ucx_group::fail(std::string why) {
  std::lock_guard<std::mutex> lk(mu_);
  if (broken_.empty()) broken_ = std::move(why);
  failed_.store(true, std::memory_order_release);
}

status ucx_group::usable() const {
  if (!failed_.load(std::memory_order_acquire) && !any_dead_.load(std::memory_order_acquire))
    return {};
  if (std::string b = broken(); !b.empty())
    return make_error(errc::unavailable, "collective unavailable: {}", b);
  return {};
}

uint64_t ucx_group::tag(int src, bool p2p, uint32_t opid) const {
  return (static_cast<uint64_t>(opt_.id) << 56) | (static_cast<uint64_t>(src) << 44) |
         (static_cast<uint64_t>(p2p) << 43) | ((epoch_ & epoch_mask) << 32) | opid;
}

uint32_t ucx_group::next_op(uint64_t kind) {
  return static_cast<uint32_t>(mix(mix(step_) ^ (ops_++ << 8) ^ kind));
}

void ucx_group::post_send(op& o, int peer, const void* data, size_t bytes, uint64_t t) {
  ucp_request_param_t p{};
  void* r = ucp_tag_send_nbx(eps_[peer], data, bytes, t, &p);
  entry e;
  e.peer = peer;
  if (UCS_PTR_IS_ERR(r)) { // refused at once (a peer gone before this process reached it)
    e.st = UCS_PTR_STATUS(r);
    e.arrived = true;
  } else {
    e.req = r; // null: done already (eager, buffer reusable)
  }
  o.e.push_back(e);
}

void ucx_group::post_recv(op& o, int peer, void* data, size_t bytes, bool p2p, uint32_t opid) {
  entry e;
  e.recv = true;
  e.peer = peer;
  e.buf = data;
  e.bytes = bytes;
  e.p2p = p2p;
  e.opid = opid;
  o.e.push_back(e);
  auto& x = o.e.back();
  const uint64_t t = tag(peer, p2p, 0);
  ucp_request_param_t p{};
  // a message that is here already is taken with what the probe says of it (tag, length);
  // otherwise the receive is posted and always gives a request, tested for its info later:
  // UCX 1.13 leaves recv_info unfilled when a receive completes at once (seen: tag 0, length 0)
  ucp_tag_recv_info_t info{};
  if (ucp_tag_message_h msg = ucp_tag_probe_nb(worker_->get(), t, match_mask, 1, &info)) {
    x.info = info;
    void* r = ucp_tag_msg_recv_nbx(worker_->get(), data, bytes, msg, &p);
    if (UCS_PTR_IS_ERR(r)) {
      x.st = UCS_PTR_STATUS(r);
      x.req = nullptr;
      x.arrived = true;
      return;
    }
    x.req = r;
    x.arrived = r == nullptr;
    return;
  }
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  void* r = ucp_tag_recv_nbx(worker_->get(), data, bytes, t, match_mask, &p);
  if (UCS_PTR_IS_ERR(r)) { // wait() fails the call and cleans up what else was posted
    x.st = UCS_PTR_STATUS(r);
    x.arrived = true;
    return;
  }
  x.req = r;
  x.st = UCS_OK;
}

status ucx_group::request_failed(const entry& e, const char* what) {
  error err = ucx_error(
      e.st, fmt::format("{}: {} rank {}", what, e.recv ? "receive from" : "send to", e.peer));
  // a status that says the peer is gone marks it lost, as UCX's error handler would later
  if (err.code == errc::unavailable && e.st != UCS_ERR_CANCELED) peer_failed(e.peer, e.st);
  return err;
}

status ucx_group::settle(entry& e, const char* what) {
  // a completed receive: an older epoch's leftover is dropped and the receive posted again
  // (a leftover may also be too long for this buffer: truncated, still a leftover); anything
  // else that is not what this call expects fails it
  for (;;) {
    const bool truncated = e.st == UCS_ERR_MESSAGE_TRUNCATED;
    if (e.st != UCS_OK && !truncated) return request_failed(e, what);
    const uint64_t got_epoch = (e.info.sender_tag >> 32) & epoch_mask;
    const uint64_t d = (got_epoch - epoch_) & epoch_mask;
    if (d == 0) {
      if (truncated)
        return make_error(errc::protocol_error, "{}: rank {} sent more than the {} bytes expected",
                          what, e.peer, e.bytes);
      break;
    }
    if (d < (epoch_mask + 1) / 2)
      return make_error(errc::unavailable, "{}: rank {} is in a later epoch; epoch {} is over",
                        what, e.peer, epoch_);
    op again;
    post_recv(again, e.peer, e.buf, e.bytes, e.p2p, e.opid);
    e = again.e.back();
    if (!e.arrived) return {}; // pending again
    e.arrived = false;
  }
  if (static_cast<uint32_t>(e.info.sender_tag) != e.opid)
    return make_error(errc::unavailable,
                      "collective mismatch: rank {} is in another step or operation than rank "
                      "{} ({})",
                      e.peer, rank_, what);
  if (e.info.length != e.bytes)
    return make_error(errc::protocol_error, "{}: rank {} sent {} bytes, rank {} expects {}", what,
                      e.peer, e.info.length, rank_, e.bytes);
  return {};
}

status ucx_group::wait(op& o, const char* what) {
  struct mark {
    std::atomic<bool>& w;
    explicit mark(std::atomic<bool>& x)
        : w(x) {
      w.store(true, std::memory_order_release);
    }
    ~mark() { w.store(false, std::memory_order_release); }
  } waiting(waiting_);
  using clock = std::chrono::steady_clock;
  clock::time_point spin_until{}, give_up{}; // set at the first pass that finds nothing to do
  status result;
  for (auto& e : o.e) { // a send refused at once marks its peer even after a first failure
    if (!e.arrived || (e.recv && !result)) continue;
    e.arrived = false;
    status st = e.recv ? settle(e, what) : request_failed(e, what);
    if (result && !st) result = std::move(st);
  }
  auto pending = [&] {
    return std::any_of(o.e.begin(), o.e.end(), [](const entry& e) { return e.req; });
  };
  while (result && pending()) {
    bool any = worker_->progress();
    if (!inflight_.empty()) reap();
    for (auto& e : o.e) {
      if (!e.req) continue;
      ucs_status_t st;
      if (e.recv)
        st = ucp_tag_recv_request_test(e.req, &e.info);
      else
        st = ucp_request_check_status(e.req);
      if (st == UCS_INPROGRESS) continue;
      any = true;
      ucp_request_free(e.req);
      e.req = nullptr;
      e.st = st;
      if (!e.recv) {
        if (st != UCS_OK) result = request_failed(e, what);
        continue;
      }
      result = settle(e, what);
      if (!result) break;
    }
    if (!result) break;
    if (aborted_.load(std::memory_order_acquire)) {
      result = usable();
      break;
    }
    if (any_dead_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lk(mu_);
      for (const auto& e : o.e)
        if (e.req && !dead_[e.peer].empty()) {
          result = make_error(errc::unavailable, "{}: {}", what, dead_[e.peer]);
          break;
        }
    }
    if (!result) break;
    if (any) continue;
    const auto now = clock::now();
    if (give_up == clock::time_point{}) {
      spin_until = now + opt_.spin;
      give_up = now + opt_.timeout;
    }
    if (now > give_up) {
      int late = -1;
      for (const auto& e : o.e)
        if (e.req) late = e.peer;
      result = make_error(errc::timeout, "{}: rank {} did not answer in {} ms", what, late,
                          opt_.timeout.count());
      break;
    }
    if (now > spin_until) worker_->sleep(1);
  }
  if (result) return result;
  // the call failed: cancel what is still posted; a send still in flight keeps reading the
  // caller's buffer, so its endpoint is closed (the peer counts as lost for this group)
  for (auto& e : o.e)
    if (e.req && e.recv) ucp_request_cancel(worker_->get(), e.req);
  const auto until = clock::now() + std::chrono::milliseconds(200);
  while (pending() && clock::now() < until) {
    worker_->progress();
    for (auto& e : o.e)
      if (e.req && ucp_request_check_status(e.req) != UCS_INPROGRESS) {
        ucp_request_free(e.req);
        e.req = nullptr;
      }
  }
  for (auto& e : o.e) {
    if (!e.req) continue;
    if (!e.recv && eps_[e.peer]) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* r = ucp_ep_close_nbx(eps_[e.peer], &p);
      eps_[e.peer] = nullptr;
      peer_failed(e.peer, UCS_ERR_CANCELED);
      if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
      worker_->progress();
    }
    ucp_request_free(e.req);
    e.req = nullptr;
  }
  fail(result.error().message);
  return result;
}

status ucx_group::barrier(std::chrono::milliseconds timeout) {
  const auto saved = opt_.timeout;
  opt_.timeout = timeout;
  auto st = barrier();
  opt_.timeout = saved;
  return st;
}

status ucx_group::barrier() {
  TROUPE_TRY(usable());
  if (size_ == 1) return {};
  op o;
  const uint32_t id = next_op(k_barrier);
  char byte = 0;
  std::vector<char> in(size_);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_recv(o, k, &in[k], 1, false, id);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_send(o, k, &byte, 1, tag(rank_, false, id));
  return wait(o, "barrier");
}

status ucx_group::all_reduce_sum(void* data, int64_t n, dtype type) {
  TROUPE_TRY(check_reducible(type, "all_reduce"));
  TROUPE_TRY(usable());
  if (size_ == 1 || n == 0) return {};
  const size_t es = static_cast<size_t>(row_bytes(type, 1)), bytes = n * es;
  auto* d = static_cast<uint8_t*>(data);
  std::vector<const void*> in(size_);
  if (bytes <= 64 * 1024) {
    // one round: every rank receives every whole vector and sums them all in rank order
    scratch_.resize(bytes * size_);
    op o;
    const uint32_t id = next_op(k_all_reduce + (static_cast<uint64_t>(type) << 8));
    for (int k = 0; k < size_; ++k)
      if (k != rank_) post_recv(o, k, scratch_.data() + k * bytes, bytes, false, id);
    for (int k = 0; k < size_; ++k)
      if (k != rank_) post_send(o, k, d, bytes, tag(rank_, false, id));
    TROUPE_TRY(wait(o, "all_reduce"));
    for (int k = 0; k < size_; ++k) in[k] = k == rank_ ? d : scratch_.data() + k * bytes;
    sum_in_rank_order(in.data(), size_, d, 0, n, type);
    return {};
  }
  // reduce-scatter: rank r sums chunk r; then all-gather the sums
  const int64_t chunk = (n + size_ - 1) / size_;
  auto lo = [&](int k) { return std::min<int64_t>(n, k * chunk); };
  auto len = [&](int k) { return std::min<int64_t>(n, lo(k) + chunk) - lo(k); };
  const size_t mine = len(rank_) * es;
  scratch_.resize(mine * size_);
  {
    op o;
    const uint32_t id = next_op(k_all_reduce + (static_cast<uint64_t>(type) << 8));
    for (int k = 0; k < size_; ++k)
      if (k != rank_) post_recv(o, k, scratch_.data() + k * mine, mine, false, id);
    for (int k = 0; k < size_; ++k)
      if (k != rank_) post_send(o, k, d + lo(k) * es, len(k) * es, tag(rank_, false, id));
    TROUPE_TRY(wait(o, "all_reduce (reduce-scatter)"));
  }
  uint8_t* own = d + lo(rank_) * es;
  for (int k = 0; k < size_; ++k) in[k] = k == rank_ ? own : scratch_.data() + k * mine;
  sum_in_rank_order(in.data(), size_, own, 0, len(rank_), type);
  op o;
  const uint32_t id = next_op(k_all_reduce_gather);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_recv(o, k, d + lo(k) * es, len(k) * es, false, id);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_send(o, k, own, mine, tag(rank_, false, id));
  return wait(o, "all_reduce (all-gather)");
}

status ucx_group::all_gather(const void* in, void* out, std::span<const int64_t> counts,
                             dtype type) {
  TROUPE_TRY(check_counts(counts, size_, "all_gather"));
  TROUPE_TRY(usable());
  const int64_t es = row_bytes(type, 1);
  auto* o8 = static_cast<uint8_t*>(out);
  std::vector<int64_t> off(size_ + 1, 0);
  for (int k = 0; k < size_; ++k) off[k + 1] = off[k] + counts[k];
  if (in != o8 + off[rank_] * es) std::memmove(o8 + off[rank_] * es, in, counts[rank_] * es);
  if (size_ == 1) return {};
  op o;
  const uint32_t id = next_op(k_all_gather);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_recv(o, k, o8 + off[k] * es, counts[k] * es, false, id);
  for (int k = 0; k < size_; ++k)
    if (k != rank_)
      post_send(o, k, o8 + off[rank_] * es, counts[rank_] * es, tag(rank_, false, id));
  return wait(o, "all_gather");
}

status ucx_group::reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                                 dtype type) {
  TROUPE_TRY(check_reducible(type, "reduce_scatter"));
  TROUPE_TRY(check_counts(counts, size_, "reduce_scatter"));
  TROUPE_TRY(usable());
  const int64_t es = row_bytes(type, 1);
  const auto* i8 = static_cast<const uint8_t*>(in);
  std::vector<int64_t> off(size_ + 1, 0);
  for (int k = 0; k < size_; ++k) off[k + 1] = off[k] + counts[k];
  const size_t mine = counts[rank_] * es;
  scratch_.resize(mine * size_);
  op o;
  const uint32_t id = next_op(k_reduce_scatter + (static_cast<uint64_t>(type) << 8));
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_recv(o, k, scratch_.data() + k * mine, mine, false, id);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_send(o, k, i8 + off[k] * es, counts[k] * es, tag(rank_, false, id));
  TROUPE_TRY(wait(o, "reduce_scatter"));
  std::vector<const void*> blocks(size_);
  for (int k = 0; k < size_; ++k)
    blocks[k] = k == rank_ ? i8 + off[rank_] * es : scratch_.data() + k * mine;
  sum_in_rank_order(blocks.data(), size_, out, 0, counts[rank_], type);
  return {};
}

status ucx_group::all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                             std::span<const int64_t> recv_counts, dtype type) {
  TROUPE_TRY(check_counts(send_counts, size_, "all_to_all"));
  TROUPE_TRY(check_counts(recv_counts, size_, "all_to_all"));
  if (send_counts[rank_] != recv_counts[rank_])
    return make_error(errc::invalid_argument, "all_to_all: rank {} sends itself {}, expects {}",
                      rank_, send_counts[rank_], recv_counts[rank_]);
  TROUPE_TRY(usable());
  const int64_t es = row_bytes(type, 1);
  const auto* i8 = static_cast<const uint8_t*>(in);
  auto* o8 = static_cast<uint8_t*>(out);
  std::vector<int64_t> so(size_ + 1, 0), ro(size_ + 1, 0);
  for (int k = 0; k < size_; ++k) {
    so[k + 1] = so[k] + send_counts[k];
    ro[k + 1] = ro[k] + recv_counts[k];
  }
  std::memcpy(o8 + ro[rank_] * es, i8 + so[rank_] * es, recv_counts[rank_] * es);
  if (size_ == 1) return {};
  op o;
  const uint32_t id = next_op(k_all_to_all);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_recv(o, k, o8 + ro[k] * es, recv_counts[k] * es, false, id);
  for (int k = 0; k < size_; ++k)
    if (k != rank_) post_send(o, k, i8 + so[k] * es, send_counts[k] * es, tag(rank_, false, id));
  return wait(o, "all_to_all");
}

status ucx_group::broadcast(void* data, int64_t n, dtype type, int root) {
  if (root < 0 || root >= size_)
    return make_error(errc::invalid_argument, "broadcast from rank {} of {}", root, size_);
  TROUPE_TRY(usable());
  if (size_ == 1) return {};
  const size_t bytes = n * row_bytes(type, 1);
  op o;
  const uint32_t id = next_op(k_broadcast + (static_cast<uint64_t>(root) << 8));
  if (rank_ == root) {
    for (int k = 0; k < size_; ++k)
      if (k != rank_) post_send(o, k, data, bytes, tag(rank_, false, id));
  } else {
    post_recv(o, root, data, bytes, false, id);
  }
  return wait(o, "broadcast");
}

uint32_t ucx_group::p2p_op(uint64_t seq) const {
  return static_cast<uint32_t>(mix(mix(step_) ^ (seq << 8) ^ 0x77));
}

status ucx_group::send(int peer, const void* data, int64_t bytes) {
  TROUPE_TRY(check_peer(peer, rank_, size_, bytes, "send"));
  TROUPE_TRY(usable());
  const uint32_t id = p2p_op(p2p_sent_[peer]++);
  op o;
  post_send(o, peer, data, bytes, tag(rank_, true, id));
  return wait(o, "send");
}

status ucx_group::send_async(int peer, std::shared_ptr<const void> owner, const void* data,
                             int64_t bytes) {
  TROUPE_TRY(check_peer(peer, rank_, size_, bytes, "send"));
  TROUPE_TRY(usable());
  reap();
  const uint32_t id = p2p_op(p2p_sent_[peer]++);
  ucp_request_param_t p{};
  void* r =
      ucp_tag_send_nbx(eps_[peer], data, static_cast<size_t>(bytes), tag(rank_, true, id), &p);
  if (UCS_PTR_IS_ERR(r)) {
    entry e;
    e.peer = peer;
    e.st = UCS_PTR_STATUS(r);
    return request_failed(e, "send");
  }
  if (r) inflight_.push_back({r, std::move(owner)});
  worker_->progress();
  return {};
}

status ucx_group::recv(int peer, void* data, int64_t bytes) {
  TROUPE_TRY(check_peer(peer, rank_, size_, bytes, "recv"));
  TROUPE_TRY(usable());
  const uint32_t id = p2p_op(p2p_recvd_[peer]++);
  op o;
  post_recv(o, peer, data, bytes, true, id);
  return wait(o, "recv");
}

} // namespace troupe::transport
