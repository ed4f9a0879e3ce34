// matmul.cpp (cpu): y = x W^T (+ bias) for W in f32, f16, bf16, q8_0, q4_0. Work is split
// over output features N (each worker reads a disjoint slice of W once). Within a feature,
// W is dequantized in chunks of 256 values into a stack buffer and dotted with every token's
// row, so W is read once per call whatever T is.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <cblas.h>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemv.hpp"

extern "C" void openblas_set_num_threads(int);

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t chunk = 256; // multiple of the 32-value quant block; fits L1 with x rows

// The SIMD path: every weight row is read once and dotted with all T token rows while it
// sits in L1. Quantized weights take int8 activations, quantized here once per call.
bool matmul_simd(const op_args& a, const exec_ctx& ctx) {
  const gemv_table& tab = gemv_kernels();
  const auto& x = a.src[0];
  const auto& w = a.src[1];
  gemv_fn fn = nullptr;
  switch (w.type) {
  case dtype::f32:
    fn = tab.f32;
    break;
  case dtype::f16:
    fn = tab.f16;
    break;
  case dtype::bf16:
    fn = tab.bf16;
    break;
  case dtype::q8_0:
    fn = tab.q8_0;
    break;
  case dtype::q4_0:
    fn = tab.q4_0;
    break;
  default:
    break;
  }
  if (!fn) return false;
  const int64_t T = x.rows(), K = x.cols(), N = w.rows();
  gemv_args g{};
  g.x = x.as<float>();
  g.T = T;
  g.K = K;
  g.w = static_cast<const uint8_t*>(w.data);
  g.row_bytes = row_bytes(w.type, K);
  g.y = a.dst.as<float>();
  g.ldy = N;
  g.bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  if (is_quantized(w.type)) {
    if (!tab.quantize_q8) return false;
    xq.resize(T * K);
    xd.resize(T * (K / qk));
    for (int64_t t = 0; t < T; ++t)
      tab.quantize_q8(x.row<float>(t), K, xq.data() + t * K, xd.data() + t * (K / qk));
    g.xq = xq.data();
    g.xd = xd.data();
  }
  // about 64 KiB of weights per task: small enough to balance two cores, large enough to stream
  const int64_t grain = std::max<int64_t>(1, (64 << 10) / std::max<int64_t>(g.row_bytes, 1));
  parallel(ctx, N, grain, [&](int64_t n0, int64_t n1) {
    gemv_args mine = g;
    mine.n0 = n0;
    mine.n1 = n1;
    fn(mine);
  });
  return true;
}

// Prefill: a GEMM. Each worker takes a slice of output features; f32 weights go straight
// to a single-threaded BLAS sgemm, other types are first expanded into f32 tiles of 64 rows
// (in L2), each used for every token before the next is made. Threads are ours, not the
// BLAS library's, so a shard never runs more threads than it was given.
constexpr int64_t gemm_min_tokens = 8;
constexpr int64_t gemm_tile = 64;

void matmul_gemm(const op_args& a, const exec_ctx& ctx) {
  static const bool single = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single;
  const auto& x = a.src[0];
  const auto& w = a.src[1];
  const int64_t T = x.rows(), K = x.cols(), N = w.rows();
  const int64_t wrow = row_bytes(w.type, K);
  const float* bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  float* y = a.dst.as<float>();
  parallel(ctx, (N + gemm_tile - 1) / gemm_tile, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> tile;
    for (int64_t ti = t0; ti < t1; ++ti) {
      const int64_t n0 = ti * gemm_tile, nn = std::min(gemm_tile, N - n0);
      const float* b;
      if (w.type == dtype::f32) {
        b = reinterpret_cast<const float*>(static_cast<const char*>(w.data) + n0 * wrow);
      } else {
        tile.resize(gemm_tile * K);
        const auto to_f16 = gemv_kernels().f16_to_f32;
        for (int64_t r = 0; r < nn; ++r) {
          const char* src = static_cast<const char*>(w.data) + (n0 + r) * wrow;
          if (w.type == dtype::f16 && to_f16)
            to_f16(reinterpret_cast<const uint16_t*>(src), tile.data() + r * K, K);
          else
            dequant_row(w.type, src, 0, K, tile.data() + r * K);
        }
        b = tile.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T),
                  static_cast<int>(nn), static_cast<int>(K), 1.0f, x.as<float>(),
                  static_cast<int>(K), b, static_cast<int>(K), 0.0f, y + n0, static_cast<int>(N));
      if (bias)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t r = 0; r < nn; ++r) y[t * N + n0 + r] += bias[n0 + r];
    }
  });
}

} // namespace
void gemm_nt_avx512(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, int64_t M,
                    int64_t n, float* C, int64_t ldc); // gemm_avx512.cpp
namespace {

// Prefill, dot-product form: tiles of 4 tokens x 6 output features, weights read in their
// stored order (f32 as is; other types expanded 4 rows at a time into an L1 buffer that all
// token tiles then share). No packing pass.
// Six output features per task: 4 x 6 = 24 accumulators, the most that fit the 32 zmm
// registers with the six weight vectors and one token vector (measured best of 4, 5, 6).
constexpr int64_t nt_group = 6;

void matmul_nt(const op_args& a, const exec_ctx& ctx) {
  const auto& x = a.src[0];
  const auto& w = a.src[1];
  const int64_t T = x.rows(), K = x.cols(), N = w.rows();
  const int64_t wrow = row_bytes(w.type, K);
  const float* bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  float* y = a.dst.as<float>();
  const auto to_f16 = gemv_kernels().f16_to_f32;
  const int64_t G = nt_group;
  parallel(ctx, (N + G - 1) / G, 4, [&](int64_t g0, int64_t g1) {
    thread_local std::vector<float> rows;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t n0 = g * G, nn = std::min<int64_t>(G, N - n0);
      const float* b;
      if (w.type == dtype::f32) {
        b = reinterpret_cast<const float*>(static_cast<const char*>(w.data) + n0 * wrow);
      } else {
        rows.resize(G * K);
        for (int64_t j = 0; j < nn; ++j) {
          const char* src = static_cast<const char*>(w.data) + (n0 + j) * wrow;
          if (w.type == dtype::f16 && to_f16)
            to_f16(reinterpret_cast<const uint16_t*>(src), rows.data() + j * K, K);
          else
            dequant_row(w.type, src, 0, K, rows.data() + j * K);
        }
        b = rows.data();
      }
      gemm_nt_avx512(x.as<float>(), K, b, K, K, T, nn, y + n0, N);
      if (bias)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t j = 0; j < nn; ++j) y[t * N + n0 + j] += bias[n0 + j];
    }
  });
}

void matmul(const op_args& a, const exec_ctx& ctx) {
  if (a.src[0].rows() >= gemm_min_tokens) {
    // AVX-512: our dot-product GEMM; elsewhere a BLAS sgemm (TROUPE_BLAS=1 forces it)
    static const bool ours =
        std::string(gemv_kernels().isa) == "avx512" && !std::getenv("TROUPE_BLAS");
    if (ours)
      matmul_nt(a, ctx);
    else
      matmul_gemm(a, ctx);
    return;
  }
  if (matmul_simd(a, ctx)) return;
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
  r.add(
      op::matmul, backend::cpu, "f32|f16|bf16|q8_0|q4_0",
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
