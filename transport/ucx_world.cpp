// ucx_world.cpp: the join (rendezvous over a UCX listener and streams, HMAC proofs) and
// split() (ucx_world.hpp).
#include "transport/ucx_world.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include <ucp/api/ucp.h>

#include "core/log.hpp"
#include "transport/auth.hpp"

namespace troupe::transport {

namespace {

using clock = std::chrono::steady_clock;
constexpr uint32_t magic = 0x45505254; // "TRPE"
constexpr size_t max_address = 64 * 1024;
constexpr auto hello_timeout = std::chrono::seconds(5); // a connected peer's time to say hello

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t get32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
void put_bytes(std::vector<uint8_t>& b, std::span<const uint8_t> x) {
  b.insert(b.end(), x.begin(), x.end());
}

/// An endpoint used for the join's byte stream, with its own failure flag.
struct stream_ep {
  ucp_ep_h ep = nullptr;
  ucs_status_t failed = UCS_OK;
  ucx_worker* w = nullptr;

  static void on_error(void* arg, ucp_ep_h, ucs_status_t st) {
    static_cast<stream_ep*>(arg)->failed = st;
  }
  status wait(void* req, clock::time_point deadline, const char* what, size_t* length = nullptr) {
    if (UCS_PTR_IS_ERR(req)) return ucx_error(UCS_PTR_STATUS(req), what);
    if (!req) return {};
    ucs_status_t st;
    for (;;) {
      w->progress();
      st = length ? ucp_stream_recv_request_test(req, length) : ucp_request_check_status(req);
      if (st != UCS_INPROGRESS) break;
      if (failed != UCS_OK || clock::now() > deadline) {
        ucp_request_cancel(w->get(), req);
        while (ucp_request_check_status(req) == UCS_INPROGRESS) w->progress();
        ucp_request_free(req);
        if (failed != UCS_OK) return ucx_error(failed, what);
        return make_error(errc::timeout, "{}: no answer in time", what);
      }
      w->sleep(1);
    }
    ucp_request_free(req);
    if (st != UCS_OK) return ucx_error(st, what);
    return {};
  }
  status send(std::span<const uint8_t> b, clock::time_point deadline, const char* what) {
    ucp_request_param_t p{};
    return wait(ucp_stream_send_nbx(ep, b.data(), b.size(), &p), deadline, what);
  }
  status recv(uint8_t* out, size_t n, clock::time_point deadline, const char* what) {
    if (n == 0) return {};
    ucp_request_param_t p{};
    size_t got = 0;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_RECV_INFO;
    p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    p.recv_info.length = &got;
    return wait(ucp_stream_recv_nbx(ep, out, n, &got, &p), deadline, what, &got);
  }
  void close() {
    if (!ep) return;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* r = ucp_ep_close_nbx(ep, &p);
    if (UCS_PTR_IS_PTR(r)) {
      const auto until = clock::now() + std::chrono::seconds(1);
      while (ucp_request_check_status(r) == UCS_INPROGRESS && clock::now() < until) w->progress();
      ucp_request_free(r);
    }
    ep = nullptr;
  }
};

status resolve(const std::string& host, uint16_t port, sockaddr_storage& out, socklen_t& len) {
  std::memset(&out, 0, sizeof(out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
    return {};
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return {};
  }
  return make_error(errc::invalid_argument, "MASTER_ADDR {}: not an IPv4 or IPv6 address", host);
}

struct joined {
  std::vector<std::vector<uint8_t>> addresses; // [rank]
};

// rank 0: listens, admits size - 1 peers, answers each with the table
expected<joined> serve_join(ucx_worker& w, const std::vector<uint8_t>& own,
                            const world_options& opt) {
  joined out;
  out.addresses.assign(opt.size, {});
  out.addresses[0] = own;
  sockaddr_storage sa;
  socklen_t salen = 0;
  TROUPE_TRY(resolve(opt.master_addr, opt.master_port, sa, salen));
  std::deque<ucp_conn_request_h> incoming;
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  lp.sockaddr.addrlen = salen;
  lp.conn_handler.cb = [](ucp_conn_request_h r, void* arg) {
    static_cast<std::deque<ucp_conn_request_h>*>(arg)->push_back(r);
  };
  lp.conn_handler.arg = &incoming;
  ucp_listener_h listener = nullptr;
  ucs_status_t st = ucp_listener_create(w.get(), &lp, &listener);
  if (st != UCS_OK)
    return ucx_error(st, fmt::format("listening at {}:{}", opt.master_addr, opt.master_port));
  struct member {
    std::unique_ptr<stream_ep> ep;
    nonce client_nonce;
  };
  std::vector<member> members(opt.size);
  int admitted = 1;
  const auto deadline = clock::now() + opt.join_timeout;
  status result;
  while (admitted < opt.size) {
    w.progress();
    if (incoming.empty()) {
      if (clock::now() > deadline) {
        result = make_error(errc::timeout, "join: {} of {} ranks arrived in {} ms", admitted,
                            opt.size, opt.join_timeout.count());
        break;
      }
      w.sleep(1);
      continue;
    }
    ucp_conn_request_h req = incoming.front();
    incoming.pop_front();
    auto ep = std::make_unique<stream_ep>();
    ep->w = &w;
    ucp_ep_params_t epp{};
    epp.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                     UCP_EP_PARAM_FIELD_ERR_HANDLER;
    epp.conn_request = req;
    epp.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    epp.err_handler.cb = stream_ep::on_error;
    epp.err_handler.arg = ep.get();
    if (ucp_ep_create(w.get(), &epp, &ep->ep) != UCS_OK) continue;
    // challenge, hello, verdict: a peer that fails any check is refused and logged
    const auto until = std::min(deadline, clock::now() + hello_timeout);
    std::vector<uint8_t> ch;
    put32(ch, magic);
    put32(ch, rendezvous_version);
    const auto challenge = random_nonce();
    put_bytes(ch, challenge);
    std::array<uint8_t, 84> hello;
    std::vector<uint8_t> addr;
    std::string refusal;
    int rank = -1;
    auto got = ep->send(ch, until, "join: challenge");
    if (got) got = ep->recv(hello.data(), hello.size(), until, "join: hello");
    if (!got) {
      TROUPE_LOG_WARN("transport", "join: a peer left before saying hello: {}",
                      got.error().message);
      ep->close();
      continue;
    }
    const uint32_t m = get32(&hello[0]), ver = get32(&hello[4]), world = get32(&hello[12]),
                   alen = get32(&hello[16]);
    rank = static_cast<int>(get32(&hello[8]));
    if (m != magic)
      refusal = "not a Troupe peer (bad magic)";
    else if (ver != rendezvous_version)
      refusal = fmt::format("protocol version {}, this run speaks {}", ver, rendezvous_version);
    else if (world != static_cast<uint32_t>(opt.size))
      refusal = fmt::format("world size {}, this run has {}", world, opt.size);
    else if (rank < 1 || rank >= opt.size)
      refusal = fmt::format("rank {} out of range 1..{}", get32(&hello[8]), opt.size - 1);
    else if (members[rank].ep)
      refusal = fmt::format("rank {} has joined already", rank);
    else if (alen == 0 || alen > max_address)
      refusal = fmt::format("address of {} bytes (at most {})", alen, max_address);
    if (refusal.empty()) {
      addr.resize(alen);
      got = ep->recv(addr.data(), alen, until, "join: address");
      if (!got) refusal = got.error().message;
    }
    if (refusal.empty()) {
      std::vector<uint8_t> signed_part = {'h', 'e', 'l', 'l', 'o'};
      put_bytes(signed_part, challenge);
      put_bytes(signed_part, std::span(hello).subspan(8, 8)); // rank, world size
      put_bytes(signed_part, addr);
      const digest want = hmac_sha256(opt.secret, signed_part);
      if (!same_digest(want, std::span(hello).subspan(52, 32)))
        refusal = "authentication failed (wrong secret)";
    }
    std::vector<uint8_t> verdict;
    put32(verdict, magic);
    put32(verdict, refusal.empty() ? 0 : 1);
    put32(verdict, static_cast<uint32_t>(refusal.size()));
    verdict.insert(verdict.end(), refusal.begin(), refusal.end());
    got = ep->send(verdict, until, "join: verdict");
    if (!refusal.empty() || !got) {
      TROUPE_LOG_WARN("transport", "join: refused a peer (claimed rank {}): {}",
                      static_cast<int64_t>(rank), refusal.empty() ? got.error().message : refusal);
      if (!refusal.empty()) {
        // let the verdict reach it before closing
        const auto linger = clock::now() + std::chrono::milliseconds(200);
        while (clock::now() < linger && ep->failed == UCS_OK) w.progress();
      }
      ep->close();
      continue;
    }
    std::copy(hello.begin() + 20, hello.begin() + 52, members[rank].client_nonce.begin());
    members[rank].ep = std::move(ep);
    out.addresses[rank] = std::move(addr);
    ++admitted;
    TROUPE_LOG_INFO("transport", "join: rank {} of {} is in", rank, opt.size);
  }
  if (result) {
    std::vector<uint8_t> table;
    for (const auto& a : out.addresses) {
      put32(table, static_cast<uint32_t>(a.size()));
      put_bytes(table, a);
    }
    for (int r = 1; r < opt.size && result; ++r) {
      std::vector<uint8_t> signed_part = {'t', 'a', 'b', 'l', 'e'};
      put_bytes(signed_part, members[r].client_nonce);
      put_bytes(signed_part, table);
      const digest mac = hmac_sha256(opt.secret, signed_part);
      std::vector<uint8_t> msg = table;
      put_bytes(msg, mac);
      auto sent = members[r].ep->send(msg, deadline, "join: table");
      if (!sent)
        result = make_error(errc::unavailable, "join: rank {} left: {}", r, sent.error().message);
    }
  }
  for (auto& m : members)
    if (m.ep) {
      // the ranks close first once they have the table; wait for that briefly
      const auto linger = clock::now() + std::chrono::seconds(1);
      while (clock::now() < linger && m.ep->failed == UCS_OK && result) w.progress();
      m.ep->close();
    }
  ucp_listener_destroy(listener);
  if (!result) return result.error();
  return out;
}

// rank r > 0: connects to rank 0 (retrying until it listens), proves itself, gets the table
expected<joined> ask_join(ucx_worker& w, const std::vector<uint8_t>& own,
                          const world_options& opt) {
  sockaddr_storage sa;
  socklen_t salen = 0;
  TROUPE_TRY(resolve(opt.master_addr, opt.master_port, sa, salen));
  const auto deadline = clock::now() + opt.join_timeout;
  for (;;) {
    stream_ep ep;
    ep.w = &w;
    ucp_ep_params_t epp{};
    epp.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    epp.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    epp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    epp.sockaddr.addrlen = salen;
    epp.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    epp.err_handler.cb = stream_ep::on_error;
    epp.err_handler.arg = &ep;
    ucs_status_t st = ucp_ep_create(w.get(), &epp, &ep.ep);
    if (st != UCS_OK) return ucx_error(st, "join: connecting to rank 0");
    std::array<uint8_t, 40> ch;
    auto got = ep.recv(ch.data(), ch.size(), deadline, "join: challenge");
    if (!got) {
      ep.close();
      if (clock::now() > deadline)
        return make_error(errc::timeout, "join: rank 0 at {}:{} did not answer in {} ms",
                          opt.master_addr, opt.master_port, opt.join_timeout.count());
      std::this_thread::sleep_for(std::chrono::milliseconds(100)); // not listening yet
      continue;
    }
    if (get32(&ch[0]) != magic) {
      ep.close();
      return make_error(errc::protocol_error, "join: {}:{} is not a Troupe rank 0", opt.master_addr,
                        opt.master_port);
    }
    // a version mismatch is rank 0's to judge: it answers with the reason
    const auto mine = random_nonce();
    const auto& addr = own;
    std::vector<uint8_t> hello;
    put32(hello, magic);
    put32(hello, opt.version);
    put32(hello, static_cast<uint32_t>(opt.rank));
    put32(hello, static_cast<uint32_t>(opt.size));
    put32(hello, static_cast<uint32_t>(addr.size()));
    put_bytes(hello, mine);
    std::vector<uint8_t> signed_part = {'h', 'e', 'l', 'l', 'o'};
    put_bytes(signed_part, std::span(ch).subspan(8, 32));
    put_bytes(signed_part, std::span(hello).subspan(8, 8));
    put_bytes(signed_part, addr);
    put_bytes(hello, hmac_sha256(opt.secret, signed_part));
    put_bytes(hello, addr);
    std::array<uint8_t, 12> verdict;
    got = ep.send(hello, deadline, "join: hello");
    if (got) got = ep.recv(verdict.data(), verdict.size(), deadline, "join: verdict");
    if (!got) {
      ep.close();
      return got.error();
    }
    if (get32(&verdict[4]) != 0) {
      std::string why(std::min<uint32_t>(get32(&verdict[8]), 4096), '\0');
      (void)ep.recv(reinterpret_cast<uint8_t*>(why.data()), why.size(), deadline, "join: reason");
      ep.close();
      return make_error(errc::unavailable, "join: rank 0 refused rank {}: {}", opt.rank, why);
    }
    joined out;
    std::vector<uint8_t> table;
    for (int r = 0; r < opt.size; ++r) {
      std::array<uint8_t, 4> len;
      got = ep.recv(len.data(), 4, deadline, "join: table");
      const uint32_t n = get32(len.data());
      if (got && (n == 0 || n > max_address))
        got = make_error(errc::protocol_error, "join: table entry {} of {} bytes", r, n);
      std::vector<uint8_t> a(got ? n : 0);
      if (got) got = ep.recv(a.data(), n, deadline, "join: table");
      if (!got) {
        ep.close();
        return got.error();
      }
      put_bytes(table, len);
      put_bytes(table, a);
      out.addresses.push_back(std::move(a));
    }
    digest mac;
    got = ep.recv(mac.data(), 32, deadline, "join: table proof");
    ep.close();
    if (!got) return got.error();
    std::vector<uint8_t> signed_tab = {'t', 'a', 'b', 'l', 'e'};
    put_bytes(signed_tab, mine);
    put_bytes(signed_tab, table);
    if (!same_digest(hmac_sha256(opt.secret, signed_tab), mac))
      return make_error(errc::protocol_error,
                        "join: the table's proof does not match: rank 0 does not hold this "
                        "run's secret");
    return out;
  }
}

expected<long> env_int(const char* name, long lo, long hi, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end || x < lo || x > hi)
    return make_error(errc::invalid_argument, "{}={}: not an integer in [{}, {}]", name, v, lo, hi);
  return x;
}

} // namespace

expected<world_options> world_options_from_env(world_options o) {
  auto size = env_int("WORLD_SIZE", 1, 4096, o.size);
  if (!size) return size.error();
  o.size = static_cast<int>(*size);
  auto rank = env_int("RANK", 0, o.size - 1, o.rank);
  if (!rank) return rank.error();
  o.rank = static_cast<int>(*rank);
  auto local = env_int("LOCAL_RANK", 0, 4095, o.local_rank);
  if (!local) return local.error();
  o.local_rank = static_cast<int>(*local);
  auto port = env_int("MASTER_PORT", 1, 65535, o.master_port);
  if (!port) return port.error();
  o.master_port = static_cast<uint16_t>(*port);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) o.master_addr = a;
  auto secret = secret_from_env();
  if (!secret) return secret.error();
  if (!secret->empty()) o.secret = std::move(*secret);
  return o;
}

