// worker_interface.hpp: the worker protocol as typed signature lists. The pool (published by
// the coordinator) gives a challenge (hello), admits a worker that answers it (join: rank,
// protocol version, proof, its node actor), and places shards on a joined worker for the
// supervisor (spawn) and gathers every worker's expert counts for /metrics (experts); a
// worker's node starts a shard from an order, answers the heartbeat (ping), frees its
// process's UCX groups (halt) and reports its process's expert counts as (layer, expert,
// tokens) triples (experts). Whatever arrives from the network is
// checked by the handlers (worker_pool.cpp, worker_node.cpp), typed or not.
#pragma once

#include "actors/messages.hpp"

namespace troupe::actors {

using pool_actor = caf::typed_actor<
    caf::reacts_to<attach_atom, caf::actor>, // the supervisor, from this process
    caf::replies_to<hello_atom>::with<std::vector<uint8_t>>,
    caf::replies_to<join_atom, int32_t, uint32_t, std::vector<uint8_t>, caf::actor>::with<bool>,
    caf::replies_to<spawn_atom, int32_t, shard_order>::with<caf::actor>, // -> the shard
    caf::replies_to<experts_atom>::with<std::vector<int64_t>>,           // every worker's
    caf::reacts_to<stop_atom>>;

using node_actor =
    caf::typed_actor<caf::replies_to<spawn_atom, shard_order>::with<caf::actor>, // -> the shard
                     caf::replies_to<ping_atom>::with<bool>,
                     caf::reacts_to<halt_atom, uint64_t, std::string>, // epoch, why
                     caf::replies_to<experts_atom>::with<std::vector<int64_t>>>;

} // namespace troupe::actors
