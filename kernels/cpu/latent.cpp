// latent.cpp (cpu): the latent-attention ops (op.hpp): concat by rows (and slice), and head_matmul
// threaded over heads. Non-transposed (W_h [N, K]): the CPU matmul kernel per head (int8
// kernels for quantized weights); transposed (W_h [K, N]): y += x[k] * row k, a block of rows
// dequantized once per call for all the step's tokens. Scratch rows are thread-local (32 KB,
// reused across steps). f32 sums.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu.hpp"
#include "kernels/registry.hpp"

namespace troupe::kernels::cpu {
namespace {

void concat(const op_args& a, const exec_ctx&) {
  const auto &x = a.src[0], &y = a.src[1];
  const int64_t A = x.cols(), B = y.cols();
  for (int64_t r = 0; r < x.rows(); ++r) {
    float* out = a.dst.row<float>(r);
    std::memcpy(out, x.row<float>(r), static_cast<size_t>(A) * 4);
    std::memcpy(out + A, y.row<float>(r), static_cast<size_t>(B) * 4);
  }
}

void slice(const op_args& a, const exec_ctx&) {
  const size_t bytes = static_cast<size_t>(a.p.cols) * 4;
  for (int64_t r = 0; r < a.src[0].rows(); ++r)
    std::memcpy(a.dst.row<float>(r), a.src[0].row<float>(r) + a.p.col0, bytes);
}

TROUPE_CPU_DISPATCH
void axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// W_h [N, K] is an ordinary matrix: each head runs the CPU matmul kernel (the int8 GEMV at
// decode, the int8 GEMM for a prefill's tokens), heads side by side on the pool's threads.
// x's rows of a head are strided (H Kx apart), so more than one token is gathered first.
void head_matmul_rows(const op_args& a, const exec_ctx& ctx) {
  const auto &x = a.src[0], &w = a.src[1];
  const int64_t T = x.dims[0], H = x.dims[1], Kx = x.dims[2], N = a.dst.dims[2], K = w.cols();
  op_args m;
  m.kind = op::matmul;
  m.src[0] = tensor_view(x.data, dtype::f32, shape{T, K});
  m.src[1] = tensor_view(w.data, w.type, shape{N, K});
  m.dst = tensor_view(a.dst.data, dtype::f32, shape{T, N});
  const float* xs = x.as<float>();
  float* ys = a.dst.as<float>();
  parallel(ctx, H, 1, [&](int64_t h0, int64_t h1) {
    thread_local std::vector<float> xh, yh;
    const exec_ctx one; // this thread only
    for (int64_t h = h0; h < h1; ++h) {
      op_args c = m;
      c.src[1].data = const_cast<void*>(w.row(h * N));
      if (T == 1) {
        c.src[0].data = const_cast<float*>(xs + h * Kx);
        c.dst.data = ys + h * N;
        matmul(c, one);
        continue;
      }
      xh.resize(static_cast<size_t>(T * K));
      yh.resize(static_cast<size_t>(T * N));
      for (int64_t t = 0; t < T; ++t)
        std::memcpy(xh.data() + t * K, xs + (t * H + h) * Kx, K * sizeof(float));
      c.src[0].data = xh.data();
      c.dst.data = yh.data();
      matmul(c, one);
      for (int64_t t = 0; t < T; ++t)
        std::memcpy(ys + (t * H + h) * N, yh.data() + t * N, N * sizeof(float));
    }
  });
}

// W_h [K, N]: y[t, h, :] = sum_k x[t, h, k] W[h K + k, :], every row adding into all of a
// head's outputs, so heads are the work units. Rows are dequantized a block at a time (about
// 32 KB of f32, L1-resident) and every token of the step uses the block before the next one:
// a prefill of T tokens dequantizes each weight once, not T times.
void head_matmul(const op_args& a, const exec_ctx& ctx) {
  if (a.p.k == 0) return head_matmul_rows(a, ctx);
  const auto &x = a.src[0], &w = a.src[1];
  const int64_t T = x.dims[0], H = x.dims[1], Kx = x.dims[2], N = a.dst.dims[2];
  const int64_t K = w.rows() / H;
  const int64_t rb = std::clamp<int64_t>(8192 / std::max<int64_t>(N, 1), 1, K); // rows per block
  const float* xs = x.as<float>();
  float* ys = a.dst.as<float>();
  parallel(ctx, H, 1, [&](int64_t h0, int64_t h1) {
    thread_local std::vector<float> rows;
    rows.resize(static_cast<size_t>(rb * N));
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t t = 0; t < T; ++t) std::memset(ys + (t * H + h) * N, 0, N * sizeof(float));
      for (int64_t k0 = 0; k0 < K; k0 += rb) {
        const int64_t kn = std::min(rb, K - k0);
        for (int64_t i = 0; i < kn; ++i)
          dequant_row(w.type, w.row(h * K + k0 + i), 0, N, rows.data() + i * N);
        for (int64_t t = 0; t < T; ++t) {
          const float* xv = xs + (t * H + h) * Kx + k0;
          float* out = ys + (t * H + h) * N;
          for (int64_t i = 0; i < kn; ++i) axpy(out, rows.data() + i * N, xv[i], N);
        }
      }
    }
  });
}

} // namespace

void register_latent(registry& r) {
  r.add(op::concat, backend::cpu, "f32", contiguous_args, concat);
  r.add(op::slice, backend::cpu, "f32", contiguous_args, slice);
  r.add(
      op::head_matmul, backend::cpu, "any",
      [](const op_args& a) {
        // dequant_row reads whole blocks: K (or N) on the weight's block boundaries
        const int64_t blk = block_elems(a.src[1].type);
        const int64_t H = a.src[0].dims[1];
        const int64_t K = a.p.k ? a.src[1].rows() / H : a.src[1].cols();
        return contiguous_args(a) && (a.p.k ? a.src[1].cols() : K) % blk == 0;
      },
      head_matmul);
}

} // namespace troupe::kernels::cpu
