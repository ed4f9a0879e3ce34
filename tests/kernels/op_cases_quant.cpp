// op_cases_quant.cpp: harness cases for the weight formats the kernels expand block by block
// (GGUF's K-quants, q4_1 / q5_0 / q5_1 and MXFP4, op_cases.hpp): embedding, matmul, matmul_swiglu
// and matmul_qkv with random blocks, against the reference backend; BitNet's t2_32 on the
// activations its layers give it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include <fmt/format.h>

#include "case_util.hpp"
#include "core/kquant.hpp"

namespace troupe::kernels::harness {
namespace {

// GGUF's K-quants as weights: random blocks (nothing quantizes to them); inner sizes in
// whole blocks of 256. The int8 kernels (decode for every K-quant, prefill for Q4_K / Q5_K /
// Q6_K) take q8 activations and have the tolerance of the other int8 paths; the paths that
// expand blocks keep f32 activations and f32's tolerance.
host_tensor kquant(dtype t, shape s, gen& g) {
  host_tensor h = out(t, s);
  random_blocks(
      t, s.numel() / block_elems(t), 0.05f, [&g] { return g.rng(); }, h.bytes.data());
  return h;
}

// t2_32 rows as BitNet's are: one scale for all the blocks of a row (random blocks' scales vary,
// which the kernels' general path takes)
host_tensor bitnet_rows(int64_t N, int64_t K, gen& g) {
  host_tensor h = kquant(dtype::t2_32, {N, K}, g);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 1; b < K / 32; ++b)
      std::memcpy(h.bytes.data() + (n * K / 32 + b) * 12, h.bytes.data() + n * K / 32 * 12, 4);
  return h;
}

} // namespace

