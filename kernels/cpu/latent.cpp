// latent.cpp (cpu): the latent-attention ops (op.hpp): concat by rows, and head_matmul
// threaded over (token, head) pairs. Non-transposed (W_h [N, K]): N dot products of the
// head's x with dequantized rows; transposed (W_h [K, N]): y += x[k] * row k, rows dequantized
// once per pair. Scratch rows are thread-local (a few KB, reused across steps). f32 sums.
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu.hpp"

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

TROUPE_CPU_DISPATCH
void axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void head_matmul(const op_args& a, const exec_ctx& ctx) {
  const auto &x = a.src[0], &w = a.src[1];
  const int64_t T = x.dims[0], H = x.dims[1], Kx = x.dims[2], N = a.dst.dims[2];
  const bool tr = a.p.k != 0;
  const int64_t K = tr ? w.rows() / H : w.cols();
  parallel(ctx, T * H, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(w.cols()));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H;
      const float* xv = x.as<float>() + (t * H + h) * Kx;
      float* out = a.dst.as<float>() + (t * H + h) * N;
      if (tr) {
        std::memset(out, 0, static_cast<size_t>(N) * 4);
        for (int64_t k = 0; k < K; ++k) {
          dequant_row(w.type, w.row(h * K + k), 0, N, row.data());
          axpy(out, row.data(), xv[k], N);
        }
      } else {
        for (int64_t n = 0; n < N; ++n) {
          dequant_row(w.type, w.row(h * N + n), 0, K, row.data());
          out[n] = dot_f32(xv, row.data(), K);
        }
      }
    }
  });
}

} // namespace

void register_latent(registry& r) {
  r.add(op::concat, backend::cpu, "f32", contiguous_args, concat);
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
