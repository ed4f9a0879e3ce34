// local_node.hpp: the coordinator's own process as a node, like a worker's: the supervisor
// tells it by message (halt_atom, epoch, why) that a shard was lost, and it aborts the groups
// of the shards in this process formed before that epoch (through the process's watchdog), so
// siblings blocked in a collective on a shard that is gone fail at once. It places no shards
// (the supervisor spawns those of its own process) and answers the heartbeat. Halts come
// only from this process.
#pragma once

#include <memory>

#include "actors/watchdog.hpp"
#include "actors/worker_interface.hpp"

namespace troupe::actors {

node_actor spawn_local_node(caf::actor_system& sys, std::shared_ptr<watchdog> watch);

} // namespace troupe::actors
