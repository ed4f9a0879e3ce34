// watchdog.hpp: the one thing the actors of a process share: when each shard entered the step
// it is running. A thread stuck in a kernel can send nothing, so the actor that watches for
// hangs in that process (the supervisor for the shards of its own process, a worker's node for
// the shards of its process) reads these stamps; it learns nothing else from them and never
// writes them. Keyed by actor id: a replacement never inherits the stamp of the shard it
// replaced (whose abandoned thread may still be stuck). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

namespace troupe::actors {

class watchdog {
 public:
  using clock = std::chrono::steady_clock;

  /// The shard with actor id `id` enters (true) or leaves (false) a step.
  void busy(uint64_t id, bool on) {
    std::lock_guard<std::mutex> lk(mu_);
    if (on)
      since_[id] = clock::now();
    else
      since_.erase(id);
  }
  /// Seconds actor `id` has been inside one step; 0 when idle.
  double busy_seconds(uint64_t id) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = since_.find(id);
    return it == since_.end() ? 0
                              : std::chrono::duration<double>(clock::now() - it->second).count();
  }

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, clock::time_point> since_;
};

} // namespace troupe::actors
