// weights.hpp: a shard's weights as the executor reads them: each weight value of its graph
// resolved against the checkpoint. Whole tensors and row slices are zero-copy views of the
// mapped file; column slices (the inputs of a cut-by-input-features weight), rows gathered
// from fused tensors, transposed weights (GPT-2's Conv1D) and norms or biases stored in 16
// bits are copied into owned buffers. Values that take the same bytes of the same tensor
// (graph::weight_identity: a weight-shared block read by several layers) share one view and one
// copy. `resident_bytes` counts what the shard reads when it runs (views and copies, each
// once), which TP x PP divides. Host memory (a device backend uploads).
// Tests: tests/exec/executor_test.cpp
#pragma once

#include <functional>
#include <vector>

#include "arch/model_source.hpp"
#include "core/buffer.hpp"
#include "graph/graph.hpp"

namespace troupe::exec {

struct loaded_weights {
  std::vector<tensor_view> views; // by value id; empty for anything but a present weight
  std::vector<buffer> owned;
  int64_t resident_bytes = 0;
};

/// Every weight a node of `g` reads.
expected<loaded_weights> load_weights(const model_source& m, const graph::graph& g);

struct quantized_weights {
  int64_t matrices = 0;
  int64_t published_bytes = 0, quantized_bytes = 0;
};

/// Per value of `g`: whether every node that reads it may take it in a block format (matmuls,
/// embedding lookups, a moe whose every matrix `can` be quantized) and none is a mixture's
/// router: the weights --quantize may quantize (quantize_weights, and troupe plan's sizing).
std::vector<char> block_format_readers(const graph::graph& g,
                                       const std::function<bool(graph::vid)>& can);

/// The f32 / f16 / bf16 matrices of `w` that only matmuls and embedding lookups of `g` read,
/// quantized to `to` (q8_0 or q4_0) where their rows are whole blocks, in place, with their
/// values' dtype in `g` (quantize_weights.cpp); the published rows are released.
expected<quantized_weights> quantize_weights(const model_source& m, graph::graph& g,
                                             loaded_weights& w, dtype to);

} // namespace troupe::exec