expected<std::unique_ptr<ucx_world>> ucx_world::join(const world_options& opt) {
  if (opt.size < 1 || opt.rank < 0 || opt.rank >= opt.size)
    return make_error(errc::invalid_argument, "join: rank {} of a world of {}", opt.rank, opt.size);
  if (opt.size > 1 && opt.secret.size() < 8)
    return make_error(errc::invalid_argument,
                      "join: a run of {} processes needs a shared secret of at least 8 bytes "
                      "(--secret, TROUPE_SECRET or TROUPE_SECRET_FILE)",
                      opt.size);
  std::unique_ptr<ucx_world> w(new ucx_world());
  auto ctx = ucx_context::create();
  if (!ctx) return ctx.error();
  w->ctx_ = *ctx;
  auto worker = ucx_worker::create(w->ctx_);
  if (!worker) return worker.error();
  joined j;
  if (opt.size == 1)
    j.addresses = {(*worker)->address()};
  else {
    // the join's streams run on a worker of their own, gone before the world's endpoints
    // exist, so UCX never pairs a world endpoint with a join connection
    auto rv = ucx_worker::create(w->ctx_);
    if (!rv) return rv.error();
    const auto& own = (*worker)->address();
    auto got = opt.rank == 0 ? serve_join(**rv, own, opt) : ask_join(**rv, own, opt);
    if (!got) return got.error();
    j = std::move(*got);
  }
  auto g = ucx_group::connect(std::move(*worker), opt.rank, j.addresses, opt.group);
  if (!g) return g.error();
  w->world_ = std::move(*g);
  auto wired = w->world_->barrier(); // every endpoint is wired, both ways
  if (!wired) return wired.error();
  return w;
}

