// packed_test.cpp: q8_0 (AVX-512), q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS matmuls from the
// layout made at load (tensor_view::packed, kernels/cpu/gemv.hpp pack_q4_0 / pack_q8_0 /
// pack_q4_k / pack_q5_k / pack_q6_k / pack_iq4_xs: 16 rows a group on AVX-512, 8 on AVX2) give what
// the published rows give, for 1-7 tokens and 8-33 (prefill: Q6_K's GEMM over rows unpacked from
// the layout, across spans and threads), with and without bias, through row slices that keep or
// drop the layout, and the matmul report names the path; Q6_K's unpacking is the exact inverse of
// its packing. Runs where the CPU's table has the packed kernels (ctest runs it with
// TROUPE_ISA=avx2 too); skipped, saying why, elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/half.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/amx.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/report.hpp"
#include "kernels/registry.hpp"

using namespace troupe;
using namespace troupe::kernels;

namespace {

// N rows of K values of `t`: random code and scale bytes, and normal f16 scales where the
// format keeps them (q4_0 / q8_0 / IQ4_NL / IQ4_XS: d first; Q4_K / Q5_K: d and dmin first;
// Q6_K: d last).
std::vector<uint8_t> random_rows(dtype t, int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::uniform_int_distribution<int> byte(0, 255);
  const size_t block = static_cast<size_t>(info(t).block_bytes);
  const std::vector<size_t> scales = t == dtype::q4_k || t == dtype::q5_k
                                         ? std::vector<size_t>{0, 2}
                                     : t == dtype::q6_k ? std::vector<size_t>{208}
                                                        : std::vector<size_t>{0};
  std::vector<uint8_t> w(static_cast<size_t>(row_bytes(t, K) * N));
  for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
  for (size_t b = 0; b < w.size(); b += block)
    for (size_t at : scales) {
      const uint16_t d = f32_to_f16(scale(rng));
      w[b + at] = static_cast<uint8_t>(d & 0xff);
      w[b + at + 1] = static_cast<uint8_t>(d >> 8);
    }
  return w;
}

std::vector<float> run(const tensor_view& w, const std::vector<float>& x, int64_t T,
                       const float* bias) {
  const int64_t K = w.cols(), N = w.rows();
  std::vector<float> y(static_cast<size_t>(T * N), -1.0f);
  op_args a;
  a.kind = op::matmul;
  a.src[0] = tensor_view(const_cast<float*>(x.data()), dtype::f32, {T, K});
  a.src[1] = w;
  if (bias) a.src[2] = tensor_view(const_cast<float*>(bias), dtype::f32, {N});
  a.dst = tensor_view(y.data(), dtype::f32, {T, N});
  auto k = registry::global().find(backend::cpu, a);
  EXPECT_TRUE(k);
  if (k) {
    EXPECT_TRUE((*k)(a, exec_ctx{}));
  }
  return y;
}

// w with its packed layout, made into `layout` (cpu::packed_bytes(w) > 0)
tensor_view laid_out(const tensor_view& w, std::vector<uint8_t>& layout) {
  layout.resize(static_cast<size_t>(cpu::packed_bytes(w)));
  cpu::pack(w, layout.data());
  tensor_view wp = w;
  wp.packed = layout.data();
  return wp;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << i;
}

} // namespace

class PackedDecode : public ::testing::TestWithParam<dtype> {};

