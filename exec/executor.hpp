// executor.hpp: runs one shard's part of a model on a backend. At creation it asks the
// model's family for the whole graph (arch/family.hpp), cuts it for this shard (pipeline
// stage, tensor rank), removes dead nodes, loads the weights the shard reads, allocates its
// paged KV cache, and compiles the graph once per row class (steps of fewer than 8 rows or
// more, for the token rows and for the logit rows): fusion passes where the backend has the
// fused kernels, a kernel resolved for every node, and an activation arena planned from the
// values' lifetimes (sizes per row, so one plan serves every step size; the arena grows only
// when a step is larger than any before). forward() runs the plan for a batch: step inputs,
// copy-on-write block copies, every node in order (kernels through the backend, reporting
// a status; all-reduce / all-gather through the shard's collective), and hands back this
// stage's hidden rows or the logits. On a device backend (CUDA) the weights are uploaded once,
// every step's inputs go up in one copy, kernels are enqueued on the shard's stream, and the
// stage's output (or a collective over host memory) comes back to the host: that is how a
// pipeline mixes CPU and GPU stages. One step at a time; the caller's thread runs it.
// Tests: tests/exec/forward_test.cpp (every family, fused and not), tests/graph/graph_test.cpp
#pragma once

#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "arch/model_source.hpp"
#include "arch/shard_plan.hpp"
#include "core/batch.hpp"
#include "core/collective.hpp"
#include "exec/backend.hpp"
#include "exec/weights.hpp"
#include "graph/graph.hpp"

namespace troupe::exec {

struct exec_options {
  kernels::backend where = kernels::backend::cpu;
  int device = 0; // which GPU (where == cuda)
  int threads = 1;
  std::vector<int> cpus; // pin the shard's threads here when not empty
  int64_t kv_blocks = 0; // blocks in the KV arena (block 0 is the null block)
  int block_size = 16;   // P: tokens per block
  // rows of every recurrent state (gated DeltaNet layers): sequences that may hold one at a
  // time (batch_seq::state_slot indexes them); 0 for models without such layers
  int64_t state_slots = 0;
  dtype kv_dtype = dtype::f32;
  bool fuse = true;     // the fusion passes; false: the graph as the family built it
  bool profile = false; // time every node (executor::profile; `troupe bench --profile`)
  // tests: the device code paths (uploads, one input copy, downloads, collectives through the
  // host) over host memory and the CPU kernels (make_emulated_device_backend)
  bool host_as_device = false;
  // a device shard records each decode step shape's launches once (CUDA graphs) and replays
  // them; TROUPE_CUDA_GRAPHS=0 turns it off
  bool graphs = true;
  // a device shard sizes its activation arena and step inputs for steps of this many token
  // rows when it loads (a larger step grows them, which allocates on that step)
  int64_t max_rows = 512;
  // bytes the CPU kernels' load-time layouts (tensor_view::packed, a copy of the q4_0 / q8_0 /
  // K-quant matrices that matmuls read) may add at their peak: -1 half of the free memory, 0
  // none (all from the published rows); past it, none is made. Where the kernels then read
  // only the layout, the published rows are released (executor::released_bytes), so those
  // matrices add only the largest of them while it is made (executor::layout_need)
  int64_t pack_budget = -1;
  // matrices stored in f32 / f16 / bf16 quantized at load (q8_0 or q4_0: `--quantize`;
  // quantize_weights.cpp); f32: as published
  dtype quantize = dtype::f32;
};

/// Time spent in one kernel over the profiled steps of one row class.
struct op_time {
  std::string kernel;         // "cpu/matmul/q8_0", "all_reduce" ...
  bool decode = false;        // steps of fewer than row_class_boundary rows
  bool weight_matmul = false; // the node multiplies by a weight matrix (or table of rows)
  double seconds = 0;
  int64_t calls = 0;
};

/// Rows of a step seen by kernel choice: below 8 (decode) or from 8 on (prefill). Kernels'
/// supports() may depend on the row count only through this boundary (registry.hpp).
inline constexpr int64_t row_class_boundary = 8;

class executor {
 public:
  static expected<std::unique_ptr<executor>> create(std::shared_ptr<const model_source> m,
                                                    const shard_spec& spec, const exec_options& opt,
                                                    collective* comm);
  ~executor();
  /// Forgets the decode graphs recorded so far (a shard calls it when its stage's NCCL
  /// communicator, which the graphs captured, is replaced).
  void drop_graphs();

  /// Runs the shard's part of step `b`. `x` is [T, C] f32: the previous stage's output (or
  /// ignored on the first stage); on return this stage's output. On the last stage `logits`
  /// receives [n_logits, V]: per sequence in the order of b.seqs, its scored rows then its
  /// sampling row (batch_seq::logit_rows).
  status forward(const batch& b, std::vector<float>& x, std::vector<float>* logits);

