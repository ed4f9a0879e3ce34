// supervisor_interface.hpp: the supervisor's messages as a typed signature list. Shards say
// they are loaded (ready), where their UCX worker is (group), that a group formed (grouped) and
// that a new instance ran a step (progress); the worker pool says a worker joined or left;
// a worker's node reports a hung shard; the engine asks for a resync (answered with the new
// epoch); the host asks for the shards' resident bytes and stops it. A shard also says where it
// runs and its device's memory (device); the gateway asks for every shard's report (shards).
#pragma once

#include "actors/messages.hpp"

namespace troupe::actors {

using supervisor_actor = caf::typed_actor<
    caf::reacts_to<ready_atom, int32_t, int32_t, int64_t, int64_t>,     // stage, rank, weights, KV
    caf::reacts_to<group_atom, int32_t, int32_t, std::vector<uint8_t>>, // its UCX address
    caf::reacts_to<grouped_atom, int32_t, int32_t, bool, std::string, uint64_t>, // ok, why, epoch
    caf::reacts_to<progress_atom, int32_t, int32_t>,
    caf::reacts_to<device_atom, int32_t, int32_t, std::string, int64_t, int64_t>, // total, free
    caf::replies_to<shards_atom>::with<std::vector<shard_report>>,
    caf::reacts_to<worker_atom, int32_t, caf::actor, bool>, // rank, its node, up
    caf::reacts_to<hung_atom, caf::actor, double>,          // a shard, seconds in its step
    caf::replies_to<resync_atom>::with<uint64_t>,
    caf::replies_to<stats_atom>::with<std::vector<int64_t>>, caf::reacts_to<stop_atom>>;

} // namespace troupe::actors
