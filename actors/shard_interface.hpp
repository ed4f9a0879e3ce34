// shard_interface.hpp: what a hop of the pipeline accepts, as a typed signature list. Every hop
// (a stage's shards, a developer actor between stages) takes steps and the supervisor's route
// updates; a shard also forms its UCX groups when the supervisor says so (worker processes).
// Senders hold these handles, so a message a hop does not take fails to compile. The shard is
// a blocking actor (CAF 0.17 has no typed blocking actors): its handlers are checked against
// shard_actor when its behavior is built (shard.cpp), and its handle is cast once, at spawn.
#pragma once

#include "actors/messages.hpp"

namespace troupe::actors {

/// Any hop: (step_atom, step_msg) runs or forwards a step; (route_atom, route_update) takes
/// the supervisor's routes.
using hop_actor =
    caf::typed_actor<caf::reacts_to<step_atom, step_msg>, caf::reacts_to<route_atom, route_update>>;

/// A stage's shard: a hop that also forms a group (epoch, group id, its member rank, every
/// member's UCX worker address) and answers the supervisor (grouped_atom ...).
using shard_actor = hop_actor::extend<
    caf::reacts_to<group_atom, uint64_t, uint8_t, int32_t, std::vector<std::vector<uint8_t>>>>;

} // namespace troupe::actors
