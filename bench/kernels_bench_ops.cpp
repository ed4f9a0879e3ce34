// kernels_bench_ops.cpp: Google Benchmark micro-benchmarks of the CPU kernels other than the
// plain matmul (kernels_bench.cpp): the norms (f32 and q8_0 output), rope and rope + KV
// write, the fused gate/up + SwiGLU, decode attention over a paged cache and causal prefill
// attention, at the bench-134m shapes (C 768, 12 heads of 64, F 2048), and the latent
// attention's per-head matmuls at DeepSeek-V3's. Counters: GB/s of
// the bytes each op must move, GFLOP/s where arithmetic is the point.
//   build/bench/kernels_bench --benchmark_filter='attention|norm|rope|swiglu'
#include <numeric>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/buffer.hpp"
#include "core/convert.hpp"
#include "core/thread_pool.hpp"
#include "kernels/registry.hpp"

using namespace troupe;
using namespace troupe::kernels;

namespace {

constexpr int64_t C = 768, H = 12, D = 64, F = 2048;

std::vector<float> randn(int64_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Runs `a` on the CPU backend with `threads` workers and sets the counters.
// cold: before each call (untimed) 64 MB are read, so the call's operands come from memory
// as a decode step's KV rows do once the weights streamed through the caches
void run(benchmark::State& st, op_args& a, int threads, double bytes, double flops,
         bool cold = false) {
  auto k = registry::global().find(backend::cpu, a);
  if (!k) {
    st.SkipWithError("no CPU kernel");
    return;
  }
  thread_pool pool(threads);
  exec_ctx ctx;
  ctx.pool = &pool;
  std::vector<float> evict(cold ? size_t{16} << 20 : 0, 1.0f);
  for (auto _ : st) {
    if (cold) {
      st.PauseTiming();
      float sum = 0;
      for (size_t i = 0; i < evict.size(); i += 16) sum += evict[i]++;
      benchmark::DoNotOptimize(sum);
      st.ResumeTiming();
    }
    (void)(*k)(a, ctx);
    benchmark::DoNotOptimize(a.dst.data);
  }
  using bc = benchmark::Counter;
  if (bytes > 0) st.counters["GB/s"] = bc(bytes, bc::kIsIterationInvariantRate, bc::kIs1000);
  if (flops > 0) st.counters["GFLOP/s"] = bc(flops, bc::kIsIterationInvariantRate, bc::kIs1000);
  st.SetLabel(k->name);
}

// rmsnorm / add_rmsnorm of T rows, writing f32 or q8_0 (args: T, add, q8, threads)
void BM_norm(benchmark::State& st) {
  const int64_t T = st.range(0);
  const bool add = st.range(1), q8 = st.range(2);
  auto x = randn(T * C, 1), r = randn(T * C, 2), w = randn(C, 3, 0.1f), sum(x);
  std::vector<uint8_t> out(row_bytes(q8 ? dtype::q8_0 : dtype::f32, C) * T);
  op_args a;
  a.kind = add ? op::add_rmsnorm : op::rmsnorm;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, C});
  a.src[1] = tensor_view(add ? r.data() : w.data(), dtype::f32, add ? shape{T, C} : shape{C});
  if (add) {
    a.src[2] = tensor_view(w.data(), dtype::f32, {C});
    a.dst2 = tensor_view(sum.data(), dtype::f32, {T, C});
  }
  a.dst = tensor_view(out.data(), q8 ? dtype::q8_0 : dtype::f32, {T, C});
  const double bytes = 4.0 * T * C * (add ? 3 : 1) + static_cast<double>(out.size());
  run(st, a, static_cast<int>(st.range(3)), bytes, 0);
}