TEST_P(PackedDecode, DecodeFromThePackedLayoutEqualsThePublishedRows) {
  const dtype type = GetParam();
  const int64_t N = 48, K = 512;
  auto bytes = random_rows(type, N, K, 7);
  tensor_view w(bytes.data(), type, {N, K});
  const int64_t packed = cpu::packed_bytes(w);
  if (packed == 0)
    GTEST_SKIP() << "this CPU's kernel table (" << cpu::gemv_kernels().isa << ") has no packed "
                 << name(type) << " decode";
  EXPECT_EQ(packed, w.nbytes());
  std::vector<uint8_t> layout;
  const tensor_view wp = laid_out(w, layout);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> bias(N);
  for (auto& b : bias) b = nd(rng);
  // 1-7 tokens (decode) and 8+ (prefill: the published rows go through the int8 GEMM, a kernel
  // of its own; Q6_K's layout through the same GEMM, unpacked)
  for (int64_t T : {1, 2, 3, 4, 5, 6, 7, 8, 13, 33}) {
    std::vector<float> x(static_cast<size_t>(T * K));
    for (auto& v : x) v = nd(rng);
    for (const float* b : std::vector<const float*>{nullptr, bias.data()}) {
      SCOPED_TRACE("T " + std::to_string(T) + (b ? " with bias" : ""));
      cpu::reset_matmul_uses();
      const auto want = run(w, x, T, b);
      const auto got = run(wp, x, T, b);
      expect_close(got, want);
      const auto uses = cpu::matmul_uses();
      ASSERT_EQ(uses.size(), 2u);
      EXPECT_NE(uses[0].path.find("packed") == std::string::npos,
                uses[1].path.find("packed") == std::string::npos)
          << "one call as published, one packed";
      // where the CPU has AMX, q8_0 / q4_0 prefill runs on its tiles, from either
      if (T >= 8 && (type == dtype::q8_0 || type == dtype::q4_0) && cpu::amx_int8_usable()) {
        for (const auto& u : uses) {
          EXPECT_EQ(u.path.rfind("amx int8", 0), 0u) << u.path;
        }
      }
    }
  }
  // rows 16..48 and 16..40 keep the layout (they start at a boundary of every layout's
  // groups; the rows past the last whole group read the published ones); 8..40 and 4..44 read
  // the published rows
  std::vector<float> x(static_cast<size_t>(2 * K));
  for (auto& v : x) v = nd(rng);
  const auto whole = run(w, x, 2, nullptr);
  for (auto [b, e] : {std::pair<int64_t, int64_t>{16, 48}, {16, 40}, {8, 40}, {4, 44}}) {
    const tensor_view s = wp.slice_rows(b, e);
    EXPECT_EQ(s.packed != nullptr, b % 16 == 0);
    const auto part = run(s, x, 2, nullptr);
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t n = b; n < e; ++n)
        ASSERT_NEAR(part[t * (e - b) + n - b], whole[t * N + n],
                    1e-4f * (1 + std::fabs(whole[t * N + n])))
            << b << " " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PackedDecode,
                         ::testing::Values(dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q5_k,
                                           dtype::q6_k, dtype::iq4_nl, dtype::iq4_xs),
                         [](const auto& info) { return std::string(name(info.param)); });

// Q5_K's largest codes (31: every qs nibble and qh bit set) against activations at the int8
// extremes: the AVX2 kernel's int16 sums of maddubs pairs (2 x 31 x 127 each) must move to
// int32 before they pass 32767; the published rows' kernel (checked against the reference by
// the op harness) is the yardstick.
TEST(PackedQ5K, TheLargestCodesDoNotSaturate) {
  const int64_t N = 16, K = 512;
  auto bytes = random_rows(dtype::q5_k, N, K, 11);
  for (size_t b = 0; b < bytes.size(); b += 176)
    for (size_t i = 16; i < 176; ++i) bytes[b + i] = 0xff; // qh and qs: every code 31
  tensor_view w(bytes.data(), dtype::q5_k, {N, K});
  if (cpu::packed_bytes(w) == 0)
    GTEST_SKIP() << "this CPU's kernel table (" << cpu::gemv_kernels().isa
                 << ") has no packed q5_k decode";
  std::vector<uint8_t> layout;
  const tensor_view wp = laid_out(w, layout);
  for (int64_t T : {2, 9}) // decode, and prefill's block-by-block walk
    for (float sign : {1.0f, -1.0f}) {
      SCOPED_TRACE("T " + std::to_string(T));
      std::vector<float> x(static_cast<size_t>(T * K), sign); // quantized to +-127 everywhere
      const auto want = run(w, x, T, nullptr);
      const auto got = run(wp, x, T, nullptr);
      expect_close(got, want);
    }
}

// Prefill walks the layout 256 values at a time (AVX2: a K-quant or IQ4_XS block, or 8 blocks
// of the 32-value formats); rows of 5 blocks of 32 end inside the first span.
TEST(PackedPrefill, RowsShorterThanASpanOf256Values) {
  const int64_t N = 32, K = 160;
  for (dtype type : {dtype::q4_0, dtype::iq4_nl}) {
    SCOPED_TRACE(name(type));
    auto bytes = random_rows(type, N, K, 5);
    tensor_view w(bytes.data(), type, {N, K});
    if (cpu::packed_bytes(w) == 0) continue;
    std::vector<uint8_t> layout;
    const tensor_view wp = laid_out(w, layout);
    std::mt19937 rng(9);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t T : {8, 13}) {
      std::vector<float> x(static_cast<size_t>(T * K));
      for (auto& v : x) v = nd(rng);
      expect_close(run(wp, x, T, nullptr), run(w, x, T, nullptr));
    }
  }
}

