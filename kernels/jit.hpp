// jit.hpp: element-wise programs (expr.hpp) compiled for the CPU when a model is loaded, as
// PyTorch Inductor's CPU backend does: the program becomes a small C++ loop, built by the
// system compiler (TROUPE_JIT_CXX, else $CXX, else c++) into a shared object cached under
// TROUPE_JIT_DIR (default ~/.cache/troupe/jit) by the program's hash, and loaded with
// dlopen. TROUPE_JIT=0 turns it off. Where no compiler works, prepare() says why (once in
// the log) and the caller composes the program from primitive ops instead. On a GPU, NVRTC
// builds the program as a kernel (jit_prepare_gpu). Counters for /metrics. Thread-safe: programs
// compile concurrently (the executor builds a model's programs on several threads). Tests:
// tests/kernels/expr_test.cpp
#pragma once

#include <cstdint>

#include "kernels/expr.hpp"

namespace troupe::kernels {

/// The compiled entry point: dst[t, c] from up to 4 sources, source i's element (t, c) at
/// src[i][t * row_stride[i] + c * col_stride[i]] (strides 0 broadcast).
using ew_fn = void (*)(const float* const* src, const int64_t* row_stride,
                       const int64_t* col_stride, float* dst, int64_t rows, int64_t cols);

struct jit_stats {
  int64_t compiled = 0; // built by the compiler in this process
  int64_t cached = 0;   // loaded from the on-disk cache or already loaded
  int64_t failed = 0;   // could not be built (the program was composed instead)
  int64_t composed = 0; // programs run as compositions of primitives (counted by the executor)
};

/// Sets p.compiled; an error (unavailable: no compiler, or TROUPE_JIT=0) leaves it null.
status jit_prepare(ew_program& p);
/// Compiles p for the current GPU with NVRTC (kernels/cuda/jit_nvrtc.cpp); unavailable without
/// CUDA, NVRTC, a GPU, or with TROUPE_JIT=0 (the executor composes the program instead).
status jit_prepare_gpu(const ew_program& p);
jit_stats jit_counters();
void jit_count_composed();

} // namespace troupe::kernels
