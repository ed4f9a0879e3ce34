// jit_nvrtc.cpp: element-wise programs (expr.hpp) compiled for the GPU with NVRTC when a model
// loads (or at a program's first launch), as the CPU's JIT builds them with the system
// compiler: the program's straight-line code becomes the body of a grid-stride kernel over
// [rows, cols] with up to four broadcast sources, compiled for the current device's
// architecture into a cubin, loaded with the runtime's library API (no libcuda link, so
// binaries start where no driver is installed), and cached per (program hash, device). A
// program NVRTC cannot build is composed from primitive ops by the executor instead.
// Counters join the CPU JIT's (kernels/jit.hpp). Thread-safe.
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <map>
#include <mutex>

#include "core/log.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/expr.hpp"

namespace troupe::kernels::cuda {
namespace {

struct built {
  cudaLibrary_t lib = nullptr;
  cudaKernel_t kernel = nullptr;
};

std::mutex mu;
std::map<std::pair<uint64_t, int>, built> cache; // (program hash, device) -> kernel

// The kernel's source: dst[t, c] = program(src0..3 at (t, c) through their strides).
std::string source_of(const ew_program& p) {
  std::string body = p.to_cpp("s", "out");
  // the CPU form calls std:: math; device code has the same float overloads unqualified
  for (size_t at = body.find("std::"); at != std::string::npos; at = body.find("std::", at))
    body.erase(at, 5);
  std::string loads;
  for (int i = 0; i < p.sources && i < 4; ++i)
    loads += fmt::format("  const float s{0} = src{0}[t * rs[{0}] + c * cs[{0}]];\n", i);
  return fmt::format(R"(
struct strides {{ long long v[4]; }};
extern "C" __global__ void ew(const float* src0, const float* src1, const float* src2,
                              const float* src3, strides rsv, strides csv, float* dst,
                              long long rows, long long cols) {{
  const long long* rs = rsv.v;
  const long long* cs = csv.v;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < rows * cols;
       i += (long long)gridDim.x * blockDim.x) {{
    const long long t = i / cols, c = i % cols;
{}    float out;
{}
    dst[i] = out;
  }}
}}
)",
                     loads, body);
}

expected<built> compile(const ew_program& p, int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return make_error(errc::unavailable, "nvrtc: no cuda:{}", device);
  const std::string src = source_of(p);
  nvrtcProgram prog = nullptr;
  if (nvrtcCreateProgram(&prog, src.c_str(), "troupe_ew.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return make_error(errc::unavailable, "nvrtc: cannot create a program");
  const std::string arch = fmt::format("--gpu-architecture=sm_{}{}", prop.major, prop.minor);
  const char* opts[] = {arch.c_str(), "--std=c++17", "-default-device"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    nvrtcDestroyProgram(&prog);
    return make_error(errc::unavailable, "nvrtc: {} compiling '{}': {}", nvrtcGetErrorString(r),
                      p.text, log);
  }
  size_t size = 0;
  nvrtcGetCUBINSize(prog, &size);
  std::string cubin(size, '\0');
  nvrtcGetCUBIN(prog, cubin.data());
  nvrtcDestroyProgram(&prog);
  built b;
  if (auto e = cudaLibraryLoadData(&b.lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      e != cudaSuccess)
    return make_error(errc::unavailable, "nvrtc: loading the cubin: {}", cudaGetErrorString(e));
  if (auto e = cudaLibraryGetKernel(&b.kernel, b.lib, "ew"); e != cudaSuccess) {
    cudaLibraryUnload(b.lib);
    return make_error(errc::unavailable, "nvrtc: no kernel in the cubin: {}",
                      cudaGetErrorString(e));
  }
  return b;
}

expected<built> get(const ew_program& p) {
  int device = 0;
  cudaGetDevice(&device);
  std::lock_guard<std::mutex> lk(mu);
  const auto key = std::make_pair(p.hash(), device);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  TROUPE_TRY_ASSIGN(b, compile(p, device));
  cache.emplace(key, b);
  return b;
}

} // namespace

status jit_prepare_gpu(const ew_program& p) {
  TROUPE_TRY_ASSIGN(b, get(p));
  (void)b;
  return {};
}

status launch_elementwise(const op_args& a, const exec_ctx& c) {
  const ew_program& p = *a.p.program;
  TROUPE_TRY_ASSIGN(b, get(p));
  const long long rows = a.dst.rows(), cols = a.dst.cols();
  if (rows * cols == 0) return {};
  const float* src[4] = {nullptr, nullptr, nullptr, nullptr};
  struct strides {
    long long v[4];
  } rs{}, cs{};
  for (int i = 0; i < p.sources && i < 4; ++i) {
    const tensor_view& s = a.src[static_cast<size_t>(i)];
    src[i] = s.as<float>();
    rs.v[i] = s.rows() == 1 && rows > 1 ? 0 : s.cols(); // a [1, C] row broadcasts over rows
    cs.v[i] = s.cols() == 1 && cols > 1 ? 0 : 1;        // a [T, 1] column over columns
  }
  float* dst = a.dst.as<float>();
  void* args[] = {&src[0],
                  &src[1],
                  &src[2],
                  &src[3],
                  &rs,
                  &cs,
                  &dst,
                  const_cast<long long*>(&rows),
                  const_cast<long long*>(&cols)};
  const long long n = rows * cols;
  const unsigned blocks = static_cast<unsigned>(n / 256 + 1 < 65536 ? n / 256 + 1 : 65536);
  if (auto e = cudaLaunchKernel(reinterpret_cast<const void*>(b.kernel), dim3(blocks), dim3(256),
                                args, 0, static_cast<cudaStream_t>(c.stream));
      e != cudaSuccess)
    return make_error(errc::internal, "cuda kernel elementwise '{}' failed: {}", p.text,
                      cudaGetErrorString(e));
  return check_launch("elementwise", c);
}

} // namespace troupe::kernels::cuda
