// convert.hpp: row conversions between any stored dtype and f32, the scalar specification
// that kernels, loaders and `troupe synth` share. Quantization follows GGUF's reference
// (q8_0: d = max|x| / 127, q = round(x / d); q4_0: d = signed max / -8, q = round(x/d) + 8
// clamped to [0, 15]). n must be a multiple of the block size of a block format. The
// K-quants (q2_k ... q6_k) are read only: from_f32 writes nothing for them, and the ops
// that quantize refuse them.
// Tests: tests/core/dtype_test.cpp
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace troupe {

/// dst[0..n) = the f32 values of n elements of `type` starting at `src`.
void to_f32(dtype type, const void* src, float* dst, int64_t n);
/// Stores n f32 values as `type` at `dst` (rounding / quantizing). i8/i32 truncate.
void from_f32(dtype type, const float* src, void* dst, int64_t n);

} // namespace troupe
