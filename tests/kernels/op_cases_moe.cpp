// op_cases_moe.cpp: harness cases for the mixture-of-experts and latent-attention ops
// (op_cases.hpp): moe over every weight type (with GPT-OSS's biases and clamped SwiGLU, and
// Nemotron-H's ungated relu^2 experts),
// concat, head_matmul in both orientations, and DeepSeek's router.
#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "case_util.hpp"
#include "core/kquant.hpp"

namespace troupe::kernels::harness {

// k distinct experts for each of T tokens, drawn from experts [0, pool)
std::vector<int32_t> choose_experts(gen& g, int64_t T, int64_t k, int32_t pool_size) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> pool;
    for (int32_t e = 0; e < pool_size; ++e) pool.push_back(e);
    std::shuffle(pool.begin(), pool.end(), g.rng);
    ids.insert(ids.end(), pool.begin(), pool.begin() + k);
  }
  return ids;
}

// x [T, C], the choices' ids [T, k] and weights, W_gate and W_up [E F, C] and W_down [E C, F]
// of type w (drawn in this order)
std::vector<host_tensor> moe_sources(gen& g, dtype w, int64_t T, int64_t C, int64_t F, int64_t E,
                                     int64_t k, const std::vector<int32_t>& ids) {
  std::vector<host_tensor> src;
  src.push_back(from_floats(dtype::f32, {T, C}, g.normal(T * C)));
  src.push_back(from_ints({T, k}, ids));
  src.push_back(from_floats(dtype::f32, {T, k}, g.uniform(T * k, 0.05f, 1.0f)));
  src.push_back(from_floats(w, {E * F, C}, g.normal(E * F * C, 0.2f)));
  src.push_back(from_floats(w, {E * F, C}, g.normal(E * F * C, 0.2f)));
  src.push_back(from_floats(w, {E * C, F}, g.normal(E * C * F, 0.1f)));
  return src;
}

// The same for ungated experts (relu^2): W_up [E F, C] drawn first, in both the gate and up slots
std::vector<host_tensor> relu2_sources(gen& g, dtype w, int64_t T, int64_t C, int64_t F, int64_t E,
                                       int64_t k, const std::vector<int32_t>& ids) {
  host_tensor up = from_floats(w, {E * F, C}, g.normal(E * F * C, 0.2f));
  std::vector<host_tensor> src;
  src.push_back(from_floats(dtype::f32, {T, C}, g.normal(T * C)));
  src.push_back(from_ints({T, k}, ids));
  src.push_back(from_floats(dtype::f32, {T, k}, g.uniform(T * k, 0.05f, 1.0f)));
  src.push_back(up);
  src.push_back(up);
  src.push_back(from_floats(w, {E * C, F}, g.normal(E * C * F, 0.1f)));
  return src;
}

