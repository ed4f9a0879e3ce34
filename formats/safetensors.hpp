// safetensors.hpp: reader for Hugging Face safetensors checkpoints, single-file
// (model.safetensors) or sharded (model.safetensors.index.json naming a file per tensor).
// Layout: u64 header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [b, e]},
// "__metadata__": {...}}, then the data; offsets are relative to the data start. Checks: the
// header fits, is valid JSON of that shape, every dtype is known, every [b, e) lies inside
// the data, e - b matches the shape, and regions do not overlap. Zero-copy via mmap.
// Tests: tests/formats/checkpoint_test.cpp, tests/formats/checkpoint_fuzz_test.cpp
#pragma once

#include <map>
#include <memory>
#include <string>

#include "formats/checkpoint.hpp"

namespace troupe {

/// Adds the tensors of one mapped safetensors file to `index`; returns its __metadata__.
expected<std::map<std::string, std::string>> parse_safetensors(std::shared_ptr<mapped_file> file,
                                                               tensor_index& index);
/// Opens a single .safetensors file.
expected<std::unique_ptr<tensor_index>> open_safetensors(const std::string& path);
/// Opens a directory's weights: model.safetensors.index.json (sharded) or model.safetensors.
/// A sharded checkpoint must provide every tensor its index names, from the named shard.
expected<std::unique_ptr<tensor_index>> open_safetensors_dir(const std::string& dir);

/// safetensors dtype names Troupe computes with: F32, F16, BF16 (I8 and I32 load as raw).
std::optional<dtype> dtype_from_safetensors(std::string_view name);
std::string_view safetensors_name(dtype t);

} // namespace troupe
