// matmul_fused.cu: matmul_qkv (q, k and v of one input) and matmul_swiglu (silu(x Wg^T) *
// (x Wu^T)) on the GPU. Decode steps run one GEMV launch over every matrix (gemv.cuh: the
// rows of q, k and v one after another; gate and up rows side by side with the SwiGLU applied
// as the sums land), so a layer's projections cost one launch each instead of three. Larger
// steps with bf16 weights round the input once for cuBLASLt and run its GEMMs (gemm_lt_parts);
// the rest run launch_matmul per matrix. matmul_swiglu's gate and up products of a larger step
// live in the call's scratch (the executor plans it) until the SwiGLU reads them.
#include "kernels/cuda/call_scratch.hpp"
#include "kernels/cuda/gemv.cuh"

namespace troupe::kernels::cuda {
namespace {

op_args matmul_args(const tensor_view& x, const tensor_view& w, const tensor_view& y) {
  op_args m;
  m.kind = op::matmul;
  m.src[0] = x;
  m.src[1] = w;
  m.dst = y;
  return m;
}

// The matrices' products by the step's kernels: one GEMV launch, one rounding for cuBLASLt, or
// launch_matmul each.
status products(const tensor_view& x, const tensor_view* w, float* const* y, int n,
                bool swiglu_gemv, float* swiglu_out, const exec_ctx& c) {
  const long long T = x.rows(), K = x.cols();
  const dtype wt = w[0].type;
  const long long rb = row_bytes(wt, K);
  bool aligned = true;
  for (int i = 0; i < n; ++i)
    aligned = aligned && gemv_aligned(wt, rb, w[i].data, x.as<float>(), K);
  if (T <= max_gemv_tokens && aligned) {
    gemv_job j{};
    j.x = x.as<float>(), j.T = T, j.K = K, j.row_bytes = rb, j.parts = n;
    for (int i = 0; i < n; ++i) {
      j.part[i] = {static_cast<const uint8_t*>(w[i].data), nullptr, y[i], w[i].rows()};
      j.rows += w[i].rows();
    }
    if (swiglu_gemv) {
      j.swiglu = true;
      j.rows = w[0].rows();
      j.part[0].y = swiglu_out;
    }
    return launch_gemv(j, wt, c);
  }
  if (wt == dtype::bf16 && T >= 16) { // as launch_matmul: bf16 activations only from bf16
    lt_part parts[3];
    for (int i = 0; i < n; ++i) parts[i] = {w[i].data, w[i].rows(), y[i], nullptr};
    auto st = gemm_lt_parts(x.as<float>(), T, K, wt, parts, n, c);
    if (st || st.error().code != errc::unsupported) return st;
  }
  for (int i = 0; i < n; ++i)
    TROUPE_TRY(launch_matmul(
        matmul_args(x, w[i], tensor_view(y[i], dtype::f32, shape{T, w[i].rows()})), c));
  return {};
}

} // namespace

status launch_matmul_qkv(const op_args& a, const exec_ctx& c) {
  if (a.src[0].rows() == 0) return {};
  const tensor_view w[3] = {a.src[1], a.src[2], a.src[3]};
  float* const y[3] = {a.dst.as<float>(), a.dst2.as<float>(), a.dst3.as<float>()};
  return products(a.src[0], w, y, 3, false, nullptr, c);
}

status launch_matmul_swiglu(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].rows(), F = a.src[1].rows();
  if (T == 0 || F == 0) return {};
  const tensor_view w[2] = {a.src[1], a.src[2]};
  const long long rb = row_bytes(w[0].type, a.src[0].cols());
  const float* x = a.src[0].as<float>();
  const long long K = a.src[0].cols();
  if (T <= max_gemv_tokens && gemv_aligned(w[0].type, rb, w[0].data, x, K) &&
      gemv_aligned(w[1].type, rb, w[1].data, x, K)) {
    float* const y[2] = {nullptr, nullptr}; // the gate's and up's sums stay in registers
    return products(a.src[0], w, y, 2, true, a.dst.as<float>(), c);
  }
  // larger steps: gate and up [T, F] each into scratch, then the SwiGLU
  const size_t bytes = static_cast<size_t>(T * F) * sizeof(float);
  const size_t up_at = (bytes + 255) / 256 * 256;
  call_scratch tmp;
  TROUPE_TRY(tmp.get(up_at + bytes, c, "matmul_swiglu temporaries"));
  float* g = static_cast<float*>(tmp.ptr);
  float* u = reinterpret_cast<float*>(static_cast<char*>(tmp.ptr) + up_at);
  float* const y[2] = {g, u};
  TROUPE_TRY(products(a.src[0], w, y, 2, false, nullptr, c));
  op_args s;
  s.kind = op::swiglu;
  s.src[0] = tensor_view(g, dtype::f32, shape{T, F});
  s.src[1] = tensor_view(u, dtype::f32, shape{T, F});
  s.dst = a.dst;
  return launch_swiglu(s, c);
}

} // namespace troupe::kernels::cuda
