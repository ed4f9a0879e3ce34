// pipeline.hpp: the CAF side of a host, for code that composes pipelines from actors: the
// actor system, the engine and supervisor handles, and hop_context, which a developer actor
// inserted between stages uses to pass step messages on and to follow the routes. Example (a hop
// that counts activations and forwards them) in examples/custom_actor.cpp.
#pragma once

#include <caf/all.hpp>

#include "actors/engine_interface.hpp"
#include "actors/host.hpp"
#include "actors/shard_interface.hpp"
#include "actors/supervisor_interface.hpp"
#include "actors/worker_interface.hpp"

namespace troupe::actors {

/// Where a developer actor sits: it receives (step_atom, step_msg) and must call forward(),
/// and it takes the supervisor's route updates with route_handler() in its behavior (a
/// restarted shard of the next stage has a new handle).
struct hop_context {
  std::shared_ptr<routing_table> routes; // the actor's own copy (shared by copies of ctx)
  size_t hop = 0;
  std::string name;

  /// Sends `m` (possibly with edited activations) to every actor of the next hop.
  template <class Self>
  void forward(Self* self, const step_msg& m) const {
    for (const auto& a : routes->hop(hop + 1))
      self->send(caf::actor_cast<hop_actor>(a), step_atom::value, m);
  }
  /// The handler of (route_atom, route_update) to put in the actor's behavior.
  auto route_handler() const {
    return [r = routes](route_atom, const route_update& u) { r->apply(u); };
  }
};

struct host_internals {
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  engine_actor engine;
  supervisor_actor supervisor;
  pool_actor pool;       // the worker registry (worker processes only)
  node_actor local_node; // this process as a node (halts its shards' groups)
  uint16_t worker_port = 0;
  std::vector<caf::actor> custom;
  std::shared_ptr<const model_source> model;
  host_options opt;
  int64_t kv_blocks = 0;
  int64_t state_slots = 0; // recurrent state rows per shard (linear attention layers)
};

} // namespace troupe::actors
