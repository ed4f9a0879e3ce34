// cuda_device.cpp: the CUDA device (device.hpp) over the runtime API, CUDA availability
// (said once in the log when absent), and registration of the CUDA kernels when a GPU is
// present. CUDA error codes become troupe errors here, with the call that failed.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "core/log.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/device.hpp"
#include "kernels/expr.hpp"
#include "kernels/precision.hpp"
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
  int index() const override { return index_; }
  status make_current() override {
    if (auto e = cudaSetDevice(index_); e != cudaSuccess) return cuda_error(e, "cudaSetDevice");
    return {};
  }
  expected<void*> stream_create() override {
    cudaSetDevice(index_);
    cudaStream_t st = nullptr;
    if (auto e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking); e != cudaSuccess)
      return cuda_error(e, "cudaStreamCreate");
    return static_cast<void*>(st);
  }
  void stream_destroy(void* stream) override {
    if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
  status upload_async(void* dst, const void* src, size_t n, void* stream) override {
    if (auto e =
            cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream));
        e != cudaSuccess)
      return cuda_error(e, "cudaMemcpyAsync H2D");
    return {};
  }
  status download_async(void* dst, const void* src, size_t n, void* stream) override {
    if (auto e =
            cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream));
        e != cudaSuccess)
      return cuda_error(e, "cudaMemcpyAsync D2H");
    return {};
  }
  status copy_async(void* dst, const void* src, size_t n, void* stream) override {
    if (auto e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice,
                                 static_cast<cudaStream_t>(stream));
        e != cudaSuccess)
      return cuda_error(e, "cudaMemcpyAsync D2D");
    return {};
  }
  status stream_synchronize(void* stream) override {
    if (auto e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream)); e != cudaSuccess)
      return cuda_error(e, "cudaStreamSynchronize");
    return {};
  }
  expected<void*> alloc_pinned(size_t bytes) override {
    void* p = nullptr;
    if (auto e = cudaMallocHost(&p, std::max<size_t>(bytes, 1)); e != cudaSuccess)
      return cuda_error(e, "cudaMallocHost");
    return p;
  }
  void free_pinned(void* ptr) override { cudaFreeHost(ptr); }
  bool can_capture() const override { return true; }
  status capture_begin(void* stream) override {
    if (auto e = cudaStreamBeginCapture(static_cast<cudaStream_t>(stream),
                                        cudaStreamCaptureModeThreadLocal);
        e != cudaSuccess)
      return cuda_error(e, "cudaStreamBeginCapture");
    return {};
  }
  expected<void*> capture_end(void* stream) override {
    cudaGraph_t g = nullptr;
    if (auto e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &g); e != cudaSuccess)
      return cuda_error(e, "cudaStreamEndCapture");
    cudaGraphExec_t x = nullptr;
    const auto e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) return cuda_error(e, "cudaGraphInstantiate");
    return static_cast<void*>(x);
  }
  status graph_launch(void* graph, void* stream) override {
    if (auto e =
            cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream));
        e != cudaSuccess)
      return cuda_error(e, "cudaGraphLaunch");
    return {};
  }
  void graph_destroy(void* graph) override {
    if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
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

// The GPUs this process can use, and why none when so (said once in the log).
struct gpus {
  int count = 0;
  std::string why;
};
const gpus& gpu_info() {
  static const gpus info = [] {
    gpus g;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      g.why = fmt::format("no usable GPU ({})", cudaGetErrorString(e));
      TROUPE_LOG_INFO("cuda", "{}; running on the CPU", g.why);
      return g;
    }
    if (n == 0) {
      g.why = "no GPU found";
      TROUPE_LOG_INFO("cuda", "no GPU found; running on the CPU");
    }
    g.count = n;
    return g;
  }();
  return info;
}

int gpu_count() {
  return gpu_info().count;
}

} // namespace

bool cuda_available() {
  return gpu_count() > 0;
}