// rope of T tokens' 12 query heads in place, or rope + write of their K to an f16 cache
void BM_rope(benchmark::State& st) {
  const int64_t T = st.range(0);
  const bool store = st.range(1);
  auto x = randn(T * H * D, 4);
  std::vector<int32_t> pos(T), slots(T);
  std::iota(pos.begin(), pos.end(), 100);
  std::iota(slots.begin(), slots.end(), 16);
  const int64_t NB = (T + 16) / 16 + 1;
  std::vector<uint16_t> cache(NB * 16 * H * D);
  op_args a;
  a.kind = store ? op::rope_kv_store : op::rope;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, H, D});
  a.src[1] = tensor_view(pos.data(), dtype::i32, {T});
  a.p.rope.rot_dim = D;
  a.p.block_size = 16;
  if (store) {
    a.src[2] = tensor_view(slots.data(), dtype::i32, {T});
    a.dst = tensor_view(cache.data(), dtype::f16, {NB, 16, H, D});
  } else {
    a.dst = a.src[0];
  }
  run(st, a, static_cast<int>(st.range(2)), (store ? 6.0 : 8.0) * T * H * D, 0);
}

// silu(x Wg^T) * (x Wu^T) for T tokens, F 2048 (args: T, dtype index, threads)
void BM_matmul_swiglu(benchmark::State& st) {
  const int64_t T = st.range(0);
  const dtype type = st.range(1) == 0 ? dtype::q8_0 : st.range(1) == 1 ? dtype::bf16 : dtype::f32;
  auto x = randn(T * C, 5);
  auto wg = *buffer::allocate(row_bytes(type, C) * F),
       wu = *buffer::allocate(row_bytes(type, C) * F);
  const auto row = randn(C, 6, 0.05f);
  for (int64_t n = 0; n < F; ++n) {
    from_f32(type, row.data(), wg.as<uint8_t>() + n * row_bytes(type, C), C);
    from_f32(type, row.data(), wu.as<uint8_t>() + n * row_bytes(type, C), C);
  }
  std::vector<float> y(T * F);
  op_args a;
  a.kind = op::matmul_swiglu;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, C});
  a.src[1] = wg.view(type, {F, C});
  a.src[2] = wu.view(type, {F, C});
  a.dst = tensor_view(y.data(), dtype::f32, {T, F});
  run(st, a, static_cast<int>(st.range(2)), 2.0 * row_bytes(type, C) * F, 4.0 * T * C * F);
}

// decode: B sequences of S positions each, one query row per sequence, 12 heads, paged cache
// in blocks of 16 (args: B, S, f16, threads, cold caches, query heads per KV head); GB/s = K
// and V bytes read
void BM_paged_decode(benchmark::State& st) {
  const int64_t B = st.range(0), S = st.range(1), P = 16;
  const dtype kv = st.range(2) ? dtype::f16 : dtype::f32;
  const int64_t Hkv = H / st.range(5); // GQA: range(5) query heads per KV head
  const int64_t per_seq = (S + P - 1) / P, NB = B * per_seq + 1, MB = per_seq;
  std::vector<uint8_t> kc(row_bytes(kv, NB * P * Hkv * D)), vc(kc.size());
  {
    const auto v = randn(NB * P * Hkv * D, 7);
    from_f32(kv, v.data(), kc.data(), v.size());
    from_f32(kv, v.data(), vc.data(), v.size());
  }
  std::vector<int32_t> seqs;
  for (int64_t b = 0; b < B; ++b) {
    seqs.insert(seqs.end(), {static_cast<int32_t>(b), 1, static_cast<int32_t>(S - 1)});
    for (int64_t i = 0; i < MB; ++i) seqs.push_back(static_cast<int32_t>(1 + b * per_seq + i));
  }
  auto q = randn(B * H * D, 8);
  std::vector<float> out(B * H * D);
  op_args a;
  a.kind = op::paged_attention;
  a.src[0] = tensor_view(q.data(), dtype::f32, {B, H, D});
  a.src[1] = tensor_view(kc.data(), kv, {NB, P, Hkv, D});
  a.src[2] = tensor_view(vc.data(), kv, {NB, P, Hkv, D});
  a.src[3] = tensor_view(seqs.data(), dtype::i32, {B, 3 + MB});
  a.dst = tensor_view(out.data(), dtype::f32, {B, H, D});
  a.p.scale = 0.125f;
  a.p.block_size = P;
  run(st, a, static_cast<int>(st.range(3)), 2.0 * row_bytes(kv, B * S * Hkv * D),
      4.0 * B * S * H * D, st.range(4) != 0);
}

