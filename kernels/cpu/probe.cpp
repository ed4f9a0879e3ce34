// probe.cpp: bandwidth, FMA-peak and int8-peak probes (probe.hpp). The compute probes run in
// the instruction set the matmul kernels chose (gemv_kernels().isa, TROUPE_ISA included), so
// they measure what the kernels can use.
#include "kernels/cpu/probe.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <immintrin.h>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemv.hpp"

namespace troupe::kernels::cpu {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TROUPE_CPU_DISPATCH
float sum_floats(const float* p, size_t n) {
  float acc[32] = {};
  for (size_t i = 0; i + 32 <= n; i += 32)
    for (int j = 0; j < 32; ++j) acc[j] += p[i + j];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

// FMA peak: as many independent accumulator chains as the register file holds next to the
// two operands (FMA latency x ports is 8 on current cores: 12 or more chains cover it), in
// the vector width the kernels use. 16 x 16 lanes auto-vectorised would need 32 ymm on AVX2
// and spill, so each ISA has its own loop. Returns a sum (keeps the work) and sets flops.
__attribute__((target("avx512f,fma"))) float fma_avx512(int64_t iters, double& flops) {
  constexpr int chains = 24; // of 32 zmm
  __m512 a[chains];
  const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
  for (int k = 0; k < chains; ++k) a[k] = _mm512_set1_ps(static_cast<float>(k) * 1e-3f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int k = 0; k < chains; ++k) a[k] = _mm512_fmadd_ps(a[k], b, c);
  }
  __m512 s = a[0];
  for (int k = 1; k < chains; ++k) s = _mm512_add_ps(s, a[k]);
  flops = 2.0 * 16 * chains * static_cast<double>(iters);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters, double& flops) {
  constexpr int chains = 12; // of 16 ymm
  __m256 a[chains];
  const __m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
  for (int k = 0; k < chains; ++k) a[k] = _mm256_set1_ps(static_cast<float>(k) * 1e-3f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < chains; ++k) a[k] = _mm256_fmadd_ps(a[k], b, c);
  }
  __m256 s = a[0];
  for (int k = 1; k < chains; ++k) s = _mm256_add_ps(s, a[k]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  flops = 2.0 * 8 * chains * static_cast<double>(iters);
  return out[0] + out[7];
}

float fma_portable(int64_t iters, double& flops) {
  float a[8][4];
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 4; ++j) a[k][j] = static_cast<float>(k + j) * 1e-3f;
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 4; ++j) a[k][j] = a[k][j] * 1.0000001f + 1e-7f;
  flops = 2.0 * 32 * static_cast<double>(iters);
  return a[0][0] + a[7][3];
}

// int8 dot-product peak in the kernels' instructions: vpdpbusd on AVX-512 VNNI (64 products a
// zmm), maddubs + madd + add on AVX2 (32 products per three instructions). Counted as 2
// operations per product, like a FLOP.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int32_t int8_avx512(int64_t iters,
                                                                           double& ops) {
  constexpr int chains = 16; // 24 makes GCC copy each accumulator before its vpdpbusd
  __m512i a[chains];
  const __m512i u = _mm512_set1_epi8(3), x = _mm512_set1_epi8(-2);
  for (int k = 0; k < chains; ++k) a[k] = _mm512_set1_epi32(k);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int k = 0; k < chains; ++k) a[k] = _mm512_dpbusd_epi32(a[k], u, x);
  }
  __m512i s = a[0];
  for (int k = 1; k < chains; ++k) s = _mm512_add_epi32(s, a[k]);
  ops = 2.0 * 64 * chains * static_cast<double>(iters);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2"))) int32_t int8_avx2(int64_t iters, double& ops) {
  constexpr int chains = 12;
  __m256i a[chains];
  const __m256i u = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int k = 0; k < chains; ++k) a[k] = _mm256_set1_epi32(k);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < chains; ++k)
      a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), ones));
  }
  __m256i s = a[0];
  for (int k = 1; k < chains; ++k) s = _mm256_add_epi32(s, a[k]);
  ops = 2.0 * 32 * chains * static_cast<double>(iters);
  return _mm256_extract_epi32(s, 0);
}

// Runs body(iters, ops) on `threads` threads `repeats` times: the median rate.
template <class F>
double rate_of(int threads, int repeats, int64_t iters, F body) {
  std::vector<double> rates;
  volatile float sink = 0;
  for (int r = 0; r < repeats; ++r) {
    std::vector<std::thread> ts;
    std::vector<float> part(threads);
    std::vector<double> ops(threads);
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] { part[t] = static_cast<float>(body(iters, ops[t])); });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double total = 0;
    for (int t = 0; t < threads; ++t) {
      sink = sink + part[t];
      total += ops[t];
    }
    rates.push_back(total / s);
  }
  return median(rates);
}

} // namespace

double probe_read_bandwidth(int threads, int repeats) {
  const size_t per_thread = 256ull << 20; // 256 MiB each: far past the last-level cache
  std::vector<std::vector<float>> bufs(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] { bufs[t].assign(per_thread / 4, 1.0f); });
  for (auto& t : ts) t.join();
  std::vector<double> rates;
  volatile float sink = 0;
  for (int r = 0; r < repeats + 1; ++r) {
    ts.clear();
    std::vector<float> part(threads);
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] { part[t] = sum_floats(bufs[t].data(), bufs[t].size()); });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (float p : part) sink = sink + p;
    if (r > 0)
      rates.push_back(static_cast<double>(per_thread) * threads / s); // first pass warms the TLB
  }
  return median(rates);
}

double probe_fma_peak(int threads, int repeats) {
  const std::string isa = gemv_kernels().isa;
  const int64_t iters = 2'000'000;
  if (isa == "avx512") return rate_of(threads, repeats, iters, fma_avx512);
  if (isa == "avx2") return rate_of(threads, repeats, iters, fma_avx2);
  return rate_of(threads, repeats, iters, fma_portable);
}

double probe_int8_peak(int threads, int repeats) {
  const std::string isa = gemv_kernels().isa;
  const int64_t iters = 2'000'000;
  if (isa == "avx512") return rate_of(threads, repeats, iters, int8_avx512);
  if (isa == "avx2") return rate_of(threads, repeats, iters, int8_avx2);
  return 0;
}

const char* cpu_features() {
  static const std::string s = [] {
    std::string out;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) out += "avx2 ";
    if (__builtin_cpu_supports("fma")) out += "fma ";
    if (__builtin_cpu_supports("f16c")) out += "f16c ";
    if (__builtin_cpu_supports("avx512f")) out += "avx512f ";
    if (__builtin_cpu_supports("avx512bw")) out += "avx512bw ";
    if (__builtin_cpu_supports("avx512vnni")) out += "avx512_vnni ";
    if (__builtin_cpu_supports("avx512bf16")) out += "avx512_bf16 ";
    if (!out.empty()) out.pop_back();
    return out;
  }();
  return s.c_str();
}

} // namespace troupe::kernels::cpu
