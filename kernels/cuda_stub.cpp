// cuda_stub.cpp: stands in for kernels/cuda when the build has no nvcc: no CUDA device, no
// CUDA kernels, and one log line saying the run is CPU-only.
#include "core/log.hpp"
#include "kernels/device.hpp"
#include "kernels/registry.hpp"

namespace troupe::kernels {

bool cuda_available() {
  static const bool said = [] {
    TROUPE_LOG_INFO("cuda", "built without CUDA; running on the CPU");
    return true;
  }();
  (void)said;
  return false;
}

std::string cuda_summary() {
  return "built without CUDA";
}

device* get_cuda_device(int) {
  return nullptr;
}

void register_cuda_kernels(registry&) {}

status jit_prepare_gpu(const ew_program&) {
  return make_error(errc::unavailable, "built without CUDA");
}

} // namespace troupe::kernels
