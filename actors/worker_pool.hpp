// worker_pool.hpp: the coordinator's side of worker processes. The pool actor is published on
// CAF's network layer at host:port; a `troupe worker` that connects asks it for a challenge
// and answers with HMAC-SHA256(secret, "worker" challenge rank version): a peer without the
// secret, speaking another protocol version, claiming a rank out of range or one already
// taken is refused with the reason and logged, and the run goes on. Joined workers are told to
// the supervisor (worker_atom, rank, node actor, up), which orders shards onto them
// (spawn_atom, rank, shard_order: delegated to that worker) and sends its route updates to
// the shards themselves. When the pool launched the workers itself (`serve --workers N`), a
// worker process that dies (SIGKILL, a crash) or whose connection drops is reaped and started
// again with the same rank, and the new process joins as its predecessor did; otherwise the
// run waits for a replacement to join (as under Kubernetes, where the StatefulSet restarts it).
// A heartbeat every second finds a worker that stops answering while its connection stays up
// (a frozen process, a partition TCP has not noticed yet): after heartbeat_timeout_s it counts
// as lost like a dead one (a launched process is killed and started again).
// Tests: tests/integration/workers_test.py
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/worker_interface.hpp"
#include "core/expected.hpp"

namespace troupe::actors {

struct worker_pool_options {
  int workers = 0;
  std::string host = "127.0.0.1"; // where the pool listens
  uint16_t port = 0;              // 0: a free port (published() says which)
  std::string secret;             // at least 8 bytes
  std::string exe;                // launch `exe worker` processes; empty: wait for them to join
  std::vector<std::string> worker_args; // extra arguments for launched workers
  double heartbeat_timeout_s = 10;      // a worker silent this long is lost (and replaced)
};

/// Spawns the pool without publishing it (tests); it launches nothing before it hears its port.
pool_actor spawn_worker_pool(caf::actor_system& sys, const worker_pool_options& opt);

/// Spawns and publishes the pool (and launches the workers when opt.exe is set). `pool` gets
/// the actor; returns the port.
expected<uint16_t> start_worker_pool(caf::actor_system& sys, const worker_pool_options& opt,
                                     pool_actor& pool);

/// A random secret for a run whose workers the coordinator launches itself (hex, 32 bytes).
std::string random_secret();

/// The bytes a worker signs to join (worker_node.cpp and worker_pool.cpp agree on them).
std::vector<uint8_t> worker_proof_bytes(const std::vector<uint8_t>& challenge, int32_t rank,
                                        uint32_t version);

} // namespace troupe::actors
