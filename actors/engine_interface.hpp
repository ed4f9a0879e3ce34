// engine_interface.hpp: the engine's messages as a typed signature list, and the sink
// interface the engine streams to. What clients send (the gateway, host::generate): generate,
// cancel, finish, stats; what the pipeline sends: a step done or failed (shards), a shard down
// or all up again and the routes (the supervisor), and who the supervisor is (the host).
// Errors come back as caf::error carrying troupe's code (messages.hpp: to_caf / from_caf).
#pragma once

#include "actors/messages.hpp"

namespace troupe::actors {

/// Receives a request's events: (event_atom, gen_event) until one with `finish` set.
using sink_actor = caf::typed_actor<caf::reacts_to<event_atom, gen_event>>;

using engine_actor = caf::typed_actor<
    // clients
    caf::replies_to<generate_atom, gen_request, caf::actor>::with<int64_t>, // sink: sink_actor
    caf::reacts_to<cancel_atom, int64_t>,                                   // a request id
    caf::reacts_to<finish_atom, int64_t, int32_t>, // a stop string ended (request, index)
    caf::replies_to<stats_atom>::with<engine_stats>,
    // the pipeline
    caf::reacts_to<done_atom, step_done>, caf::reacts_to<failed_atom, step_failed>,
    caf::reacts_to<down_atom, int32_t, int32_t, std::string, int32_t>, // stage, rank, why, how
    caf::reacts_to<up_atom, uint64_t, int64_t>,                        // epoch, restarts so far
    caf::reacts_to<route_atom, route_update>,
    caf::reacts_to<attach_atom, caf::actor>>; // the supervisor (answers resync_atom)

} // namespace troupe::actors
