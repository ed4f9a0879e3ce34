// gemv.cpp: picks the decode kernel table for this CPU (gemv.hpp; on AMD's AVX-512 cores a
// measured mix of the AVX-512 and AVX2 kernels) and says whether the AMX int8 kernels may run
// (amx.hpp), and lays q4_0 / Q4_K weights out for the packed decode kernels (pack_q4_0).
// TROUPE_ISA=avx2 or TROUPE_ISA=portable forces a lesser
// path (TROUPE_ISA=avx512: the AVX-512 table alone, without the AMD mix), TROUPE_AMX=0 turns
// AMX off (tests and comparisons). Compiled for any x86-64 CPU.
#include "kernels/cpu/gemv.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cpu/amx.hpp"

#include "core/log.hpp"

namespace troupe::kernels::cpu {

namespace {

bool amd() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return !std::strcmp(vendor, "AuthenticAMD");
}

// AMD's AVX-512 cores (Zen 4 and later) ran the AVX-512 table's two-rows-at-a-time decode
// kernels (f32 / f16 / bf16 / q8_0) at half the bandwidth of one row at a time, and their
// 512-bit float GEMV below the 256-bit one (bench/README.md "CPU paths", an A/B on an EPYC):
// there the AVX2 decode kernels take f32 and q8_0; everything else stays AVX-512. The 16-bit
// ones read adjacent rows (one stream) until they paired rows from the two halves of a range;
// since then they are ahead end to end too (bench/README.md "16-bit decode on AMD's AVX-512
// kernels"), bf16 without the even / odd split, which was slower there.
const gemv_table* zen_table() {
  static const gemv_table t = [] {
    gemv_table z = *gemv_avx512_table();
    const gemv_table& v2 = *gemv_avx2_table();
    z.f32 = v2.f32;
    z.bf16 = gemv_bf16_unsplit_avx512;
    z.q8_0 = v2.q8_0;
    // q4_0 / Q4_K from the packed layout stay AVX-512 (16 rows in zmm lanes, vpdpbusd): from
    // DRAM 30-32 GB/s on one thread against the AVX2 kernels' 25-35 and the published rows'
    // 14-22 (kernels_bench BM_matmul/*_packed/1/768/262144/1)
    return z;
  }();
  return &t;
}

} // namespace

const gemv_table& gemv_kernels() {
  static const gemv_table chosen = [] {
    static const gemv_table portable = {.isa = "portable"};
    const char* force = std::getenv("TROUPE_ISA");
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c") &&
                        __builtin_cpu_supports("fma");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    const gemv_table* t = &portable;
    if (force && !std::strcmp(force, "portable"))
      t = &portable;
    else if (avx512 && !(force && !std::strcmp(force, "avx2")))
      t = amd() && avx2 && !(force && !std::strcmp(force, "avx512")) ? zen_table()
                                                                     : gemv_avx512_table();
    else if (avx2)
      t = gemv_avx2_table();
    TROUPE_LOG_DEBUG("cpu", "matmul kernels: {}", t->isa);
    return *t;
  }();
  return chosen;
}

namespace {
// The packed layouts keep G rows' blocks together: fn(o, blk, r) for row r of every group of G
// and every block, o the group's block (G x `bytes`), blk the row's published block.
template <class F>
void over_groups(const uint8_t* w, int64_t N, int64_t nb, int64_t bytes, int G, uint8_t* out,
                 F fn) {
  const int64_t rb = nb * bytes;
  for (int64_t g = 0; g < N / G; ++g)
    for (int64_t b = 0; b < nb; ++b)
      for (int r = 0; r < G; ++r)
        fn(out + g * G * rb + b * G * bytes, w + (g * G + r) * rb + b * bytes, r);
}
} // namespace

void pack_q4_0(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out) {
  // 18 bytes a block: f16 scale, 16 code bytes
  over_groups(w, N, K / 32, 18, G, out, [G](uint8_t* o, const uint8_t* blk, int r) {
    std::memcpy(o + 2 * r, blk, 2);
    for (int c = 0; c < 4; ++c) std::memcpy(o + 2 * G + 4 * G * c + 4 * r, blk + 2 + 4 * c, 4);
  });
}

