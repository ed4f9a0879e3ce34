// amx_tiles_bench.cpp: what one AMX tile operation costs on this machine, the numbers behind
// the AMX kernels' shapes (kernels/cpu/gemm_amx.cpp): TDPBF16PS and TDPBSSD on tiles already
// loaded, TILELOADD of a 1 KiB tile from L1, and two loads feeding four products. Exits
// cleanly (status 0, a line saying so) where the CPU or the kernel offers no AMX.
//   build/bench/amx_tiles_bench
// Built with -mamx-tile -mamx-int8 -mamx-bf16.
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/cpu/amx.hpp"

namespace {

struct tile_config {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

template <class F>
double ns_per(long iters, int ops, F&& body) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iters; ++i) body(i);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s / iters / ops * 1e9;
}

} // namespace

int main() {
  if (!troupe::kernels::cpu::amx_int8_usable() || !troupe::kernels::cpu::amx_bf16_usable()) {
    std::puts("amx_tiles_bench: no AMX int8/bf16 tiles on this CPU (or refused by the kernel)");
    return 0;
  }
  tile_config c;
  std::memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int i = 0; i < 8; ++i) c.rows[i] = 16, c.colsb[i] = 64;
  _tile_loadconfig(&c);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  std::vector<uint16_t> buf(8 * 8192, 0x3c00);
  const long n = 1000000;
  const double bf16 = ns_per(n, 4, [](long) {
    _tile_dpbf16ps(2, 0, 6);
    _tile_dpbf16ps(3, 0, 7);
    _tile_dpbf16ps(4, 1, 6);
    _tile_dpbf16ps(5, 1, 7);
  });
  const double int8 = ns_per(n, 4, [](long) {
    _tile_dpbssd(2, 0, 6);
    _tile_dpbssd(3, 0, 7);
    _tile_dpbssd(4, 1, 6);
    _tile_dpbssd(5, 1, 7);
  });
  const double load = ns_per(n, 4, [&](long i) {
    const uint16_t* p = buf.data() + (i & 7) * 8192;
    _tile_loadd(6, p, 64);
    _tile_loadd(7, p + 512, 64);
    _tile_loadd(1, p + 1024, 64);
    _tile_loadd(0, p + 1536, 64);
  });
  const double mix = ns_per(n, 1, [&](long i) {
    const uint16_t* p = buf.data() + (i & 7) * 2048;
    _tile_loadd(6, p, 64);
    _tile_loadd(7, p + 512, 64);
    _tile_dpbf16ps(2, 0, 6);
    _tile_dpbf16ps(3, 1, 6);
    _tile_dpbf16ps(4, 0, 7);
    _tile_dpbf16ps(5, 1, 7);
  });
  _tile_release();
  std::printf("TDPBF16PS  %.1f ns (%.0f GMAC/s)\n", bf16, 16 * 16 * 32 / bf16);
  std::printf("TDPBSSD    %.1f ns (%.0f GMAC/s)\n", int8, 16 * 16 * 64 / int8);
  std::printf("TILELOADD  %.1f ns (1 KiB from L1)\n", load);
  std::printf("2 loads + 4 TDPBF16PS: %.1f ns\n", mix);
  return 0;
}
