// worker_node.hpp: `troupe worker`, a process that holds shards for a coordinator (`troupe
// serve` or a host with workers). It reaches the coordinator's worker registry over CAF's
// network layer (MASTER_ADDR:MASTER_PORT), proves it holds the run's secret (an HMAC of the
// registry's challenge, never the secret itself) and speaks the worker protocol version; then
// its node actor starts the shards it is ordered to (each opens the model from the same path
// and maps only the tensors of its own slice), watches them for hangs (a shard stuck in one step
// is reported to the supervisor), frees their UCX groups when the supervisor says a shard was
// lost, and ends the process when the coordinator goes away.
// Shards of a stage whose TP ranks live in different processes sum over a UCX group.
// Tests: tests/integration/workers_test.py
#pragma once

#include <cstdint>
#include <string>

#include "arch/model_config.hpp"
#include "core/expected.hpp"

namespace troupe::actors {

struct shard_order;

inline constexpr uint32_t worker_protocol_version = 6; // 2: routes go to the shards;
                                                       // 3: nodes report expert counts;
                                                       // 4: orders say when a stage sums
                                                       //    over NCCL;
                                                       // 5: orders say what to quantize to
                                                       // 6: steps carry a grammar's tokens

struct worker_options {
  int rank = 0;
  std::string coordinator = "127.0.0.1"; // MASTER_ADDR
  uint16_t port = 29500;                 // MASTER_PORT
  std::string secret;
  double join_timeout_s = 60;
  int caf_threads = 2;
};

/// An order from the network is checked before anything is spawned from it: every field in
/// range (element types, backend, ranks, layers, sizes) and the slice valid for the model.
status check_order(const shard_order& o, const model_config& c);

/// Runs the worker until the coordinator goes away (0), or fails to join (2: refused, 1: else).
int run_worker(const worker_options& o);

} // namespace troupe::actors
