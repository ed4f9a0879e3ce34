// supervisor.cpp: spawning, monitoring and restarting shards (supervisor.hpp).
#include "actors/supervisor.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>

#include "actors/engine_interface.hpp"
#include "actors/shard_interface.hpp"
#include "actors/supervisor_interface.hpp"
#include "actors/worker_interface.hpp"
#include "core/log.hpp"

namespace troupe::actors {
namespace {

using restart_atom = caf::atom_constant<caf::atom("restart")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using place_atom = caf::atom_constant<caf::atom("place")>; // try to start a remote shard
using regroup_atom = caf::atom_constant<caf::atom("regroup")>;
using clock = std::chrono::steady_clock;

// The interface and what the supervisor sends itself (timers).
using supervisor_impl = supervisor_actor::extend<
    caf::reacts_to<restart_atom, int32_t>, caf::reacts_to<retry_atom, int32_t>,
    caf::reacts_to<place_atom, int32_t>, caf::reacts_to<regroup_atom>, caf::reacts_to<tick_atom>>;

struct slot {
  shard_setup setup;
  shard_actor handle;
  bool ready = false;
  bool failed = false;                    // given up on
  std::deque<clock::time_point> restarts; // failures since the last progress
  int backoff_ms = 50;
  bool progressed = false; // this instance completed a step
  int64_t resident_bytes = 0;
  std::string device; // where it runs (its device report)
  int64_t device_total = 0, device_free = 0;
  // worker processes
  uint64_t generation = 0;      // spawn requests of an older generation are void
  bool placing = false;         // a spawn request is in flight
  bool retry_never = false;     // it refused to load: no retry can help
  std::vector<uint8_t> address; // its UCX worker (TP > 1)
};

// What a remote shard said before the spawn reply told us its handle.
struct early_news {
  bool has_address = false, has_ready = false, has_device = false;
  std::vector<uint8_t> address;
  int64_t resident = 0, kv = 0;
  std::string device;
  int64_t device_total = 0, device_free = 0;
};

// A shard's device report (from the network: bounded).
void on_device(slot& s, const std::string& dev, int64_t total, int64_t free) {
  s.device = dev.substr(0, 256);
  s.device_total = std::max<int64_t>(total, 0);
  s.device_free = std::clamp<int64_t>(free, 0, s.device_total);
}

struct supervisor_state {
  supervisor_setup setup;
  std::vector<slot> slots;
  int64_t restarts = 0;
  std::vector<node_actor> workers;             // joined worker nodes, by rank
  std::map<caf::actor_addr, early_news> early; // remote shards not yet placed
  // group formation (worker processes) runs one round at a time: the acks a round awaits
  // (slot index -> acks), whether it failed, and whether another was asked for meanwhile
  bool forming = false, round_failed = false, form_again = false;
  std::map<size_t, int> awaiting;
  std::vector<caf::typed_response_promise<uint64_t>>
      resync_waiters; // answered when the groups are formed
  uint64_t group_epoch = 0;
  routing_table routes; // the routes: the supervisor's own, sent to whoever uses them
  static inline const char* name = "troupe.supervisor";
};

using state_ptr = supervisor_impl::stateful_pointer<supervisor_state>;

int slot_of(state_ptr self, const caf::actor_addr& a) {
  for (size_t i = 0; i < self->state.slots.size(); ++i)
    if (self->state.slots[i].handle && self->state.slots[i].handle.address() == a)
      return static_cast<int>(i);
  return -1;
}

bool all_ready(state_ptr self) {
  for (const auto& s : self->state.slots)
    if (!s.ready) return false;
  return true;
}

shard_order order_for(state_ptr self, const slot& s) {
  const auto& sh = s.setup;
  shard_order o;
  o.model_path = self->state.setup.model_path;
  o.stage = sh.stage;
  o.hop = static_cast<int32_t>(sh.hop);
  o.last = sh.last;
  o.spec = sh.spec;
  o.threads = sh.opt.threads;
  o.kv_blocks = sh.opt.kv_blocks;
  o.state_slots = sh.opt.state_slots;
  o.block_size = sh.opt.block_size;
  o.kv_dtype = static_cast<uint8_t>(sh.opt.kv_dtype);
  o.quantize = static_cast<uint8_t>(sh.opt.quantize);
  o.where = static_cast<uint8_t>(sh.opt.where);
  o.device = sh.opt.device;
  o.nccl = sh.nccl_across;
  o.cpus.assign(sh.opt.cpus.begin(), sh.opt.cpus.end());
  o.group_timeout_s = self->state.setup.group_timeout_s;
  o.hang_timeout_s = self->state.setup.hang_timeout_s;
  o.faults = sh.faults->specs();
  o.supervisor = caf::actor_cast<caf::actor>(self);
  return o;
}

void on_address(state_ptr self, size_t i, std::vector<uint8_t> addr);
void on_ready(state_ptr self, size_t i, int64_t resident, int64_t kv);

// A shard's handle is known: monitor it, route to it, and take what it already said.
void placed(state_ptr self, size_t i, shard_actor h) {
  auto& s = self->state.slots[i];
  s.handle = std::move(h);
  self->monitor(s.handle);
  self->state.routes.replace(s.setup.hop, static_cast<size_t>(s.setup.spec.tp_rank),
                             caf::actor_cast<caf::actor>(s.handle));
  auto it = self->state.early.find(s.handle.address());
  if (it == self->state.early.end()) return;
  early_news n = std::move(it->second);
  self->state.early.erase(it);
  if (n.has_address) on_address(self, i, std::move(n.address));
  if (n.has_device) on_device(s, n.device, n.device_total, n.device_free);
  if (n.has_ready) on_ready(self, i, n.resident, n.kv);
}

void lost(state_ptr self, size_t i, const std::string& why, bool cannot_load = false);
std::string reason_text(state_ptr self, const caf::error& e);
bool refused_for_good(const caf::error& e);

void spawn_slot(state_ptr self, size_t i) {
  auto& st = self->state;
  auto& s = st.slots[i];
  s.ready = false;
  s.address.clear();
  if (!st.setup.pool) {
    placed(self, i, spawn_shard(self->system(), s.setup, caf::actor_cast<caf::actor>(self)));
    return;
  }
  // in a worker process: ask its node (through the pool); it may not have joined yet
  s.handle = shard_actor{};
  const int w = st.setup.worker_of.at(i);
  if (s.placing) return;
  if (w >= static_cast<int>(st.workers.size()) || !st.workers[static_cast<size_t>(w)]) {
    self->delayed_send(self, std::chrono::milliseconds(200), place_atom::value,
                       static_cast<int32_t>(i));
    return;
  }
  s.placing = true;
  const uint64_t gen = ++s.generation;
  self->request(st.setup.pool, std::chrono::seconds(120), spawn_atom::value,
                static_cast<int32_t>(w), order_for(self, s))
      .then(
          [=](const caf::actor& h) {
            auto& s = self->state.slots[i];
            if (s.generation != gen) { // abandoned meanwhile
              self->send_exit(h, caf::exit_reason::user_shutdown);
              return;
            }
            s.placing = false;
            placed(self, i, caf::actor_cast<shard_actor>(h));
          },
          [=](const caf::error& e) {
            auto& s = self->state.slots[i];
            if (s.generation != gen) return;
            s.placing = false;
            if (refused_for_good(e)) // the worker will refuse it again (a bad order, no model)
              return lost(self, i, fmt::format("worker {} refused it: {}", w, reason_text(self, e)),
                          true);
            TROUPE_LOG_WARN("supervisor", "cannot start {} on worker {}: {}",
                            shard_name(s.setup.stage, s.setup.spec.tp_rank), w,
                            self->system().render(e));
            self->delayed_send(self, std::chrono::milliseconds(500), place_atom::value,
                               static_cast<int32_t>(i));
          });
}

// Aborts the groups in every process (the workers' and its own, through their nodes): whoever
// waits on the lost shard (a TP sum, activations) fails at once; all_up() forms them again.
void halt_workers(state_ptr self, const std::string& why) {
  const uint64_t epoch = self->state.routes.epoch();
  for (const auto& w : self->state.workers)
    if (w) self->send(w, halt_atom::value, epoch, why);
  if (self->state.setup.local_node)
    self->send(self->state.setup.local_node, halt_atom::value, epoch, why);
}

// Tells the engine and every hop's actors (shards, developer actors) the routes: before the
// engine may send a step along them, and whenever the epoch moves (a step of an older epoch
// is then dropped wherever it arrives).
void push_routes(state_ptr self) {
  auto& st = self->state;
  const route_update u = st.routes.to_update();
  if (st.setup.engine) self->send(st.setup.engine, route_atom::value, u);
  for (const auto& hop : u.hops)
    for (const auto& a : hop)
      if (a) self->send(caf::actor_cast<hop_actor>(a), route_atom::value, u);
}

void announce_up(state_ptr self) {
  auto& st = self->state;
  self->send(st.setup.engine, up_atom::value, st.routes.epoch(), st.restarts);
  for (auto& rp : st.resync_waiters) rp.deliver(st.routes.epoch());
  st.resync_waiters.clear();
}

void all_up(state_ptr self);

// A formation round is over: tell the engine, or start another round (one failed, a shard was
// replaced meanwhile, or a resync asked for one).
void round_over(state_ptr self) {
  auto& st = self->state;
  st.forming = false;
  if (st.round_failed || st.form_again) {
    st.round_failed = st.form_again = false;
    self->delayed_send(self, std::chrono::milliseconds(200), regroup_atom::value);
    return;
  }
  announce_up(self);
}

// Every shard is up: form the groups before the engine hears of it. With worker processes,
// each stage's TP group and each stage boundary (from the addresses the shards reported); in
// one process, each stage's rank 0 starts its stage's group over in the round's epoch. One
// round at a time: asked again while one runs, another follows it.
void all_up(state_ptr self) {
  auto& st = self->state;
  if (st.forming) {
    st.form_again = true;
    return;
  }
  if (!all_ready(self)) return; // a replacement's ready starts the next round
  st.forming = true;
  st.awaiting.clear();
  // every round in an epoch of its own, so that a late answer of another round never counts
  if (st.group_epoch == st.routes.epoch()) st.routes.bump_epoch();
  push_routes(self);
  st.group_epoch = st.routes.epoch();
  // slots by stage, in TP rank order
  std::map<int, std::vector<size_t>> stages;
  for (size_t i = 0; i < st.slots.size(); ++i) stages[st.slots[i].setup.stage].push_back(i);
  for (auto& [stage, members] : stages)
    std::sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return st.slots[a].setup.spec.tp_rank < st.slots[b].setup.spec.tp_rank;
    });
  auto form = [&](uint8_t id, const std::vector<size_t>& members) {
    std::vector<std::vector<uint8_t>> addrs;
    for (size_t i : members) addrs.push_back(st.slots[i].address);
    for (size_t k = 0; k < members.size(); ++k) {
      self->send(st.slots[members[k]].handle, group_atom::value, st.group_epoch, id,
                 static_cast<int32_t>(k), addrs);
      ++st.awaiting[members[k]];
    }
  };
  for (auto& [stage, members] : stages) {
    if (!st.setup.pool) { // one process: the stage's in-process group, reset by its rank 0
      if (members.size() > 1) form(tp_group_id(stage), {members.front()});
      continue;
    }
    if (members.size() > 1) form(tp_group_id(stage), members); // the stage's TP group
    auto next = stages.find(stage + 1); // the boundary: this rank 0, then the next stage
    if (next == stages.end()) continue;
    std::vector<size_t> boundary = {members.front()};
    boundary.insert(boundary.end(), next->second.begin(), next->second.end());
    form(boundary_group_id(stage), boundary);
  }
  TROUPE_LOG_DEBUG("supervisor", "forming round epoch={} awaiting={}", st.group_epoch,
                   st.awaiting.size());
  if (st.awaiting.empty()) round_over(self);
}

