// engine.hpp: the engine actor: continuous batching in front of a pipeline. It owns the
// scheduler and the KV block pool (engine/), turns requests into sequences, keeps up to
// `max_inflight` steps (pipeline micro-batches) in flight, and streams each completion's new
// tokens to its sink as events (no text work here: the sinks detokenize and match stop
// strings, and say finish when one matched). When the supervisor reports a shard down it pauses,
// fails the steps in flight, and drops all KV so every running sequence is recomputed from prompt +
// generated tokens; streams pause and resume with no token repeated or lost. A step in flight
// longer than the step timeout is treated as lost (resync through the supervisor). Messages:
// (generate_atom, gen_request, sink) -> request id or an error with troupe's code; (cancel_atom,
// id); (finish_atom, id, index): a stop string ended that completion; (stats_atom) -> engine_stats;
// internal: done/failed from shards, down/up and route updates (its own copy of the routes)
// from the supervisor.
#pragma once

#include <memory>

#include "actors/engine_interface.hpp"

#include "arch/model_source.hpp"
#include "engine/fault_plan.hpp"
#include "engine/scheduler.hpp"

namespace troupe::actors {

struct engine_setup {
  std::shared_ptr<const model_source> model;
  std::shared_ptr<const fault_plan> faults;
  int32_t kv_blocks = 0;
  int32_t block_size = 16;
  scheduler_config sched;
  int max_inflight = 1;
  double step_timeout_s = 60;
  int64_t max_waiting = 1 << 20; // requests queued beyond this are refused (429 at the gateway)
  std::string restart_policy;    // reported in stats (/health)
};

/// A blocking actor on its own thread; its handle is typed (engine_interface.hpp).
engine_actor spawn_engine(caf::actor_system& sys, engine_setup setup);

} // namespace troupe::actors
