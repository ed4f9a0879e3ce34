// dtype.hpp: element types Troupe stores tensors in. f32/f16/bf16/i8/i32 are plain scalars;
// q8_0 and q4_0 are GGUF's block formats with GGUF's exact byte layout, so quantized weights
// load from a .gguf file without conversion:
//   q8_0: 32 values per 34-byte block { f16 d; int8 qs[32]; }            x = d * qs[j]
//   q4_0: 32 values per 18-byte block { f16 d; uint8 qs[16]; }            x = d * (nib - 8)
//         value j < 16 is the low nibble of qs[j], value j + 16 its high nibble.
// A row of n elements takes row_bytes(type, n); n must be a multiple of the block size.
// Tests: tests/core/dtype_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe {

enum class dtype : uint8_t { f32, f16, bf16, i8, i32, q8_0, q4_0 };

inline constexpr int dtype_count = 7;

struct dtype_info {
  std::string_view name; // "f32", "q8_0", ...
  int64_t block_elems;   // values per block (1 for scalar types)
  int64_t block_bytes;   // bytes per block
  bool quantized;        // a block format with a scale
};

const dtype_info& info(dtype type);
inline std::string_view name(dtype type) {
  return info(type).name;
}
inline int64_t block_elems(dtype type) {
  return info(type).block_elems;
}
inline bool is_quantized(dtype type) {
  return info(type).quantized;
}
/// Parses "f32", "fp16", "bf16", "q8_0", ... (case-insensitive).
std::optional<dtype> parse_dtype(std::string_view text);

/// Bytes taken by `n` consecutive values; n must be a multiple of block_elems(type).
inline int64_t row_bytes(dtype type, int64_t n) {
  const auto& i = info(type);
  return n / i.block_elems * i.block_bytes;
}

/// GGUF block structs, laid out exactly as in a .gguf file.
struct block_q8_0 {
  uint16_t d; // f16 scale
  int8_t qs[32];
};
struct block_q4_0 {
  uint16_t d; // f16 scale
  uint8_t qs[16];
};
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q4_0) == 18);
inline constexpr int64_t qk = 32; // values per quantization block

} // namespace troupe