// causal prefill attention of T tokens (contiguous K/V), 12 heads; GFLOP/s counts the
// causal half (args: T, threads)
void BM_prefill_attention(benchmark::State& st) {
  const int64_t T = st.range(0);
  auto q = randn(T * H * D, 9), k = randn(T * H * D, 10), v = randn(T * H * D, 11);
  std::vector<float> out(T * H * D);
  op_args a;
  a.kind = op::attention;
  a.src[0] = tensor_view(q.data(), dtype::f32, {T, H, D});
  a.src[1] = tensor_view(k.data(), dtype::f32, {T, H, D});
  a.src[2] = tensor_view(v.data(), dtype::f32, {T, H, D});
  a.dst = tensor_view(out.data(), dtype::f32, {T, H, D});
  a.p.scale = 0.125f;
  run(st, a, static_cast<int>(st.range(1)), 0, 2.0 * T * (T + 1) * H * D);
}

// DeepSeek-V3's absorbed latent attention per head (16 of its 128 heads): q_nope [128] meets
// W_kb(h) [512, 128] (rows), and the weighted latent [512] meets W_vb(h) stored [512, 128]
// (transposed); q8_0 weights (args: T, transposed, threads); GB/s = weight bytes read once
void BM_head_matmul(benchmark::State& st) {
  const int64_t T = st.range(0), Hh = 16, L = 512, Dn = 128;
  const bool tr = st.range(1);
  const int64_t K = tr ? L : Dn, N = tr ? Dn : L;
  const auto w32 = randn(Hh * K * N, 12, 0.05f);
  std::vector<uint8_t> w(row_bytes(dtype::q8_0, Hh * K * N));
  from_f32(dtype::q8_0, w32.data(), w.data(), w32.size());
  auto x = randn(T * Hh * K, 13);
  std::vector<float> out(T * Hh * N);
  op_args a;
  a.kind = op::head_matmul;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, Hh, K});
  a.src[1] = tr ? tensor_view(w.data(), dtype::q8_0, {Hh * K, N})
                : tensor_view(w.data(), dtype::q8_0, {Hh * N, K});
  a.dst = tensor_view(out.data(), dtype::f32, {T, Hh, N});
  a.p.k = tr;
  run(st, a, static_cast<int>(st.range(2)), static_cast<double>(w.size()), 2.0 * T * Hh * K * N);
}

} // namespace

