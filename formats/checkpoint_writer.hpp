// checkpoint_writer.hpp: writes GGUF (v3) and safetensors files. Tensors are declared with a
// fill callback and written one at a time, so a multi-gigabyte synthetic model never sits in
// memory whole. Used by `troupe synth`, by tests that build corrupt or unusual checkpoints,
// and for exports. Tests: tests/formats/checkpoint_test.cpp (round trips through the readers)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "core/tensor.hpp"
#include "formats/gguf.hpp"

namespace troupe {

using fill_fn = std::function<void(uint8_t* dst, size_t bytes)>;

class gguf_writer {
 public:
  void set(const std::string& key, const gguf_value& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);
  /// Copies every key of `g` whose name starts with `prefix` (e.g. "tokenizer.").
  void copy_keys(const gguf_file& g, const std::string& prefix);
  void add_tensor(const std::string& name, dtype type, shape dims, fill_fn fill);
  status write(const std::string& path, uint32_t alignment = 32) const;

 private:
  struct kv {
    std::string key;
    gguf_value value;
    std::vector<std::string> owned; // backing store for string values
  };
  struct tensor {
    std::string name;
    dtype type;
    shape dims;
    fill_fn fill;
  };
  std::vector<kv> kvs_;
  std::vector<tensor> tensors_;
};

class safetensors_writer {
 public:
  void set_metadata(const std::string& key, const std::string& value);
  void add_tensor(const std::string& name, dtype type, shape dims, fill_fn fill);
  status write(const std::string& path) const;

 private:
  struct tensor {
    std::string name;
    dtype type;
    shape dims;
    fill_fn fill;
  };
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<tensor> tensors_;
};

} // namespace troupe
