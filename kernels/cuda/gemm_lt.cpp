// gemm_lt.cpp: y = x W^T for bf16 / f16 weights and steps of 16+ tokens on the tensor cores,
// through cuBLASLt (f32 accumulation, f32 output). The activations are rounded to the weights'
// type first (as GPU engines run a bf16 model); with exact activations (precision.hpp) each
// is split into two halves, x = hi + lo, and the two products summed, which keeps the result
// within about 2^-16 of f32 activations (the CPU's AMX bf16 path does the same) at twice the
// tensor-core work. Per thread and device: one cuBLASLt handle and a 32 MiB workspace, made at
// first use; per shape: the layouts and the heuristic's algorithm, kept. Row-major y [T, N] =
// x [T, K] W [N, K]^T is column-major D [N, T] = op_T(W as K x N) * (x as K x T).
// unsupported (the caller's tiled kernel runs) when cuBLASLt has no algorithm for a shape.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "kernels/cuda/cuda.hpp"
#include "kernels/precision.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr size_t workspace_bytes = size_t{32} << 20;

error lt_error(cublasStatus_t s, const char* what) {
  return make_error(errc::internal, "cublasLt: {}: {} ({})", what, cublasLtGetStatusString(s),
                    static_cast<int>(s));
}

struct plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};

struct lt_state {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<std::tuple<long long, long long, long long, int>, plan> plans; // (N, T, K, type)
};

expected<lt_state*> state_for_current_device() {
  thread_local std::map<int, lt_state> states;
  int dev = 0;
  cudaGetDevice(&dev);
  lt_state& st = states[dev];
  if (!st.handle) {
    if (auto s = cublasLtCreate(&st.handle); s != CUBLAS_STATUS_SUCCESS)
      return lt_error(s, "cublasLtCreate");
    if (auto e = cudaMalloc(&st.workspace, workspace_bytes); e != cudaSuccess) {
      cublasLtDestroy(st.handle);
      st.handle = nullptr;
      return make_error(errc::out_of_memory, "cublasLt workspace: {}", cudaGetErrorString(e));
    }
  }
  return &st;
}

expected<plan*> plan_for(lt_state& st, long long N, long long T, long long K, cudaDataType_t t) {
  plan& p = st.plans[{N, T, K, static_cast<int>(t)}];
  if (p.desc) {
    if (!p.ok) return make_error(errc::unsupported, "cublasLt: no algorithm for this shape");
    return &p;
  }
  if (auto s = cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      s != CUBLAS_STATUS_SUCCESS)
    return lt_error(s, "MatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  cublasLtMatrixLayoutCreate(&p.a, t, K, N, K);
  cublasLtMatrixLayoutCreate(&p.b, t, K, T, K);
  cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, N, T, N);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes, sizeof(workspace_bytes));
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  const auto s =
      cublasLtMatmulAlgoGetHeuristic(st.handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &r, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = s == CUBLAS_STATUS_SUCCESS && found > 0;
  if (!p.ok) return make_error(errc::unsupported, "cublasLt: no algorithm for this shape");
  p.algo = r.algo;
  return &p;
}

// scratch for the rounded activations: the executor's arena, else a temporary (op harness)
struct scratch_bytes {
  void* ptr = nullptr;
  bool owned = false;
  ~scratch_bytes() {
    if (owned) cudaFree(ptr);
  }
};

} // namespace

status gemm_lt(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].rows(), K = a.src[0].cols(), N = a.src[1].rows();
  const bool bf16 = a.src[1].type == dtype::bf16;
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  if (K % 8 != 0) return make_error(errc::unsupported, "cublasLt: K {} not a multiple of 8", K);
  TROUPE_TRY_ASSIGN(st, state_for_current_device());
  TROUPE_TRY_ASSIGN(p, plan_for(*st, N, T, K, t));
  const bool exact = exact_activations();
  const size_t half_bytes = static_cast<size_t>(T * K) * 2;
  scratch_bytes sb;
  if (c.scratch) sb.ptr = c.scratch->alloc(half_bytes * (exact ? 2 : 1));
  if (!sb.ptr) {
    if (auto e = cudaMalloc(&sb.ptr, half_bytes * (exact ? 2 : 1)); e != cudaSuccess)
      return make_error(errc::out_of_memory, "gemm activations: {}", cudaGetErrorString(e));
    sb.owned = true;
  }
  void* hi = sb.ptr;
  void* lo = exact ? static_cast<char*>(sb.ptr) + half_bytes : nullptr;
  auto s = static_cast<cudaStream_t>(c.stream);
  TROUPE_TRY(launch_to_half(a.src[0].as<float>(), hi, lo, T * K, bf16, c));
  const float one = 1.0f, zero = 0.0f;
  float* y = a.dst.as<float>();
  auto run = [&](const void* x, const float* beta) -> status {
    const auto r = cublasLtMatmul(st->handle, p->desc, &one, a.src[1].data, p->a, x, p->b, beta, y,
                                  p->d, y, p->d, &p->algo, st->workspace, workspace_bytes, s);
    if (r != CUBLAS_STATUS_SUCCESS) return lt_error(r, "Matmul");
    return {};
  };
  TROUPE_TRY(run(hi, &zero));
  if (exact) TROUPE_TRY(run(lo, &one));
  if (a.src[2].data) TROUPE_TRY(launch_add_bias(y, a.src[2].as<float>(), T, N, c));
  return check_launch("cublasLt matmul", c);
}

} // namespace troupe::kernels::cuda
