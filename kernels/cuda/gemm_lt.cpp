// gemm_lt.cpp: y = x W^T for bf16 / f16 weights and steps of 16+ tokens on the tensor cores,
// through cuBLASLt (f32 accumulation, f32 output). The activations are rounded to the weights'
// type first (as GPU engines run a bf16 model); with exact activations (precision.hpp) each
// is split into two halves, x = hi + lo, and the two products summed, which keeps the result
// within about 2^-16 of f32 activations (the CPU's AMX bf16 path does the same) at twice the
// tensor-core work. Per thread and device: one cuBLASLt handle and a 32 MiB workspace, made at
// first use; per shape: the layouts and the heuristic's algorithm, kept. Several weights of one
// input (matmul_qkv, gate and up) share one rounding of it (gemm_lt_parts). Row-major y [T, N] =
// x [T, K] W [N, K]^T is column-major D [N, T] = op_T(W as K x N) * (x as K x T).
// unsupported (the caller's tiled kernel runs) when cuBLASLt has no algorithm for a shape.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

#include "kernels/cuda/call_scratch.hpp"
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
  ~plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// (N, T, K, type, alignment of W, of x, of y): the heuristic may only pick an algorithm for
// the alignments the call has (its default assumes 256 bytes; the executor's buffers are 64)
using plan_key = std::tuple<long long, long long, long long, int, int, int, int>;

// per thread, device and stream: a workspace serves one stream at a time
struct lt_state {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<plan_key, plan> plans;
  ~lt_state() {
    plans.clear();
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
  }
};

expected<lt_state*> state_for(cudaStream_t stream) {
  thread_local std::map<std::pair<int, cudaStream_t>, lt_state> states;
  int dev = 0;
  cudaGetDevice(&dev);
  lt_state& st = states[{dev, stream}];
  if (!st.handle) {
    if (auto s = cublasLtCreate(&st.handle); s != CUBLAS_STATUS_SUCCESS)
      return lt_error(s, "cublasLtCreate");
    if (auto e = cudaMalloc(&st.workspace, workspace_bytes); e != cudaSuccess) {
      cublasLtDestroy(st.handle);
      st.handle = nullptr;
      st.workspace = nullptr;
      return make_error(errc::out_of_memory, "cublasLt workspace: {}", cudaGetErrorString(e));
    }
  }
  return &st;
}

// The largest power of two, up to 256, that divides the address.
int alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && u % static_cast<uintptr_t>(a)) a /= 2;
  return a;
}

status lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, what);
  return {};
}

expected<plan*> plan_for(lt_state& st, long long N, long long T, long long K, cudaDataType_t t,
                         int align_w, int align_x, int align_y) {
  plan& p = st.plans[{N, T, K, static_cast<int>(t), align_w, align_x, align_y}];
  if (p.desc) {
    if (!p.ok) return make_error(errc::unsupported, "cublasLt: no algorithm for this shape");
    return &p;
  }
  TROUPE_TRY(lt_check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                      "MatmulDescCreate"));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TROUPE_TRY(
      lt_check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
               "TRANSA"));
  TROUPE_TRY(
      lt_check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
               "TRANSB"));
  TROUPE_TRY(lt_check(cublasLtMatrixLayoutCreate(&p.a, t, K, N, K), "layout A"));
  TROUPE_TRY(lt_check(cublasLtMatrixLayoutCreate(&p.b, t, K, T, K), "layout B"));
  TROUPE_TRY(lt_check(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, N, T, N), "layout D"));
  cublasLtMatmulPreference_t pref = nullptr;
  TROUPE_TRY(lt_check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate"));
  const uint32_t aw = static_cast<uint32_t>(align_w), ax = static_cast<uint32_t>(align_x),
                 ay = static_cast<uint32_t>(align_y);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const uint32_t*> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ax},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ay},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ay}};
  status set =
      lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)),
               "workspace preference");
  for (auto [attr, v] : aligns)
    if (set)
      set = lt_check(cublasLtMatmulPreferenceSetAttribute(pref, attr, v, sizeof(*v)),
                     "alignment preference");
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  const auto s = set ? cublasLtMatmulAlgoGetHeuristic(st.handle, p.desc, p.a, p.b, p.d, p.d, pref,
                                                      1, &r, &found)
                     : CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulPreferenceDestroy(pref);
  if (!set) return set.error();
  p.ok = s == CUBLAS_STATUS_SUCCESS && found > 0;
  if (!p.ok) return make_error(errc::unsupported, "cublasLt: no algorithm for this shape");
  p.algo = r.algo;
  return &p;
}

} // namespace

status gemm_lt_parts(const float* x, long long T, long long K, dtype wt, const lt_part* parts,
                     int n_parts, const exec_ctx& c) {
  const bool bf16 = wt == dtype::bf16;
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  if (K % 8 != 0) return make_error(errc::unsupported, "cublasLt: K {} not a multiple of 8", K);
  auto s = static_cast<cudaStream_t>(c.stream);
  TROUPE_TRY_ASSIGN(st, state_for(s));
  const bool exact = exact_activations();
  // the remainder half starts 256-byte aligned after the rounded one
  const size_t half_bytes = (static_cast<size_t>(T * K) * 2 + 255) / 256 * 256;
  call_scratch sb; // the rounded activations (and the remainders)
  TROUPE_TRY(sb.get(half_bytes * (exact ? 2 : 1), c, "gemm activations"));
  void* hi = sb.ptr;
  void* lo = exact ? static_cast<char*>(sb.ptr) + half_bytes : nullptr;
  const int ax = std::min(alignment(hi), lo ? alignment(lo) : 256);
  plan* plans[3] = {};
  for (int i = 0; i < n_parts; ++i) { // every part's algorithm before any work is queued
    TROUPE_TRY_ASSIGN(
        p, plan_for(*st, parts[i].N, T, K, t, alignment(parts[i].w), ax, alignment(parts[i].y)));
    plans[i] = p;
  }
  TROUPE_TRY(launch_to_half(x, hi, lo, T * K, bf16, c)); // once for every part
  const float one = 1.0f, zero = 0.0f;
  for (int i = 0; i < n_parts; ++i) {
    const plan* p = plans[i];
    float* y = parts[i].y;
    auto run = [&](const void* xh, const float* beta) -> status {
      const auto r = cublasLtMatmul(st->handle, p->desc, &one, parts[i].w, p->a, xh, p->b, beta, y,
                                    p->d, y, p->d, &p->algo, st->workspace, workspace_bytes, s);
      // a refusal of these operands after all: the caller's own kernel runs instead (it
      // writes every part whole)
      if (r == CUBLAS_STATUS_NOT_SUPPORTED || r == CUBLAS_STATUS_INVALID_VALUE)
        return make_error(errc::unsupported, "cublasLt: {}", cublasLtGetStatusString(r));
      return lt_check(r, "Matmul");
    };
    TROUPE_TRY(run(hi, &zero));
    if (exact) TROUPE_TRY(run(lo, &one));
    if (parts[i].bias) TROUPE_TRY(launch_add_bias(y, parts[i].bias, T, parts[i].N, c));
  }
  return check_launch("cublasLt matmul", c);
}

status gemm_lt(const op_args& a, const exec_ctx& c) {
  const lt_part p{a.src[1].data, a.src[1].rows(), a.dst.as<float>(),
                  a.src[2].data ? a.src[2].as<float>() : nullptr};
  return gemm_lt_parts(a.src[0].as<float>(), a.src[0].rows(), a.src[0].cols(), a.src[1].type, &p, 1,
                       c);
}

} // namespace troupe::kernels::cuda