void on_address(state_ptr self, size_t i, std::vector<uint8_t> addr) {
  if (addr.empty() || addr.size() > 64 * 1024) { // from the network: an address UCX could not use
    TROUPE_LOG_WARN(
        "supervisor", "{} sent a UCX address of {} bytes; ignored",
        shard_name(self->state.slots[i].setup.stage, self->state.slots[i].setup.spec.tp_rank),
        addr.size());
    return;
  }
  self->state.slots[i].address = std::move(addr);
}

void on_ready(state_ptr self, size_t i, int64_t resident, int64_t kv) {
  auto& s = self->state.slots[i];
  s.ready = true;
  s.resident_bytes = resident;
  TROUPE_LOG_DEBUG("supervisor", "{} ready resident={} kv={}",
                   shard_name(s.setup.stage, s.setup.spec.tp_rank), resident, kv);
  if (all_ready(self)) all_up(self);
}

// The slot whose current shard sent the message being handled, or -1.
int sender_slot(state_ptr self) {
  return slot_of(self, caf::actor_cast<caf::actor_addr>(self->current_sender()));
}

// Why a shard ended, for logs and replies: troupe's error as it reads ("shape_mismatch:
// ..."), the text a CAF error carries (shard.cpp's), else CAF's rendering ("exited" for a
// normal exit).
std::string reason_text(state_ptr self, const caf::error& e) {
  if (!e) return "exited";
  if (e.category() == caf::atom("troupe")) return from_caf(e).to_string();
  const auto& ctx = e.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) return ctx.get_as<std::string>(0);
  return self->system().render(e);
}

