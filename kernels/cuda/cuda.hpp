// cuda.hpp: the CUDA backend's entry points, seen by host C++ code. Kernels live in one .cu
// file per op family with launchers declared here; cuda_device.cpp wraps the runtime API
// (device memory, copies, streams) behind kernels/device.hpp and registers the launchers in
// the op registry only when a GPU is present at run time. Built only when nvcc is found.
// Debug switch: TROUPE_CUDA_SYNC=1 synchronises after every launch and checks the error.
// Tests: the op harness (tests/kernels/test_ops.cpp, label gpu) when a GPU is present.
#pragma once

#include "kernels/op.hpp"

namespace troupe::kernels::cuda {

status launch_binary(const op_args& a, const exec_ctx& c); // add, mul (with broadcast)
status launch_unary(const op_args& a, const exec_ctx& c);  // silu, tanh, rsqrt, scale, gelu_*
status launch_swiglu(const op_args& a, const exec_ctx& c);
status launch_rmsnorm(const op_args& a, const exec_ctx& c);
status launch_matmul(const op_args& a, const exec_ctx& c); // W in f32, f16, bf16
/// Checks the last launch; with TROUPE_CUDA_SYNC=1 also synchronises. A failed launch is an
/// error status naming the kernel and CUDA's message (the executor reports it with the node;
/// nothing on a kernel path aborts).
status check_launch(const char* what, const exec_ctx& c);

} // namespace troupe::kernels::cuda
