// supervisor.hpp: the supervisor actor spawns and monitors every shard of a pipeline. When a
// shard dies (a crash, an injected fault) or hangs (a step outlives the timeout), it bumps
// the routing epoch, aborts the stage's collective so its siblings stop waiting, tells the
// engine to pause and rebuild its KV, and respawns the shard after a bounded exponential
// backoff on the same device: the new shard maps its weight slice again and rejoins the
// group; then the engine resumes. A shard that keeps failing (max_restarts within the
// window) is given up on and reported: the engine then answers every request with an error
// and /health says why. Keep a strong handle to the supervisor (DEPENDENCIES.md).
#pragma once

#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/shard.hpp"

namespace troupe::actors {

struct supervisor_setup {
  std::vector<shard_setup> shards; // one per shard, with stage / hop / rank filled in
  std::shared_ptr<routing_table> routes;
  std::vector<std::shared_ptr<transport::inproc_group>> groups; // per stage
  caf::actor engine;
  double hang_timeout_s = 30;
  int max_restarts = 5;
  double restart_window_s = 60;
};

caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_setup setup);

} // namespace troupe::actors
