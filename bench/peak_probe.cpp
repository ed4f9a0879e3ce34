// peak_probe.cpp: an independent check of `troupe bench`'s FMA and int8 peaks (probe.cpp):
// hand-written assembly, no intrinsics and no code shared with the kernels. Each loop issues
// independent vfmadd231ps (12 ymm / 24 zmm accumulators), vpdpbusd (24 zmm) or AVX2's
// vpmaddubsw + vpmaddwd + vpaddd (6 chains) per iteration, one thread per --threads, and
// prints the best of 5 runs: GFLOP/s, or GOP/s for int8 (two per product). bench/README.md
// ("FMA peak") compares them with `troupe bench`.
//   build/bench/peak_probe [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace {

__attribute__((target("avx2,fma"))) void fma_ymm(long iters) {
  asm volatile("vxorps %%ymm0, %%ymm0, %%ymm0\n"
               "vxorps %%ymm1, %%ymm1, %%ymm1\n"
               "1:\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm4\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm5\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm6\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm7\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm8\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm9\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm10\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm11\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm12\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm13\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm14\n"
               "vfmadd231ps %%ymm0, %%ymm1, %%ymm15\n"
               "dec %0\n"
               "jnz 1b\n"
               : "+r"(iters)
               :
               : "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9",
                 "ymm10", "ymm11", "ymm12", "ymm13", "ymm14", "ymm15", "cc");
}

__attribute__((target("avx512f"))) void fma_zmm(long iters) {
  asm volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n"
               "vpxord %%zmm1, %%zmm1, %%zmm1\n"
               "1:\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm8\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm9\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm10\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm11\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm12\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm13\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm14\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm15\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm16\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm17\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm18\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm19\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm20\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm21\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm22\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm23\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm24\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm25\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm26\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm27\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm28\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm29\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm30\n"
               "vfmadd231ps %%zmm0, %%zmm1, %%zmm31\n"
               "dec %0\n"
               "jnz 1b\n"
               : "+r"(iters)
               :
               : "xmm0", "xmm1", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
                 "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
                 "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "cc");
}

__attribute__((target("avx512f,avx512vnni"))) void dp_zmm(long iters) {
  asm volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n"
               "vpxord %%zmm1, %%zmm1, %%zmm1\n"
               "1:\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm8\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm9\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm10\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm11\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm12\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm13\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm14\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm15\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm16\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm17\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm18\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm19\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm20\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm21\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm22\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm23\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm24\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm25\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm26\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm27\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm28\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm29\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm30\n"
               "vpdpbusd %%zmm0, %%zmm1, %%zmm31\n"
               "dec %0\n"
               "jnz 1b\n"
               : "+r"(iters)
               :
               : "xmm0", "xmm1", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
                 "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
                 "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "cc");
}

__attribute__((target("avx2"))) void int8_ymm(long iters) {
  asm volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n"
               "vpxor %%ymm1, %%ymm1, %%ymm1\n"
               "vpxor %%ymm2, %%ymm2, %%ymm2\n"
               "1:\n"
               "vpmaddubsw %%ymm1, %%ymm0, %%ymm3\n"
               "vpmaddwd %%ymm2, %%ymm3, %%ymm3\n"
               "vpaddd %%ymm3, %%ymm9, %%ymm9\n"
               "vpmaddubsw %%ymm1, %%ymm0, %%ymm4\n"
               "vpmaddwd %%ymm2, %%ymm4, %%ymm4\n"
               "vpaddd %%ymm4, %%ymm10, %%ymm10\n"
               "vpmaddubsw %%ymm1, %%ymm0, %%ymm5\n"
               "vpmaddwd %%ymm2, %%ymm5, %%ymm5\n"
               "vpaddd %%ymm5, %%ymm11, %%ymm11\n"
               "vpmaddubsw %%ymm1, %%ymm0, %%ymm6\n"
               "vpmaddwd %%ymm2, %%ymm6, %%ymm6\n"
               "vpaddd %%ymm6, %%ymm12, %%ymm12\n"
               "vpmaddubsw %%ymm1, %%ymm0, %%ymm7\n"
               "vpmaddwd %%ymm2, %%ymm7, %%ymm7\n"
               "vpaddd %%ymm7, %%ymm13, %%ymm13\n"
               "vpmaddubsw %%ymm1, %%ymm0, %%ymm8\n"
               "vpmaddwd %%ymm2, %%ymm8, %%ymm8\n"
               "vpaddd %%ymm8, %%ymm14, %%ymm14\n"
               "dec %0\n"
               "jnz 1b\n"
               : "+r"(iters)
               :
               : "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9",
                 "ymm10", "ymm11", "ymm12", "ymm13", "ymm14", "cc");
}

// Best of 5: `ops` per iteration per thread.
double best_rate(int threads, double ops, const std::function<void(long)>& loop) {
  const long iters = 20'000'000;
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    std::vector<std::thread> ts;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) ts.emplace_back([&] { loop(iters); });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, ops * static_cast<double>(iters) * threads / s);
  }
  return best;
}

} // namespace

int main(int argc, char** argv) {
  int threads = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    std::printf("avx2   fma  %7.1f GFLOP/s\n", best_rate(threads, 2.0 * 8 * 12, fma_ymm) / 1e9);
    std::printf("avx2   int8 %7.1f GOP/s\n", best_rate(threads, 2.0 * 32 * 6, int8_ymm) / 1e9);
  }
  if (__builtin_cpu_supports("avx512f")) {
    std::printf("avx512 fma  %7.1f GFLOP/s\n", best_rate(threads, 2.0 * 16 * 24, fma_zmm) / 1e9);
    if (__builtin_cpu_supports("avx512vnni"))
      std::printf("avx512 int8 %7.1f GOP/s\n", best_rate(threads, 2.0 * 64 * 24, dp_zmm) / 1e9);
  }
  return 0;
}
