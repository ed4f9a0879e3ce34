// gemv_packed.hpp: the walk both ISA files' packed decode kernels share (gemv.hpp, the layouts
// pack_q4_0 / pack_q4_k make at load): output features [n0, n1) one group of G interleaved rows
// at a time, the tokens 4 at a time and then the rest, each through Rows::run<NT>(a, group,
// n, t0), and the prefetch that keeps the weight stream ahead. Included by packed_avx2.cpp (G =
// 8, ymm lanes) and packed_avx512.cpp (G = 16, zmm lanes); no code past SSE here.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

#include "kernels/cpu/gemv.hpp"

namespace troupe::kernels::cpu {

// Every cache line of the block `bytes` long at `blk`, packed_prefetch bytes ahead: a group's
// blocks are one sequential stream, and one prefetch a block (1-36 lines) left it to the
// hardware prefetcher, which ran at 12-21 GB/s from DRAM where this reaches 30-35
// (kernels_bench BM_matmul/q4_k_packed/1/768/262144/1, an AMD EPYC, one thread; 4.5 KB ahead
// 28, 9 KB 32-34, 14-27 KB 28-29).
constexpr int64_t packed_prefetch = 9216;
inline void prefetch_block(const uint8_t* blk, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64)
    _mm_prefetch(reinterpret_cast<const char*>(blk) + packed_prefetch + i, _MM_HINT_T0);
}

template <int G, class Rows>
void over_packed_groups(const gemv_args& a) {
  for (int64_t n = a.n0; n < a.n1; n += G) {
    const uint8_t* grp = a.wp + n * a.row_bytes; // group n / G starts n row lengths in
    int64_t t = 0;
    for (; t + 4 <= a.T; t += 4) Rows::template run<4>(a, grp, n, t);
    switch (a.T - t) {
    case 3:
      Rows::template run<3>(a, grp, n, t);
      break;
    case 2:
      Rows::template run<2>(a, grp, n, t);
      break;
    case 1:
      Rows::template run<1>(a, grp, n, t);
      break;
    default:
      break;
    }
  }
}

} // namespace troupe::kernels::cpu
