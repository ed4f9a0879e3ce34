// shard_runner.hpp: executes one shard's part of a forward step. It owns the shard's weights
// (shard_weights.hpp), its KV arena (its layers and KV heads for every block), a thread pool,
// and the kernels it resolved from the op registry for its backend. The model's recipe
// (model_config) decides which ops run; nothing here is architecture-specific by name.
// Per step: [first stage] vocab-parallel embedding -> per layer: norm, QKV (+bias), rope,
// KV store, paged attention (over the layer's sliding window when it has one), o_proj, all-reduce,
// residual, norm, gate/up, SwiGLU, down, all-reduce, residual -> [last stage]. Fused where the op
// set has it (op.hpp): residual + next norm (add_rmsnorm), gate/up + SwiGLU (matmul_swiglu), K rope
// + KV write (rope_kv_store); the unfused sequence stays behind `runner_options::fuse` for
// comparison -> final norm on the rows that need logits, lm_head slice, all-gather into
// full-vocabulary logits. Partial sums meet in the `collective` (never in the engine). One step at
// a time; the caller's thread runs it. Tests: tests/model/forward_test.cpp
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/batch.hpp"
#include "core/collective.hpp"
#include "core/thread_pool.hpp"
#include "kernels/registry.hpp"
#include "model/shard_weights.hpp"

namespace troupe::model {

struct runner_options {
  kernels::backend where = kernels::backend::cpu;
  int threads = 1;
  std::vector<int> cpus; // pin the shard's threads here when not empty
  int64_t kv_blocks = 0; // blocks in the KV arena (block 0 is the null block)
  int block_size = 16;   // P: tokens per block
  dtype kv_dtype = dtype::f32;
  bool fuse = true; // fused ops (add_rmsnorm, matmul_swiglu, rope_kv_store); false: the unfused
                    // sequence, for comparisons
};

class shard_runner {
 public:
  static expected<std::unique_ptr<shard_runner>> create(std::shared_ptr<const model_source> m,
                                                        const shard_spec& spec,
                                                        const runner_options& opt,
                                                        collective* comm);
  ~shard_runner();

  /// Runs the shard's layers over `b`. `x` is [T, C] f32: the previous stage's output (or
  /// ignored on the first stage); on return this stage's output. On the last stage `logits`
  /// receives [n_logits, V]: per sequence in the order of b.seqs, its scored rows then its
  /// sampling row (batch_seq::logit_rows).
  status forward(const batch& b, std::vector<float>& x, std::vector<float>* logits);

  const shard_weights& weights() const { return *w_; }
  const model_config& config() const { return w_->source->config; }
  int64_t kv_bytes() const { return static_cast<int64_t>(kv_.size()); }
  int64_t kv_blocks() const { return opt_.kv_blocks; }
  int block_size() const { return opt_.block_size; }
  void set_collective(collective* comm) { comm_ = comm; }

 private:
  shard_runner() = default;
  status exec(kernels::op_args& a);
  status check_batch(const batch& b) const;
  bool q8_activations(int64_t T);
  tensor_view k_cache(int layer) const;
  tensor_view v_cache(int layer) const;

  std::unique_ptr<shard_weights> w_;
  runner_options opt_;
  collective* comm_ = nullptr;
  std::unique_ptr<thread_pool> pool_;
  buffer kv_;
  int64_t kv_layer_bytes_ = 0;
  const kernels::registry* reg_ = nullptr;
  std::map<std::tuple<int, int, int, int>, kernels::kernel> kernels_;
  // scratch, grown on demand
  std::vector<float> h_, q_, k_, v_, attn_, o_, g_, u_, xs_, lg_, lg_all_;
  std::vector<uint8_t> hq_;            // the norms' output as q8_0 (see q8_activations)
  bool norm_inputs_quantized_ = false; // QKV and gate/up weights all q8_0 / q4_0
  std::map<int64_t, bool> q8x_;        // T -> the backend takes q8_0 activations
  std::vector<int32_t> ids_, pos_, slots_, seqinfo_;
};

} // namespace troupe::model