BENCHMARK(BM_head_matmul)
    ->ArgsProduct({{1, 64}, {0, 1}, {1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_norm)
    ->ArgsProduct({{1, 64}, {0, 1}, {0, 1}, {1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_rope)
    ->ArgsProduct({{1, 64}, {0, 1}, {1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul_swiglu)
    ->ArgsProduct({{1, 64}, {0, 1, 2}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
// Gated DeltaNet's recurrence for one sequence continuing its state: T tokens (1: a decode
// step), Qwen3.5's layer shape (16 key heads, 32 value heads, 128 x 128 memories, 2 MB of f32
// state); GB/s counts the state read and written once per token (args: T, threads)
void BM_gated_delta(benchmark::State& st) {
  const int64_t T = st.range(0), Hk = 16, Hv = 32, Dk = 128, Dv = 128;
  auto q = randn(T * Hk * Dk, 21), k = randn(T * Hk * Dk, 22), v = randn(T * Hv * Dv, 23);
  auto ga = randn(T * Hv, 24), gb = randn(T * Hv, 25), alog = randn(Hv, 26, 0.5f),
       dt = randn(Hv, 27, 0.5f), state = randn(Hv * Dk * Dv, 28, 0.01f);
  std::vector<int32_t> table = {0, static_cast<int32_t>(T), 1, 0}; // continues slot 0
  std::vector<float> out(T * Hv * Dv);
  op_args a;
  a.kind = op::gated_delta;
  a.src[0] = tensor_view(q.data(), dtype::f32, {T, Hk, Dk});
  a.src[1] = tensor_view(k.data(), dtype::f32, {T, Hk, Dk});
  a.src[2] = tensor_view(v.data(), dtype::f32, {T, Hv, Dv});
  a.src[3] = tensor_view(ga.data(), dtype::f32, {T, Hv});
  a.src[4] = tensor_view(gb.data(), dtype::f32, {T, Hv});
  a.src[5] = tensor_view(alog.data(), dtype::f32, {Hv});
  a.src[6] = tensor_view(dt.data(), dtype::f32, {Hv});
  a.src[7] = tensor_view(state.data(), dtype::f32, {1, Hv, Dk, Dv});
  a.src[8] = tensor_view(table.data(), dtype::i32, {1, 4});
  a.dst = tensor_view(out.data(), dtype::f32, {T, Hv, Dv});
  run(st, a, static_cast<int>(st.range(1)), 2.0 * 4 * Hv * Dk * Dv * T, 6.0 * T * Hv * Dk * Dv);
}

// xLSTM's mLSTM cell for one sequence continuing its state: T tokens (1: a decode step),
// xLSTM-7b's layer shape (8 heads, keys 256, values 512: 4.2 MB of f32 state); GB/s counts the
// state read and written once per token (args: T, threads)
void BM_mlstm_scan(benchmark::State& st) {
  const int64_t T = st.range(0), H = 8, Dk = 256, Dv = 512;
  auto q = randn(T * H * Dk, 41), k = randn(T * H * Dk, 42), v = randn(T * H * Dv, 43);
  auto ig = randn(T * H, 44), fg = randn(T * H, 45),
       state = randn(H * (Dk + 1) * (Dv + 1), 46, 0.01f);
  std::vector<int32_t> table = {0, static_cast<int32_t>(T), 1, 0}; // continues slot 0
  std::vector<float> out(T * H * Dv);
  op_args a;
  a.kind = op::mlstm_scan;
  a.src[0] = tensor_view(q.data(), dtype::f32, {T, H, Dk});
  a.src[1] = tensor_view(k.data(), dtype::f32, {T, H, Dk});
  a.src[2] = tensor_view(v.data(), dtype::f32, {T, H, Dv});
  a.src[3] = tensor_view(ig.data(), dtype::f32, {T, H});
  a.src[4] = tensor_view(fg.data(), dtype::f32, {T, H});
  a.src[5] = tensor_view(state.data(), dtype::f32, {1, H, Dk + 1, Dv + 1});
  a.src[6] = tensor_view(table.data(), dtype::i32, {1, 4});
  a.dst = tensor_view(out.data(), dtype::f32, {T, H, Dv});
  a.p.eps = 1e-6f;
  run(st, a, static_cast<int>(st.range(1)), 2.0 * 4 * H * (Dk + 1) * (Dv + 1) * T,
      4.0 * T * H * Dk * (Dv + 1));
}

// Mamba's selective scan for one sequence continuing its state: T tokens (1: a decode step);
// args (T, shape, threads): shape 0 Mamba-2's layer (Mamba-Codestral: 128 heads of 64, 8 groups,
// state 128: 4 MB of f32 state), 1 Mamba-1's (Falcon-Mamba 7B: 8192 channels as heads of one
// value, an A per state value, state 16: 0.5 MB); GB/s counts the state read and written once
// per token
void BM_ssm_scan(benchmark::State& st) {
  const int64_t T = st.range(0);
  const bool m1 = st.range(1) == 1;
  const int64_t H = m1 ? 8192 : 128, P = m1 ? 1 : 64, G = m1 ? 1 : 8, N = m1 ? 16 : 128;
  auto x = randn(T * H * P, 31), dt = randn(T * H, 32), A = randn(m1 ? H * N : H, 33, 0.5f);
  auto B = randn(T * G * N, 34), C = randn(T * G * N, 35), D = randn(H, 36), dtb = randn(H, 37);
  auto state = randn(H * P * N, 38, 0.01f);
  std::vector<int32_t> table = {0, static_cast<int32_t>(T), 1, 0}; // continues slot 0
  std::vector<float> out(T * H * P);
  op_args a;
  a.kind = op::ssm_scan;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, H, P});
  a.src[1] = tensor_view(dt.data(), dtype::f32, {T, H});
  a.src[2] =
      m1 ? tensor_view(A.data(), dtype::f32, {H, N}) : tensor_view(A.data(), dtype::f32, {H});
  a.src[3] = tensor_view(B.data(), dtype::f32, {T, G, N});
  a.src[4] = tensor_view(C.data(), dtype::f32, {T, G, N});
  a.src[5] = tensor_view(D.data(), dtype::f32, {H});
  a.src[6] = tensor_view(dtb.data(), dtype::f32, {H});
  a.src[7] = tensor_view(state.data(), dtype::f32, {1, H, P, N});
  a.src[8] = tensor_view(table.data(), dtype::i32, {1, 4});
  a.dst = tensor_view(out.data(), dtype::f32, {T, H, P});
  run(st, a, static_cast<int>(st.range(2)), 2.0 * 4 * H * P * N * T, 4.0 * T * H * P * N);
}

// Mamba's causal conv1d with bias and SiLU over one sequence: args (T, shape, threads): shape 0
// Mamba-2's x, B, C of Mamba-Codestral (8192 + 2 x 1024 channels in heads of 64), 1 Mamba-1's
// (8192 channels of one value each); 4 taps
void BM_causal_conv(benchmark::State& st) {
  const int64_t T = st.range(0), K = 4;
  const bool m1 = st.range(1) == 1;
  const int64_t Dc = m1 ? 1 : 64, Hc = m1 ? 8192 : 160, Cc = Hc * Dc;
  auto x = randn(T * Cc, 41), w = randn(Cc * K, 42, 0.5f), b = randn(Cc, 43);
  auto state = randn(Cc * (K - 1), 44);
  std::vector<int32_t> table = {0, static_cast<int32_t>(T), 1, 0};
  std::vector<float> out(T * Cc);
  op_args a;
  a.kind = op::causal_conv;
  a.src[0] = tensor_view(x.data(), dtype::f32, {T, Hc, Dc});
  a.src[1] = tensor_view(w.data(), dtype::f32, {Cc, K});
  a.src[2] = tensor_view(state.data(), dtype::f32, {1, Hc, K - 1, Dc});
  a.src[3] = tensor_view(table.data(), dtype::i32, {1, 4});
  a.src[4] = tensor_view(b.data(), dtype::f32, {Cc});
  a.dst = tensor_view(out.data(), dtype::f32, {T, Hc, Dc});
  run(st, a, static_cast<int>(st.range(2)), 4.0 * (2 * T * Cc + Cc * K), 2.0 * T * Cc * K);
}

BENCHMARK(BM_paged_decode)
    ->ArgsProduct({{1, 64}, {128, 512, 1024}, {0, 1}, {1, 2}, {0}, {1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
// one row with the caches emptied before each call: the memory's pace, as in a decode step
// (one layer of bench-134m's cache at 256 and 1024 positions: 1.6 and 6.3 MB in f32), and
// with 4 query heads per KV head (GQA, as most models since 2024), at 1024 and 8192
BENCHMARK(BM_paged_decode)
    ->ArgsProduct({{1}, {256, 1024}, {0, 1}, {1}, {1}, {1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_paged_decode)
    ->ArgsProduct({{1}, {1024, 8192}, {0, 1}, {1}, {1}, {4}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gated_delta)
    ->ArgsProduct({{1, 512}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlstm_scan)
    ->ArgsProduct({{1, 512}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ssm_scan)
    ->ArgsProduct({{1, 256}, {0, 1}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_causal_conv)
    ->ArgsProduct({{1, 256}, {0, 1}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_prefill_attention)
    ->ArgsProduct({{128, 1024, 4096}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