void pack_iq4_xs(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out) {
  // 136 bytes a block: d, scales_h, scales_l[4], 8 sub-blocks of 16 code bytes
  over_groups(w, N, K / 256, 136, G, out, [G](uint8_t* o, const uint8_t* blk, int r) {
    std::memcpy(o + 2 * r, blk, 2);
    std::memcpy(o + 2 * G + 2 * r, blk + 2, 2);
    std::memcpy(o + 4 * G + 4 * r, blk + 4, 4);
    for (int s = 0; s < 8; ++s)
      for (int c = 0; c < 4; ++c)
        std::memcpy(o + 8 * G + 16 * G * s + 4 * G * c + 4 * r, blk + 8 + 16 * s + 4 * c, 4);
  });
}

void pack_q8_0(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out) {
  // 34 bytes a block: f16 scale, 32 code bytes
  over_groups(w, N, K / 32, 34, G, out, [G](uint8_t* o, const uint8_t* blk, int r) {
    std::memcpy(o + 2 * r, blk, 2);
    for (int c = 0; c < 8; ++c) std::memcpy(o + 2 * G + 4 * G * c + 4 * r, blk + 2 + 4 * c, 4);
  });
}

void pack_q4_k(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out) {
  // 144 bytes a block: d, dmin, 12 scale bytes, 128 code bytes
  over_groups(w, N, K / 256, 144, G, out, [G](uint8_t* o, const uint8_t* blk, int r) {
    std::memcpy(o + 2 * r, blk, 2);
    std::memcpy(o + 2 * G + 2 * r, blk + 2, 2);
    for (int i = 0; i < 3; ++i) std::memcpy(o + 4 * G + 4 * G * i + 4 * r, blk + 4 + 4 * i, 4);
    for (int p = 0; p < 4; ++p)
      for (int c = 0; c < 8; ++c)
        std::memcpy(o + 16 * G + 32 * G * p + 4 * G * c + 4 * r, blk + 16 + 32 * p + 4 * c, 4);
  });
}

void pack_q5_k(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out) {
  // 176 bytes a block: d, dmin, 12 scale bytes, qh[32] (the 5th bits), 128 code bytes
  over_groups(w, N, K / 256, 176, G, out, [G](uint8_t* o, const uint8_t* blk, int r) {
    std::memcpy(o + 2 * r, blk, 2);
    std::memcpy(o + 2 * G + 2 * r, blk + 2, 2);
    for (int i = 0; i < 3; ++i) std::memcpy(o + 4 * G + 4 * G * i + 4 * r, blk + 4 + 4 * i, 4);
    for (int c = 0; c < 8; ++c) std::memcpy(o + 16 * G + 4 * G * c + 4 * r, blk + 16 + 4 * c, 4);
    for (int p = 0; p < 4; ++p)
      for (int c = 0; c < 8; ++c)
        std::memcpy(o + 48 * G + 32 * G * p + 4 * G * c + 4 * r, blk + 48 + 32 * p + 4 * c, 4);
  });
}

void pack_q6_k(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out) {
  // 210 bytes a block: ql[128], qh[64], 16 int8 scales, f16 d
  over_groups(w, N, K / 256, 210, G, out, [G](uint8_t* o, const uint8_t* blk, int r) {
    std::memcpy(o + 2 * r, blk + 208, 2);
    for (int i = 0; i < 4; ++i) std::memcpy(o + 2 * G + 4 * G * i + 4 * r, blk + 192 + 4 * i, 4);
    for (int c = 0; c < 32; ++c) std::memcpy(o + 18 * G + 4 * G * c + 4 * r, blk + 4 * c, 4);
    for (int c = 0; c < 16; ++c) std::memcpy(o + 146 * G + 4 * G * c + 4 * r, blk + 128 + 4 * c, 4);
  });
}

bool amx_int8_usable() {
  static const bool usable = [] {
    if (const char* e = std::getenv("TROUPE_AMX"); e && !std::strcmp(e, "0")) return false;
    if (std::strcmp(gemv_kernels().isa, "avx512") != 0) return false; // the kernel uses AVX-512
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = d & (1u << 24), int8 = d & (1u << 25);
    if (!tile || !int8) return false;
    // _mm512_cvtne2ps_pbh of the bf16 packing needs AVX512_BF16 (leaf 7 subleaf 1, EAX bit 5)
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    if (!__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) || !(a1 & (1u << 5))) return false;
    // Linux hands out the 8 KiB tile state only on request: ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA (18); the grant covers every thread of the process
    constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    const bool granted = syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
    TROUPE_LOG_DEBUG("cpu", "AMX int8 tiles: {}", granted ? "on" : "refused by the kernel");
    return granted;
  }();
  return usable;
}

bool amx_bf16_usable() {
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return amx_int8_usable() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22));
  }();
  return usable;
}

} // namespace troupe::kernels::cpu
