// attention_rows.hpp: the prefill attention tile with the query rows in the vector lanes,
// written once over a vector type V and included by each per-ISA file (attention_avx512.cpp
// with V = 16 lanes of a zmm and __mmask16 masks, attention_avx2.cpp with V = 8 lanes of a ymm
// and all-ones lanes as masks), which compiles it with its own -m flags; everything here has
// internal linkage, so the copies never merge. No standard-library templates (see gemv.hpp).
//
// A tile is up to V::lanes query rows of one head, one row a lane. A block of V::lanes keys
// gives as many score vectors, each the sum over d of the rows' q[d] (transposed once per tile,
// the scale folded in) times key j's value d broadcast from its cache row: one FMA each, no
// dot product to reduce. So the online softmax is lane-wise: the running maximum, the exp,
// the sums and the rescaling, and a key a row must not see (causal, a window, a row past a
// partial tile) is a mask lane. The weighted sum of V rows accumulates the output transposed
// ([D][lanes], in L1), V::dchunk values of d in registers at a time against the block's
// probability vectors, V values broadcast as K's. Every query head of the GQA group shares the
// block's K and V rows, copied side by side once per block (converted to f32 for f16 / bf16
// caches). No software prefetch: attention.cpp runs the tiles of one KV head one after another,
// so its rows come from L2 (or the hardware prefetcher); prefetching each row a block ahead was
// 10-25% slower (kernels_bench BM_prefill_attention at 1024 and 4096 tokens).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention_kv.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace arows {

template <kv_elem E>
constexpr int64_t elem_bytes = E == kv_elem::f32 ? 4 : 2;

// Values d .. D - 1 of a cache row as f32, one at a time (the V types' to_f32 do the rest a
// vector at a time)
template <kv_elem E>
inline void to_f32_tail(const uint8_t* src, float* dst, int64_t d, int64_t D) {
  if constexpr (E == kv_elem::f32) {
    __builtin_memcpy(dst + d, src + 4 * d, static_cast<size_t>(D - d) * 4);
    return;
  }
  for (; d < D; ++d) {
    uint16_t h;
    __builtin_memcpy(&h, src + 2 * d, 2);
    if constexpr (E == kv_elem::f16) {
      dst[d] = _cvtsh_ss(h);
    } else {
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      __builtin_memcpy(dst + d, &u, 4);
    }
  }
}

