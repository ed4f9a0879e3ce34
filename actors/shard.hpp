// shard.hpp: the shard actor: a detached CAF actor (its own thread) that owns one device's
// share of the model: its weight slice, its part of the KV cache and its compute threads
// (exec::executor). It runs each step message it receives; the shards of a stage sum
// partial results through their collective group (transport/); rank 0 forwards the stage's
// activations to the next hop, and on the last stage samples the next tokens and answers
// the engine. Steps of an older epoch are dropped. It keeps its own copy of the routes, kept
// current by the supervisor's (route_atom, route_update) messages. Injected faults (fault_plan)
// kill it or throw inside its forward pass. Spawned and monitored by the supervisor, in its own
// process or, through a worker process's node actor, in another.
#pragma once

#include <memory>

#include "actors/shard_interface.hpp"

#include "actors/routing.hpp"
#include "actors/watchdog.hpp"
#include "engine/fault_plan.hpp"
#include "exec/executor.hpp"
#include "transport/inproc_group.hpp"
#include "transport/nccl_group.hpp"

namespace troupe::actors {

struct shard_setup {
  std::shared_ptr<const model_source> model;
  shard_spec spec;
  exec::exec_options opt;
  int stage = 0;
  size_t hop = 0;
  bool last = true;
  routing_table routes;            // the routes when it starts; the supervisor's updates follow
  std::shared_ptr<watchdog> watch; // its process's hang watchdog (stamped around each step)
  std::shared_ptr<transport::inproc_group> group; // in-process TP group (null: none or UCX)
  std::shared_ptr<transport::nccl_group> nccl;    // instead, over NCCL: a stage on its own GPUs
  bool ucx = false;            // in a worker process: TP group and stage boundaries over UCX
  bool nccl_across = false;    // ... and its stage's ranks each own a GPU: sums over NCCL,
                               // the NCCL id carried by the UCX group
  double group_timeout_s = 60; // a UCX collective waiting longer fails
  int worker_rank = -1;        // the worker process it lives in (-1: the coordinator's)
  std::shared_ptr<const fault_plan> faults;
};

/// Spawns a detached shard actor; it tells `notify` (ready_atom, stage, rank, resident bytes)
/// once its weights are loaded, or quits with the load error. A shard in a worker process first
/// tells (group_atom, stage, rank, its UCX worker address) and forms each of its groups when
/// `notify` sends (group_atom, epoch, group id, its member rank, every member's address),
/// answering (grouped_atom, stage, rank, ok, why, epoch); in one process the same message to
/// a stage's rank 0 resets the stage's in-process group for the epoch. It enlists with
/// setup.watch (its process's watchdog) for the hang watch and its node's halts.
shard_actor spawn_shard(caf::actor_system& sys, shard_setup setup, const caf::actor& notify);

/// UCX group ids (worker processes): stage S's TP group, and the boundary from stage S's rank 0
/// to stage S + 1's ranks (member 0 the sender, member 1 + r stage S + 1's rank r).
uint8_t tp_group_id(int stage);
uint8_t boundary_group_id(int stage);

/// Actor name used by fault rules and logs: "stage<S>.rank<R>".
std::string shard_name(int stage, int rank);

} // namespace troupe::actors