// A refusal to load that no restart can change: what the checkpoint, the plan or the order
// is (a shape, a dtype, a missing or corrupt tensor, an order a worker rejects). Troupe's
// errors only (a crash, a lost worker or memory that ran out are worth another attempt).
bool refused_for_good(const caf::error& e) {
  if (!e || e.category() != caf::atom("troupe")) return false;
  const errc c = from_caf(e).code;
  return c == errc::shape_mismatch || c == errc::unsupported || c == errc::not_found ||
         c == errc::corrupt_file || c == errc::invalid_argument;
}

// A shard is gone (dead or abandoned): pause the engine, free its siblings, schedule a respawn.
// `cannot_load`: it refused to load what it was given (a shape, a dtype, a missing tensor),
// which another attempt would refuse the same way: given up on at once, never retried.
void lost(state_ptr self, size_t i, const std::string& why, bool cannot_load) {
  auto& st = self->state;
  auto& s = st.slots[i];
  const int stage = s.setup.stage, rank = s.setup.spec.tp_rank;
  s.handle = shard_actor{};
  s.ready = false;
  s.placing = false;
  ++s.generation;
  if (st.forming) { // the round cannot complete as asked; the replacement's ready starts one
    st.round_failed = true;
    st.awaiting.erase(i);
    if (st.awaiting.empty()) st.forming = false;
  }
  const uint64_t epoch = st.routes.bump_epoch();
  push_routes(self); // the steps in flight are void wherever they are
  halt_workers(self, shard_name(stage, rank) + ": " + why);
  const auto now = clock::now();
  s.restarts.push_back(now);
  while (!s.restarts.empty() && std::chrono::duration<double>(now - s.restarts.front()).count() >
                                    st.setup.restart_window_s)
    s.restarts.pop_front();
  s.progressed = false;
  const bool give_up = cannot_load || static_cast<int>(s.restarts.size()) > st.setup.max_restarts;
  s.failed = give_up;
  if (!give_up) {
    TROUPE_LOG_WARN("supervisor", "{} lost ({}); epoch={} restart in {} ms",
                    shard_name(stage, rank), why, epoch, s.backoff_ms);
    self->send(st.setup.engine, down_atom::value, stage, rank, why, shard_down::restarting);
    self->delayed_send(self, std::chrono::milliseconds(s.backoff_ms), restart_atom::value,
                       static_cast<int32_t>(i));
    s.backoff_ms = std::min(s.backoff_ms * 2, 2000); // bounded exponential backoff
    return;
  }
  if (cannot_load) {
    s.retry_never = true;
    const std::string what = fmt::format("{}; it cannot load, gave up", why);
    TROUPE_LOG_ERROR("supervisor", "{}: {}", shard_name(stage, rank), what);
    self->send(st.setup.engine, down_atom::value, stage, rank, what, shard_down::cannot_load);
    if (!st.setup.retry_after_give_up && st.setup.on_give_up) st.setup.on_give_up();
    return;
  }
  const std::string what = fmt::format(
      "{}; it failed {} times in a row without completing a step; gave up", why, s.restarts.size());
  if (st.setup.retry_after_give_up) {
    TROUPE_LOG_ERROR("supervisor", "{}: {}; retrying every {} s", shard_name(stage, rank), what,
                     st.setup.retry_interval_s);
    self->send(st.setup.engine, down_atom::value, stage, rank,
               fmt::format("{}; retrying every {} s", what, st.setup.retry_interval_s),
               shard_down::given_up);
    self->delayed_send(
        self, std::chrono::milliseconds(static_cast<int64_t>(st.setup.retry_interval_s * 1000)),
        retry_atom::value, static_cast<int32_t>(i));
  } else {
    TROUPE_LOG_ERROR("supervisor", "{}: {}; exiting (--on-give-up exit)", shard_name(stage, rank),
                     what);
    self->send(st.setup.engine, down_atom::value, stage, rank, what, shard_down::given_up);
    if (st.setup.on_give_up) st.setup.on_give_up();
  }
}

