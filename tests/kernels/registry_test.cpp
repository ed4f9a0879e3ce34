// registry_test.cpp: lookup order (native before composed), composite availability, and
// that an op no backend can serve gives a clear error (kernels/registry.hpp); the CPU matmul's
// path report (kernels/cpu/report.hpp); the element-wise programs' rounding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/cpu/amx.hpp"
#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/report.hpp"
#include "kernels/expr.hpp"
#include "kernels/jit.hpp"
#include "kernels/registry.hpp"

using namespace troupe;
using namespace troupe::kernels;

namespace {
void fake_silu(const op_args& a, const exec_ctx&) {
  for (int64_t i = 0; i < a.src[0].numel(); ++i) a.dst.as<float>()[i] = 42.0f;
}
void fake_mul(const op_args& a, const exec_ctx&) {
  for (int64_t i = 0; i < a.src[0].numel(); ++i)
    a.dst.as<float>()[i] = a.src[0].as<float>()[i] * a.src[1].as<float>()[i];
}
bool always(const op_args&) {
  return true;
}
} // namespace

TEST(Registry, NativeFirstThenComposed) {
  const auto& r = registry::global();
  float g[4] = {1, 2, 3, 4}, u[4] = {1, 1, 1, 1}, y[4];
  op_args a;
  a.kind = op::swiglu;
  a.src[0] = tensor_view(g, dtype::f32, {1, 4});
  a.src[1] = tensor_view(u, dtype::f32, {1, 4});
  a.dst = tensor_view(y, dtype::f32, {1, 4});
  auto native = r.find(backend::cpu, a);
  ASSERT_TRUE(native);
  EXPECT_FALSE(native->composed);
  auto composed = r.find(backend::cpu, a, lookup::composed_only);
  ASSERT_TRUE(composed);
  EXPECT_TRUE(composed->composed);
  EXPECT_NE(composed->name.find("composed"), std::string::npos);
}

TEST(Registry, ComposesFromPrimitivesOfTheSameBackend) {
  registry r;
  r.add(op::silu, backend::cpu, "fake", always, fake_silu);
  r.add(op::mul, backend::cpu, "fake", always, fake_mul);
  register_composites(r);
  float g[3] = {1, 2, 3}, u[3] = {1, 2, 3}, y[3];
  op_args a;
  a.kind = op::swiglu;
  a.src[0] = tensor_view(g, dtype::f32, {1, 3});
  a.src[1] = tensor_view(u, dtype::f32, {1, 3});
  a.dst = tensor_view(y, dtype::f32, {1, 3});
  auto k = r.find(backend::cpu, a);
  ASSERT_TRUE(k);
  EXPECT_TRUE(k->composed);
  ASSERT_TRUE((*k)(a, exec_ctx{}));
  EXPECT_EQ(y[0], 42.0f); // silu(fake) = 42, times up = 1
  EXPECT_EQ(y[2], 126.0f);
  // without mul the composite cannot serve, and no other kernel can
  registry bare;
  bare.add(op::silu, backend::cpu, "fake", always, fake_silu);
  register_composites(bare);
  EXPECT_FALSE(bare.find(backend::cpu, a));
  auto st = run_op(bare, backend::cpu, a, exec_ctx{});
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, errc::unsupported);
}

TEST(Registry, CheckArgsRejectsBadShapes) {
  float x[8], w[8], y[8];
  op_args a;
  a.kind = op::matmul;
  a.src[0] = tensor_view(x, dtype::f32, {2, 4});
  a.src[1] = tensor_view(w, dtype::f32, {2, 3}); // K disagrees
  a.dst = tensor_view(y, dtype::f32, {2, 2});
  auto st = check_args(a);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, errc::shape_mismatch);
  a.src[1] = tensor_view(w, dtype::f32, {2, 4});
  EXPECT_TRUE(check_args(a));
}

