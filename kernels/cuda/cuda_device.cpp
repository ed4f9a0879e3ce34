// cuda_device.cpp: the CUDA device (device.hpp) over the runtime API, CUDA availability
// (said once in the log when absent), and registration of the CUDA kernels when a GPU is
// present. CUDA error codes become troupe errors here, with the call that failed.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "core/log.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/device.hpp"
#include "kernels/registry.hpp"

namespace troupe::kernels {
namespace {

error cuda_error(cudaError_t e, const char* what) {
  return make_error(errc::io_error, "cuda: {}: {} ({})", what, cudaGetErrorString(e),
                    static_cast<int>(e));
}

class cuda_device final : public device {
 public:
  explicit cuda_device(int index)
      : index_(index) {}
  backend kind() const override { return backend::cuda; }
  std::string describe() const override {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, index_);
    return fmt::format("cuda:{} ({}, sm_{}{})", index_, prop.name, prop.major, prop.minor);
  }
  expected<void*> alloc(size_t bytes) override {
    cudaSetDevice(index_);
    void* p = nullptr;
    if (auto e = cudaMalloc(&p, std::max<size_t>(bytes, 1)); e != cudaSuccess)
      return cuda_error(e, "cudaMalloc");
    return p;
  }
  void free(void* ptr) override { cudaFree(ptr); }
  status upload(void* dst, const void* src, size_t n) override {
    if (auto e = cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice); e != cudaSuccess)
      return cuda_error(e, "cudaMemcpy H2D");
    return {};
  }
  status download(void* dst, const void* src, size_t n) override {
    if (auto e = cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost); e != cudaSuccess)
      return cuda_error(e, "cudaMemcpy D2H");
    return {};
  }
  status synchronize() override {
    if (auto e = cudaDeviceSynchronize(); e != cudaSuccess) return cuda_error(e, "synchronize");
    return {};
  }
  int64_t memory_total() const override {
    size_t f = 0, t = 0;
    cudaSetDevice(index_);
    cudaMemGetInfo(&f, &t);
    return static_cast<int64_t>(t);
  }
  int64_t memory_free() const override {
    size_t f = 0, t = 0;
    cudaSetDevice(index_);
    cudaMemGetInfo(&f, &t);
    return static_cast<int64_t>(f);
  }

 private:
  int index_;
};

int gpu_count() {
  static const int count = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      TROUPE_LOG_INFO("cuda", "no usable GPU ({}); running on the CPU", cudaGetErrorString(e));
      return 0;
    }
    if (n == 0) TROUPE_LOG_INFO("cuda", "no GPU found; running on the CPU");
    return n;
  }();
  return count;
}

} // namespace

bool cuda_available() {
  return gpu_count() > 0;
}

device* get_cuda_device(int index) {
  static std::vector<std::unique_ptr<cuda_device>> devices = [] {
    std::vector<std::unique_ptr<cuda_device>> out;
    for (int i = 0; i < gpu_count(); ++i) out.push_back(std::make_unique<cuda_device>(i));
    return out;
  }();
  if (index < 0 || index >= static_cast<int>(devices.size())) return nullptr;
  return devices[index].get();
}

status cuda::check_launch(const char* what, const exec_ctx& c) {
  static const bool sync = std::getenv("TROUPE_CUDA_SYNC") != nullptr;
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && sync) e = cudaStreamSynchronize(static_cast<cudaStream_t>(c.stream));
  if (e != cudaSuccess)
    return make_error(errc::internal, "cuda kernel {} failed: {}", what, cudaGetErrorString(e));
  return {};
}

void register_cuda_kernels(registry& r) {
  if (!cuda_available()) return;
  auto f32 = [](const op_args& a) {
    for (const auto& s : a.src)
      if (s.data && s.type != dtype::f32) return false;
    return a.dst.type == dtype::f32 && a.dst.contiguous();
  };
  for (op o : {op::add, op::mul}) r.add(o, backend::cuda, "f32", f32, cuda::launch_binary);
  for (op o : {op::silu, op::tanh, op::rsqrt, op::scale, op::gelu_erf})
    r.add(o, backend::cuda, "f32", f32, cuda::launch_unary);
  r.add(op::swiglu, backend::cuda, "f32", f32, cuda::launch_swiglu);
  r.add(op::rmsnorm, backend::cuda, "f32", f32, cuda::launch_rmsnorm);
  r.add(
      op::matmul, backend::cuda, "f32|f16|bf16",
      [](const op_args& a) {
        const dtype t = a.src[1].type;
        return a.src[0].type == dtype::f32 && a.dst.type == dtype::f32 &&
               (t == dtype::f32 || t == dtype::f16 || t == dtype::bf16) && a.src[0].contiguous() &&
               a.src[1].contiguous();
      },
      cuda::launch_matmul);
}

} // namespace troupe::kernels
