// gemv.cuh: the decode GEMV (gemv.cu) as the matmul launchers call it: y = x W^T for steps of
// at most 8 tokens, over one weight matrix (matmul), three of one input whose rows follow one
// another (matmul_qkv), or gate and up rows with the SwiGLU applied as the sums land
// (matmul_swiglu). Included by kernels/cuda/*.cu only.
#pragma once

#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {

/// Tokens a step may have for the GEMV (more: tiled kernels or cuBLASLt).
constexpr int max_gemv_tokens = 8;

/// One weight matrix of a GEMV and where its outputs go: y [T, n] (+ bias [n] when given).
struct gemv_part {
  const uint8_t* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  long long n = 0;
};

struct gemv_job {
  const float* x = nullptr; // [T, K] f32
  long long T = 0, K = 0, row_bytes = 0;
  gemv_part part[3];
  int parts = 1;       // matrices whose rows follow one another (rows = their n summed)
  bool swiglu = false; // part 0 gate, part 1 up, both n rows: part 0's y = silu(gate) * up
  long long rows = 0;  // rows a warp group takes: the parts' n summed, or n for swiglu
};

/// Whether weight rows of this type and size at w, and x [T, K], take the GEMV's 16-byte loads
/// (the quantized blocks are read in their own way; x always as float4).
bool gemv_aligned(dtype t, long long row_bytes, const void* w, const float* x, long long K);

/// Runs the job on the call's stream for weights of type t (f32, f16, bf16, q8_0, q4_0).
status launch_gemv(const gemv_job& j, dtype t, const exec_ctx& c);

} // namespace troupe::kernels::cuda
