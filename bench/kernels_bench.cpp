// kernels_bench.cpp: Google Benchmark micro-benchmarks of the CPU kernels through the op
// registry, with GB/s (weight bytes streamed) and GFLOP/s counters. Shapes are the
// bench-134m model's (C 768, F 2048, V 32000). Weights are sized past the last-level cache
// where the point is the memory wall.
//   build/bench/kernels_bench [--benchmark_filter=matmul] [--benchmark_format=json]
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/buffer.hpp"
#include "core/convert.hpp"
#include "core/kquant.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/registry.hpp"

using namespace troupe;
using namespace troupe::kernels;

namespace {

std::vector<float> randn(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// y[T, N] = x[T, K] W[N, K]^T with W of `type`; N x K large enough to leave the caches. With
// `packed`, W also in the layout the CPU's decode kernels read fastest, as the executor makes
// it at load (tensor_view::packed; skipped where this CPU's table has none for `type`).
void BM_matmul(benchmark::State& st, dtype type, bool packed) {
  const int64_t T = st.range(0), K = st.range(1), N = st.range(2);
  const int threads = static_cast<int>(st.range(3));
  const auto x = randn(T * K, 1);
  auto wbuf = *buffer::allocate(row_bytes(type, K) * N);
  if (type == dtype::t2_32) { // BitNet's ternary blocks (written at load): one scale a matrix
    std::mt19937_64 rng(2);
    random_blocks(
        type, K / 32 * N, 0.02f, [&rng] { return rng(); }, wbuf.as<uint8_t>());
    const float d = 0.02f;
    for (int64_t b = 0; b < K / 32 * N; ++b) std::memcpy(wbuf.as<uint8_t>() + b * 12, &d, 4);
  } else if (is_kquant(type)) { // written by no quantizer here: bytes whose f16 scales are normal
    std::mt19937 rng(2);
    for (int64_t i = 0; i < row_bytes(type, K) * N; ++i)
      wbuf.as<uint8_t>()[i] = static_cast<uint8_t>(0x30 + rng() % 13);
  } else {
    const auto w = randn(K, 2);
    for (int64_t n = 0; n < N; ++n)
      from_f32(type, w.data(), wbuf.as<uint8_t>() + n * row_bytes(type, K), K);
  }
  std::vector<float> y(T * N);
  op_args a;
  a.kind = op::matmul;
  a.src[0] = tensor_view(const_cast<float*>(x.data()), dtype::f32, {T, K});
  a.src[1] = wbuf.view(type, {N, K});
  buffer layout;
  if (packed) {
    const int64_t bytes = cpu::packed_bytes(a.src[1]);
    if (bytes == 0) {
      st.SkipWithError("no packed layout for this dtype on this CPU");
      return;
    }
    layout = *buffer::allocate(static_cast<size_t>(bytes));
    cpu::pack(a.src[1], layout.data());
    a.src[1].packed = layout.data();
  }
  a.dst = tensor_view(y.data(), dtype::f32, {T, N});
  auto k = registry::global().find(backend::cpu, a);
  thread_pool pool(threads);
  exec_ctx ctx;
  ctx.pool = &pool;
  for (auto _ : st) {
    (void)(*k)(a, ctx);
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(row_bytes(type, K) * N);
  st.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
  st.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * T * K * N, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  st.SetLabel(std::string(name(type)) + " " + k->name);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({1, 768, 32768, threads});   // decode: 24-100 MB of weights (may sit in a large L3)
    b->Args({1, 768, 262144, threads});  // decode: 150-800 MB, past any cache
    b->Args({1, 5632, 32768, threads});  // decode, long rows (a 1 B model's down projection)
    b->Args({4, 5632, 32768, threads});  // batched decode of 4 sequences, long rows
    b->Args({64, 768, 2048, threads});   // prefill of 64 tokens on a 768 x 2048 projection
    b->Args({256, 768, 32768, threads}); // prefill with the weights coming from DRAM
    b->Args({64, 768, 65536, threads});  // prefill of 64 tokens, the weights coming from DRAM
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// BitNet b1.58 2B4T's projections (C 2560, F 6912): its ternary weights as t2_32 against the
// same matrices as bf16 (how they ran before: floats in the checkpoint's dtype)
void bitnet_shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({1, 2560, 6912, threads});  // decode: gate / up
    b->Args({1, 6912, 2560, threads});  // decode: down
    b->Args({4, 2560, 6912, threads});  // batched decode of 4 sequences
    b->Args({64, 2560, 6912, threads}); // prefill of 64 tokens
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

} // namespace

BENCHMARK_CAPTURE(BM_matmul, bitnet_bf16, dtype::bf16, false)->Apply(bitnet_shapes);
BENCHMARK_CAPTURE(BM_matmul, bitnet_t2_32, dtype::t2_32, false)->Apply(bitnet_shapes);

BENCHMARK_CAPTURE(BM_matmul, f32, dtype::f32, false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, f16, dtype::f16, false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, bf16, dtype::bf16, false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q8_0, dtype::q8_0, false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q4_0, dtype::q4_0, false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q4_k, dtype::q4_k, false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q6_k, dtype::q6_k, false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q4_0_packed, dtype::q4_0, true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q4_k_packed, dtype::q4_k, true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q5_k_packed, dtype::q5_k, true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, q6_k_packed, dtype::q6_k, true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, iq4_xs_packed, dtype::iq4_xs, true)->Apply(shapes);

BENCHMARK_MAIN();
