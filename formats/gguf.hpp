// gguf.hpp: reader for GGUF v2 and v3 files (llama.cpp's checkpoint format): every metadata
// value type (integers, floats, bool, string, nested arrays), tensor infos, the alignment
// rule, and zero-copy tensor data through a mapped_file. Every count, length, offset and size
// read from the file is checked before use; errors name the file, the key or tensor, and the
// byte offset ("model.gguf: byte 812: string length 9e18 runs past the end of the file").
// GGUF v1 (32-bit counts) is rejected as unsupported. Tests: tests/formats/checkpoint_test.cpp,
// tests/formats/checkpoint_fuzz_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/checkpoint.hpp"

namespace troupe {

enum class gguf_type : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
std::string_view to_string(gguf_type t);

struct gguf_value {
  gguf_type type = gguf_type::u8;
  int64_t i = 0;                  // integer types and bool (u64 values above 2^63 are rejected)
  double f = 0.0;                 // f32 / f64 (integers are mirrored here too)
  std::string_view str;           // string (points into the mapped file)
  gguf_type elem = gguf_type::u8; // array element type
  std::vector<gguf_value> arr;

  bool is_integer() const;
  bool is_float() const { return type == gguf_type::f32 || type == gguf_type::f64; }
};

struct gguf_file {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;      // where tensor data begins
  std::vector<std::string> keys; // metadata keys in file order
  std::map<std::string, gguf_value, std::less<>> kv;
  tensor_index tensors;
  std::shared_ptr<mapped_file> file;

  const gguf_value* get(std::string_view key) const;
  /// Typed accessors: not_found when absent, corrupt_file when of another type.
  expected<int64_t> get_int(std::string_view key) const;
  expected<double> get_float(std::string_view key) const; // also accepts integers
  expected<std::string_view> get_string(std::string_view key) const;
  expected<bool> get_bool(std::string_view key) const;
  expected<std::vector<std::string_view>> get_strings(std::string_view key) const;
  expected<std::vector<double>> get_floats(std::string_view key) const;
  expected<std::vector<int64_t>> get_ints(std::string_view key) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
};

/// Parses the header and tensor infos of a mapped GGUF file.
expected<std::unique_ptr<gguf_file>> parse_gguf(std::shared_ptr<mapped_file> file);
expected<std::unique_ptr<gguf_file>> open_gguf(const std::string& path);

/// ggml type ids Troupe computes with: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 30 BF16.
std::optional<dtype> dtype_from_ggml(uint32_t ggml_type);
uint32_t ggml_type_of(dtype t);
std::string ggml_type_name(uint32_t ggml_type);

} // namespace troupe