  const model_config& config() const { return source_->config; }
  const shard_spec& spec() const { return spec_; }
  int64_t resident_bytes() const { return weights_.resident_bytes; }
  /// Weight bytes one decode step streams: every weight a node reads, but embedding tables
  /// (one row each per token) unless a matmul reads them too (tied lm_head).
  int64_t decode_weight_bytes() const;
  int64_t kv_bytes() const { return kv_bytes_; }
  /// Bytes of the recurrent states (linear attention layers), every slot's.
  int64_t state_bytes() const { return state_bytes_; }
  /// Bytes of the CPU kernels' load-time layouts made, of the published weight rows released
  /// after them, and what the layouts add at their peak (the least exec_options::pack_budget
  /// that makes them: the copies kept next to their rows and the largest released one).
  int64_t layout_bytes() const { return layout_bytes_; }
  int64_t released_bytes() const { return released_bytes_; }
  int64_t layout_need() const { return layout_need_; }
  /// The memory of the device the shard runs on (the host's for the CPU backends).
  memory_info device_memory() const { return be_->memory(); }
  /// Where the shard runs: "cpu", "cuda:0 (NVIDIA H200, sm_90)".
  std::string device_name() const;
  int64_t kv_blocks() const { return opt_.kv_blocks; }
  int block_size() const { return opt_.block_size; }
  void set_collective(collective* comm) { comm_ = comm; }
  /// The shard's graph before the fusion passes, and each compiled plan: every node with
  /// the kernel it runs ("cpu/matmul/q8_0", "...composed(...)", "ref/..."), for `troupe explain`.
  /// A summary line counts the nodes per kernel kind (native, composed, reference).
  std::string explain(bool all_plans = true) const;
  /// With exec_options::profile: per kernel and row class, the time of every node since
  /// the last reset, in first-run order.
  const std::vector<op_time>& profile() const { return profile_; }
  void reset_profile() { profile_.clear(); }

  struct plan;

 private:
  executor() = default;
  status compile(int tc, int nc);
  status check_batch(const batch& b) const;
  status lay_out(const model_source& m, int64_t pack_budget); // the CPU kernels' layouts
  expected<tensor_view> view_of(const plan& p, graph::vid v, int64_t T, int64_t N, int64_t S,
                                int64_t cols) const;

  std::shared_ptr<const model_source> source_;
  shard_spec spec_;
  shard_dims dims_;
  exec_options opt_;
  collective* comm_ = nullptr;
  std::unique_ptr<backend> be_;
  graph::graph base_; // cut for this shard, shapes inferred, not fused
  loaded_weights weights_;
  std::vector<kernels::device_buffer> kv_; // per state value (index in kv_of_)
  std::vector<int> kv_of_;                 // value id -> index in kv_, or -1
  int64_t kv_bytes_ = 0, state_bytes_ = 0;
  int64_t layout_bytes_ = 0, released_bytes_ = 0, layout_need_ = 0;
  std::array<std::unique_ptr<plan>, 4> plans_; // [token class * 2 + logit class]
  kernels::device_buffer arena_, scratch_;
  int64_t arena_rows_ = 0; // rows the arena holds now
  status grow_arena(int64_t T);
  // vocabulary-parallel logits: each rank's block size for N rows (and their sum), the blocks
  // interleaved into rows of V (on the device: backend copies), gathered by a collective on
  // device memory (NCCL)
  std::vector<int64_t> gather_block_counts(int64_t N, int64_t& total) const;
  status interleave_gathered(const float* blocks, float* rows, int64_t N, int64_t V,
                             bool device) const;
  status gather_on_device(const tensor_view& part, const tensor_view& all, int64_t N);
  // t's largest value over the ranks, element by element (an all_reduce node's reduce_max)
  status all_reduce_max(const tensor_view& t);
  // the graph's collectives (executor_collectives.cpp): t summed over the ranks in place (or
  // its maximum); the ranks' blocks [N, Vs] of part side by side into all [N, V]
  status all_reduce(const tensor_view& t, bool max);
  status all_gather(const tensor_view& part, const tensor_view& all, int64_t N);
  std::vector<float> gathered_; // (the ranks' blocks, in rank order)
  // device backends: the weights uploaded (views point here), the step inputs and the hidden
  // rows of a step uploaded once each, and host buffers for collectives over host memory
  bool on_device_ = false;
  kernels::device_buffer weights_dev_, inputs_dev_, hidden_dev_;
  std::array<int64_t, graph::input_kind_count> input_off_{}; // int32 offset of each input_kind
  std::vector<int32_t> staged_;
  std::vector<float> host_tmp_;
  // captured decode steps by (plan, T, N, S, seq table columns); dropped when a buffer they
  // point at is reallocated
  using graph_key = std::array<int64_t, 5>;
  std::map<graph_key, void*> graphs_;
  std::set<graph_key> graphs_seen_; // shapes run once (their second step is recorded)
  static constexpr size_t max_graphs = 64;
  bool graphs_on_ = false;
  std::string spec_name() const;
  std::vector<int64_t> gather_counts_; // all-gather: vocabulary rows per rank
  std::vector<op_time> profile_;
  // step inputs (host)
  std::vector<int32_t> tokens_, tokens_local_, positions_, slots_, seq_table_, logit_rows_,
      state_table_;
  bool recurrent_ = false; // the shard's graph holds recurrent states
};

} // namespace troupe::exec
