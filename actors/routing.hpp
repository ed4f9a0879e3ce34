// routing.hpp: where step messages go, shared by the engine, the supervisor and every shard
// of one process. A pipeline is a list of hops: each hop is the set of actors that receive a
// step message (the TP shards of a stage, or one developer actor inserted between stages).
// The supervisor replaces a restarted shard's handle here and bumps the epoch on every
// failure; steps of an older epoch are dropped wherever they are. Shards also stamp when
// they start and finish a step so the supervisor can tell a hung shard. Thread-safe. A
// worker process keeps its own copy, which the supervisor's route updates keep current.
#pragma once

#include <caf/actor.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace troupe::actors {

struct hop_info {
  std::vector<caf::actor> actors;
  int stage = -1; // -1: a developer actor
  std::string name;
};

class routing_table {
 public:
  using clock = std::chrono::steady_clock;

  uint64_t epoch() const { return epoch_.load(); }
  uint64_t bump_epoch() { return ++epoch_; }
  /// Raises the epoch to `e` if it is behind (a worker process's copy following the
  /// supervisor's, or a step that carries a newer epoch than the copy has heard of).
  void raise_epoch(uint64_t e) {
    uint64_t cur = epoch_.load();
    while (cur < e && !epoch_.compare_exchange_weak(cur, e)) {
    }
  }

  void set_hops(std::vector<hop_info> hops) {
    std::lock_guard<std::mutex> lk(mu_);
    hops_ = std::move(hops);
    busy_since_.assign(hops_.size(), {});
    for (size_t h = 0; h < hops_.size(); ++h)
      busy_since_[h].assign(hops_[h].actors.size(), clock::time_point{});
  }
  size_t hops() const {
    std::lock_guard<std::mutex> lk(mu_);
    return hops_.size();
  }
  std::vector<caf::actor> hop(size_t h) const {
    std::lock_guard<std::mutex> lk(mu_);
    return h < hops_.size() ? hops_[h].actors : std::vector<caf::actor>{};
  }
  hop_info info(size_t h) const {
    std::lock_guard<std::mutex> lk(mu_);
    return hops_.at(h);
  }
  void replace(size_t h, size_t rank, caf::actor a) {
    std::lock_guard<std::mutex> lk(mu_);
    hops_.at(h).actors.at(rank) = std::move(a);
    busy_since_[h][rank] = {};
  }
  /// The hop of pipeline stage `stage`.
  size_t hop_of_stage(int stage) const {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t h = 0; h < hops_.size(); ++h)
      if (hops_[h].stage == stage) return h;
    return hops_.size();
  }
  void mark_busy(size_t h, size_t rank, bool busy) {
    std::lock_guard<std::mutex> lk(mu_);
    if (h >= busy_since_.size() || rank >= busy_since_[h].size()) return; // routes not heard yet
    busy_since_[h][rank] = busy ? clock::now() : clock::time_point{};
  }
  /// Seconds (hop, rank) has been inside one step; 0 when idle.
  double busy_seconds(size_t h, size_t rank) const {
    std::lock_guard<std::mutex> lk(mu_);
    if (h >= busy_since_.size() || rank >= busy_since_[h].size()) return 0;
    const auto t = busy_since_[h][rank];
    if (t == clock::time_point{}) return 0;
    return std::chrono::duration<double>(clock::now() - t).count();
  }

  caf::actor engine_actor() const {
    std::lock_guard<std::mutex> lk(mu_);
    return engine_;
  }
  void set_engine(caf::actor e) {
    std::lock_guard<std::mutex> lk(mu_);
    engine_ = std::move(e);
  }

 private:
  mutable std::mutex mu_;
  std::vector<hop_info> hops_;
  std::vector<std::vector<clock::time_point>> busy_since_;
  caf::actor engine_;
  std::atomic<uint64_t> epoch_{1};
};

} // namespace troupe::actors