// A fused op plans once for its first weight; a later weight without the layout (here the up
// matrix of matmul_swiglu, read as published) is still multiplied right, on whatever path the
// CPU has (with AMX: a K-quant plan re-planned without it, a q8_0 / q4_0 one in the other tile
// order), for prefill-sized steps.
TEST_P(PackedDecode, AFusedOpsWeightWithoutTheLayoutMatchesTheUnfusedOnes) {
  const dtype type = GetParam();
  const int64_t F = 32, K = 512, T = 9;
  auto gb = random_rows(type, F, K, 11), ub = random_rows(type, F, K, 12);
  tensor_view wg(gb.data(), type, {F, K}), wu(ub.data(), type, {F, K});
  if (cpu::packed_bytes(wg) == 0)
    GTEST_SKIP() << "no packed " << name(type) << " layout on this CPU";
  std::vector<uint8_t> layout;
  const tensor_view wgp = laid_out(wg, layout);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(T * K));
  for (auto& v : x) v = nd(rng);
  const auto g = run(wg, x, T, nullptr), u = run(wu, x, T, nullptr);
  std::vector<float> y(static_cast<size_t>(T * F), -1.0f);
  op_args a;
  a.kind = op::matmul_swiglu;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, K});
  a.src[1] = wgp;
  a.src[2] = wu;
  a.dst = tensor_view(y.data(), dtype::f32, {T, F});
  auto k = registry::global().find(backend::cpu, a);
  ASSERT_TRUE(k);
  ASSERT_TRUE((*k)(a, exec_ctx{}));
  for (int64_t i = 0; i < T * F; ++i) {
    const float want = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    ASSERT_NEAR(y[i], want, 1e-3f * (1.0f + std::fabs(want))) << i;
  }
}

// Each table's Q6_K unpacking (gemv_table::unpack_q6_k, the prefill GEMM's input) gives back
// the rows pack_q6_k laid out, byte for byte, for every group of a matrix.
TEST(PackedQ6K, UnpackingAGroupGivesThePublishedRowsBack) {
  __builtin_cpu_init();
  std::vector<const cpu::gemv_table*> tables;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    tables.push_back(cpu::gemv_avx2_table());
  if (std::string(cpu::gemv_kernels().isa) == "avx512") tables.push_back(cpu::gemv_avx512_table());
  if (tables.empty()) GTEST_SKIP() << "no SIMD table on this CPU";
  const int64_t N = 32, K = 768;
  const auto rows = random_rows(dtype::q6_k, N, K, 21);
  const int64_t rb = row_bytes(dtype::q6_k, K);
  for (const cpu::gemv_table* tab : tables) {
    SCOPED_TRACE(tab->isa);
    ASSERT_TRUE(tab->unpack_q6_k);
    const int G = tab->pack_rows;
    std::vector<uint8_t> layout(rows.size()), back(static_cast<size_t>(G * rb));
    cpu::pack_q6_k(rows.data(), N, K, G, layout.data());
    for (int64_t g = 0; g < N / G; ++g) {
      std::fill(back.begin(), back.end(), 0);
      tab->unpack_q6_k(layout.data() + g * G * rb, K, back.data());
      ASSERT_TRUE(std::equal(back.begin(), back.end(), rows.begin() + g * G * rb)) << "group " << g;
    }
  }
}

// Q6_K prefill from the layout over more rows than one unpacked span holds (~128 KiB), with
// bias, on one thread and on two (each range whole groups): the same as the published rows, on
// AMX tiles where the CPU has them (TROUPE_AMX=0: the unpacking GEMM).
TEST(PackedQ6K, PrefillAcrossSpansAndThreadsEqualsThePublishedRows) {
  const int64_t N = 16 * 41, K = 256, T = 13;
  auto bytes = random_rows(dtype::q6_k, N, K, 23);
  tensor_view w(bytes.data(), dtype::q6_k, {N, K});
  if (cpu::packed_bytes(w) == 0)
    GTEST_SKIP() << "this CPU's kernel table (" << cpu::gemv_kernels().isa
                 << ") has no packed q6_k layout";
  std::vector<uint8_t> layout;
  const tensor_view wp = laid_out(w, layout);
  EXPECT_TRUE(cpu::packed_only(wp)) << "prefill reads the layout: the published rows can go";
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(T * K)), bias(N);
  for (auto& v : x) v = nd(rng);
  for (auto& b : bias) b = nd(rng);
  const auto want = run(w, x, T, bias.data());
  cpu::reset_matmul_uses();
  expect_close(run(wp, x, T, bias.data()), want);
  const auto uses = cpu::matmul_uses();
  ASSERT_EQ(uses.size(), 1u);
  // on AMX its tiles read the layout (products of 16 values); elsewhere the int8 GEMM reads rows
  // unpacked from it
  EXPECT_NE(uses[0].path.find(cpu::amx_int8_usable() ? "amx int8 packed" : "unpacked"),
            std::string::npos)
      << uses[0].path;
  thread_pool pool(2);
  exec_ctx ctx;
  ctx.pool = &pool;
  std::vector<float> y(static_cast<size_t>(T * N), -1.0f);
  op_args a;
  a.kind = op::matmul;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, K});
  a.src[1] = wp;
  a.src[2] = tensor_view(bias.data(), dtype::f32, {N});
  a.dst = tensor_view(y.data(), dtype::f32, {T, N});
  auto k = registry::global().find(backend::cpu, a);
  ASSERT_TRUE(k);
  ASSERT_TRUE((*k)(a, ctx));
  expect_close(y, want);
}