void kquant_cases(std::vector<op_case>& out_cases) {
  const dtype types[] = {dtype::q2_k,   dtype::q3_k,   dtype::q4_k, dtype::q5_k,  dtype::q6_k,
                         dtype::q4_1,   dtype::q5_0,   dtype::q5_1, dtype::mxfp4, dtype::f8_b128,
                         dtype::iq4_nl, dtype::iq4_xs, dtype::t2_32};
  const tolerance tol_f32{1e-9, 1e-3}, tol_int8{5e-4, 8e-2}; // int8: outputs grow with K
  for (dtype w : types) {
    // int8 at decode for every K-quant, and at prefill (the int8 GEMM) for Q4_K / Q5_K / Q6_K
    const bool gemm8 = w == dtype::q4_k || w == dtype::q5_k || w == dtype::q6_k ||
                       w == dtype::mxfp4 || w == dtype::iq4_nl || w == dtype::iq4_xs;
    // MXFP4 decodes on int8 too (and prefills on the int8 GEMM, above)
    const bool int8_decode = is_kquant(w) || w == dtype::mxfp4 || w == dtype::iq4_nl ||
                             w == dtype::iq4_xs || w == dtype::t2_32;
    const auto tol_at = [&](int64_t T) {
      return int8_decode && (T < 8 || gemm8) ? tol_int8 : tol_f32;
    };
    {
      op_case c;
      c.name = fmt::format("embedding(V=40,C=512,T=5,table={})", name(w));
      gen g(c.name);
      c.kind = op::embedding;
      c.src = {kquant(w, {40, 512}, g), from_ints({5}, {3, 39, 0, 17, 3})};
      c.dst = out(dtype::f32, {5, 512});
      c.tol = {0, 0};
      c.bytes = 5 * 512 * 4.0 * 2;
      out_cases.push_back(std::move(c));
    }
    for (auto [T, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 256, 96},
                           {3, 512, 33},
                           {16, 512, 64},
                           {37, 256, 48},
                           {64, 1024, 17}}) {
      op_case c;
      c.name = fmt::format("matmul(T={},K={},N={},W={})", T, K, N, name(w));
      gen g(c.name);
      c.kind = op::matmul;
      c.src = {from_floats(dtype::f32, {T, K}, g.normal(T * K)), kquant(w, {N, K}, g), absent()};
      c.dst = out(dtype::f32, {T, N});
      c.tol = tol_at(T);
      c.flops = 2.0 * T * K * N;
      c.bytes = row_bytes(w, K) * N + 4.0 * (T * K + T * N);
      out_cases.push_back(std::move(c));
    }
    for (auto [T, K, F] : {std::tuple<int64_t, int64_t, int64_t>{1, 256, 96}, {12, 512, 100}}) {
      op_case c;
      c.name = fmt::format("matmul_swiglu(T={},K={},F={},W={})", T, K, F, name(w));
      gen g(c.name);
      c.kind = op::matmul_swiglu;
      c.src = {from_floats(dtype::f32, {T, K}, g.normal(T * K)), kquant(w, {F, K}, g),
               kquant(w, {F, K}, g)};
      c.dst = out(dtype::f32, {T, F});
      c.tol = tol_at(T);
      if (int8_decode && (T < 8 || gemm8))
        c.tol.max_abs = 1.6e-1; // two q8-activation products multiplied
      c.flops = 4.0 * T * K * F;
      c.bytes = 2.0 * row_bytes(w, K) * F + 4.0 * (T * K + T * F);
      out_cases.push_back(std::move(c));
    }
    for (auto [T, K] : {std::pair<int64_t, int64_t>{1, 256}, {40, 512}}) {
      const int64_t Nq = 64, Nkv = 32;
      op_case c;
      c.name = fmt::format("matmul_qkv(T={},K={},Nq={},Nkv={},W={})", T, K, Nq, Nkv, name(w));
      gen g(c.name);
      c.kind = op::matmul_qkv;
      c.src = {from_floats(dtype::f32, {T, K}, g.normal(T * K)), kquant(w, {Nq, K}, g),
               kquant(w, {Nkv, K}, g), kquant(w, {Nkv, K}, g)};
      c.dst = out(dtype::f32, {T, Nq});
      c.dst2 = out(dtype::f32, {T, Nkv});
      c.dst3 = out(dtype::f32, {T, Nkv});
      c.tol = tol_at(T);
      c.flops = 2.0 * T * K * (Nq + 2 * Nkv);
      c.bytes = row_bytes(w, K) * (Nq + 2 * Nkv) + 4.0 * (T * K + T * (Nq + 2 * Nkv));
      out_cases.push_back(std::move(c));
    }
  }
  // BitNet's layers: t2_32 weights on activations already rounded per token to 8 bits (x = k /
  // s, |k| <= 127, one at 127), which the decode kernel's per-row int8 quantization gives back
  // exactly: f32's tolerance, not int8's
  for (auto [T, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 256, 96}, {3, 512, 40}}) {
    op_case c;
    c.name = fmt::format("matmul(T={},K={},N={},W=t2_32,x rounded per row)", T, K, N);
    gen g(c.name);
    std::vector<float> x = g.normal(T * K);
    for (int64_t t = 0; t < T; ++t) {
      float amax = 0;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[t * K + k]));
      const float s = 127.0f / amax;
      for (int64_t k = 0; k < K; ++k)
        x[t * K + k] = std::clamp(std::nearbyint(x[t * K + k] * s), -128.0f, 127.0f) / s;
    }
    c.kind = op::matmul;
    c.src = {from_floats(dtype::f32, {T, K}, x), bitnet_rows(N, K, g), absent()};
    c.dst = out(dtype::f32, {T, N});
    c.tol = {1e-12, 1e-4};
    c.flops = 2.0 * T * K * N;
    c.bytes = row_bytes(dtype::t2_32, K) * N + 4.0 * (T * K + T * N);
    out_cases.push_back(std::move(c));
  }
  // ... and a part of such rows (a tensor-parallel rank's: its largest value below the row's),
  // with the rows' step given (src3)
  {
    const int64_t T = 2, K = 256, N = 48;
    op_case c;
    c.name = fmt::format("matmul(T={},K={},N={},W=t2_32,x part of rounded rows, step)", T, K, N);
    gen g(c.name);
    std::vector<float> x = g.normal(T * K), step(T);
    for (int64_t t = 0; t < T; ++t) {
      const float s = 127.0f / 6.0f; // (the whole row's largest value 6: this part's smaller)
      for (int64_t k = 0; k < K; ++k)
        x[t * K + k] = std::clamp(std::nearbyint(x[t * K + k] * s), -120.0f, 120.0f) / s;
      step[static_cast<size_t>(t)] = 6.0f / 127.0f;
    }
    c.kind = op::matmul;
    c.src = {from_floats(dtype::f32, {T, K}, x), bitnet_rows(N, K, g), absent(),
             from_floats(dtype::f32, {T, 1}, step)};
    c.dst = out(dtype::f32, {T, N});
    c.tol = {1e-12, 1e-4};
    c.flops = 2.0 * T * K * N;
    c.bytes = row_bytes(dtype::t2_32, K) * N + 4.0 * (T * K + T * N);
    out_cases.push_back(std::move(c));
  }
}

} // namespace troupe::kernels::harness