// Mixtures of experts: E experts of width F, k chosen per token (every expert chosen by
// several tokens in prefill, by some in decode, one expert never), weights of each dtype.
void moe_cases(std::vector<op_case>& out_cases) {
  for (dtype w : {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0})
    for (auto [T, E, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 2}, {7, 6, 2}, {33, 8, 3}}) {
      const int64_t C = 64, F = 96;
      op_case c;
      c.name = fmt::format("moe(T={},C={},F={},E={},k={},W={})", T, C, F, E, k, name(w));
      gen g(c.name);
      c.kind = op::moe;
      // k distinct experts per token, expert E - 1 never
      const std::vector<int32_t> ids = choose_experts(g, T, k, static_cast<int32_t>(E - 1));
      c.src = moe_sources(g, w, T, C, F, E, k, ids);
      c.dst = out(dtype::f32, {T, C});
      c.tol = tol_for(w);
      // q8 activations into both expert matmuls (int8 paths at decode and prefill alike), the
      // second on the product of the first; outputs of about +-3
      if (is_quantized(w)) c.tol.max_abs = 1.5e-1;
      c.flops = 6.0 * T * k * C * F;
      c.bytes = 3.0 * row_bytes(w, C) * F * std::min(E - 1, T * k) + 8.0 * T * C;
      out_cases.push_back(std::move(c));
    }
  // GPT-OSS's experts: biases on all three products, the clamped SwiGLU (limit 7, alpha
  // 1.702; the inputs reach past the limit so both clamps bite), MXFP4 weights among them
  for (dtype w : {dtype::f32, dtype::bf16, dtype::q8_0, dtype::mxfp4})
    for (auto [T, E, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 2}, {19, 6, 3}}) {
      const int64_t C = 64, F = 96;
      op_case c;
      c.name =
          fmt::format("moe(T={},C={},F={},E={},k={},W={},biases,clamped)", T, C, F, E, k, name(w));
      gen g(c.name);
      c.kind = op::moe;
      const std::vector<int32_t> ids = choose_experts(g, T, k, static_cast<int32_t>(E));
      auto weights = [&](int64_t rows, int64_t cols, float sigma) {
        if (w == dtype::mxfp4) {
          host_tensor h = out(w, {rows, cols});
          random_blocks(
              w, rows * cols / 32, sigma, [&g] { return g.rng(); }, h.bytes.data());
          return h;
        }
        return from_floats(w, {rows, cols}, g.normal(rows * cols, sigma));
      };
      c.src = {from_floats(dtype::f32, {T, C}, g.normal(T * C, 2.0f)),
               from_ints({T, k}, ids),
               from_floats(dtype::f32, {T, k}, g.uniform(T * k, 0.05f, 1.0f)),
               weights(E * F, C, 0.4f),
               weights(E * F, C, 0.4f),
               weights(E * C, F, 0.1f),
               from_floats(dtype::f32, {E * F}, g.normal(E * F, 1.0f)),
               from_floats(dtype::f32, {E * F}, g.normal(E * F, 1.0f)),
               from_floats(dtype::f32, {E * C}, g.normal(E * C, 1.0f))};
      c.dst = out(dtype::f32, {T, C});
      c.p.swiglu_alpha = 1.702f;
      c.p.swiglu_limit = 7.0f;
      c.tol = tol_for(w);
      // q8 activations into products that reach the clamp (hidden values up to 56) and outputs
      // of about +-30: the error is judged by nmse
      if (is_quantized(w)) c.tol.max_abs = 2.0;
      c.flops = 6.0 * T * k * C * F;
      out_cases.push_back(std::move(c));
    }
  // DeepSeek-V4's experts: silu(min(g, L)) clamp(u, -L, L), products reaching both limits
  for (dtype w : {dtype::f32, dtype::bf16, dtype::q8_0})
    for (auto [T, E, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 2}, {21, 6, 3}}) {
      const int64_t C = 64, F = 96;
      op_case c;
      c.name =
          fmt::format("moe(T={},C={},F={},E={},k={},W={},clamped_silu)", T, C, F, E, k, name(w));
      gen g(c.name);
      c.kind = op::moe;
      const std::vector<int32_t> ids = choose_experts(g, T, k, static_cast<int32_t>(E));
      c.src = {from_floats(dtype::f32, {T, C}, g.normal(T * C, 2.0f)),
               from_ints({T, k}, ids),
               from_floats(dtype::f32, {T, k}, g.uniform(T * k, 0.05f, 1.0f)),
               from_floats(w, {E * F, C}, g.normal(E * F * C, 0.4f)),
               from_floats(w, {E * F, C}, g.normal(E * F * C, 0.4f)),
               from_floats(w, {E * C, F}, g.normal(E * C * F, 0.1f))};
      c.dst = out(dtype::f32, {T, C});
      c.p.swiglu_limit = 3.0f;
      c.p.moe_clamp = true;
      c.tol = tol_for(w);
      if (is_quantized(w)) c.tol.max_abs = 5e-1;
      c.flops = 6.0 * T * k * C * F;
      out_cases.push_back(c);
      // Step 3.7's order: min(silu(g), L) clamp(u, -L, L), the clip after the activation
      c.name = fmt::format("moe(T={},C={},F={},E={},k={},W={},silu_then_clamped)", T, C, F, E, k,
                           name(w));
      c.p.moe_clamp_after = true;
      out_cases.push_back(std::move(c));
    }
  // LongCat-Flash's zero-computation experts: ids past the E real ones add their weight times x
  // (some tokens choosing only those), or nothing where another shard adds them
  for (dtype w : {dtype::f32, dtype::bf16, dtype::q8_0})
    for (auto [T, E, Z, k] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 6, 3, 3},
                              {2, 4, 4, 3},
                              {17, 6, 3, 3}})
      for (bool elsewhere : {false, true}) {
        const int64_t C = 64, F = 96;
        op_case c;
        c.name = fmt::format("moe(T={},C={},F={},E={},k={},W={},zero_experts={}{})", T, C, F, E, k,
                             name(w), Z, elsewhere ? ",elsewhere" : "");
        gen g(c.name);
        c.kind = op::moe;
        const std::vector<int32_t> ids = choose_experts(g, T, k, static_cast<int32_t>(E + Z));
        c.src = moe_sources(g, w, T, C, F, E, k, ids);
        c.dst = out(dtype::f32, {T, C});
        c.p.zero_experts = static_cast<int>(Z);
        c.p.zero_elsewhere = elsewhere;
        c.tol = tol_for(w);
        if (is_quantized(w)) c.tol.max_abs = 1.5e-1;
        c.flops = 6.0 * T * k * C * F;
        out_cases.push_back(std::move(c));
      }
  // Ergo's experts: ungated relu^2, each one's output RMS-normed times its own row of [E, C]
  for (dtype w : {dtype::f32, dtype::bf16, dtype::q8_0})
    for (auto [T, E, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 2}, {13, 6, 3}}) {
      const int64_t C = 64, F = 96;
      op_case c;
      c.name = fmt::format("moe(T={},C={},F={},E={},k={},W={},relu2,post_norm)", T, C, F, E, k,
                           name(w));
      gen g(c.name);
      c.kind = op::moe;
      const std::vector<int32_t> ids = choose_experts(g, T, k, static_cast<int32_t>(E));
      c.src = relu2_sources(g, w, T, C, F, E, k, ids);
      c.src.insert(c.src.end(), {absent(), absent(), absent(),
                                 from_floats(dtype::f32, {E, C}, g.uniform(E * C, 0.5f, 1.5f))});
      c.dst = out(dtype::f32, {T, C});
      c.p.moe_relu2 = c.p.moe_post_norm = true;
      c.p.eps = 1e-6f;
      c.tol = tol_for(w);
      if (is_quantized(w)) c.tol.max_abs = 1.5e-1;
      c.flops = 4.0 * T * k * C * F;
      out_cases.push_back(std::move(c));
    }
  // Nemotron-H's ungated experts: down(relu(up x)^2), the up weights in both gate and up slots
  for (dtype w : {dtype::f32, dtype::bf16, dtype::q8_0})
    for (auto [T, E, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 2}, {21, 6, 3}}) {
      const int64_t C = 64, F = 96;
      op_case c;
      c.name = fmt::format("moe(T={},C={},F={},E={},k={},W={},relu2)", T, C, F, E, k, name(w));
      gen g(c.name);
      c.kind = op::moe;
      const std::vector<int32_t> ids = choose_experts(g, T, k, static_cast<int32_t>(E));
      c.src = relu2_sources(g, w, T, C, F, E, k, ids);
      c.dst = out(dtype::f32, {T, C});
      c.p.moe_relu2 = true;
      c.tol = tol_for(w);
      // q8 activations into products then squared: outputs of about +-5, judged by nmse
      if (is_quantized(w)) c.tol.max_abs = 3e-1;
      c.flops = 4.0 * T * k * C * F;
      out_cases.push_back(std::move(c));
    }
  // Gemma 4's experts: GeGLU, each choice's weight times its expert's scale (src9, by global id)
  for (dtype w : {dtype::f32, dtype::bf16, dtype::q8_0})
    for (auto [T, E, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 2}, {21, 6, 3}}) {
      const int64_t C = 64, F = 96;
      op_case c;
      c.name =
          fmt::format("moe(T={},C={},F={},E={},k={},W={},geglu,scales)", T, C, F, E, k, name(w));
      gen g(c.name);
      c.kind = op::moe;
      const std::vector<int32_t> ids = choose_experts(g, T, k, static_cast<int32_t>(E));
      c.src = moe_sources(g, w, T, C, F, E, k, ids);
      c.src.insert(c.src.end(), {absent(), absent(), absent(),
                                 from_floats(dtype::f32, {E}, g.uniform(E, 0.5f, 1.5f))});
      c.dst = out(dtype::f32, {T, C});
      c.p.moe_gelu = true;
      c.tol = tol_for(w);
      if (is_quantized(w)) c.tol.max_abs = 3e-1;
      c.flops = 6.0 * T * k * C * F;
      out_cases.push_back(std::move(c));
    }
}

