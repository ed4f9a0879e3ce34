// watchdog.hpp: what the actor that watches a process (the coordinator's local node and
// supervisor, or a worker's node) knows of the shards in it, and the one thing actors of a
// process share. A thread stuck in a kernel can send nothing, and a shard blocked in a
// collective cannot read its mailbox, so each shard enlists here when it starts: it stamps
// when it enters and leaves a step, and leaves two probes of its communication groups:
// whether it waits for peers (then it is a victim, not the one that hangs) and how to abort
// the groups formed before an epoch (a node's halt, when the supervisor says a shard was
// lost, so nobody waits out a group timeout for it). Keyed by actor id: a replacement never
// inherits the stamp of the shard it replaced (whose abandoned thread may still be stuck).
// Thread-safe; the probes run outside its lock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace troupe::actors {

class watchdog {
 public:
  using clock = std::chrono::steady_clock;

  struct probes {
    std::function<bool()> waiting;                                 // waits in a collective
    std::function<void(uint64_t epoch, const std::string&)> abort; // groups formed before epoch
  };

  /// Shard `id` starts (its groups' probes) / ends.
  void enlist(uint64_t id, probes p) {
    std::lock_guard<std::mutex> lk(mu_);
    members_[id].p = std::move(p);
  }
  void leave(uint64_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    members_.erase(id);
  }
  /// Shard `id` enters (true) or leaves (false) a step.
  void busy(uint64_t id, bool on) {
    std::lock_guard<std::mutex> lk(mu_);
    if (on)
      members_[id].since = clock::now();
    else if (auto it = members_.find(id); it != members_.end())
      it->second.since = {};
  }
  /// Whether shard `id` waits for peers in one of its groups.
  bool waiting(uint64_t id) const {
    std::function<bool()> f;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = members_.find(id);
      if (it != members_.end()) f = it->second.p.waiting;
    }
    return f && f();
  }
  /// Seconds shard `id` has been stuck in one step when that is past `timeout_s` and it does not
  /// wait for peers (then it is the one that hangs); 0 otherwise. A shard whose groups were
  /// aborted during the step (abort_all) was a victim waiting for a lost peer: it gets a full
  /// `timeout_s` from the abort to notice and leave the step, not from the step's start.
  double stuck(uint64_t id, double timeout_s) const {
    double since_start = 0, since_free = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = members_.find(id);
      if (it == members_.end() || it->second.since == clock::time_point{}) return 0;
      const auto now = clock::now();
      since_start = std::chrono::duration<double>(now - it->second.since).count();
      since_free =
          std::chrono::duration<double>(now - std::max(it->second.since, it->second.freed)).count();
    }
    return since_free > timeout_s && !waiting(id) ? since_start : 0;
  }
  /// Aborts every enlisted shard's groups formed before `epoch` (their waiters fail at once).
  void abort_all(uint64_t epoch, const std::string& why) {
    std::vector<std::function<void(uint64_t, const std::string&)>> fs;
    {
      std::lock_guard<std::mutex> lk(mu_);
      const auto now = clock::now();
      for (auto& [id, m] : members_) {
        if (m.p.abort) fs.push_back(m.p.abort);
        if (m.since != clock::time_point{}) m.freed = now; // see stuck()
      }
    }
    for (auto& f : fs) f(epoch, why);
  }

 private:
  struct member {
    clock::time_point since;
    clock::time_point freed; // its groups last aborted (abort_all)
    probes p;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, member> members_;
};

} // namespace troupe::actors
