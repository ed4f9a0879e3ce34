// cuda.hpp: the CUDA backend's entry points, seen by host C++ code. Kernels live in one .cu
// file per op family with launchers declared here; cuda_device.cpp wraps the runtime API
// (device memory, copies, streams, graphs) behind kernels/device.hpp and registers the
// launchers in the op registry only when a GPU is present at run time; gemm_lt.cpp runs the
// tensor-core GEMMs through cuBLASLt. Built only when nvcc is found. Every launcher enqueues
// on the call's stream (exec_ctx::stream) and returns a status: a launch error fails that
// node (and its shard, which the supervisor restarts), never the process.
// Debug switch: TROUPE_CUDA_SYNC=1 synchronises after every launch and checks the error.
// Tests: the op harness on the GPU (tests/kernels/test_ops.cpp, ctest label gpu) and
// tests/exec/device_test.cpp; bench/gpu/check.sh runs both on a lent GPU.
#pragma once

#include "kernels/op.hpp"

namespace troupe::kernels::cuda {

status launch_binary(const op_args& a, const exec_ctx& c); // add, mul (with broadcast)
status launch_unary(const op_args& a, const exec_ctx& c);  // silu, tanh, ..., clamp
status launch_swiglu(const op_args& a, const exec_ctx& c);
status launch_rmsnorm(const op_args& a, const exec_ctx& c);
status launch_add_rmsnorm(const op_args& a, const exec_ctx& c);
status launch_layernorm(const op_args& a, const exec_ctx& c);
status launch_embedding(const op_args& a, const exec_ctx& c);
status launch_rope(const op_args& a, const exec_ctx& c);
status launch_rope_kv_store(const op_args& a, const exec_ctx& c);
status launch_kv_store(const op_args& a, const exec_ctx& c);
status launch_attention(const op_args& a, const exec_ctx& c);
status launch_paged_attention(const op_args& a, const exec_ctx& c);
status launch_matmul(const op_args& a, const exec_ctx& c); // W f32, f16, bf16, q8_0, q4_0
status launch_matmul_qkv(const op_args& a, const exec_ctx& c);
status launch_matmul_swiglu(const op_args& a, const exec_ctx& c);
status launch_softmax(const op_args& a, const exec_ctx& c);
status launch_sum_rows(const op_args& a, const exec_ctx& c);
status launch_topk(const op_args& a, const exec_ctx& c); // topk and argmax
status launch_convert(const op_args& a, const exec_ctx& c);
status launch_quantize(const op_args& a, const exec_ctx& c);
status launch_dequantize(const op_args& a, const exec_ctx& c);
status launch_concat(const op_args& a, const exec_ctx& c);
status launch_head_matmul(const op_args& a, const exec_ctx& c);
status launch_moe_router(const op_args& a, const exec_ctx& c);
status launch_moe(const op_args& a, const exec_ctx& c);
/// An element-wise program (expr.hpp) compiled with NVRTC at its first use (jit_nvrtc.cpp).
status launch_elementwise(const op_args& a, const exec_ctx& c);
/// Compiles it now for the current device (the executor does this when a model loads).
status jit_prepare_gpu(const ew_program& p);

/// matmul with bf16 / f16 weights on the tensor cores (cuBLASLt); unsupported when cuBLASLt
/// has no algorithm for the shape (launch_matmul then runs its own kernel).
status gemm_lt(const op_args& a, const exec_ctx& c);
/// One weight [N, K] (bf16 or f16) of gemm_lt_parts and its output y [T, N] (+ bias [N]).
struct lt_part {
  const void* w;
  long long N;
  float* y;
  const float* bias;
};
/// y_i = x W_i^T for up to 3 weights of one type, x [T, K] f32 rounded once for all of them.
status gemm_lt_parts(const float* x, long long T, long long K, dtype wt, const lt_part* parts,
                     int n_parts, const exec_ctx& c);
/// x f32 [n] rounded to bf16 (or f16) into hi, and x - hi into lo when lo is not null.
status launch_to_half(const float* x, void* hi, void* lo, long long n, bool bf16,
                      const exec_ctx& c);
/// y [T, N] += bias [N] on every row.
status launch_add_bias(float* y, const float* bias, long long T, long long N, const exec_ctx& c);

bool matmul_weight_ok(dtype t);
int rope_max_rot_dim();
int attention_max_head_dim();

/// Checks the last launch; with TROUPE_CUDA_SYNC=1 also synchronises. A failed launch is an
/// error status naming the kernel and CUDA's message (the executor reports it with the node;
/// nothing on a kernel path aborts).
status check_launch(const char* what, const exec_ctx& c);

} // namespace troupe::kernels::cuda
