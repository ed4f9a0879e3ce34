// report.hpp: what the CPU matmul kernels did, for benchmarks (`troupe bench` prints it): every
// weight matmul counted under its weight dtype, the path matmul.cpp's plan took (gemv, int8,
// amx, nt, blas, portable) in the kernels' ISA, and whether it was a decode call (fewer than 8
// tokens) or a prefill one. Relaxed atomic counters, one increment per matmul call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::kernels::cpu {

struct matmul_use {
  std::string weights; // dtype name
  std::string path;    // "int8 gemm avx512 (vpdpbusd)", "gemv avx2 (int8)", ...
  bool prefill = false;
  bool int8 = false; // int8 products (the int8 GEMM, AMX int8, int8 gemv): against the int8 peak
  uint64_t calls = 0;
};

/// The counts since start-up (or the last reset), the most used first.
std::vector<matmul_use> matmul_uses();
void reset_matmul_uses();

} // namespace troupe::kernels::cpu
