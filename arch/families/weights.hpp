// weights.hpp (arch/families, internal): how a family adds its weights to a graph: looked
// up by name in the checkpoint (shape and dtype from the file, checked against what the
// config implies), with their tensor-parallel cut. 1-D weights (norms, biases) are f32 in
// the graph whatever the file stores (the executor converts them when loading). Also what a
// family's prepare_hf uses before the graph exists: a multimodal checkpoint's language model
// renamed as the text model's, and tensors repacked at load (experts transposed) added to the
// index. Tests: tests/exec/forward_test.cpp (every family's fixture),
// tests/actors/pipeline_test.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arch/model_source.hpp"
#include "graph/builder.hpp"

namespace troupe::arch {

/// A tensor a family derives at load (repacked, stacked) added to the checkpoint's index:
/// its bytes become a file the index holds, described as `description` (for errors),
/// `raw_type` the type as the checkpoint would name it. `replace`: it takes the place of the
/// stored tensor of that name; else it is new (an error if the name exists).
status add_derived_tensor(tensor_index& t, const std::string& name, dtype type, shape dims,
                          std::string raw_type, std::vector<uint8_t> bytes,
                          const std::string& description, bool replace = false);

/// The stored tensor `from` read under the name `to` as well (the same bytes, no copy); `from` is
/// marked consumed.
status rename_tensor(tensor_index& t, const std::string& from, std::string to);

/// A tensor name `prefix` + layer index + "." + rest split as (the index, rest); nullopt for a
/// name of another form (a family's prepare_hf renumbering layers).
struct layer_tensor {
  int64_t layer;
  std::string rest;
};
std::optional<layer_tensor> layer_of_name(std::string_view name, std::string_view prefix);

/// A multimodal checkpoint's language model read as the text model's: language_model.X as X
/// (language_model.model.* and language_model.lm_head.*, as Gemma 3, Mistral 3 and Llama 4
/// publish them) and model.language_model.X as model.X (Qwen 3.5); the originals are marked
/// consumed, the vision tower's tensors stay unread (listed at load). As a family's prepare_hf.
status prepare_language_model(const model_config& c, tensor_index& t);

/// The bytes of f32 values, as add_derived_tensor takes them (a family's derived constants).
std::vector<uint8_t> f32_bytes(const std::vector<float>& v);

/// add_derived_tensor for a tensor repacked from one stored in `from`, described after it.
status add_repacked_tensor(tensor_index& t, const std::string& name, dtype type, shape dims,
                           std::vector<uint8_t> bytes, const mapped_file* from);
/// A stored tensor a family repacks at load, of shape `dims` (an error otherwise); marked
/// consumed (its bytes go into the repacked ones).
expected<const tensor_info*> take_tensor(tensor_index& t, const std::string& name,
                                         std::vector<int64_t> dims);
/// Float experts stored as the model multiplies them, [E, K, M] (x W): for each expert the
/// `rows` columns first, first + stride, ... of its W as rows, [E, rows, K] in the stored dtype
/// (f32, f16 or bf16; tiles of 32 x 32, so a matrix of any size copies at memory speed).
expected<std::vector<uint8_t>> transpose_experts(const tensor_info& w, int64_t E, int64_t K,
                                                 int64_t M, int64_t first, int64_t stride,
                                                 int64_t rows);
/// One layer's experts packed as the model multiplies them (Llama 4, Qwen3-VL-MoE as published):
/// `prefix`gate_up_proj [E, C, 2F] (gate columns, then up) and `prefix`down_proj [E, F, C],
/// taken and added back as the moe op's rows: `prefix`gate / up [E, F, C], `prefix`down [E, C, F].
status repack_packed_experts(tensor_index& t, const std::string& prefix, int64_t E, int64_t C,
                             int64_t F);

class weights {
 public:
  weights(const model_source& m, graph::graph& g)
      : m_(m)
      , g_(g) {}
  /// A weight; `want` is the shape the config implies ([N, K] or [N], after any transpose),
  /// checked when given. Optional weights the checkpoint lacks come back as an empty value.
  expected<graph::vid> get(const std::string& name, int layer, std::vector<int64_t> want,
                           graph::cut split = graph::cut::none,
                           graph::axis along = graph::axis::none, int64_t unit = 1,
                           bool optional = false, graph::weight_ref ref = {});
  /// Matrices stacked by rows into one weight [groups * rows, K] (`each` = {rows, K}): one
  /// stored tensor [groups, rows, K] (GGUF's merged experts) when `parts` has one name, else
  /// `groups` tensors [rows, K] of one dtype (HF's per-expert tensors, gathered at load). TP
  /// cuts every matrix alike (value::groups). `label` names the value in the graph.
  expected<graph::vid> stacked(const std::vector<std::string>& parts, const std::string& label,
                               int layer, int64_t groups, std::vector<int64_t> each,
                               graph::cut split, graph::axis along);
  bool has(const std::string& name) const { return m_.tensors->contains(name); }
  /// A weight that is not in the checkpoint: every element `value` (a non-parametric norm's
  /// ones), cut like a weight of that shape would be.
  graph::vid constant(const std::string& name, int layer, std::vector<int64_t> dims, float value,
                      graph::cut split = graph::cut::none, graph::axis along = graph::axis::none,
                      int64_t unit = 1);

 private:
  // a matrix's dtype when the model is sized from its config (model_source::shapes_only)
  dtype assumed_type(const std::vector<int64_t>& dims, graph::axis along) const;

  const model_source& m_;
  graph::graph& g_;
};

} // namespace troupe::arch