// An expert id outside [0, E) (a corrupt router result, a peer's garbage) is an error from
// every backend's moe, never a read past the stacked weights.
TEST(Registry, MoeRefusesExpertIdsOutOfRange) {
  const auto& r = registry::global();
  const int64_t T = 2, C = 32, F = 32, E = 2, k = 1;
  std::vector<float> x(T * C, 0.5f), w(E * F * C, 0.01f), wd(E * C * F, 0.01f), y(T * C);
  float wts[T * k] = {1.0f, 1.0f};
  for (int32_t bad : {2, -1}) {
    int32_t ids[T * k] = {0, bad};
    op_args a;
    a.kind = op::moe;
    a.src[0] = tensor_view(x.data(), dtype::f32, {T, C});
    a.src[1] = tensor_view(ids, dtype::i32, {T, k});
    a.src[2] = tensor_view(wts, dtype::f32, {T, k});
    a.src[3] = tensor_view(w.data(), dtype::f32, {E * F, C});
    a.src[4] = tensor_view(w.data(), dtype::f32, {E * F, C});
    a.src[5] = tensor_view(wd.data(), dtype::f32, {E * C, F});
    a.dst = tensor_view(y.data(), dtype::f32, {T, C});
    ASSERT_TRUE(check_args(a));
    for (backend b : {backend::ref, backend::cpu}) {
      auto st = run_op(r, b, a, {});
      ASSERT_FALSE(st) << to_string(b) << " accepted expert " << bad;
      EXPECT_NE(st.error().to_string().find("expert"), std::string::npos) << st.error().to_string();
    }
  }
}

// report.hpp counts each weight matmul under the path the plan took: with q4_0 weights, one
// token runs the decode gemv and 16 tokens the int8 GEMM (AMX tiles where the CPU has them;
// where the kernels have SIMD tables; plain loops and BLAS otherwise), and the counts say so.
TEST(MatmulReport, CountsThePathEachCallTook) {
  const int64_t K = 64, N = 16;
  std::vector<uint8_t> w(static_cast<size_t>(row_bytes(dtype::q4_0, K) * N), 0x11);
  std::vector<float> x(16 * K, 0.5f), y(16 * N);
  kernels::cpu::reset_matmul_uses();
  for (int64_t T : {1, 16, 16}) {
    op_args a;
    a.kind = op::matmul;
    a.src[0] = tensor_view(x.data(), dtype::f32, {T, K});
    a.src[1] = tensor_view(w.data(), dtype::q4_0, {N, K});
    a.dst = tensor_view(y.data(), dtype::f32, {T, N});
    auto k = registry::global().find(backend::cpu, a);
    ASSERT_TRUE(k);
    ASSERT_TRUE((*k)(a, exec_ctx{}));
  }
  const auto uses = kernels::cpu::matmul_uses();
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_TRUE(uses[0].prefill);
  EXPECT_EQ(uses[0].calls, 2u);
  EXPECT_FALSE(uses[1].prefill);
  EXPECT_EQ(uses[1].calls, 1u);
  for (const auto& u : uses) EXPECT_EQ(u.weights, "q4_0");
  const std::string isa = kernels::cpu::gemv_kernels().isa;
  if (isa == "portable") { // prefill on BLAS over expanded tiles, decode in plain loops
    EXPECT_EQ(uses[0].path, "blas sgemm (weights expanded)");
    EXPECT_EQ(uses[1].path, "portable loops");
  } else {
    if (kernels::cpu::amx_int8_usable())
      EXPECT_EQ(uses[0].path, "amx int8");
    else
      EXPECT_EQ(uses[0].path.rfind("int8 gemm " + isa, 0), 0u) << uses[0].path;
    EXPECT_EQ(uses[1].path, "gemv " + isa + " (int8)");
  }
}

// round(x) takes halves to the even integer (torch.round, which BitNet's activation
// quantization calls): the reference's value and, where the JIT can build it, the CPU kernel's
TEST(Expression, RoundTakesHalvesToEven) {
  auto p = parse_expression("round(x)", {"x"});
  ASSERT_TRUE(p) << p.error().message;
  p->sources = 1;
  const float in[8] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 3.49f, -3.51f, 1e7f + 1};
  const float want[8] = {0, 2, 2, -0.0f, -2, 3, -4, 1e7f + 1};
  for (int i = 0; i < 8; ++i) {
    const double x = in[i];
    EXPECT_EQ(p->eval(&x), want[i]) << in[i];
  }
  if (!jit_prepare(*p)) GTEST_SKIP() << "no compiler for the JIT here";
  float y[8] = {};
  op_args a;
  a.kind = op::elementwise;
  a.p.program = &*p;
  a.src[0] = tensor_view(const_cast<float*>(in), dtype::f32, {1, 8});
  a.dst = tensor_view(y, dtype::f32, {1, 8});
  ASSERT_TRUE(run_op(registry::global(), backend::cpu, a, exec_ctx{}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], want[i]) << in[i];
}