std::string cuda_summary() {
  const auto& g = gpu_info();
  if (g.count == 0) return g.why;
  return fmt::format("{} GPU{}", g.count, g.count == 1 ? "" : "s");
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

namespace {
bool contig(const op_args& a) {
  for (const auto& s : a.src)
    if (s.data && !s.contiguous()) return false;
  return a.dst.contiguous() && (!a.dst2.data || a.dst2.contiguous()) &&
         (!a.dst3.data || a.dst3.contiguous());
}
// matmul_qkv / matmul_swiglu: f32 input, `weights` matrices of one type the matmul takes
bool fused_ok(const op_args& a, int weights) {
  const dtype t = a.src[1].type;
  for (int i = 1; i <= weights; ++i)
    if (a.src[static_cast<size_t>(i)].type != t) return false;
  return a.src[0].type == dtype::f32 && cuda::matmul_weight_ok(t) && contig(a);
}
} // namespace

status jit_prepare_gpu(const ew_program& p) {
  const char* off = std::getenv("TROUPE_JIT");
  if (off && std::string(off) == "0") return make_error(errc::unavailable, "TROUPE_JIT=0");
  if (!cuda_available()) return make_error(errc::unavailable, "no GPU");
  return cuda::jit_prepare_gpu(p);
}

void register_cuda_kernels(registry& r) {
  if (!cuda_available()) return;
  auto f32 = [](const op_args& a) {
    for (const auto& s : a.src)
      if (s.data && s.type != dtype::f32) return false;
    return a.dst.type == dtype::f32 && contig(a);
  };
  for (op o : {op::add, op::mul}) r.add(o, backend::cuda, "f32", f32, cuda::launch_binary);
  for (op o : {op::silu, op::tanh, op::rsqrt, op::scale, op::gelu_erf, op::gelu_tanh, op::relu,
               op::sigmoid, op::exp, op::abs, op::recip, op::clamp})
    r.add(o, backend::cuda, "f32", f32, cuda::launch_unary);
  r.add(op::swiglu, backend::cuda, "f32", f32, cuda::launch_swiglu);
  r.add(op::rmsnorm, backend::cuda, "f32", f32, cuda::launch_rmsnorm);
  r.add(op::add_rmsnorm, backend::cuda, "f32", f32, cuda::launch_add_rmsnorm);
  r.add(op::layernorm, backend::cuda, "f32", f32, cuda::launch_layernorm);
  r.add(op::softmax, backend::cuda, "f32", f32, cuda::launch_softmax);
  r.add(op::sum_rows, backend::cuda, "f32", f32, cuda::launch_sum_rows);
  r.add(op::concat, backend::cuda, "f32", f32, cuda::launch_concat);
  r.add(
      op::embedding, backend::cuda, "f32|f16|bf16|q8_0|q4_0",
      [](const op_args& a) { return cuda::matmul_weight_ok(a.src[0].type) && contig(a); },
      cuda::launch_embedding);
  r.add(
      op::matmul, backend::cuda, "f32|f16|bf16 (cublasLt)|q8_0|q4_0",
      [](const op_args& a) {
        return a.src[0].type == dtype::f32 && cuda::matmul_weight_ok(a.src[1].type) &&
               (!a.src[2].data || a.src[2].type == dtype::f32) && contig(a);
      },
      cuda::launch_matmul);
  r.add(
      op::matmul_qkv, backend::cuda, "f32|f16|bf16 (cublasLt)|q8_0|q4_0: one GEMV launch",
      [](const op_args& a) {
        return fused_ok(a, 3) && a.dst2.type == dtype::f32 && a.dst3.type == dtype::f32;
      },
      cuda::launch_matmul_qkv);
  r.add(
      op::matmul_swiglu, backend::cuda, "f32|f16|bf16 (cublasLt)|q8_0|q4_0: SwiGLU in the GEMV",
      [](const op_args& a) { return fused_ok(a, 2) && a.dst.type == dtype::f32; },
      cuda::launch_matmul_swiglu);
  r.add(
      op::head_matmul, backend::cuda, "f32|f16|bf16|q8_0|q4_0",
      [](const op_args& a) {
        return a.src[0].type == dtype::f32 && cuda::matmul_weight_ok(a.src[1].type) && contig(a);
      },
      cuda::launch_head_matmul);
  r.add(
      op::rope, backend::cuda, "f32",
      [](const op_args& a) {
        return a.src[0].type == dtype::f32 && a.dst.type == dtype::f32 &&
               a.p.rope.rot_dim <= cuda::rope_max_rot_dim() && a.p.rope.rot_offset == 0 &&
               !a.p.rope.inverse && contig(a); // (an offset or inverse turn: not here yet)
      },
      cuda::launch_rope);
  r.add(
      op::rope_kv_store, backend::cuda, "f32|f16|bf16 cache",
      [](const op_args& a) {
        const dtype c = a.dst.type;
        const auto &k = a.src[0], &v = a.src[3], &q = a.src[4];
        // a 16-bit cache stages k in shared memory: 48 KB less the 2 KB of angles
        const bool fits =
            k.dims.rank == 3 &&
            (c == dtype::f32 || k.dims[1] * k.dims[2] <= (48 * 1024 - 2048) / 4); // 48 KB staging
        return k.type == dtype::f32 && (c == dtype::f32 || c == dtype::f16 || c == dtype::bf16) &&
               a.p.rope.rot_dim <= cuda::rope_max_rot_dim() && a.p.rope.rot_offset == 0 &&
               !a.p.rope.inverse && fits &&
               (!v.data || (v.type == dtype::f32 && a.dst2.type == c)) &&
               (!q.data || (q.type == dtype::f32 && a.dst3.type == dtype::f32)) && contig(a);
      },
      cuda::launch_rope_kv_store);
  r.add(
      op::kv_store, backend::cuda, "f32|f16|bf16 cache",
      [](const op_args& a) {
        const dtype c = a.dst.type;
        return a.src[0].type == dtype::f32 &&
               (c == dtype::f32 || c == dtype::f16 || c == dtype::bf16) && contig(a);
      },
      cuda::launch_kv_store);
  for (op o : {op::attention, op::paged_attention})
    r.add(
        o, backend::cuda, "gqa",
        [](const op_args& a) {
          const dtype c = a.src[1].type;
          const tensor_view& sinks = a.src[a.kind == op::attention ? 3 : 4];
          return a.src[0].type == dtype::f32 && a.dst.type == dtype::f32 &&
                 (c == dtype::f32 || c == dtype::f16 || c == dtype::bf16) && a.src[2].type == c &&
                 a.src[0].dims.rank == 3 && a.src[0].dims[2] <= cuda::attention_max_head_dim() &&
                 (!sinks.data || sinks.type == dtype::f32) && contig(a) &&
                 !(a.kind == op::paged_attention &&
                   (a.src[5].data || a.src[6].data ||
                    a.src[7].data)); // (no sparse, compressed
                                     // or relative-bias kernel yet)
        },
        o == op::attention ? cuda::launch_attention : cuda::launch_paged_attention);
  for (op o : {op::argmax, op::topk})
    r.add(
        o, backend::cuda, "f32",
        [](const op_args& a) { return a.src[0].type == dtype::f32 && contig(a); },
        cuda::launch_topk);
  r.add(
      op::convert, backend::cuda, "f32|f16|bf16",
      [](const op_args& a) {
        auto fl = [](dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; };
        return fl(a.src[0].type) && fl(a.dst.type) && contig(a);
      },
      cuda::launch_convert);
  r.add(
      op::quantize, backend::cuda, "q8_0|q4_0",
      [](const op_args& a) {
        return a.src[0].type == dtype::f32 &&
               (a.dst.type == dtype::q8_0 || a.dst.type == dtype::q4_0) && contig(a);
      },
      cuda::launch_quantize);
  r.add(
      op::dequantize, backend::cuda, "q8_0|q4_0",
      [](const op_args& a) {
        return (a.src[0].type == dtype::q8_0 || a.src[0].type == dtype::q4_0) &&
               a.dst.type == dtype::f32 && contig(a);
      },
      cuda::launch_dequantize);
  r.add(
      op::moe_router, backend::cuda, "f32",
      [](const op_args& a) {
        const int64_t E = a.src[0].cols();
        return a.src[0].type == dtype::f32 && E <= 4096 && contig(a) && // shared memory: 2 E + 2 G
               !a.p.router_sqrt_softplus && !a.p.router_sparsemixer && !a.p.router_bias_on_logits &&
               !a.src[2].data; // (DeepSeek-V4's, PhiMoE's: not here yet)
      },
      cuda::launch_moe_router);
  r.add(
      op::elementwise, backend::cuda, "nvrtc",
      [](const op_args& a) {
        if (!a.p.program || a.p.program->sources > 4 || a.dst.type != dtype::f32) return false;
        for (int i = 0; i < a.p.program->sources; ++i)
          if (a.src[static_cast<size_t>(i)].type != dtype::f32) return false;
        return contig(a);
      },
      cuda::launch_elementwise);
  r.add(
      op::moe, backend::cuda, "f32|f16|bf16|q8_0|q4_0",
      [](const op_args& a) {
        // one weight format for the three stacked matrices (launch_moe reads them alike)
        // (ungated relu^2 experts, Nemotron-H's, GeGLU experts and per-expert scales, Gemma
        // 4's: not in launch_moe)
        // (nor LongCat's zero-computation experts)
        return !a.p.moe_relu2 && !a.p.moe_gelu && !a.p.moe_clamp && !a.p.zero_experts &&
               !a.p.moe_post_norm && !a.src[9].data && a.src[0].type == dtype::f32 &&
               cuda::matmul_weight_ok(a.src[3].type) && a.src[4].type == a.src[3].type &&
               a.src[5].type == a.src[3].type && moe_biases_ok(a) && contig(a);
      },
      cuda::launch_moe);
}

} // namespace troupe::kernels