expected<std::unique_ptr<ucx_group>> ucx_world::split(std::span<const int> members, uint8_t id,
                                                      ucx_group_options opt) {
  if (id == 0) return make_error(errc::invalid_argument, "split: group id 0 is the world's");
  int mine = -1;
  std::vector<uint8_t> seen(size(), 0);
  for (size_t i = 0; i < members.size(); ++i) {
    const int r = members[i];
    if (r < 0 || r >= size() || seen[r])
      return make_error(errc::invalid_argument, "split: member {} is out of range or repeated", r);
    seen[r] = 1;
    if (r == rank()) mine = static_cast<int>(i);
  }
  std::unique_ptr<ucx_worker> worker;
  if (mine >= 0) {
    auto w = ucx_worker::create(ctx_);
    if (!w) return w.error();
    worker = std::move(*w);
  }
  // every world rank contributes its new worker's address (or nothing), lengths first; the
  // moves are byte-wise (i8)
  std::vector<int64_t> lens(size(), 0), eight(size(), 8);
  const int64_t own = worker ? static_cast<int64_t>(worker->address().size()) : 0;
  TROUPE_TRY(world_->all_gather(&own, lens.data(), eight, dtype::i8));
  int64_t total = 0;
  for (int64_t l : lens) {
    if (l < 0 || l > static_cast<int64_t>(max_address))
      return make_error(errc::protocol_error, "split: a rank announced an address of {} bytes", l);
    total += l;
  }
  std::vector<uint8_t> all(total);
  TROUPE_TRY(
      world_->all_gather(worker ? worker->address().data() : nullptr, all.data(), lens, dtype::i8));
  if (mine < 0) return std::unique_ptr<ucx_group>();
  std::vector<std::vector<uint8_t>> addrs;
  std::vector<int64_t> off(size() + 1, 0);
  for (int k = 0; k < size(); ++k) off[k + 1] = off[k] + lens[k];
  for (int r : members) {
    if (lens[r] == 0)
      return make_error(errc::protocol_error, "split: member {} sent no address", r);
    addrs.emplace_back(all.begin() + off[r], all.begin() + off[r + 1]);
  }
  opt.id = id;
  auto g = ucx_group::connect(std::move(worker), mine, addrs, opt);
  if (!g) return g.error();
  TROUPE_TRY((*g)->barrier());
  return g;
}

} // namespace troupe::transport
