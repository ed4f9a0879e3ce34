// gemv_packed.hpp: the walks both ISA files' packed kernels share (gemv.hpp, the layouts
// pack_q4_0 / pack_q4_k make at load): output features [n0, n1) one group of G interleaved rows
// at a time, for decode the tokens 4 at a time and then the rest through Rows::run<NT>, for
// prefill the group's 256-value spans decoded once and every token over each (Span), and the
// prefetch that keeps the weight stream ahead. Included by packed_avx2.cpp (G =
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

// fn.template operator()<NT>(t0) over the T tokens, 4 at a time and then the rest.
template <class F>
void over_tokens(int64_t T, F&& fn) {
  int64_t t = 0;
  for (; t + 4 <= T; t += 4) fn.template operator()<4>(t);
  switch (T - t) {
  case 3:
    fn.template operator()<3>(t);
    break;
  case 2:
    fn.template operator()<2>(t);
    break;
  case 1:
    fn.template operator()<1>(t);
    break;
  default:
    break;
  }
}

// Decode (1-7 tokens): each group of G rows read for the tokens 4 at a time, through
// Rows::run<NT>(a, group, n, t0).
template <int G, class Rows>
void over_packed_groups(const gemv_args& a) {
  for (int64_t n = a.n0; n < a.n1; n += G) {
    const uint8_t* grp = a.wp + n * a.row_bytes; // group n / G starts n row lengths in
    over_tokens(a.T, [&]<int NT>(int64_t t) { Rows::template run<NT>(a, grp, n, t); });
  }
}

// Prefill (8+ tokens): each group's 256-value spans (8 blocks of 32 from k32; fewer at the end
// of a row) decoded once by Span::decode(group, k32, blocks), then every token passes over
// them through Span::run<NT>(a, span, k32, n, t0), adding its share into y (the first span
// writes it).
template <int G, class Span>
void over_packed_spans(const gemv_args& a) {
  Span sp;
  const int64_t n32 = a.K / 32;
  for (int64_t n = a.n0; n < a.n1; n += G) {
    const uint8_t* grp = a.wp + n * a.row_bytes;
    for (int64_t k32 = 0; k32 < n32; k32 += 8) {
      sp.decode(grp, k32, static_cast<int>(n32 - k32 < 8 ? n32 - k32 : 8));
      over_tokens(a.T, [&]<int NT>(int64_t t) { Span::template run<NT>(a, sp, k32, n, t); });
    }
  }
}

// The table's entry: spans for prefill, groups for decode.
template <int G, class Rows, class Span>
void over_packed(const gemv_args& a) {
  if (a.T >= 8)
    over_packed_spans<G, Span>(a);
  else
    over_packed_groups<G, Rows>(a);
}

} // namespace troupe::kernels::cpu
