// routing.hpp: where step messages go. A pipeline is a list of hops: each hop is the set of
// actors that receive a step message (the TP shards of a stage, or one developer actor
// inserted between stages). The supervisor owns the routes: it replaces a restarted shard's
// handle and bumps the epoch on every failure, and tells the engine, every shard and every
// developer hop by message (route_update); each keeps its own copy (a routing_table that no
// other actor touches), so the same code runs whether they share a process or not. Steps of
// an older epoch than a copy has heard of are dropped wherever they are.
#pragma once

#include <caf/actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::actors {

struct hop_info {
  std::vector<caf::actor> actors;
  int stage = -1; // -1: a developer actor
  std::string name;
};

/// The routes as the supervisor sends them (serialisable: messages.hpp gives it `inspect`).
struct route_update {
  uint64_t epoch = 0;
  std::vector<std::vector<caf::actor>> hops;
  std::vector<int32_t> stages;
  std::vector<std::string> names;
  caf::actor engine;
};

/// One actor's copy of the routes. Not thread-safe: it belongs to one actor.
class routing_table {
 public:
  uint64_t epoch() const { return epoch_; }
  uint64_t bump_epoch() { return ++epoch_; }
  /// Raises the epoch to `e` if it is behind (a copy hearing of a newer epoch from a step
  /// before the supervisor's update arrives).
  void raise_epoch(uint64_t e) { epoch_ = e > epoch_ ? e : epoch_; }

  void set_hops(std::vector<hop_info> hops) { hops_ = std::move(hops); }
  size_t hops() const { return hops_.size(); }
  const std::vector<caf::actor>& hop(size_t h) const {
    static const std::vector<caf::actor> none;
    return h < hops_.size() ? hops_[h].actors : none;
  }
  const hop_info& info(size_t h) const { return hops_.at(h); }
  void replace(size_t h, size_t rank, caf::actor a) { hops_.at(h).actors.at(rank) = std::move(a); }
  /// The hop of pipeline stage `stage`.
  size_t hop_of_stage(int stage) const {
    for (size_t h = 0; h < hops_.size(); ++h)
      if (hops_[h].stage == stage) return h;
    return hops_.size();
  }

  const caf::actor& engine_actor() const { return engine_; }
  void set_engine(caf::actor e) { engine_ = std::move(e); }

  /// What the supervisor sends.
  route_update to_update() const {
    route_update u;
    u.epoch = epoch_;
    for (const auto& h : hops_) {
      u.hops.push_back(h.actors);
      u.stages.push_back(h.stage);
      u.names.push_back(h.name);
    }
    u.engine = engine_;
    return u;
  }
  /// Takes the supervisor's routes; the epoch only moves forward. A malformed update (the
  /// lists of unequal length, from a peer) is ignored and returns false.
  bool apply(const route_update& u) {
    if (u.stages.size() != u.hops.size() || u.names.size() != u.hops.size()) return false;
    std::vector<hop_info> hops;
    for (size_t h = 0; h < u.hops.size(); ++h) hops.push_back({u.hops[h], u.stages[h], u.names[h]});
    hops_ = std::move(hops);
    engine_ = u.engine;
    raise_epoch(u.epoch);
    return true;
  }

 private:
  std::vector<hop_info> hops_;
  caf::actor engine_;
  uint64_t epoch_ = 1;
};

} // namespace troupe::actors
