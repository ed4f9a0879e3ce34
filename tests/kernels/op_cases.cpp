// op_cases.cpp: every harness case (op_cases.hpp). Inputs come from a generator seeded by the
// case name, so a failing case reproduces exactly.
#include "case_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "core/convert.hpp"
#include "core/kquant.hpp"
#include "kernels/jit.hpp"

namespace troupe::kernels::harness {
namespace {

void embedding_cases(std::vector<op_case>& out_cases) {
  for (dtype w : weight_types) {
    op_case c;
    c.name = fmt::format("embedding(V=100,C=64,T=7,table={})", name(w));
    gen g(c.name);
    c.kind = op::embedding;
    c.src = {from_floats(w, {100, 64}, g.normal(6400)), from_ints({7}, {3, 99, 0, 42, 42, 7, 64})};
    c.dst = out(dtype::f32, {7, 64});
    c.tol = {0, 0};
    c.bytes = 7 * 64 * 4.0 * 2;
    out_cases.push_back(c);
    // ids past the table (and negative) read row 0: Gemma 3n's per-layer table
    c.name = fmt::format("embedding(V=100,C=64,T=7,table={},ids_row0)", name(w));
    c.src[1] = from_ints({7}, {3, 100, 0, -1, 250, 7, 99});
    c.p.ids_row0 = true;
    out_cases.push_back(std::move(c));
  }
}

void matmul_cases(std::vector<op_case>& out_cases) {
  struct dims {
    int64_t T, K, N;
    bool bias;
  };
  const dims shapes[] = {
      {1, 256, 96, false},  {5, 128, 33, false}, {16, 512, 64, false}, {3, 96, 40, true},
      {9, 1024, 17, false}, {37, 256, 48, true}, // AMX: a partial token tile, bias
      {64, 512, 32, false}};                     // AMX: batched decode of 64
  auto add = [&](dtype w, const dims& d) {
    op_case c;
    c.name =
        fmt::format("matmul(T={},K={},N={},W={}{})", d.T, d.K, d.N, name(w), d.bias ? ",bias" : "");
    gen g(c.name);
    c.kind = op::matmul;
    c.src = {from_floats(dtype::f32, {d.T, d.K}, g.normal(d.T * d.K)),
             from_floats(w, {d.N, d.K}, g.normal(d.N * d.K, 0.05f)),
             d.bias ? from_floats(dtype::f32, {d.N}, g.normal(d.N)) : absent()};
    c.dst = out(dtype::f32, {d.T, d.N});
    c.tol = tol_for(w);
    c.flops = 2.0 * d.T * d.K * d.N;
    c.bytes = row_bytes(w, d.K) * d.N + 4.0 * (d.T * d.K + d.T * d.N);
    out_cases.push_back(std::move(c));
  };
  for (dtype w : weight_types)
    for (auto d : shapes) add(w, d);
  // f32/f16/bf16 with a K that is not a multiple of the vector width (108: 16-wide passes, one
  // of 8, a scalar tail); single tokens over an odd number of rows (the decode kernels read
  // the two halves of a range side by side, the odd row alone) with a bias, and with K = 128
  // (AVX-512's bf16 kernel splitting x into even and odd halves); prefill GEMMs over 33 tokens
  // (two full tiles of 16, one of 1) with K = 100 (x laid out 16 x 16 blocks at a time, then
  // 4 values of k one by one) and a short last group of features
  for (dtype w : {dtype::f32, dtype::f16, dtype::bf16})
    for (auto d : {dims{2, 100, 7, false}, dims{1, 100, 7, true}, dims{1, 108, 9, true},
                   dims{1, 128, 11, true}, dims{33, 100, 29, true}})
      add(w, d);
}

void norm_cases(std::vector<op_case>& out_cases) {
  for (auto [T, C] : {std::pair<int64_t, int64_t>{3, 64}, {1, 1000}, {17, 288}}) {
    op_case c;
    c.name = fmt::format("rmsnorm(T={},C={})", T, C);
    gen g(c.name);
    c.kind = op::rmsnorm;
    c.src = {from_floats(dtype::f32, {T, C}, g.normal(T * C, 2.0f)),
             from_floats(dtype::f32, {C}, g.normal(C, 0.5f, 1.0f))};
    c.dst = out(dtype::f32, {T, C});
    c.p.eps = 1e-5f;
    c.tol = {1e-11, 1e-5};
    c.bytes = 8.0 * T * C;
    out_cases.push_back(std::move(c));
    for (bool bias : {false, true}) {
      op_case l;
      l.name = fmt::format("layernorm(T={},C={}{})", T, C, bias ? ",bias" : "");
      gen gl(l.name);
      l.kind = op::layernorm;
      l.src = {from_floats(dtype::f32, {T, C}, gl.normal(T * C, 2.0f, 0.5f)),
               from_floats(dtype::f32, {C}, gl.normal(C, 0.5f, 1.0f)),
               bias ? from_floats(dtype::f32, {C}, gl.normal(C)) : absent()};
      l.dst = out(dtype::f32, {T, C});
      l.p.eps = 1e-5f;
      l.tol = {1e-11, 1e-5};
      l.bytes = 8.0 * T * C;
      out_cases.push_back(std::move(l));
    }
  }
}

void rope_cases(std::vector<op_case>& out_cases) {
  struct variant {
    const char* label;
    rope_layout layout;
    rope_scaling scaling;
    int rot_dim;
    int rot_offset = 0;
    bool inverse = false;
  };
  const variant vs[] = {
      // DeepSeek-V4's: each head's last 16 turned, and turned back (the conjugate)
      {"interleaved,last16", rope_layout::interleaved, rope_scaling::yarn, 16, 48},
      {"interleaved,last16,inverse", rope_layout::interleaved, rope_scaling::none, 16, 48, true},
      {"neox,offset8,inverse", rope_layout::neox, rope_scaling::none, 32, 8, true},
      {"interleaved", rope_layout::interleaved, rope_scaling::none, 64},
      {"neox", rope_layout::neox, rope_scaling::none, 64},
      {"neox,linear", rope_layout::neox, rope_scaling::linear, 64},
      {"neox,llama3", rope_layout::neox, rope_scaling::llama3, 64},
      {"neox,yarn", rope_layout::neox, rope_scaling::yarn, 64},
      {"interleaved,partial", rope_layout::interleaved, rope_scaling::none, 32},
      {"neox,partial", rope_layout::neox, rope_scaling::none, 32},
  };
  for (const auto& v : vs) {
    op_case c;
    c.name = fmt::format("rope(T=5,H=4,D=64,{})", v.label);
    gen g(c.name);
    c.kind = op::rope;
    std::vector<int32_t> pos(5);
    for (auto& p : pos) p = static_cast<int32_t>(g.integer(0, 4000));
    c.src = {from_floats(dtype::f32, {5, 4, 64}, g.normal(5 * 4 * 64)), from_ints({5}, pos)};
    c.dst = out(dtype::f32, {5, 4, 64});
    c.p.rope.layout = v.layout;
    c.p.rope.rot_dim = v.rot_dim;
    c.p.rope.rot_offset = v.rot_offset;
    c.p.rope.inverse = v.inverse;
    c.p.rope.theta = 500000.0;
    c.p.rope.scaling = v.scaling;
    c.p.rope.factor = v.scaling == rope_scaling::yarn ? 4.0 : 8.0;
    c.p.rope.orig_ctx = v.scaling == rope_scaling::llama3 ? 1024 : 4096;
    c.tol = {1e-10, 1e-4};
    c.bytes = 8.0 * 5 * 4 * 64;
    out_cases.push_back(std::move(c));
  }
}

void elementwise_cases(std::vector<op_case>& out_cases) {
  for (op o : {op::silu, op::gelu_erf, op::gelu_tanh, op::tanh, op::rsqrt, op::scale, op::clamp,
               op::relu, op::sigmoid, op::exp, op::abs, op::recip}) {
    op_case c;
    c.name = fmt::format("{}(T=4,C=333)", to_string(o));
    gen g(c.name);
    c.kind = o;
    auto x = o == op::rsqrt || o == op::recip ? g.uniform(4 * 333, 0.1f, 10.0f)
                                              : g.normal(4 * 333, 3.0f);
    c.src = {from_floats(dtype::f32, {4, 333}, x)};
    c.dst = out(dtype::f32, {4, 333});
    c.p.scale = o == op::clamp ? 2.5f : 0.37f; // clamp: a third of the values saturate
    c.p.bias = -1.25f;
    c.tol = {1e-11, 1e-5};
    c.bytes = 8.0 * 4 * 333;
    out_cases.push_back(std::move(c));
  }
  {
    op_case c;
    c.name = "swiglu(T=4,F=172)";
    gen g(c.name);
    c.kind = op::swiglu;
    c.src = {from_floats(dtype::f32, {4, 172}, g.normal(688, 3.0f)),
             from_floats(dtype::f32, {4, 172}, g.normal(688))};
    c.dst = out(dtype::f32, {4, 172});
    c.tol = {1e-11, 1e-5};
    c.bytes = 12.0 * 688;
    out_cases.push_back(std::move(c));
  }
  for (op o : {op::add, op::mul}) {
    for (auto [label, R1, C1] : {std::tuple<const char*, int64_t, int64_t>{"full", 6, 130},
                                 {"row", 1, 130},
                                 {"col", 6, 1},
                                 {"groups", 6, 10}, // a value per group of 13 (a head's gate)
                                 {"row_groups", 1, 5}}) {
      op_case c;
      c.name = fmt::format("{}(T=6,C=130,{})", to_string(o), label);
      gen g(c.name);
      c.kind = o;
      c.src = {from_floats(dtype::f32, {6, 130}, g.normal(780)),
               from_floats(dtype::f32, {R1, C1}, g.normal(R1 * C1))};
      c.dst = out(dtype::f32, {6, 130});
      c.tol = {1e-12, 1e-6};
      c.bytes = 12.0 * 780;
      out_cases.push_back(std::move(c));
    }
  }
  {
    op_case c;
    c.name = "softmax(T=3,N=517,scale=0.5)";
    gen g(c.name);
    c.kind = op::softmax;
    c.src = {from_floats(dtype::f32, {3, 517}, g.normal(3 * 517, 4.0f))};
    c.dst = out(dtype::f32, {3, 517});
    c.p.scale = 0.5f;
    c.tol = {1e-10, 1e-6};
    out_cases.push_back(std::move(c));
  }
}

void reduce_cases(std::vector<op_case>& out_cases) {
  {
    op_case c;
    c.name = "sum_rows(T=5,C=300)";
    gen g(c.name);
    c.kind = op::sum_rows;
    c.src = {from_floats(dtype::f32, {5, 300}, g.normal(1500))};
    c.dst = out(dtype::f32, {5, 1});
    c.tol = {1e-10, 1e-4};
    out_cases.push_back(std::move(c));
  }
  {
    op_case c;
    c.name = "sum_rows(absmax,T=5,C=300)";
    gen g(c.name);
    c.kind = op::sum_rows;
    c.src = {from_floats(dtype::f32, {5, 300}, g.normal(1500))};
    c.dst = out(dtype::f32, {5, 1});
    c.p.row_absmax = true;
    c.tol = {0, 0};
    out_cases.push_back(std::move(c));
  }
  {
    op_case c;
    c.name = "argmax(T=4,V=1000)";
    gen g(c.name);
    c.kind = op::argmax;
    c.src = {from_floats(dtype::f32, {4, 1000}, g.normal(4000))};
    c.dst = out(dtype::i32, {4});
    c.tol = {0, 0};
    out_cases.push_back(std::move(c));
  }
  {
    op_case c;
    c.name = "topk(T=3,V=500,k=5)";
    gen g(c.name);
    c.kind = op::topk;
    c.src = {from_floats(dtype::f32, {3, 500}, g.normal(1500))};
    c.dst = out(dtype::i32, {3, 5});
    c.dst2 = out(dtype::f32, {3, 5});
    c.p.k = 5;
    c.tol = {0, 0};
    out_cases.push_back(std::move(c));
  }
}

// Element-wise programs: full sources, a [1, C] row and a [T, 1] column broadcast. The CPU
// kernel is the JIT's (compiled here, when a compiler is present; else the case is skipped
// as unsupported on the CPU: the executor then composes the program from primitives).
void program_cases(std::vector<op_case>& out_cases) {
  static const char* texts[] = {"relu(x)*relu(x) + 0.5*sigmoid(y) - tanh(z)/2",
                                "x * sigmoid(1.702 * x) + max(y, z) * min(x, 0.25)",
                                "gelu(x) * y + gelu_tanh(z) - exp(-abs(x)) + sqrt(abs(y)) * 0.1",
                                // xIELU's shape (Apertus): a branch by sign, expm1 near 0
                                "0.5*x + 0.7*relu(x)^2 + 0.9*(1 - step(x))*(expm1(min(x, "
                                "-0.000001)) - x) + step(y - z)*expm1(0.001*z)",
                                // Laguna's attention gate; past torch's threshold (20) as well
                                "x * softplus(y) + softplus(12*z) - softplus(-x)",
                                // rounding (BitNet's activation quantization; x 8 is exact in
                                // f32 and f64 alike, so both round the same values)
                                "round(x * 8) / 8 + round(y * 0.5) * z - round(-x * 4)"};
  static std::vector<std::unique_ptr<ew_program>> programs;
  for (int k = 0; k < 6; ++k) {
    auto p = parse_expression(texts[k], {"x", "y", "z"});
    if (!p) continue;
    programs.push_back(std::make_unique<ew_program>(std::move(*p)));
    (void)jit_prepare(*programs.back());
    op_case c;
    c.name = fmt::format("elementwise({},T=5,C=200)", texts[k]);
    gen g(c.name);
    c.kind = op::elementwise;
    const shape third = k == 1 ? shape{5, 1} : shape{1, 200};
    c.src = {from_floats(dtype::f32, {5, 200}, g.normal(1000, 2.0f)),
             from_floats(dtype::f32, {5, 200}, g.normal(1000, 2.0f)),
             from_floats(dtype::f32, third, g.normal(third.numel(), 2.0f))};
    c.dst = out(dtype::f32, {5, 200});
    c.p.program = programs.back().get();
    c.tol = {1e-11, 1e-5};
    out_cases.push_back(std::move(c));
  }
}

void convert_cases(std::vector<op_case>& out_cases) {
  const std::pair<dtype, dtype> pairs[] = {{dtype::f32, dtype::f16},  {dtype::f32, dtype::bf16},
                                           {dtype::f16, dtype::f32},  {dtype::bf16, dtype::f32},
                                           {dtype::f16, dtype::bf16}, {dtype::bf16, dtype::f16}};
  for (auto [from, to] : pairs) {
    op_case c;
    c.name = fmt::format("convert(n=1000,{}->{})", name(from), name(to));
    gen g(c.name);
    c.kind = op::convert;
    c.src = {from_floats(from, {1000}, g.normal(1000, 10.0f))};
    c.dst = out(to, {1000});
    c.tol = {0, 0};
    c.bytes = 1000.0 * 6;
    out_cases.push_back(std::move(c));
  }
  for (dtype q : {dtype::q8_0, dtype::q4_0}) {
    op_case c;
    c.name = fmt::format("quantize(T=4,C=256,{})", name(q));
    gen g(c.name);
    c.kind = op::quantize;
    c.src = {from_floats(dtype::f32, {4, 256}, g.normal(1024))};
    c.dst = out(q, {4, 256});
    c.tol = {0, 0};
    out_cases.push_back(std::move(c));
    op_case d;
    d.name = fmt::format("dequantize(T=4,C=256,{})", name(q));
    gen gd(d.name);
    d.kind = op::dequantize;
    d.src = {from_floats(q, {4, 256}, gd.normal(1024))};
    d.dst = out(dtype::f32, {4, 256});
    d.tol = {0, 0};
    out_cases.push_back(std::move(d));
  }
}

// The fused ops against their definition (the composition they replace, run on the reference).
void fused_cases(std::vector<op_case>& out_cases) {
  for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 288}, {7, 100}, {19, 512}}) {
    op_case c;
    c.name = fmt::format("add_rmsnorm(T={},C={})", T, C);
    gen g(c.name);
    c.kind = op::add_rmsnorm;
    c.src = {from_floats(dtype::f32, {T, C}, g.normal(T * C, 2.0f)),
             from_floats(dtype::f32, {T, C}, g.normal(T * C, 0.5f)),
             from_floats(dtype::f32, {C}, g.normal(C, 0.5f, 1.0f))};
    c.dst = out(dtype::f32, {T, C});
    c.dst2 = out(dtype::f32, {T, C});
    c.p.eps = 1e-5f;
    c.tol = {1e-11, 1e-5};
    c.bytes = 16.0 * T * C;
    out_cases.push_back(std::move(c));
  }
  struct dims {
    int64_t T, K, F;
  };
  for (dtype w : weight_types) {
    for (auto d : {dims{1, 256, 96}, dims{3, 128, 70}, dims{12, 512, 100}, dims{64, 96, 37},
                   dims{40, 128, 96}}) {
      op_case c;
      c.name = fmt::format("matmul_swiglu(T={},K={},F={},W={})", d.T, d.K, d.F, name(w));
      gen g(c.name);
      c.kind = op::matmul_swiglu;
      c.src = {from_floats(dtype::f32, {d.T, d.K}, g.normal(d.T * d.K)),
               from_floats(w, {d.F, d.K}, g.normal(d.F * d.K, 0.05f)),
               from_floats(w, {d.F, d.K}, g.normal(d.F * d.K, 0.05f))};
      c.dst = out(dtype::f32, {d.T, d.F});
      c.tol = tol_for(w);
      if (is_quantized(w)) c.tol.max_abs = 1e-1; // two q8-activation products multiplied
      c.flops = 4.0 * d.T * d.K * d.F;
      c.bytes = 2.0 * row_bytes(w, d.K) * d.F + 4.0 * (d.T * d.K + d.T * d.F);
      out_cases.push_back(std::move(c));
    }
  }
  // q, k and v of one input (GQA: k and v narrower); decode and prefill row counts
  for (dtype w : weight_types)
    for (auto [T, K] : {std::pair<int64_t, int64_t>{1, 256}, {3, 128}, {40, 128}}) {
      const int64_t Nq = 64, Nkv = 32;
      op_case c;
      c.name = fmt::format("matmul_qkv(T={},K={},Nq={},Nkv={},W={})", T, K, Nq, Nkv, name(w));
      gen g(c.name);
      c.kind = op::matmul_qkv;
      c.src = {from_floats(dtype::f32, {T, K}, g.normal(T * K)),
               from_floats(w, {Nq, K}, g.normal(Nq * K, 0.05f)),
               from_floats(w, {Nkv, K}, g.normal(Nkv * K, 0.05f)),
               from_floats(w, {Nkv, K}, g.normal(Nkv * K, 0.05f))};
      c.dst = out(dtype::f32, {T, Nq});
      c.dst2 = out(dtype::f32, {T, Nkv});
      c.dst3 = out(dtype::f32, {T, Nkv});
      c.tol = tol_for(w);
      c.flops = 2.0 * T * K * (Nq + 2 * Nkv);
      c.bytes = row_bytes(w, K) * (Nq + 2 * Nkv) + 4.0 * T * (K + Nq + 2 * Nkv);
      out_cases.push_back(std::move(c));
    }
  // norms that quantize their output for the next matmul, and matmuls that take it
  for (bool add : {false, true}) {
    const int64_t T = 3, C = 256;
    op_case c;
    c.name = fmt::format("{}(T={},C={},dst=q8_0)", add ? "add_rmsnorm" : "rmsnorm", T, C);
    gen g(c.name);
    c.kind = add ? op::add_rmsnorm : op::rmsnorm;
    auto x = from_floats(dtype::f32, {T, C}, g.normal(T * C, 2.0f));
    auto w = from_floats(dtype::f32, {C}, g.normal(C, 0.5f, 1.0f));
    if (add) {
      c.src = {std::move(x), from_floats(dtype::f32, {T, C}, g.normal(T * C, 0.5f)), std::move(w)};
      c.dst2 = out(dtype::f32, {T, C});
    } else {
      c.src = {std::move(x), std::move(w)};
    }
    c.dst = out(dtype::q8_0, {T, C});
    c.p.eps = 1e-5f;
    c.tol = {1e-4, 5e-2}; // one quantization step where f32 and f64 norms round apart
    out_cases.push_back(std::move(c));
  }
  for (dtype w : {dtype::q8_0, dtype::q4_0})
    for (int64_t T : {1, 3}) {
      const int64_t K = 256, N = 48;
      op_case c;
      c.name = fmt::format("matmul(T={},K={},N={},W={},x=q8_0)", T, K, N, name(w));
      gen g(c.name);
      c.kind = op::matmul;
      c.src = {from_floats(dtype::q8_0, {T, K}, g.normal(T * K)),
               from_floats(w, {N, K}, g.normal(N * K, 0.05f)), absent()};
      c.dst = out(dtype::f32, {T, N});
      c.tol = {1e-9, 1e-4}; // int8 x int8 dot products are exact; the scales are f32
      out_cases.push_back(std::move(c));
      op_case f;
      f.name = fmt::format("matmul_swiglu(T={},K={},F={},W={},x=q8_0)", T, K, N, name(w));
      gen gf(f.name);
      f.kind = op::matmul_swiglu;
      f.src = {from_floats(dtype::q8_0, {T, K}, gf.normal(T * K)),
               from_floats(w, {N, K}, gf.normal(N * K, 0.05f)),
               from_floats(w, {N, K}, gf.normal(N * K, 0.05f))};
      f.dst = out(dtype::f32, {T, N});
      f.tol = {1e-9, 1e-4};
      out_cases.push_back(std::move(f));
    }
  for (dtype kv : {dtype::f32, dtype::f16, dtype::bf16})
    for (auto layout : {rope_layout::neox, rope_layout::interleaved}) {
      op_case c;
      c.name = fmt::format("rope_kv_store(T=6,Hkv=2,D=64,{},cache={})",
                           layout == rope_layout::neox ? "neox" : "interleaved", name(kv));
      gen g(c.name);
      c.kind = op::rope_kv_store;
      std::vector<int32_t> pos = {0, 1, 2, 900, 33, 4000}, slots = {5, 0, 17, 3, 30, 12};
      c.src = {from_floats(dtype::f32, {6, 2, 64}, g.normal(6 * 2 * 64)), from_ints({6}, pos),
               from_ints({6}, slots)};
      c.dst = from_floats(kv, {8, 4, 2, 64}, std::vector<float>(8 * 4 * 2 * 64, 0.0f));
      c.p.block_size = 4;
      c.p.rope.layout = layout;
      c.p.rope.rot_dim = layout == rope_layout::neox ? 64 : 48;
      c.p.rope.rot_offset = layout == rope_layout::neox ? 0 : 16; // (the last 48: V4's)
      c.p.rope.theta = 10000.0;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-4} : tolerance{1e-5, 1e-2};
      out_cases.push_back(std::move(c));
    }
  // the attention's whole prologue: k roped into its cache, v stored, q (4 heads over 2 KV
  // heads) roped with the same angles; with v only, and with q only
  for (dtype kv : {dtype::f32, dtype::bf16})
    for (auto layout : {rope_layout::neox, rope_layout::interleaved})
      for (int parts : {3, 1, 2}) { // bit 0: v, bit 1: q
        op_case c;
        c.name = fmt::format("rope_kv_store(T=6,H=4,Hkv=2,D=64,{},cache={}{}{})",
                             layout == rope_layout::neox ? "neox" : "interleaved", name(kv),
                             parts & 1 ? ",v" : "", parts & 2 ? ",q" : "");
        gen g(c.name);
        c.kind = op::rope_kv_store;
        std::vector<int32_t> pos = {0, 1, 2, 900, 33, 4000}, slots = {5, 0, 17, 3, 30, 12};
        c.src = {from_floats(dtype::f32, {6, 2, 64}, g.normal(6 * 2 * 64)), from_ints({6}, pos),
                 from_ints({6}, slots),
                 parts & 1 ? from_floats(dtype::f32, {6, 2, 64}, g.normal(6 * 2 * 64)) : absent(),
                 parts & 2 ? from_floats(dtype::f32, {6, 4, 64}, g.normal(6 * 4 * 64)) : absent()};
        c.dst = from_floats(kv, {8, 4, 2, 64}, std::vector<float>(8 * 4 * 2 * 64, 0.0f));
        if (parts & 1)
          c.dst2 = from_floats(kv, {8, 4, 2, 64}, std::vector<float>(8 * 4 * 2 * 64, 0.0f));
        if (parts & 2) c.dst3 = out(dtype::f32, {6, 4, 64});
        c.p.block_size = 4;
        c.p.rope.layout = layout;
        c.p.rope.rot_dim = layout == rope_layout::neox ? 64 : 48; // partial: the tail copied
        c.p.rope.theta = 10000.0;
        c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-4} : tolerance{1e-5, 1e-2};
        out_cases.push_back(std::move(c));
      }
}