// R (1..V::lanes) query rows at positions p0 .. p0 + R - 1, the G query heads of kv's KV head;
// q / out: row r, head g at + r * qs + g * D; work: attend_rows_floats(V::lanes, G, D) floats.
// DT: the head size D when it is one of the common ones (0: any D), so key j's values lie at a
// constant offset j * D from the block's first row and the broadcasts need one pointer (with a
// run-time D they took 16, more than the registers: reloaded for every broadcast, ~2x slower).
template <class V, kv_elem E, int DT = 0>
void tile(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D_arg, int64_t p0,
          int64_t window, float scale, const kv_layout& kv, float* out, float* work) {
  const int64_t D = DT ? DT : D_arg;
  using vf = typename V::vf;
  using mask = typename V::mask;
  constexpr int L = V::lanes, KB = V::lanes, DC = V::dchunk;
  const int64_t S = p0 + R - kv.first; // keys from position kv.first
  if (window >= p0 + R) window = 0;    // every row's window starts at 0 (and fits an int)
  float* qt = work;                    // [G][D][L]: the rows' q, transposed and scaled
  float* acc = qt + G * D * L;         // [G][D][L]: the output, transposed
  float* mx = acc + G * D * L;         // [G][L] running maximum
  float* sum = mx + G * L;             // [G][L] running sum of exp
  float* kb = sum + G * L;             // [KB][D] the block's K rows, f32, side by side
  float* vb = kb + KB * D;             // [KB][D] and its V rows
  for (int64_t g = 0; g < G; ++g)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t r = 0; r < L; ++r)
        qt[(g * D + d) * L + r] = r < R ? q[r * qs + g * D + d] * scale : 0.0f;
  for (int64_t i = 0; i < G * D * L; ++i) acc[i] = 0.0f;
  for (int64_t g = 0; g < G; ++g) { // a sink starts the softmax: its logit the maximum, exp(0)
    V::store(mx + g * L, V::set1(kv.sinks ? kv.sinks[g] : -3.0e38f));
    V::store(sum + g * L, V::set1(kv.sinks ? 1.0f : 0.0f));
  }
  const typename V::vi pos = V::positions(p0); // each row's position
  const typename V::vi before = V::positions(p0 - window);
  const mask active = V::first_lanes(R);
  const vf low = V::set1(-3.0e38f);
  row_cursor kc(kv.k, kv, S), vc(kv.v, kv, S);
  for (int64_t s0 = 0; s0 < S; s0 += KB) {
    const int64_t n = S - s0 < KB ? S - s0 : KB;
    // the block's rows copied (f32) or converted side by side (see DT)
    for (int64_t j = 0; j < n; ++j) {
      V::template to_f32<E>(kc.next(), kb + j * D, D);
      V::template to_f32<E>(vc.next(), vb + j * D, D);
    }
    // padding keys: masked below, and zeros (p = 0 times a stale value could be NaN)
    for (int64_t i = n * D; i < KB * D; ++i) kb[i] = vb[i] = 0.0f;
    const int64_t a0 = kv.first + s0; // position of the block's first key
    // every key visible to every row: the block's last key at or before the first row, and
    // (with a window) its first key inside the last row's window
    const bool full =
        n == KB && R == L && a0 + KB - 1 <= p0 && (window <= 0 || a0 > p0 + L - 1 - window);
    mask m[KB];
    for (int j = 0; j < KB; ++j) {
      if (full || j >= n) {
        m[j] = full ? V::all() : V::none();
        continue;
      }
      const int a = static_cast<int>(a0 + j);
      m[j] = V::at_or_before(active, a, pos);           // key a at or before the row
      if (window > 0) m[j] = V::after(m[j], a, before); // and inside its window
    }
    for (int64_t g = 0; g < G; ++g) {
      const float* qg = qt + g * D * L;
      vf s[KB];
      for (int j = 0; j < KB; ++j) s[j] = V::zero();
      for (int64_t d = 0; d < D; ++d) {
        const vf qd = V::load(qg + d * L);
        for (int j = 0; j < KB; ++j) s[j] = V::fma(qd, V::set1(kb[j * D + d]), s[j]);
      }
      if (kv.softcap > 0) {
        const vf c = V::set1(kv.softcap), ic = V::set1(1.0f / kv.softcap);
        for (int j = 0; j < KB; ++j) s[j] = V::mul(c, V::tanh(V::mul(s[j], ic)));
      }
      if (kv.slopes) { // + slope * (key position - query position)
        const vf sl = V::set1(kv.slopes[g]);
        for (int j = 0; j < KB; ++j)
          s[j] = V::fma(sl, V::distance(static_cast<int>(a0 + j), pos), s[j]);
      }
      vf mb = low;
      for (int j = 0; j < KB; ++j) {
        if (!full) s[j] = V::select(m[j], s[j], low);
        mb = V::max(mb, s[j]);
      }
      const vf mold = V::load(mx + g * L);
      const vf mnew = V::max(mold, mb);
      const vf corr = V::exp(V::sub(mold, mnew));
      vf ps = V::zero();
      for (int j = 0; j < KB; ++j) {
        s[j] = V::maskz(m[j], V::exp(V::sub(s[j], mnew))); // now p_j
        ps = V::add(ps, s[j]);
      }
      V::store(mx + g * L, mnew);
      V::store(sum + g * L, V::fma(V::load(sum + g * L), corr, ps));
      // acc[d] = acc[d] * corr + sum_j p_j v_j[d], DC values of d in registers per pass
      float* ag = acc + g * D * L;
      int64_t d0 = 0;
      for (; d0 + DC <= D; d0 += DC) {
        vf a[DC];
        for (int i = 0; i < DC; ++i) a[i] = V::mul(V::load(ag + (d0 + i) * L), corr);
        for (int j = 0; j < KB; ++j)
          for (int i = 0; i < DC; ++i) a[i] = V::fma(s[j], V::set1(vb[j * D + d0 + i]), a[i]);
        for (int i = 0; i < DC; ++i) V::store(ag + (d0 + i) * L, a[i]);
      }
      if constexpr (DT == 0 || DT % DC != 0) {
        for (; d0 < D; ++d0) {
          vf a = V::mul(V::load(ag + d0 * L), corr);
          for (int j = 0; j < KB; ++j) a = V::fma(s[j], V::set1(vb[j * D + d0]), a);
          V::store(ag + d0 * L, a);
        }
      }
    }
  }
  alignas(64) float row[L];
  for (int64_t g = 0; g < G; ++g) {
    const vf inv = V::div(V::set1(1.0f), V::load(sum + g * L)); // lanes past R: never stored
    for (int64_t d = 0; d < D; ++d) {
      V::store(row, V::mul(V::load(acc + (g * D + d) * L), inv));
      for (int64_t r = 0; r < R; ++r) out[r * qs + g * D + d] = row[r];
    }
  }
}

// tile<V, E> with the head size fixed where it is 64 or 128.
template <class V, kv_elem E>
void tile_any(const float* q, int64_t qs, int64_t R, int64_t G, int64_t D, int64_t p0,
              int64_t window, float scale, const kv_layout& kv, float* out, float* work) {
  if (D == 64) return tile<V, E, 64>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  if (D == 128) return tile<V, E, 128>(q, qs, R, G, D, p0, window, scale, kv, out, work);
  tile<V, E>(q, qs, R, G, D, p0, window, scale, kv, out, work);
}

} // namespace arows
} // namespace
} // namespace troupe::kernels::cpu
