// checkpoint.hpp: named tensors read zero-copy from one or more memory-mapped files (a GGUF
// file, a safetensors file, or the shards of a sharded safetensors checkpoint). Shapes are
// row-major, outermost first (a GGUF tensor's ne[] reversed). A tensor whose stored type
// Troupe cannot compute with keeps its raw type name and fails with `unsupported` when used.
// Slices: rows [a, b) of a tensor are a zero-copy view; columns [a, b) are copied into an
// owned buffer (tensor-parallel row-split weights need them), reading only those bytes.
// Thread-safe for reads. Tests: tests/formats/checkpoint_test.cpp
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.hpp"
#include "core/mapped_file.hpp"
#include "core/tensor.hpp"

namespace troupe {

struct tensor_info {
  std::string name;
  bool supported = true; // false: `raw_type` is a format Troupe does not compute with
  dtype type = dtype::f32;
  std::string raw_type; // as the file names it ("F32", "Q4_K")
  shape dims;
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  const mapped_file* file = nullptr;

  tensor_view view() const { return tensor_view(const_cast<uint8_t*>(data), type, dims); }
};

class tensor_index {
 public:
  void add_file(std::shared_ptr<mapped_file> f) { files_.push_back(std::move(f)); }
  /// Adds a tensor; corrupt_file when the name is already taken.
  status add(tensor_info info);
  /// Adds a tensor or replaces the one of that name (a family's load-time repack).
  void replace(tensor_info info);

  const tensor_info* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  /// The whole tensor (zero-copy). not_found / unsupported name the tensor and file.
  expected<tensor_view> view(std::string_view name) const;
  /// Rows [begin, end) of the outermost dimension (zero-copy).
  expected<tensor_view> rows(std::string_view name, int64_t begin, int64_t end) const;
  /// Columns [begin, end) of a 2-D tensor, copied. For block formats begin and end must be
  /// multiples of the block size.
  expected<buffer> cols(std::string_view name, int64_t begin, int64_t end, tensor_view* out) const;

  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }
  const std::vector<std::shared_ptr<mapped_file>>& files() const { return files_; }
  /// The file whose mapping holds p, or null (bytes a loader or a shard made).
  const mapped_file* file_of(const void* p) const {
    for (const auto& f : files_)
      if (f->contains(p)) return f.get();
    return nullptr;
  }
  uint64_t total_bytes() const;

  /// A tensor a load-time repack read into another one (a family's prepare step): the model
  /// reads it through that one, not by its own name.
  void mark_consumed(std::string_view name) { consumed_.emplace(name); }
  bool consumed(std::string_view name) const { return consumed_.count(std::string(name)) > 0; }

 private:
  expected<const tensor_info*> usable(std::string_view name) const;
  std::map<std::string, tensor_info, std::less<>> tensors_;
  std::set<std::string> consumed_;
  std::vector<std::shared_ptr<mapped_file>> files_;
};

} // namespace troupe
