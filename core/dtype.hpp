// dtype.hpp: element types Troupe stores tensors in. f32/f16/bf16/i8/i32 are plain scalars;
// q8_0 and q4_0 are GGUF's block formats with GGUF's exact byte layout, so quantized weights
// load from a .gguf file without conversion:
//   q8_0: 32 values per 34-byte block { f16 d; int8 qs[32]; }            x = d * qs[j]
//   q4_0: 32 values per 18-byte block { f16 d; uint8 qs[16]; }            x = d * (nib - 8)
//         value j < 16 is the low nibble of qs[j], value j + 16 its high nibble.
// q2_k ... q6_k are GGUF's K-quants, blocks of 256 values, and q4_1 / q5_0 / q5_1 its other
// 32-value formats, and its non-linear iq4_nl / iq4_xs (core/kquant.hpp); the int8 kernels take
// q8_0 / q4_0 (is_block32), the others are expanded block by block. A row of n elements takes
// row_bytes(type, n); n must be a multiple of the block size. t2_32 is Troupe's own: ternary
// weights (BitNet b1.58's) as loaded (core/kquant.hpp). Tests: tests/core/dtype_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe {

enum class dtype : uint8_t {
  f32,
  f16,
  bf16,
  i8,
  i32,
  q8_0,
  q4_0,
  q2_k,
  q3_k,
  q4_k,
  q5_k,
  q6_k,
  q4_1,
  q5_0,
  q5_1,
  mxfp4,
  f8_b128,
  iq4_nl,
  iq4_xs,
  t2_32
};

inline constexpr int dtype_count = 20;

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
/// q8_0 / q4_0: blocks of 32 values with one f16 scale (what the int8 kernels take).
inline bool is_block32(dtype type) {
  return type == dtype::q8_0 || type == dtype::q4_0;
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
