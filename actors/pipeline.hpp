// pipeline.hpp: the CAF side of a host, for code that composes pipelines from actors: the
// actor system, the engine and supervisor handles, the routing table, and hop_context, which
// a developer actor inserted between stages uses to pass step messages on. Example (a hop
// that counts activations and forwards them) in examples/custom_actor.cpp.
#pragma once

#include <caf/all.hpp>

#include "actors/host.hpp"
#include "actors/messages.hpp"
#include "actors/routing.hpp"

namespace troupe::actors {

/// Where a developer actor sits: it receives (step_atom, step_msg) and must call forward().
struct hop_context {
  std::shared_ptr<routing_table> routes;
  size_t hop = 0;
  std::string name;

  /// Sends `m` (possibly with edited activations) to every actor of the next hop.
  template <class Self>
  void forward(Self* self, const step_msg& m) const {
    for (const auto& a : routes->hop(hop + 1)) self->send(a, step_atom::value, m);
  }
};

struct host_internals {
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor engine;
  caf::actor supervisor;
  caf::actor pool; // the worker registry (worker processes only)
  uint16_t worker_port = 0;
  std::vector<caf::actor> custom;
  std::shared_ptr<routing_table> routes;
  std::shared_ptr<const model_source> model;
  host_options opt;
  int64_t kv_blocks = 0;
};

} // namespace troupe::actors
