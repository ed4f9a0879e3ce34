// shard_weights.hpp: the weights one shard computes with: its slice of every layer of its
// stage, plus the vocabulary slice of the embedding (first stage) and of the lm_head (last
// stage). Row slices (Q, K, V, gate, up, vocabulary) are zero-copy views into the mapped
// checkpoint; column slices (o_proj, down_proj) and norms / biases stored in 16-bit are
// copied into owned buffers. `resident_bytes` counts the bytes this shard reads when it runs
// (its views plus its copies), which is what TP x PP divides. Immutable after loading.
// Tests: tests/model/shard_weights_test.cpp
#pragma once

#include <memory>
#include <vector>

#include "arch/model_source.hpp"
#include "arch/shard_plan.hpp"
#include "core/buffer.hpp"

namespace troupe::model {

struct layer_weights {
  tensor_view attn_norm;    // f32 [C]
  tensor_view wq, wk, wv;   // [Hs*D, C], [Hkv_s*D, C] any dtype
  tensor_view bq, bk, bv;   // f32 or empty
  tensor_view wo;           // [C, Hs*D]
  tensor_view bo;           // f32 [C] or empty (added once, by rank 0)
  tensor_view ffn_norm;     // f32 [C]
  tensor_view w_gate, w_up; // [Fs, C]
  tensor_view w_down;       // [C, Fs]
};

struct shard_weights {
  shard_spec spec;
  shard_dims dims;
  std::vector<layer_weights> layers; // layers [spec.layer_begin, spec.layer_end)
  tensor_view tok_embd;              // [Vs, C] (first stage)
  tensor_view output_norm;           // f32 [C] (last stage)
  tensor_view output;                // [Vs, C] (last stage)
  int64_t resident_bytes = 0;
  std::vector<buffer> owned;
  std::shared_ptr<const model_source> source; // keeps the mapped files alive
};

/// Loads shard `spec` of `m`, reading only its slices.
expected<std::unique_ptr<shard_weights>> load_shard_weights(std::shared_ptr<const model_source> m,
                                                            const shard_spec& spec);

} // namespace troupe::model
