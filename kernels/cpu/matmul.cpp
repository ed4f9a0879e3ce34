// matmul.cpp (cpu): y = x W^T (+ bias) for W in f32, f16, bf16, q8_0, q4_0. Work is split
// over output features N (each worker reads a disjoint slice of W once). Within a feature,
// W is dequantized in chunks of 256 values into a stack buffer and dotted with every token's
// row, so W is read once per call whatever T is.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t chunk = 256; // multiple of the 32-value quant block; fits L1 with x rows

void matmul(const op_args& a, const exec_ctx& ctx) {
  const auto& x = a.src[0];
  const auto& w = a.src[1];
  const float* bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  const int64_t T = x.rows(), K = x.cols(), N = w.rows();
  const int64_t wrow = row_bytes(w.type, K);
  parallel(ctx, N, 8, [&](int64_t n0, int64_t n1) {
    alignas(64) float buf[chunk];
    for (int64_t n = n0; n < n1; ++n) {
      const char* wr = static_cast<const char*>(w.data) + n * wrow;
      float acc_small[8];
      float* acc = T <= 8 ? acc_small : nullptr;
      std::vector<float> acc_big;
      if (!acc) {
        acc_big.assign(T, 0.0f);
        acc = acc_big.data();
      } else {
        for (int64_t t = 0; t < T; ++t) acc[t] = 0.0f;
      }
      for (int64_t k0 = 0; k0 < K; k0 += chunk) {
        const int64_t len = std::min(chunk, K - k0);
        const float* wp;
        if (w.type == dtype::f32) {
          wp = reinterpret_cast<const float*>(wr) + k0;
        } else {
          dequant_row(w.type, wr, k0, len, buf);
          wp = buf;
        }
        for (int64_t t = 0; t < T; ++t) acc[t] += dot_f32(x.row<float>(t) + k0, wp, len);
      }
      for (int64_t t = 0; t < T; ++t) a.dst.row<float>(t)[n] = acc[t] + (bias ? bias[n] : 0.0f);
    }
  });
}

} // namespace

void register_matmul(registry& r) {
  r.add(op::matmul, backend::cpu, "f32|f16|bf16|q8_0|q4_0",
        [](const op_args& a) {
          const dtype t = a.src[1].type;
          const bool ok_type = t == dtype::f32 || t == dtype::f16 || t == dtype::bf16 ||
                               t == dtype::q8_0 || t == dtype::q4_0;
          return ok_type && contiguous_args(a) && a.src[0].type == dtype::f32 &&
                 (!is_quantized(t) || a.src[1].cols() % qk == 0);
        },
        matmul);
}

} // namespace troupe::kernels::cpu
