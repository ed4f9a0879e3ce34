// supervisor.hpp: the supervisor actor spawns and monitors every shard of a pipeline. When a
// shard dies (a crash, an injected fault) or hangs (a step outlives the timeout), it bumps
// the routing epoch, aborts the stage's collective so its siblings stop waiting, tells the
// engine to pause and rebuild its KV, and respawns the shard after a bounded exponential
// backoff on the same device: the new shard maps its weight slice again and rejoins the
// group; then the engine resumes. A replacement that completes a step reports progress once,
// which resets its backoff and failure count: a shard that fails often but works in between
// (an injected fault rate, a flaky device) is restarted for ever. One that fails max_restarts
// times in a row without completing a step is given up on and reported: the engine answers
// requests with an error and /health says why; then either it is retried every
// retry_interval_s (half-open: if it comes up, serving resumes) or on_give_up is called (the
// CLI exits non-zero). Keep a strong handle to the supervisor (DEPENDENCIES.md). With worker
// processes the shards are ordered onto them through the worker pool (worker_pool.hpp); a
// worker process that dies takes its shards with it (CAF reports them down), and they are
// started again on its successor once it has joined.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "actors/engine_interface.hpp"
#include "actors/shard.hpp"
#include "actors/supervisor_interface.hpp"
#include "actors/worker_interface.hpp"

namespace troupe::actors {

struct supervisor_setup {
  std::vector<shard_setup> shards; // one per shard, with stage / hop / rank filled in
  routing_table routes;            // the initial routes: the supervisor owns them from then on
  std::shared_ptr<watchdog> watch; // the shards of its own process (the hang watch)
  node_actor local_node;           // its own process's node (halts free in-process groups)
  engine_actor engine;
  double hang_timeout_s = 30;
  int max_restarts = 5;         // consecutive failures without progress before giving up
  double restart_window_s = 60; // failures older than this are forgotten
  bool retry_after_give_up = true;
  double retry_interval_s = 10;
  std::function<void()> on_give_up; // exit policy: told once
  // worker processes: when `pool` is set, every shard lives in the worker process of rank
  // worker_of[i] and is started there from the model at model_path; a stage with TP > 1 sums
  // over a UCX group that the supervisor forms once its shards are up (and again after any
  // replacement) from the worker addresses they report
  pool_actor pool;
  std::vector<int> worker_of; // per shard
  std::string model_path;
  double group_timeout_s = 60;
};

supervisor_actor spawn_supervisor(caf::actor_system& sys, supervisor_setup setup);

} // namespace troupe::actors