// A shard that is still there but counts as lost (its worker is gone, it hangs): no down
// message will come for it; a thread stuck in a kernel cannot be interrupted, so it is
// abandoned (its late output carries a stale epoch and is dropped) and replaced.
void abandon(state_ptr self, size_t i, const std::string& why) {
  auto& h = self->state.slots[i].handle;
  self->demonitor(h.address());
  self->send_exit(h, caf::exit_reason::kill);
  lost(self, i, why);
}

// Checked against supervisor_impl when built: a handler the interface lacks fails to compile.
supervisor_impl::behavior_type supervisor_behavior(state_ptr self, supervisor_setup setup) {
  auto& st = self->state;
  st.setup = std::move(setup);
  st.routes = st.setup.routes;
  for (auto& sh : st.setup.shards) st.slots.push_back(slot{sh, {}, false, false, {}, 50, false, 0});
  for (size_t i = 0; i < st.slots.size(); ++i) spawn_slot(self, i);
  self->set_down_handler([=](caf::down_msg& dm) {
    const int i = slot_of(self, dm.source);
    if (i < 0) return; // an abandoned shard finally ended
    lost(self, static_cast<size_t>(i), reason_text(self, dm.reason), refused_for_good(dm.reason));
  });
  self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
  return {
      [=](ready_atom, int32_t, int32_t, int64_t resident, int64_t kv_bytes) {
        const int i = sender_slot(self);
        if (i >= 0) return on_ready(self, static_cast<size_t>(i), resident, kv_bytes);
        if (self->state.setup.pool) { // a remote shard whose spawn reply is still on its way
          auto& n = self->state.early[caf::actor_cast<caf::actor_addr>(self->current_sender())];
          n.has_ready = true;
          n.resident = resident;
          n.kv = kv_bytes;
        }
      },
      [=](group_atom, int32_t, int32_t, std::vector<uint8_t> addr) {
        const int i = sender_slot(self);
        if (i >= 0) return on_address(self, static_cast<size_t>(i), std::move(addr));
        if (self->state.setup.pool) {
          auto& n = self->state.early[caf::actor_cast<caf::actor_addr>(self->current_sender())];
          n.has_address = true;
          n.address = std::move(addr);
        }
      },
      [=](grouped_atom, int32_t stage, int32_t rank, bool ok, const std::string& why,
          uint64_t epoch) {
        auto& st = self->state;
        const int i = sender_slot(self);
        if (i < 0 || !st.forming || epoch != st.group_epoch) return; // gone, or another round
        auto it = st.awaiting.find(static_cast<size_t>(i));
        if (it == st.awaiting.end()) return;
        if (!ok) {
          TROUPE_LOG_WARN("supervisor", "{} could not form a group ({}); forming again",
                          shard_name(stage, rank), why);
          st.round_failed = true;
        }
        if (--it->second == 0) st.awaiting.erase(it);
        if (st.awaiting.empty()) round_over(self);
      },
      [=](regroup_atom) { all_up(self); },
      [=](worker_atom, int32_t rank, const caf::actor& node, bool up) {
        auto& st = self->state;
        if (rank < 0) return;
        if (static_cast<size_t>(rank) >= st.workers.size()) st.workers.resize(rank + 1);
        st.workers[static_cast<size_t>(rank)] =
            up ? caf::actor_cast<node_actor>(node) : node_actor{};
        if (!up) { // its shards are lost with it, even where CAF has not said so (a silence)
          for (size_t i = 0; i < st.slots.size(); ++i)
            if (st.setup.worker_of.at(i) == rank && st.slots[i].handle)
              abandon(self, i, fmt::format("worker {} is gone", rank));
          return;
        }
        for (size_t i = 0; i < st.slots.size(); ++i)
          if (st.setup.worker_of.at(i) == rank && !st.slots[i].handle && !st.slots[i].failed &&
              !st.slots[i].placing)
            spawn_slot(self, i);
      },
      [=](hung_atom, const caf::actor& shard, double busy) {
        // a worker's node found one of its shards stuck in a step (its busy marks live there)
        auto& st = self->state;
        for (size_t i = 0; i < st.slots.size(); ++i)
          if (st.slots[i].handle && st.slots[i].handle.address() == shard.address())
            abandon(self, i, fmt::format("step running for {:.1f} s (hang)", busy));
      },
      [=](place_atom, int32_t i) {
        auto& s = self->state.slots[static_cast<size_t>(i)];
        if (!s.handle && !s.failed && !s.placing) spawn_slot(self, static_cast<size_t>(i));
      },
      [=](progress_atom, int32_t stage, int32_t rank) {
        // a (re)started shard completed a step: it works; forget its failures
        for (auto& s : self->state.slots)
          if (s.setup.stage == stage && s.setup.spec.tp_rank == rank && s.handle &&
              self->current_sender() == s.handle.address()) {
            s.progressed = true;
            s.restarts.clear();
            s.backoff_ms = 50;
          }
      },
      [=](retry_atom, int32_t i) { // half-open after giving up: try once more
        auto& st = self->state;
        auto& s = st.slots[static_cast<size_t>(i)];
        if (!s.failed || s.handle || s.retry_never) return;
        s.failed = false;
        ++st.restarts;
        TROUPE_LOG_INFO("supervisor", "retrying {} after giving up",
                        shard_name(s.setup.stage, s.setup.spec.tp_rank));
        spawn_slot(self, static_cast<size_t>(i));
      },
      [=](restart_atom, int32_t i) {
        auto& st = self->state;
        auto& s = st.slots[static_cast<size_t>(i)];
        if (s.failed || s.handle || s.placing) return; // given up, or started already
        ++st.restarts;
        TROUPE_LOG_INFO("supervisor", "respawning {}",
                        shard_name(st.slots[i].setup.stage, st.slots[i].setup.spec.tp_rank));
        spawn_slot(self, static_cast<size_t>(i));
      },
      [=](tick_atom) {
        auto& st = self->state;
        // its own process's shards (in worker processes their node watches them: hung_atom);
        // one waiting for a sibling is a victim, not the cause
        if (!st.setup.pool && st.setup.watch)
          for (size_t i = 0; i < st.slots.size(); ++i) {
            const auto& s = st.slots[i];
            if (!s.handle || !s.ready) continue;
            if (const double busy = st.setup.watch->stuck(s.handle.id(), st.setup.hang_timeout_s))
              abandon(self, i, fmt::format("step running for {:.1f} s (hang)", busy));
          }
        self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
      },
      [=](resync_atom) -> caf::result<uint64_t> {
        // a step was lost (dropped message, timeout): the groups may be out of step
        auto& st = self->state;
        const uint64_t epoch = st.routes.bump_epoch();
        push_routes(self);
        TROUPE_LOG_WARN("supervisor", "resync: epoch={}", epoch);
        // in one process, free every rank waiting in a collective (its group has no timeout);
        // worker processes: no halt, a shard in the middle of a step finishes it (or its
        // collective times out) and then starts over
        if (!st.setup.pool && st.setup.local_node)
          self->send(st.setup.local_node, halt_atom::value, epoch, std::string("resync"));
        if (all_ready(self)) {
          // answered once the groups are formed again (announce_up), not before: a step sent
          // meanwhile would meet groups that are still being formed (the shards see the new
          // round before the engine's next step: both come from here, or over one connection)
          auto rp = self->make_response_promise<uint64_t>();
          st.resync_waiters.push_back(rp);
          all_up(self);
          return rp;
        }
        return epoch;
      },
      [=](device_atom, int32_t, int32_t, const std::string& dev, int64_t total, int64_t free) {
        const int i = sender_slot(self);
        if (i >= 0) return on_device(self->state.slots[static_cast<size_t>(i)], dev, total, free);
        if (self->state.setup.pool) { // a remote shard whose spawn reply is still on its way
          auto& n = self->state.early[caf::actor_cast<caf::actor_addr>(self->current_sender())];
          n.has_device = true;
          n.device = dev.substr(0, 256);
          n.device_total = total;
          n.device_free = free;
        }
      },
      [=](shards_atom) -> std::vector<shard_report> {
        std::vector<shard_report> out;
        for (const auto& s : self->state.slots)
          out.push_back({shard_name(s.setup.stage, s.setup.spec.tp_rank), s.device,
                         s.resident_bytes, s.device_total, s.device_free});
        return out;
      },
      [=](stats_atom) -> std::vector<int64_t> {
        std::vector<int64_t> out;
        for (const auto& s : self->state.slots) out.push_back(s.resident_bytes);
        return out;
      },
      [=](stop_atom) {
        for (auto& s : self->state.slots)
          if (s.handle) {
            self->demonitor(s.handle.address());
            self->send_exit(s.handle, caf::exit_reason::user_shutdown);
          }
        self->quit();
      },
  };
}

} // namespace

supervisor_actor spawn_supervisor(caf::actor_system& sys, supervisor_setup setup) {
  return sys.spawn(supervisor_behavior, std::move(setup));
}

} // namespace troupe::actors
