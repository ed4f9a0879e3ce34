// model_source.hpp: a checkpoint opened as published: a .gguf file or a Hugging Face
// directory (config.json, model.safetensors or sharded, tokenizer.json). Holds the model
// description, the tokenizer and the zero-copy tensor index; shared (read-only) by every
// shard of a process, each of which maps only its own slices. `check_shapes` builds the
// family's graph, which checks every weight's shape against the config, naming the tensor
// on a mismatch. A model may also be opened from its config.json alone, to size it.
// Tests: tests/formats/checkpoint_test.cpp
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arch/model_config.hpp"
#include "formats/checkpoint.hpp"
#include "text/tokenizer.hpp"

namespace troupe::graph {
class graph;
} // namespace troupe::graph

namespace troupe {

class gguf_file;

struct model_source {
  std::string path;
  std::string format; // "gguf" or "hf"
  model_config config;
  std::shared_ptr<tokenizer> tok; // (shared by with_context's copies)
  std::shared_ptr<const tensor_index> tensors;
  std::shared_ptr<const gguf_file> gguf; // keeps GGUF metadata alive (gguf only)
  // opened from config.json alone (open_model_config): no tensors and no tokenizer; the
  // families' builders get every weight they ask for at the shape the config implies, the
  // matrices in `assumed` (or E4M3 tiles where the config says so), the rest in f32 as the
  // loader converts them; optional weights (biases a checkpoint may lack) are left out
  bool shapes_only = false;
  dtype assumed = dtype::bf16;
};

/// Opens `path` (a .gguf file or an HF directory). Checks shapes against the config.
expected<std::shared_ptr<const model_source>> open_model(const std::string& path);
/// `m` served with a context of `ctx` tokens (the KV cache, the scheduler and the API's
/// max_model_len follow config.ctx): the same tensors and tokenizer; `m` itself when ctx is 0 or
/// the model's. Longer than the model's context, or under 2 tokens, is an error.
expected<std::shared_ptr<const model_source>> with_context(std::shared_ptr<const model_source> m,
                                                           int64_t ctx);
/// Opens the description of a model whose weights are not here: `path` is its config.json or
/// a directory holding it. The matrices are taken to be in `weights` when given, else in the
/// config's torch_dtype (f32 when it names none, as transformers loads). For sizing a
/// deployment (exec/memory_plan.hpp): nothing can run on it.
expected<std::shared_ptr<const model_source>> open_model_config(const std::string& path,
                                                                std::optional<dtype> weights = {});
/// Builds the family's graph once: every tensor it names must be there, loadable, and of the
/// shape the config implies (the error names the tensor).
status check_shapes(const model_source& m);

/// The checkpoint's tensors that no value of `m`'s graph reads, sorted: where a family does not
/// know a tensor (a bias, a norm), the model it computes is not the published one. Legitimately
/// unread ones exist (multi-token-prediction layers, tensors a load-time repack replaced), so a
/// load only logs them; the family tests require none.
std::vector<std::string> unread_tensors(const model_source& m, const graph::graph& g);

} // namespace troupe