// Linear attention's recurrent ops over three sequences of one step: a prompt from position 0
// (its slot holds another sequence's leftovers, which must not leak in), a prompt chunk and a
// decode row that continue the states their slots hold.
void recurrent_cases(std::vector<op_case>& out_cases) {
  const std::vector<int32_t> table = {0, 5, 0, 2, 5, 3, 7, 0, 8, 1, 12, 3}; // begin count pos0 slot
  const int64_t T = 9, NS = 4;
  // (plain: no SiLU, LFM2's short convolution, with its taps in bf16 as published)
  // (bias: Mamba's conv1d)
  for (auto [Hc, Dc, K, plain, bias] :
       {std::tuple<int64_t, int64_t, int64_t, bool, bool>{2, 8, 4, false, false},
        {3, 16, 3, false, false},
        {4, 16, 3, true, false},
        {3, 16, 4, false, true}}) {
    op_case c;
    c.name = fmt::format("causal_conv(T={},Hc={},Dc={},K={}{}{})", T, Hc, Dc, K,
                         plain ? ",plain" : "", bias ? ",bias" : "");
    gen g(c.name);
    c.kind = op::causal_conv;
    c.p.conv_plain = plain;
    c.src = {
        from_floats(dtype::f32, {T, Hc, Dc}, g.normal(T * Hc * Dc)),
        from_floats(plain ? dtype::bf16 : dtype::f32, {Hc * Dc, K}, g.normal(Hc * Dc * K, 0.5f)),
        from_floats(dtype::f32, {NS, Hc, K - 1, Dc}, g.normal(NS * Hc * (K - 1) * Dc)),
        from_ints({3, 4}, table),
        bias ? from_floats(dtype::f32, {Hc * Dc}, g.normal(Hc * Dc, 0.5f)) : absent()};
    c.dst = out(dtype::f32, {T, Hc, Dc});
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  // channels of one value each (Mamba-1's), in the three sequences above and in one of 70 tokens
  // continuing its state (longer than the kernel's 64-token windows)
  for (auto [T1, Hc, K, tab] :
       {std::tuple<int64_t, int64_t, int64_t, std::vector<int32_t>>{T, 40, 4, table},
        {70, 300, 3, {0, 70, 5, 2}}}) {
    op_case c;
    c.name = fmt::format("causal_conv(T={},Hc={},Dc=1,K={},bias)", T1, Hc, K);
    gen g(c.name);
    c.kind = op::causal_conv;
    const int64_t S = static_cast<int64_t>(tab.size()) / 4;
    c.src = {from_floats(dtype::f32, {T1, Hc, 1}, g.normal(T1 * Hc)),
             from_floats(dtype::bf16, {Hc, K}, g.normal(Hc * K, 0.5f)),
             from_floats(dtype::f32, {NS, Hc, K - 1, 1}, g.normal(NS * Hc * (K - 1))),
             from_ints({S, 4}, tab), from_floats(dtype::f32, {Hc}, g.normal(Hc, 0.5f))};
    c.dst = out(dtype::f32, {T1, Hc, 1});
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  // (beta scaled by 2: OLMo hybrid's negative eigenvalues)
  for (auto [Hk, Hv, Dk, Dv, beta_scale] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, float>{2, 4, 16, 8, 0.0f},
        {2, 2, 32, 32, 0.0f},
        {2, 4, 16, 16, 2.0f}}) {
    op_case c;
    c.name = fmt::format("gated_delta(T={},Hk={},Hv={},Dk={},Dv={}{})", T, Hk, Hv, Dk, Dv,
                         beta_scale != 0 ? ",beta2" : "");
    gen g(c.name);
    c.kind = op::gated_delta;
    c.src = {from_floats(dtype::f32, {T, Hk, Dk}, g.normal(T * Hk * Dk)),
             from_floats(dtype::f32, {T, Hk, Dk}, g.normal(T * Hk * Dk)),
             from_floats(dtype::f32, {T, Hv, Dv}, g.normal(T * Hv * Dv)),
             from_floats(dtype::f32, {T, Hv}, g.normal(T * Hv)),
             from_floats(dtype::f32, {T, Hv}, g.normal(T * Hv)),
             from_floats(dtype::f32, {Hv}, g.normal(Hv, 0.5f)),
             from_floats(dtype::f32, {Hv}, g.normal(Hv, 0.5f)),
             from_floats(dtype::f32, {NS, Hv, Dk, Dv}, g.normal(NS * Hv * Dk * Dv, 0.3f)),
             from_ints({3, 4}, table)};
    c.dst = out(dtype::f32, {T, Hv, Dv});
    c.p.delta_beta_scale = beta_scale;
    c.tol = {1e-9, 1e-4};
    out_cases.push_back(std::move(c));
  }
  // Kimi's KDA: a decay per head and key channel (a [T, Hv, Dk], dt_bias [Hv * Dk]); GLM-5.3's
  // with its safe gate (a decay bounded below by exp(-5))
  for (float bound : {0.0f, -5.0f}) {
    const int64_t Hk = 3, Hv = 3, Dk = 16, Dv = 16;
    op_case c;
    c.name = fmt::format("gated_delta(T={},Hk={},Hv={},Dk={},Dv={},per_channel{})", T, Hk, Hv, Dk,
                         Dv, bound < 0 ? ",bound" : "");
    gen g(c.name);
    c.kind = op::gated_delta;
    c.src = {from_floats(dtype::f32, {T, Hk, Dk}, g.normal(T * Hk * Dk)),
             from_floats(dtype::f32, {T, Hk, Dk}, g.normal(T * Hk * Dk)),
             from_floats(dtype::f32, {T, Hv, Dv}, g.normal(T * Hv * Dv)),
             from_floats(dtype::f32, {T, Hv, Dk}, g.normal(T * Hv * Dk)),
             from_floats(dtype::f32, {T, Hv}, g.normal(T * Hv)),
             from_floats(dtype::f32, {Hv}, g.normal(Hv, 0.5f)),
             from_floats(dtype::f32, {Hv * Dk}, g.normal(Hv * Dk, 0.5f)),
             from_floats(dtype::f32, {NS, Hv, Dk, Dv}, g.normal(NS * Hv * Dk * Dv, 0.3f)),
             from_ints({3, 4}, table)};
    c.dst = out(dtype::f32, {T, Hv, Dv});
    c.p.delta_bound = bound;
    c.tol = {1e-9, 1e-4};
    out_cases.push_back(std::move(c));
  }
  // Mamba-2's scan: heads over groups of B and C (one group; two), A_log or GGUF's -exp(A_log);
  // Mamba-1's: channels as heads of one value, an A per state value
  // (dt_min: the step clamped below, Zamba2's time_step_min, high enough to bite on about half
  // of the steps)
  for (auto [H, G, P, N, neg, per_state, dt_min] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, float>{4, 1, 8, 16, false, false,
                                                                          0.0f},
        {6, 2, 16, 8, true, false, 0.0f},
        {24, 1, 1, 16, false, true, 0.0f},
        {8, 1, 1, 8, true, true, 0.0f},
        {4, 1, 8, 16, false, false, 0.7f},
        {24, 1, 1, 16, false, true, 0.7f}}) {
    op_case c;
    c.name = fmt::format("ssm_scan(T={},H={},G={},P={},N={}{}{}{})", T, H, G, P, N,
                         neg ? ",neg_a" : "", per_state ? ",A[H,N]" : "",
                         dt_min > 0 ? fmt::format(",dt_min={}", dt_min) : "");
    gen g(c.name);
    c.kind = op::ssm_scan;
    std::vector<float> A = g.normal(per_state ? H * N : H, 0.5f);
    if (neg)
      for (float& x : A) x = -std::exp(x);
    c.src = {from_floats(dtype::f32, {T, H, P}, g.normal(T * H * P)),
             from_floats(dtype::f32, {T, H}, g.normal(T * H)),
             per_state ? from_floats(dtype::f32, {H, N}, A) : from_floats(dtype::f32, {H}, A),
             from_floats(dtype::f32, {T, G, N}, g.normal(T * G * N)),
             from_floats(dtype::f32, {T, G, N}, g.normal(T * G * N)),
             from_floats(dtype::f32, {H}, g.normal(H)),
             from_floats(dtype::f32, {H}, g.normal(H, 0.5f)),
             from_floats(dtype::f32, {NS, H, P, N}, g.normal(NS * H * P * N, 0.3f)),
             from_ints({3, 4}, table)};
    c.dst = out(dtype::f32, {T, H, P});
    c.p.delta_neg_a = neg;
    c.p.scan_dt_min = dt_min;
    c.tol = {1e-9, 1e-4};
    out_cases.push_back(std::move(c));
  }
  // MiniMax's lightning attention as the scan: d = 1 and no D term (dt, D, dt_bias empty), A = -s
  // per head, one group of B and C per head
  {
    const int64_t H = 4, P = 16, N = 16;
    op_case c;
    c.name = fmt::format("ssm_scan(T={},H={},G={},P={},N={},unit_dt)", T, H, H, P, N);
    gen g(c.name);
    c.kind = op::ssm_scan;
    std::vector<float> A = g.normal(H, 0.5f);
    for (float& x : A) x = -std::exp(x) * 0.1f;
    c.src = {from_floats(dtype::f32, {T, H, P}, g.normal(T * H * P)),
             absent(),
             from_floats(dtype::f32, {H}, A),
             from_floats(dtype::f32, {T, H, N}, g.normal(T * H * N, 0.3f)),
             from_floats(dtype::f32, {T, H, N}, g.normal(T * H * N, 0.3f)),
             absent(),
             absent(),
             from_floats(dtype::f32, {NS, H, P, N}, g.normal(NS * H * P * N, 0.3f)),
             from_ints({3, 4}, table)};
    c.dst = out(dtype::f32, {T, H, P});
    c.p.scan_unit_dt = true;
    c.tol = {1e-9, 1e-4};
    out_cases.push_back(std::move(c));
  }
  // Griffin's RG-LRU: a decay in (0, 1) per token and channel (100 channels: a block of 64 and
  // a partial one), plain and with the sqrt(1 - a^2) input normalisation
  for (bool norm : {false, true}) {
    const int64_t W = 100;
    op_case c;
    c.name = fmt::format("lru_scan(T={},W={}{})", T, W, norm ? ",norm" : "");
    gen g(c.name);
    c.kind = op::lru_scan;
    c.src = {from_floats(dtype::f32, {T, W}, g.uniform(T * W, 0.05f, 0.999f)),
             from_floats(dtype::f32, {T, W}, g.normal(T * W)),
             from_floats(dtype::f32, {NS, W}, g.normal(NS * W, 0.3f)), from_ints({3, 4}, table)};
    c.dst = out(dtype::f32, {T, W});
    c.p.lru_norm = norm;
    c.tol = {1e-9, 1e-4};
    out_cases.push_back(std::move(c));
  }
  // xLSTM's mLSTM: input gates spread wide (the stabiliser m follows them up and down), forget
  // gates mostly open; key dims above and below the value dims
  for (auto [H, Dk, Dv] : {std::tuple<int64_t, int64_t, int64_t>{3, 16, 8}, {2, 8, 33}}) {
    op_case c;
    c.name = fmt::format("mlstm_scan(T={},H={},Dk={},Dv={})", T, H, Dk, Dv);
    gen g(c.name);
    c.kind = op::mlstm_scan;
    std::vector<float> f = g.normal(T * H, 2.0f);
    for (float& x : f) x += 2.0f;
    c.src = {from_floats(dtype::f32, {T, H, Dk}, g.normal(T * H * Dk)),
             from_floats(dtype::f32, {T, H, Dk}, g.normal(T * H * Dk)),
             from_floats(dtype::f32, {T, H, Dv}, g.normal(T * H * Dv)),
             from_floats(dtype::f32, {T, H}, g.normal(T * H, 4.0f)),
             from_floats(dtype::f32, {T, H}, f),
             from_floats(dtype::f32, {NS, H, Dk + 1, Dv + 1},
                         g.normal(NS * H * (Dk + 1) * (Dv + 1), 0.3f)),
             from_ints({3, 4}, table)};
    c.dst = out(dtype::f32, {T, H, Dv});
    c.p.eps = 1e-6f;
    c.tol = {1e-9, 1e-4};
    out_cases.push_back(std::move(c));
  }
  // GGUF's form: value heads tiled over the key heads (a shard's first global head 3), and
  // -exp(A_log) stored
  {
    const int64_t Hk = 2, Hv = 3, Dk = 16, Dv = 16;
    op_case c;
    c.name = fmt::format("gated_delta(T={},Hk={},Hv={},tiled,head0=3,neg_a)", T, Hk, Hv);
    gen g(c.name);
    c.kind = op::gated_delta;
    std::vector<float> neg_a = g.normal(Hv, 0.5f);
    for (float& x : neg_a) x = -std::exp(x);
    c.src = {from_floats(dtype::f32, {T, Hk, Dk}, g.normal(T * Hk * Dk)),
             from_floats(dtype::f32, {T, Hk, Dk}, g.normal(T * Hk * Dk)),
             from_floats(dtype::f32, {T, Hv, Dv}, g.normal(T * Hv * Dv)),
             from_floats(dtype::f32, {T, Hv}, g.normal(T * Hv)),
             from_floats(dtype::f32, {T, Hv}, g.normal(T * Hv)),
             from_floats(dtype::f32, {Hv}, neg_a),
             from_floats(dtype::f32, {Hv}, g.normal(Hv, 0.5f)),
             from_floats(dtype::f32, {NS, Hv, Dk, Dv}, g.normal(NS * Hv * Dk * Dv, 0.3f)),
             from_ints({3, 4}, table)};
    c.dst = out(dtype::f32, {T, Hv, Dv});
    c.p.delta_tiled = c.p.delta_neg_a = true;
    c.p.head0 = 3;
    c.tol = {1e-9, 1e-4};
    out_cases.push_back(std::move(c));
  }
}

} // namespace

std::vector<op_case> all_cases() {
  std::vector<op_case> cases;
  embedding_cases(cases);
  matmul_cases(cases);
  norm_cases(cases);
  rope_cases(cases);
  elementwise_cases(cases);
  reduce_cases(cases);
  attention_cases(cases);
  program_cases(cases);
  convert_cases(cases);
  fused_cases(cases);
  moe_cases(cases);
  latent_cases(cases);
  v4_cases(cases);
  recurrent_cases(cases);
  kquant_cases(cases);
  for (auto& c : cases) {
    while (c.src.size() < 9) c.src.push_back(absent());
    if (c.dst2.bytes.empty()) c.dst2.present = false;
    if (c.dst3.bytes.empty()) c.dst3.present = false;
  }
  return cases;
}

} // namespace troupe::kernels::harness
