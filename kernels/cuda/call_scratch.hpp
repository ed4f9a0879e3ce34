// call_scratch.hpp: the temporaries of one CUDA op call: from the executor's scratch arena when
// the call has one (planned at load: no allocation on the step path), else device memory owned
// for the call and freed with it (the op harness, a step larger than planned). Included by the
// CUDA kernels' launchers only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/op.hpp"

namespace troupe::kernels::cuda {

struct call_scratch {
  void* ptr = nullptr;
  bool owned = false;
  call_scratch() = default;
  call_scratch(const call_scratch&) = delete;
  call_scratch& operator=(const call_scratch&) = delete;
  ~call_scratch() {
    if (owned) cudaFree(ptr);
  }
  /// `bytes` for the call; `what` names them in the out-of-memory error.
  status get(size_t bytes, const exec_ctx& c, const char* what) {
    if (c.scratch) ptr = c.scratch->alloc(bytes);
    if (ptr) return {};
    if (auto e = cudaMalloc(&ptr, bytes); e != cudaSuccess)
      return make_error(errc::out_of_memory, "{}: {}", what, cudaGetErrorString(e));
    owned = true;
    return {};
  }
};

} // namespace troupe::kernels::cuda
