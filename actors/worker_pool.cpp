// worker_pool.cpp: the worker registry, its join checks and the local worker processes
// (worker_pool.hpp).
#include "actors/worker_pool.hpp"

#include <caf/io/all.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "actors/supervisor_interface.hpp"
#include "actors/worker_node.hpp"
#include "core/log.hpp"
#include "exec/expert_load.hpp"
#include "transport/auth.hpp"

extern char** environ;

namespace troupe::actors {

// "worker", the challenge, its rank and protocol version (little-endian).
std::vector<uint8_t> worker_proof_bytes(const std::vector<uint8_t>& challenge, int32_t rank,
                                        uint32_t version) {
  const std::string_view tag = "worker";
  std::vector<uint8_t> b(tag.size() + challenge.size() + 8); // sized once (GCC 12 misreads
  auto at = std::copy(tag.begin(), tag.end(), b.begin());    // an insert into a 6-byte vector)
  at = std::copy(challenge.begin(), challenge.end(), at);
  for (int i = 0; i < 4; ++i) *at++ = static_cast<uint8_t>(static_cast<uint32_t>(rank) >> (8 * i));
  for (int i = 0; i < 4; ++i) *at++ = static_cast<uint8_t>(version >> (8 * i));
  return b;
}

std::string random_secret() {
  const auto n = transport::random_nonce();
  std::string s;
  for (uint8_t b : n) s += fmt::format("{:02x}", b);
  return s;
}

namespace {

using reap_atom = caf::atom_constant<caf::atom("reap")>;
using port_atom = caf::atom_constant<caf::atom("port")>;
using beat_atom = caf::atom_constant<caf::atom("beat")>;

// The interface and what the pool sends itself (its port once published, timers).
using pool_impl = pool_actor::extend<caf::reacts_to<port_atom, uint16_t>, caf::reacts_to<beat_atom>,
                                     caf::reacts_to<reap_atom, int32_t>>;

struct member {
  node_actor node;
  pid_t pid = 0; // a process this pool launched
  int launches = 0;
  std::chrono::steady_clock::time_point seen; // its last heartbeat answer
};

struct pool_state {
  worker_pool_options opt;
  uint16_t port = 0;
  std::vector<member> members;
  std::map<caf::actor_addr, std::vector<uint8_t>> challenges; // per connecting node
  supervisor_actor supervisor;
  bool stopping = false;
  static inline const char* name = "troupe.worker_pool";
};

using pool_ptr = pool_impl::stateful_pointer<pool_state>;

// The pool is published: anyone who reaches the port can send it anything. Only its own
// process (the supervisor, the host) may place shards or stop it.
bool from_here(pool_ptr self) {
  const auto& from = self->current_sender();
  return from && from->node() == self->node();
}

// Starts `exe worker` for `rank` with the rendezvous in its environment.
pid_t launch(pool_ptr self, int rank) {
  auto& st = self->state;
  std::vector<std::string> args = {st.opt.exe, "worker"};
  args.insert(args.end(), st.opt.worker_args.begin(), st.opt.worker_args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    if (v.rfind("RANK=", 0) == 0 || v.rfind("MASTER_ADDR=", 0) == 0 ||
        v.rfind("MASTER_PORT=", 0) == 0 || v.rfind("TROUPE_SECRET", 0) == 0 ||
        v.rfind("WORLD_SIZE=", 0) == 0)
      continue;
    env.push_back(v);
  }
  env.push_back(fmt::format("RANK={}", rank));
  env.push_back(fmt::format("WORLD_SIZE={}", st.opt.workers));
  env.push_back("MASTER_ADDR=" + st.opt.host);
  env.push_back(fmt::format("MASTER_PORT={}", st.port));
  env.push_back("TROUPE_SECRET=" + st.opt.secret);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // a worker starts with the default signal handling, whatever this thread blocks or ignores
  // (serve blocks SIGTERM for its own wait and ignores SIGPIPE): a worker that inherited the
  // mask would sit out the SIGTERM of a stop and be killed two seconds later
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, st.opt.exe.c_str(), nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    TROUPE_LOG_ERROR("workers", "cannot start {} worker for rank {}", st.opt.exe, rank);
    return 0;
  }
  TROUPE_LOG_INFO("workers", "started worker rank {} (pid {})", rank, pid);
  return pid;
}

// A launched worker is gone from the network: make sure the process is gone too (a partition
// leaves it running), reap it, and start its successor.
void replace(pool_ptr self, int rank) {
  auto& m = self->state.members[static_cast<size_t>(rank)];
  if (m.pid > 0) {
    int status = 0;
    if (waitpid(m.pid, &status, WNOHANG) == 0) {
      ::kill(m.pid, SIGKILL);
      waitpid(m.pid, &status, 0);
    }
    m.pid = 0;
  }
  if (self->state.stopping || self->state.opt.exe.empty()) return;
  // a short, growing pause: a worker that dies at start must not spin the machine
  const int ms = std::min(2000, 50 << std::min(m.launches, 5));
  self->delayed_send(self, std::chrono::milliseconds(ms), reap_atom::value,
                     static_cast<int32_t>(rank));
}

// Checked against pool_impl when built: a handler the interface lacks fails to compile.
pool_impl::behavior_type pool(pool_ptr self, worker_pool_options opt) {
  self->state.opt = opt;
  self->state.members.resize(static_cast<size_t>(opt.workers));
  auto gone = [=](size_t r, const std::string& why) {
    auto& st = self->state;
    TROUPE_LOG_WARN("workers", "worker rank {} is gone: {}", r, why);
    self->demonitor(st.members[r].node.address());
    st.members[r].node = node_actor{};
    if (st.supervisor)
      self->send(st.supervisor, worker_atom::value, static_cast<int32_t>(r), caf::actor{}, false);
    replace(self, static_cast<int>(r));
  };
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t r = 0; r < st.members.size(); ++r)
      if (st.members[r].node && st.members[r].node.address() == dm.source)
        gone(r, self->system().render(dm.reason));
  });
  self->delayed_send(self, std::chrono::seconds(1), beat_atom::value);
  return {
      [=](attach_atom, const caf::actor& sup) { // and tells it who has joined already
        auto& st = self->state;
        if (!from_here(self)) return;
        st.supervisor = caf::actor_cast<supervisor_actor>(sup);
        for (size_t r = 0; r < st.members.size(); ++r)
          if (st.members[r].node)
            self->send(st.supervisor, worker_atom::value, static_cast<int32_t>(r),
                       caf::actor_cast<caf::actor>(st.members[r].node), true);
      },
      [=](port_atom, uint16_t port) { // published: launch the workers, which connect here
        auto& st = self->state;
        if (!from_here(self) || st.port != 0) return;
        st.port = port;
        if (st.opt.exe.empty()) return;
        for (size_t r = 0; r < st.members.size(); ++r) {
          ++st.members[r].launches;
          st.members[r].pid = launch(self, static_cast<int>(r));
        }
      },
      [=](hello_atom) -> std::vector<uint8_t> {
        const auto n = transport::random_nonce();
        std::vector<uint8_t> c(n.begin(), n.end());
        auto& ch = self->state.challenges;
        if (ch.size() > 1024) ch.clear(); // strangers asking and never answering
        ch[caf::actor_cast<caf::actor_addr>(self->current_sender())] = c;
        return c;
      },
      [=](join_atom, int32_t rank, uint32_t version, const std::vector<uint8_t>& proof,
          const caf::actor& node) -> caf::result<bool> {
        auto& st = self->state;
        std::string refusal;
        auto it = st.challenges.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
        if (version != worker_protocol_version)
          refusal = fmt::format("worker protocol version {}, this coordinator speaks {}", version,
                                worker_protocol_version);
        else if (it == st.challenges.end())
          refusal = "no challenge was issued to this peer";
        else if (!transport::same_digest(
                     transport::hmac_sha256(st.opt.secret,
                                            worker_proof_bytes(it->second, rank, version)),
                     proof))
          refusal = "authentication failed (wrong secret)";
        else if (rank < 0 || rank >= st.opt.workers)
          refusal = fmt::format("rank {} out of range 0..{}", rank, st.opt.workers - 1);
        else if (st.members[static_cast<size_t>(rank)].node)
          refusal = fmt::format("rank {} has joined already", rank);
        else if (!node)
          refusal = "no node actor";
        if (it != st.challenges.end()) st.challenges.erase(it); // one answer per challenge
        if (!refusal.empty()) {
          TROUPE_LOG_WARN("workers", "refused a worker (claimed rank {}): {}", rank, refusal);
          return to_caf(error{errc::unavailable, "refused: " + refusal});
        }
        auto& m = st.members[static_cast<size_t>(rank)];
        m.node = caf::actor_cast<node_actor>(node);
        m.seen = std::chrono::steady_clock::now();
        self->monitor(node);
        TROUPE_LOG_INFO("workers", "worker rank {} joined", rank);
        if (st.supervisor) self->send(st.supervisor, worker_atom::value, rank, node, true);
        return true;
      },
      [=](spawn_atom, int32_t rank, const shard_order& o) -> caf::result<caf::actor> {
        auto& st = self->state;
        if (!from_here(self)) // only this process's supervisor places shards
          return to_caf(error{errc::unavailable, "refused: not from the coordinator"});
        if (rank < 0 || rank >= st.opt.workers || !st.members[static_cast<size_t>(rank)].node)
          return to_caf(
              error{errc::unavailable, fmt::format("worker rank {} has not joined", rank)});
        auto rp = self->make_response_promise<caf::actor>();
        self->request(st.members[static_cast<size_t>(rank)].node, std::chrono::seconds(120),
                      spawn_atom::value, o)
            .then([=](const caf::actor& h) mutable { rp.deliver(h); },
                  [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      // every worker's counts, one after another (the gateway sums them with its own)
      [=](experts_atom) -> caf::result<std::vector<int64_t>> {
        auto& st = self->state;
        if (!from_here(self))
          return to_caf(error{errc::unavailable, "refused: not from the coordinator"});
        struct gather {
          std::vector<int64_t> all; // flattened triples
          size_t waiting = 0;
        };
        auto g = std::make_shared<gather>();
        auto rp = self->make_response_promise<std::vector<int64_t>>();
        for (const auto& m : st.members)
          if (m.node) ++g->waiting;
        if (g->waiting == 0) return std::vector<int64_t>{};
        for (size_t r = 0; r < st.members.size(); ++r) {
          if (!st.members[r].node) continue;
          // a worker that does not answer in time is left out of this scrape (its counters
          // live on in its process and come back in the next one)
          auto one = [=](const std::vector<int64_t>* v) mutable {
            if (v) {
              if (auto c = exec::unflatten(*v); c) // checked here: one bad reply spoils none
                g->all.insert(g->all.end(), v->begin(), v->end());
              else
                TROUPE_LOG_WARN("workers", "rank {}: {}", r, c.error().message);
            }
            if (--g->waiting == 0) rp.deliver(std::move(g->all));
          };
          self->request(st.members[r].node, std::chrono::seconds(2), experts_atom::value)
              .then([=](const std::vector<int64_t>& v) mutable { one(&v); },
                    [=](const caf::error&) mutable { one(nullptr); });
        }
        return rp;
      },
      [=](beat_atom) {
        auto& st = self->state;
        const auto now = std::chrono::steady_clock::now();
        for (size_t r = 0; r < st.members.size(); ++r) {
          auto& m = st.members[r];
          if (!m.node) continue;
          const double silent = std::chrono::duration<double>(now - m.seen).count();
          if (silent > st.opt.heartbeat_timeout_s) {
            gone(r, fmt::format("stopped answering for {:.1f} s", silent));
            continue;
          }
          const node_actor node = m.node;
          self->request(node, std::chrono::seconds(5), ping_atom::value)
              .then(
                  [=](bool) {
                    auto& mm = self->state.members[r];
                    if (mm.node == node) mm.seen = std::chrono::steady_clock::now();
                  },
                  [](const caf::error&) {}); // silence is judged above
        }
        if (!st.stopping) self->delayed_send(self, std::chrono::seconds(1), beat_atom::value);
      },
      [=](reap_atom, int32_t rank) {
        auto& st = self->state;
        auto& m = st.members[static_cast<size_t>(rank)];
        if (st.stopping || m.node || m.pid > 0) return;
        ++m.launches;
        m.pid = launch(self, rank);
      },
      [=](stop_atom) {
        auto& st = self->state;
        if (!from_here(self)) return;
        st.stopping = true;
        for (auto& m : st.members) {
          if (m.pid > 0) ::kill(m.pid, SIGTERM);
        }
        for (auto& m : st.members) {
          if (m.pid <= 0) continue;
          int status = 0;
          for (int i = 0; i < 100 && waitpid(m.pid, &status, WNOHANG) == 0; ++i) usleep(20000);
          if (waitpid(m.pid, &status, WNOHANG) == 0) {
            TROUPE_LOG_WARN("workers", "worker pid {} did not stop within 2 s of SIGTERM; killed",
                            m.pid);
            ::kill(m.pid, SIGKILL);
            waitpid(m.pid, &status, 0);
          }
          m.pid = 0;
        }
        self->quit();
      },
  };
}

} // namespace

pool_actor spawn_worker_pool(caf::actor_system& sys, const worker_pool_options& opt) {
  return sys.spawn(pool, opt);
}

expected<uint16_t> start_worker_pool(caf::actor_system& sys, const worker_pool_options& opt,
                                     pool_actor& out) {
  if (opt.workers < 1)
    return make_error(errc::invalid_argument, "a pool of {} workers", opt.workers);
  if (opt.secret.size() < 8)
    return make_error(errc::invalid_argument, "worker processes need a secret of at least 8 bytes");
  auto impl = caf::actor_cast<pool_impl>(spawn_worker_pool(sys, opt));
  out = impl;
  auto port = sys.middleman().publish(out, opt.port, opt.host.c_str(), true);
  if (!port) {
    caf::anon_send_exit(impl, caf::exit_reason::user_shutdown);
    return make_error(errc::io_error, "cannot listen for workers at {}:{}: {}", opt.host, opt.port,
                      sys.render(port.error()));
  }
  caf::scoped_actor self{sys};
  self->send(impl, port_atom::value, static_cast<uint16_t>(*port));
  return static_cast<uint16_t>(*port);
}

} // namespace troupe::actors