// Latent attention: concat by rows, per-head matmuls in both orientations (q_nope through
// W_kb^T; the weighted latent, read from the first K of wider rows, through W_vb).
void latent_cases(std::vector<op_case>& out_cases) {
  {
    op_case c;
    c.name = "concat(T=5,H=3,A=32,B=8)";
    gen g(c.name);
    c.kind = op::concat;
    c.src = {from_floats(dtype::f32, {5, 3, 32}, g.normal(5 * 3 * 32)),
             from_floats(dtype::f32, {5, 3, 8}, g.normal(5 * 3 * 8))};
    c.dst = out(dtype::f32, {5, 3, 40});
    c.tol = {1e-12, 1e-7}; // a copy
    out_cases.push_back(std::move(c));
  }
  for (dtype w : weight_types)
    for (int tr : {0, 1})
      for (int64_t T : {1, 6, 19}) { // 19: blocks of rows shared by several tokens
        const int64_t H = 4, K = tr ? 32 : 64, N = tr ? 64 : 32, Kx = tr ? K : K + 8;
        op_case c;
        c.name = fmt::format("head_matmul(T={},H={},K={},N={},{},W={})", T, H, K, N,
                             tr ? "transposed" : "rows", name(w));
        gen g(c.name);
        c.kind = op::head_matmul;
        c.src = {from_floats(dtype::f32, {T, H, Kx}, g.normal(T * H * Kx)),
                 tr ? from_floats(w, {H * K, N}, g.normal(H * K * N, 0.1f))
                    : from_floats(w, {H * N, K}, g.normal(H * N * K, 0.1f))};
        c.dst = out(dtype::f32, {T, H, N});
        c.p.k = tr;
        c.tol = tol_for(w);
        out_cases.push_back(std::move(c));
      }
  // heads of more weight rows than the CPU dequantizes in one block (8192 values), the last
  // block partial
  for (int tr : {0, 1}) {
    const int64_t T = 3, H = 2, K = tr ? 200 : 64, N = tr ? 64 : 300;
    op_case c;
    c.name = fmt::format("head_matmul(T={},H={},K={},N={},{},W=q8_0)", T, H, K, N,
                         tr ? "transposed" : "rows");
    gen g(c.name);
    c.kind = op::head_matmul;
    c.src = {from_floats(dtype::f32, {T, H, K}, g.normal(T * H * K)),
             tr ? from_floats(dtype::q8_0, {H * K, N}, g.normal(H * K * N, 0.1f))
                : from_floats(dtype::q8_0, {H * N, K}, g.normal(H * N * K, 0.1f))};
    c.dst = out(dtype::f32, {T, H, N});
    c.p.k = tr;
    c.tol = tol_for(dtype::q8_0);
    out_cases.push_back(std::move(c));
  }
}

} // namespace troupe::kernels::harness
