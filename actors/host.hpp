// host.hpp: a running Troupe pipeline in this process, behind a CAF-free facade: the actor
// system, the engine, the supervisor and its shards, built from a model and a placement
// (`--tp N --pp M` or an explicit per-stage spec). The CLI, tests and benchmarks use
// generate(); the HTTP gateway and developer code reach the actors through host_internals
// (pipeline.hpp). With host_options::workers the shards run in worker processes instead
// (worker_pool.hpp), launched by the host or joining it. Destroying the host stops every
// actor (and the worker processes it launched).
// Tests: tests/actors/pipeline_test.cpp
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/api.hpp"
#include "arch/model_source.hpp"
#include "arch/shard_plan.hpp"
#include "engine/fault_plan.hpp"
#include "engine/scheduler.hpp"
#include "kernels/op.hpp"

namespace troupe::actors {

struct hop_context;
struct host_internals;

/// A developer actor inserted after pipeline stage `after_stage`; `make` spawns it with
/// its place in the route (see pipeline.hpp).
struct custom_hop {
  int after_stage = 0;
  std::string name;
  std::function<caf::actor(caf::actor_system&, const hop_context&)> make;
};

/// What the supervisor does when a shard keeps failing without running a step in between.
enum class give_up_policy : uint8_t {
  retry, // keep restarting it every retry_interval_s (half-open); requests fail meanwhile
  exit,  // call on_fatal (the CLI exits with status 3 so an orchestrator restarts it)
};

struct host_options {
  placement place; // stages; empty: one stage, TP 1
  int threads_per_shard = 1;
  kernels::backend where = kernels::backend::cpu;
  int block_size = 16;
  int64_t kv_blocks = 0;           // 0: from kv_memory
  int64_t kv_memory = 256ll << 20; // bytes of KV per shard
  dtype kv_dtype = dtype::f32;
  dtype quantize = dtype::f32; // f32: weights as published; q8_0 / q4_0 (exec_options)
  scheduler_config sched;      // eos ids and context are filled from the model
  int max_inflight = 0;        // 0: one per stage
  fault_plan faults;
  double step_timeout_s = 60;
  double hang_timeout_s = 60;
  int max_restarts = 5; // consecutive failures of a shard with no step completed in between
  double restart_window_s = 60;
  give_up_policy on_give_up = give_up_policy::retry;
  double retry_interval_s = 10;
  std::function<void()> on_fatal; // called (on an actor thread) when giving up with exit
  int caf_threads = 2;
  int64_t max_waiting = 1 << 20;
  std::vector<custom_hop> custom;
  // worker processes: with workers > 0 every shard runs in a `troupe worker` process (the
  // engine, supervisor and gateway stay here); shard_worker gives each shard's worker rank in
  // spawn order (stage by stage, rank by rank; empty: shard i on worker i % workers)
  int workers = 0;
  std::vector<int> shard_worker;
  std::string worker_exe;                // launch the workers (`exe worker`); empty: they join
  std::string worker_host = "127.0.0.1"; // where the worker registry listens
  uint16_t worker_port = 0;              // 0: any free port
  std::string secret;                    // empty: a random one (launched workers only)
  double group_timeout_s = 10;           // a UCX collective waiting longer fails
};

struct completion {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;
  std::string text;
  finish_reason finish = finish_reason::none;
  error err; // finish == error: why
};

class host {
 public:
  static expected<std::unique_ptr<host>> start(std::shared_ptr<const model_source> m,
                                               host_options o);
  ~host();

  /// Waits until every shard has loaded (false on timeout or when loading failed).
  bool wait_ready(double timeout_s);
  /// Runs one request to completion: detokenizes and applies its stop strings on this side
  /// (output_processor), as the gateway does. on_event (optional) sees every event as it
  /// arrives, with its text filled in.
  expected<std::vector<completion>>
  generate(const gen_request& r, const std::function<void(const gen_event&)>& on_event = {},
           double timeout_s = 600);
  /// Submits every request at once and waits for all of them (completions in request order).
  expected<std::vector<std::vector<completion>>>
  generate_many(const std::vector<gen_request>& rs, double timeout_s = 600,
                const std::function<void(const gen_event&)>& on_event = {});
  engine_stats stats();
  /// Resident weight bytes per shard, in spawn order (stage by stage, rank by rank).
  std::vector<int64_t> resident_bytes();
  const model_source& model() const;
  const host_options& options() const;
  int64_t kv_blocks() const;
  /// Where the worker registry listens (0 without worker processes).
  uint16_t worker_port() const;
  host_internals& internals();

 private:
  host();
  std::unique_ptr<host_internals> impl_;
};

/// Blocks per shard that fit `kv_memory` on the shard with the most KV per block, at least
/// enough for one full context.
int64_t kv_blocks_for(const model_config& c, const placement& p, int block_size, dtype kv,
                      int64_t kv_memory);
/// Recurrent state slots per shard for a model with linear attention layers (0 without): as
/// many sequences as a step may hold, within half of `kv_memory` on the shard whose states
/// are largest (the KV blocks get the rest; all of it where no layer keeps a KV cache), at least
/// one.
int64_t state_slots_for(const model_config& c, const placement& p, int32_t max_seqs,
                        int64_t kv_memory);
/// Bytes of one sequence's recurrent states on the shard that holds most (0: none).
int64_t state_bytes_per_seq(const model_config& c, const placement& p);

} // namespace troupe::actors
