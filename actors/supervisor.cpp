// supervisor.cpp: spawning, monitoring and restarting shards (supervisor.hpp).
#include "actors/supervisor.hpp"

#include <algorithm>
#include <chrono>
#include <deque>

#include "actors/messages.hpp"
#include "core/log.hpp"

namespace troupe::actors {
namespace {

using restart_atom = caf::atom_constant<caf::atom("restart")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using clock = std::chrono::steady_clock;

struct slot {
  shard_setup setup;
  caf::actor handle;
  bool ready = false;
  bool failed = false;                    // given up on
  std::deque<clock::time_point> restarts; // failures since the last progress
  int backoff_ms = 50;
  bool progressed = false; // this instance completed a step
  int64_t resident_bytes = 0;
};

struct supervisor_state {
  supervisor_setup setup;
  std::vector<slot> slots;
  int64_t restarts = 0;
  bool announced = false;
  static inline const char* name = "troupe.supervisor";
};

using state_ptr = caf::stateful_actor<supervisor_state>*;

int slot_of(state_ptr self, const caf::actor_addr& a) {
  for (size_t i = 0; i < self->state.slots.size(); ++i)
    if (self->state.slots[i].handle && self->state.slots[i].handle.address() == a)
      return static_cast<int>(i);
  return -1;
}

void spawn_slot(state_ptr self, size_t i) {
  auto& s = self->state.slots[i];
  s.ready = false;
  s.handle = spawn_shard(self->system(), s.setup, caf::actor_cast<caf::actor>(self));
  self->monitor(s.handle);
  self->state.setup.routes->replace(s.setup.hop, static_cast<size_t>(s.setup.spec.tp_rank),
                                    s.handle);
}

bool all_ready(state_ptr self) {
  for (const auto& s : self->state.slots)
    if (!s.ready) return false;
  return true;
}

// A shard is gone (dead or abandoned): pause the engine, free its siblings, schedule a respawn.
void lost(state_ptr self, size_t i, const std::string& why) {
  auto& st = self->state;
  auto& s = st.slots[i];
  const int stage = s.setup.stage, rank = s.setup.spec.tp_rank;
  s.handle = caf::actor{};
  s.ready = false;
  const uint64_t epoch = st.setup.routes->bump_epoch();
  if (auto& g = st.setup.groups[static_cast<size_t>(stage)])
    g->abort(shard_name(stage, rank) + ": " + why);
  const auto now = clock::now();
  s.restarts.push_back(now);
  while (!s.restarts.empty() && std::chrono::duration<double>(now - s.restarts.front()).count() >
                                    st.setup.restart_window_s)
    s.restarts.pop_front();
  s.progressed = false;
  const bool give_up = static_cast<int>(s.restarts.size()) > st.setup.max_restarts;
  s.failed = give_up;
  if (!give_up) {
    TROUPE_LOG_WARN("supervisor", "{} lost ({}); epoch={} restart in {} ms",
                    shard_name(stage, rank), why, epoch, s.backoff_ms);
    self->send(st.setup.engine, down_atom::value, stage, rank, why, false);
    self->delayed_send(self, std::chrono::milliseconds(s.backoff_ms), restart_atom::value,
                       static_cast<int32_t>(i));
    s.backoff_ms = std::min(s.backoff_ms * 2, 2000); // bounded exponential backoff
    return;
  }
  const std::string what = fmt::format(
      "{}; it failed {} times in a row without completing a step; gave up", why, s.restarts.size());
  if (st.setup.retry_after_give_up) {
    TROUPE_LOG_ERROR("supervisor", "{}: {}; retrying every {} s", shard_name(stage, rank), what,
                     st.setup.retry_interval_s);
    self->send(st.setup.engine, down_atom::value, stage, rank,
               fmt::format("{}; retrying every {} s", what, st.setup.retry_interval_s), true);
    self->delayed_send(
        self, std::chrono::milliseconds(static_cast<int64_t>(st.setup.retry_interval_s * 1000)),
        retry_atom::value, static_cast<int32_t>(i));
  } else {
    TROUPE_LOG_ERROR("supervisor", "{}: {}; exiting (--on-give-up exit)", shard_name(stage, rank),
                     what);
    self->send(st.setup.engine, down_atom::value, stage, rank, what, true);
    if (st.setup.on_give_up) st.setup.on_give_up();
  }
}

caf::behavior supervisor_behavior(state_ptr self, supervisor_setup setup) {
  auto& st = self->state;
  st.setup = std::move(setup);
  for (auto& sh : st.setup.shards) st.slots.push_back(slot{sh, {}, false, false, {}, 50, false, 0});
  for (size_t i = 0; i < st.slots.size(); ++i) spawn_slot(self, i);
  self->set_down_handler([=](caf::down_msg& dm) {
    const int i = slot_of(self, dm.source);
    if (i < 0) return; // an abandoned shard finally ended
    lost(self, static_cast<size_t>(i), dm.reason ? self->system().render(dm.reason) : "exited");
  });
  self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
  return {
      [=](ready_atom, int32_t stage, int32_t rank, int64_t resident, int64_t kv_bytes) {
        auto& st = self->state;
        for (size_t i = 0; i < st.slots.size(); ++i) {
          auto& s = st.slots[i];
          if (s.setup.stage != stage || s.setup.spec.tp_rank != rank || !s.handle) continue;
          if (self->current_sender() != s.handle.address()) continue;
          s.ready = true;
          s.resident_bytes = resident;
          TROUPE_LOG_DEBUG("supervisor", "{} ready resident={} kv={}", shard_name(stage, rank),
                           resident, kv_bytes);
        }
        if (!all_ready(self)) return;
        for (auto& g : st.setup.groups)
          if (g) g->reset(st.setup.routes->epoch());
        self->send(st.setup.engine, up_atom::value, st.setup.routes->epoch(), st.restarts);
        st.announced = true;
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
        if (!s.failed || s.handle) return;
        s.failed = false;
        ++st.restarts;
        TROUPE_LOG_INFO("supervisor", "retrying {} after giving up",
                        shard_name(s.setup.stage, s.setup.spec.tp_rank));
        spawn_slot(self, static_cast<size_t>(i));
      },
      [=](restart_atom, int32_t i) {
        auto& st = self->state;
        if (st.slots[static_cast<size_t>(i)].failed) return;
        ++st.restarts;
        TROUPE_LOG_INFO("supervisor", "respawning {}",
                        shard_name(st.slots[i].setup.stage, st.slots[i].setup.spec.tp_rank));
        spawn_slot(self, static_cast<size_t>(i));
      },
      [=](tick_atom) {
        auto& st = self->state;
        for (size_t i = 0; i < st.slots.size(); ++i) {
          auto& s = st.slots[i];
          if (!s.handle || !s.ready) continue;
          const double busy =
              st.setup.routes->busy_seconds(s.setup.hop, static_cast<size_t>(s.setup.spec.tp_rank));
          const auto& g = st.setup.groups[static_cast<size_t>(s.setup.stage)];
          if (g && g->waiting(s.setup.spec.tp_rank))
            continue; // waiting for a sibling: a victim, not the cause
          if (busy > st.setup.hang_timeout_s) {
            // a detached thread stuck in a kernel cannot be interrupted: abandon it (its late
            // output carries a stale epoch and is dropped) and start a replacement
            self->demonitor(s.handle);
            self->send_exit(s.handle, caf::exit_reason::kill);
            lost(self, i, fmt::format("step running for {:.1f} s (hang)", busy));
          }
        }
        self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
      },
      [=](resync_atom) -> uint64_t {
        // a step was lost (dropped message, timeout): free every rank waiting in a collective
        auto& st = self->state;
        const uint64_t epoch = st.setup.routes->bump_epoch();
        for (auto& g : st.setup.groups)
          if (g) {
            g->abort("resync");
            g->reset(epoch);
          }
        TROUPE_LOG_WARN("supervisor", "resync: epoch={}", epoch);
        return epoch;
      },
      [=](stats_atom) -> std::vector<int64_t> {
        std::vector<int64_t> out;
        for (const auto& s : self->state.slots) out.push_back(s.resident_bytes);
        return out;
      },
      [=](stop_atom) {
        for (auto& s : self->state.slots)
          if (s.handle) {
            self->demonitor(s.handle);
            self->send_exit(s.handle, caf::exit_reason::user_shutdown);
          }
        self->quit();
      },
  };
}

} // namespace

caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_setup setup) {
  return sys.spawn(supervisor_behavior, std::move(setup));
}

} // namespace troupe::actors
