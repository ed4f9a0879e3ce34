// memory_plan.hpp: what each device of a placement holds, and the placement a set of devices
// needs (`troupe plan`). Every shard's graph is cut as the executor cuts it (shard_graph.hpp),
// without loading a weight: its weights' bytes (each tensor once: a tied embedding and
// lm_head share theirs; with --quantize the matrices the executor would quantize at load, by
// the same rule), its KV cache's bytes per token (every layer's cache state), and the
// activation arena and composites' scratch of its largest step (graph/arena.hpp). The model
// may be a checkpoint (its tensors' real dtypes and shapes) or a config.json alone
// (arch/model_source.hpp open_model_config: the shapes it implies). The search tries TP x PP
// placements (TP within a machine, every stage's shards on one machine) from the fewest
// devices up and keeps the first count at which one fits, larger TP first (fewer pipeline
// hops per token), the layers split evenly or, where that does not fit, packed into stages
// (each takes layers while it holds the target: the first and last stages carry the
// embedding, the lm_head and the logits); when that choice has several stages it also finds the
// largest TP that fits (more devices, fewer stages: what a latency-bound deployment takes). Not
// counted: the CUDA context and the libraries' workspaces (the usable fraction of a device leaves
// room for them), the CPU's repacked copies of weights. Tests: tests/exec/memory_plan_test.cpp
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arch/model_source.hpp"
#include "arch/shard_plan.hpp"

namespace troupe::exec {

struct memory_options {
  dtype kv_dtype = dtype::f32;
  dtype quantize = dtype::f32; // q8_0 / q4_0: the matrices quantized at load (--quantize)
  int64_t step_rows = 512;     // the largest step's rows (the executor's max_rows)
};

/// One shard's memory.
struct shard_memory {
  int stage = 0, rank = 0, layer_begin = 0, layer_end = 0;
  int64_t weight_bytes = 0;        // each tensor once
  int64_t kv_bytes_per_token = 0;  // every cache state of its layers
  int64_t state_bytes_per_seq = 0; // the recurrent states of its linear attention layers, for
                                   // each sequence running
  int64_t arena_bytes = 0;         // activations and scratch of a step of step_rows rows
  int64_t fixed_bytes() const {    // (saturating: an absurd step is no wraparound)
    int64_t r = 0;
    return __builtin_add_overflow(weight_bytes, arena_bytes, &r) ? INT64_MAX : r;
  }
};

/// Every shard of `p`, stage by stage, rank by rank.
expected<std::vector<shard_memory>> measure_placement(const model_source& m, const placement& p,
                                                      const memory_options& o);

/// The model's parameters as its graph holds them: the elements of every weight a node reads,
/// each tensor once (a tied lm_head is the embedding's), constants (a norm's ones) not counted.
expected<int64_t> count_parameters(const model_source& m);

struct device_pool {
  int machines = 1, per_machine = 1; // devices
  int64_t bytes = 0;                 // memory of each device
  double usable = 0.9;               // the fraction a shard may fill
  int64_t budget() const { return static_cast<int64_t>(static_cast<double>(bytes) * usable); }
};

struct plan_target {
  int64_t context = 0; // tokens of one sequence (0: the model's maximum)
  int64_t seqs = 1;    // sequences at that context at once
};

struct plan_candidate {
  placement place;
  std::vector<shard_memory> shards;
  int devices = 0;
  int64_t most_bytes = 0; // the fullest device at the target
  int64_t kv_tokens = 0;  // tokens of KV the tightest device has room for beside the target's
                          // recurrent states (0: none; INT64_MAX: no shard keeps a KV cache)
  bool fits = false;
  bool partial = false; // sized up to its first shard that does not fit: most_bytes is a
                        // lower bound and kv_tokens covers the shards sized
  bool packed = false;  // layers packed into stages (uneven) where the even split did not fit
};

struct memory_plan {
  std::vector<plan_candidate> tried; // in the order tried
  int chosen = -1;                   // index into tried; -1: none fits
  // when the choice has several stages: the placement with the largest TP that fits (fewer
  // stages a token passes; more devices), an index into tried; -1: none
  int fewer_stages = -1;
  std::string why_none; // set when no placement could be tried at all (the weights need more
                        // devices than a placement can use)
  plan_target target;   // with the context resolved
};

/// The placements to try (TP x PP from `tp` / `pp` when given, else the search above).
expected<memory_plan> plan_memory(const model_source& m, const device_pool& pool,
                                  plan_target target, const memory_options& o,
                                  std::optional<int> tp = {}, std::optional<int> pp = {},
                                  bool expert_parallel = false);

} // namespace troupe::exec
