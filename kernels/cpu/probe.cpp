// probe.cpp: bandwidth and FMA-peak probes (probe.hpp). Dispatched by CPU flags like the
// kernels, so the probe measures what the kernels can use.
#include "kernels/cpu/probe.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu.hpp"

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

TROUPE_CPU_DISPATCH
float fma_chains(int64_t iters) {
  // 16 independent chains of 16 lanes: enough to cover FMA latency on current cores
  float a[16][16], b[16], c[16];
  for (int j = 0; j < 16; ++j) {
    b[j] = 1.0000001f;
    c[j] = 1e-7f;
    for (int k = 0; k < 16; ++k) a[k][j] = static_cast<float>(k + j) * 1e-3f;
  }
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < 16; ++k)
      for (int j = 0; j < 16; ++j) a[k][j] = a[k][j] * b[j] + c[j];
  float s = 0;
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 16; ++j) s += a[k][j];
  return s;
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
  const int64_t iters = 2'000'000;
  std::vector<double> rates;
  volatile float sink = 0;
  for (int r = 0; r < repeats; ++r) {
    std::vector<std::thread> ts;
    std::vector<float> part(threads);
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { part[t] = fma_chains(iters); });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (float p : part) sink = sink + p;
    rates.push_back(2.0 * 256 * static_cast<double>(iters) * threads / s);
  }
  return median(rates);
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
