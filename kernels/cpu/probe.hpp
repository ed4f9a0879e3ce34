// probe.hpp: measures this machine's ceilings in the same run as a benchmark, so results are
// quoted as a fraction of what the hardware gave at that moment: DRAM read bandwidth (a
// vectorised sum over a buffer much larger than the last-level cache) and FP32 FMA peak
// (independent FMA chains in registers), each with `threads` threads. Medians of repeats.
// Used by `troupe bench` and the micro-benchmarks.
#pragma once

namespace troupe::kernels::cpu {

/// Bytes per second read from DRAM with `threads` threads.
double probe_read_bandwidth(int threads, int repeats = 5);
/// FP32 FLOP per second (an FMA counts two) with `threads` threads, in the kernels' ISA.
double probe_fma_peak(int threads, int repeats = 5);
/// int8 multiply-adds per second x 2 in the int8 kernels' instructions (vpdpbusd; AVX2's
/// maddubs + madd + add); 0 without them.
double probe_int8_peak(int threads, int repeats = 5);
/// "avx512f avx512_bf16 ..." as detected at run time.
const char* cpu_features();

} // namespace troupe::kernels::cpu
