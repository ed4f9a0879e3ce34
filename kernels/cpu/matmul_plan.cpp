// matmul_plan.cpp (cpu): plan() and the predicates behind it (matmul_plan.hpp): which path a
// matmul call takes for its token count, weight dtype, layout and this CPU's kernel tables,
// and the activations that path reads, prepared once per call.
#include "kernels/cpu/matmul_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/half.hpp"
#include "core/kquant.hpp"
#include "kernels/precision.hpp"

namespace troupe::kernels::cpu::mm {

gemv_fn gemv_for(const gemv_table& tab, dtype t) {
  switch (t) {
  case dtype::f32:
    return tab.f32;
  case dtype::f16:
    return tab.f16;
  case dtype::bf16:
    return tab.bf16;
  case dtype::q8_0:
    return tab.q8_0;
  case dtype::q4_0:
    return tab.q4_0;
  case dtype::q2_k:
    return tab.q2_k;
  case dtype::q3_k:
    return tab.q3_k;
  case dtype::q4_k:
    return tab.q4_k;
  case dtype::q5_k:
    return tab.q5_k;
  case dtype::q6_k:
    return tab.q6_k;
  case dtype::mxfp4:
    return tab.mxfp4;
  case dtype::iq4_nl:
    return tab.iq4_nl;
  case dtype::iq4_xs:
    return tab.iq4_xs;
  case dtype::f8_b128:
    return tab.f8_b128;
  case dtype::t2_32:
    return tab.t2_32;
  default:
    return nullptr;
  }
}

// Weights whose kernels exist only on int8 activations.
bool int8_kernel(dtype t) {
  return is_block32(t) || is_kquant(t) || t == dtype::mxfp4 || t == dtype::iq4_nl ||
         t == dtype::iq4_xs || t == dtype::t2_32;
}
// ... and use them (unless exact activations were asked for: then those weights expand).
bool int8_acts(dtype t) {
  return !exact_activations() && int8_kernel(t);
}

// x [K] as int8 with one scale for the whole row (every block's xd the same): *step where
// given (x's values its integer multiples), else the row's max / 127. BitNet's inputs, already
// rounded per token (x = k / s, |k| <= 127), come back as those k exactly, which per-32 scales
// would round again; the row's own max finds that step only where the row holds a k of 127
// (not in a tensor-parallel rank's part of a row: hence the step).
float row_step(const float* x, int64_t K) { // (the row's largest magnitude / 127)
  float amax = 0;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
  return amax / 127.0f;
}

void quantize_per_row(const float* x, int64_t K, const float* step, int8_t* q, float* d) {
  const float unit = step ? *step : row_step(x, K);
  const float inv = unit > 0 ? 1.0f / unit : 0.0f;
  for (int64_t k = 0; k < K; ++k)
    q[k] = static_cast<int8_t>(std::clamp(std::nearbyint(x[k] * inv), -127.0f, 127.0f));
  for (int64_t b = 0; b < K / qk; ++b) d[b] = unit;
}

// The K-quant kernels' sums: xd times the sum of each 16 int8 activations, T rows of K.
const float* run_sums(const int8_t* xq, const float* xd, int64_t T, int64_t K) {
  thread_local std::vector<float> xs;
  xs.resize(T * K / 16);
  for (int64_t r = 0; r < T * K / 16; ++r) {
    int s = 0;
    for (int l = 0; l < 16; ++l) s += xq[r * 16 + l];
    xs[r] = xd[r / 2] * static_cast<float>(s);
  }
  return xs.data();
}

// The table's kernel for weights of `t` laid out at load (tensor_view::packed), or null.
gemv_fn packed_for(const gemv_table& tab, dtype t) {
  switch (t) {
  case dtype::q8_0:
    return tab.q8_0_packed;
  case dtype::q4_0:
    return tab.q4_0_packed;
  case dtype::q4_k:
    return tab.q4_k_packed;
  case dtype::q5_k:
    return tab.q5_k_packed;
  case dtype::q6_k:
    return tab.q6_k_packed;
  case dtype::iq4_nl:
    return tab.iq4_nl_packed;
  case dtype::iq4_xs:
    return tab.iq4_xs_packed;
  default:
    return nullptr;
  }
}

// Whether the AMX int8 tiles take a prefill with `w` (plan's first choice for 8+ tokens where
// the CPU has them).
bool amx_int8_takes(const tensor_view& w) {
  return int8_acts(w.type) && is_block32(w.type) && w.rows() % 16 == 0 && amx_int8_usable();
}

// Whether they take IQ4_NL / IQ4_XS from the packed layout (the nibbles looked up; there is no
// kernel for their published rows).
bool amx_iq4_takes(const tensor_view& w) {
  return (w.type == dtype::iq4_nl || w.type == dtype::iq4_xs) && int8_acts(w.type) && w.packed &&
         gemv_kernels().pack_rows == 16 && w.rows() % 16 == 0 && amx_int8_usable();
}

// Whether they take Q4_K / Q5_K / Q6_K from the packed layout (they have no kernel for those
// rows).
bool amx_kq_takes(const tensor_view& w) {
  return (w.type == dtype::q4_k || w.type == dtype::q5_k || w.type == dtype::q6_k) && w.packed &&
         gemv_kernels().pack_rows == 16 && w.rows() % 16 == 0 && w.cols() % qk_k == 0 &&
         amx_int8_usable();
}

// Whether they read w's packed layout (groups of 16 rows) rather than its published rows.
bool amx_reads_packed(const tensor_view& w) {
  return (w.type == dtype::q8_0 || w.type == dtype::q4_0) && gemv_kernels().pack_rows == 16 &&
         amx_int8_takes(w);
}

// Whether prefill of a weight of `t` with the packed layout runs on its packed kernel: all but
// Q6_K's, whose packed kernel prefilled Q4_K_M 9-15% slower than its GEMM (pp256, both ISAs).
bool prefill_packed(const gemv_table& tab, dtype t) {
  return packed_for(tab, t) && t != dtype::q6_k;
}

// TROUPE_BLAS=1 (where built with BLAS): prefill on sgemm over expanded published rows.
bool blas_forced() {
#ifdef TROUPE_HAVE_BLAS
  static const bool on = std::getenv("TROUPE_BLAS") != nullptr; // read once, not per call
  return on;
#else
  return false;
#endif
}

// Whether Q6_K's prefill reads the packed layout instead: its int8 GEMM over the groups' rows
// put back as published (gemv_table::unpack_q6_k, ~128 KiB of rows at a time, once per call),
// so the published rows need not stay resident beside the layout.
bool prefill_unpacks(const gemv_table& tab, dtype t) {
  return t == dtype::q6_k && packed_for(tab, t) && tab.gemm_q6_k && tab.unpack_q6_k &&
         !blas_forced();
}

// Decode of a q8_0 / q4_0 / Q4_K / Q5_K / Q6_K weight laid out at load (tensor_view::packed): the
// packed kernel, a group of the table's pack_rows rows at a time; q4_0's takes the nibbles' offset
// through the activations' block sums, Q4_K / Q5_K's minimums and Q6_K's -32 come through the
// per-16 sums (xs).
void use_packed(const gemv_table& tab, const tensor_view& w, plan_t& m) {
  const gemv_fn fn = packed_for(tab, w.type);
  if (!w.packed || !m.xq || !fn) return;
  if (is_kquant(w.type)) { // their minimums (Q6_K: its -32) go through xs
    if (!m.xs) return;
  } else { // the codes' offsets (q4_0 8, q8_0 128) through the block sums
    thread_local std::vector<int32_t> sums;
    const int64_t blocks = m.T * (m.K / qk);
    sums.resize(blocks);
    for (int64_t i = 0; i < blocks; ++i) {
      int s = 0;
      for (int64_t l = 0; l < qk; ++l) s += m.xq[i * qk + l];
      sums[i] = s;
    }
    m.xsum = sums.data();
  }
  m.how = path::gemv_packed;
  m.fn_packed = fn;
  m.unit = tab.pack_rows;
  m.grain = std::max<int64_t>(1, m.grain / tab.pack_rows);
}

// The int8 GEMM's activations: x quantized per 32 and laid out in tiles of tab.gemm_lanes
// tokens (gemm_q_args), padding lanes zero, with the block sums times -offset in corr; for
// the K-quants (kq) corr per 16 values and the scaled sums per 32 in xs.
void int8_tiles(const gemv_table& tab, int offset, bool kq, plan_t& m) {
  const int64_t L = tab.gemm_lanes, T = m.T, K = m.K, nb = K / qk, kg = K / 4;
  const int64_t run = kq ? 16 : qk, nr = K / run;
  thread_local std::vector<int8_t> xt, row;
  thread_local std::vector<float> xd, xs, rowd;
  thread_local std::vector<int32_t> corr;
  m.lanes = L;
  m.tiles = (T + L - 1) / L;
  xt.assign(m.tiles * kg * L * 4, 0);
  xd.assign(m.tiles * nb * L, 0.0f);
  xs.assign(kq ? m.tiles * nb * L : 0, 0.0f);
  corr.assign(m.tiles * nr * L, 0);
  row.resize(K);
  rowd.resize(nb);
  for (int64_t t = 0; t < T; ++t) {
    tab.quantize_q8(m.x + t * K, K, row.data(), rowd.data());
    const int64_t j = t / L, l = t % L;
    for (int64_t g = 0; g < kg; ++g) std::memcpy(&xt[((j * kg + g) * L + l) * 4], &row[4 * g], 4);
    for (int64_t r = 0; r < nr; ++r) {
      int sum = 0;
      for (int64_t i = 0; i < run; ++i) sum += row[r * run + i];
      corr[(j * nr + r) * L + l] = -offset * sum;
      if (kq) xs[(j * nb + r / 2) * L + l] += rowd[r / 2] * static_cast<float>(sum);
    }
    for (int64_t b = 0; b < nb; ++b) xd[(j * nb + b) * L + l] = rowd[b];
  }
  m.xt = xt.data();
  m.xd = xd.data();
  m.xs = kq ? xs.data() : nullptr;
  m.corr = corr.data();
}

// The int8 GEMM for weights of type t, if this table has one.
gemm_q_fn gemm_for(const gemv_table& tab, dtype t) {
  switch (t) {
  case dtype::q8_0:
    return tab.gemm_q8_0;
  case dtype::q4_0:
    return tab.gemm_q4_0;
  case dtype::q4_k:
    return tab.gemm_q4_k;
  case dtype::q5_k:
    return tab.gemm_q5_k;
  case dtype::q6_k:
    return tab.gemm_q6_k;
  case dtype::mxfp4:
    return tab.gemm_mxfp4;
  case dtype::iq4_nl:
    return tab.gemm_iq4_nl;
  case dtype::iq4_xs:
    return tab.gemm_iq4_xs;
  default:
    return nullptr;
  }
}

// n floats of buf from a 64-byte boundary (buf grows to hold them).
float* aligned64(std::vector<float>& buf, int64_t n) {
  buf.resize(static_cast<size_t>(n + 16));
  const auto at = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - at % 64) % 64) / sizeof(float);
}

// x [T, K] as tiles of L tokens, k-major, for the tokens-in-the-lanes GEMMs: xt[(tile * K + k)
// * L + lane] is token tile * L + lane's value k, 0 past T (ceil(T / L) * K * L floats).
void pack_tokens(const float* x, int64_t T, int64_t K, int64_t L, float* xt) {
  const int64_t tiles = (T + L - 1) / L;
  for (int64_t t0 = 0; t0 < tiles; ++t0) {
    float* tile = xt + t0 * K * L;
    const int64_t lanes = std::min(L, T - t0 * L);
    if (lanes < L) std::fill(tile, tile + K * L, 0.0f);
    // full AVX-512 tiles: 16 x 16 blocks transposed in registers (most of the values)
    const int64_t k0 = lanes == 16 && L == 16 ? pack_tile16_avx512(x + t0 * L * K, K, tile) : 0;
    for (int64_t l = 0; l < lanes; ++l) {
      const float* row = x + (t0 * L + l) * K;
      for (int64_t k = k0; k < K; ++k) tile[k * L + l] = row[k];
    }
  }
}

// Chooses the path for x and weights like w, quantizing x when the gemv kernel wants int8.
plan_t plan(const tensor_view& x, const tensor_view& w, const float* step) {
  const gemv_table& tab = gemv_kernels();
  plan_t m;
  m.T = x.rows();
  m.K = x.cols();
  const int64_t wrow = row_bytes(w.type, m.K);
  if (x.type == dtype::q8_0) {
    // activations quantized by the norm before (q8x_ok said the gemv kernels take them):
    // unpack the blocks into the kernels' int8 rows and f32 scales, no quantization here
    thread_local std::vector<int8_t> xq;
    thread_local std::vector<float> xd;
    const int64_t nb = m.K / qk;
    xq.resize(m.T * m.K);
    xd.resize(m.T * nb);
    const auto* blocks = static_cast<const block_q8_0*>(x.data);
    for (int64_t i = 0; i < m.T * nb; ++i) {
      xd[i] = f16_to_f32(blocks[i].d);
      std::memcpy(xq.data() + i * qk, blocks[i].qs, qk);
    }
    m.how = path::gemv;
    m.fn = gemv_for(tab, w.type);
    m.xq = xq.data();
    m.xd = xd.data();
    if (is_kquant(w.type)) m.xs = run_sums(m.xq, m.xd, m.T, m.K);
    m.grain = std::max<int64_t>(1, (64 << 10) / std::max<int64_t>(wrow, 1));
    use_packed(tab, w, m);
    return m;
  }
  m.x = x.as<float>();
  if (m.T >= gemm_min_tokens && w.type == dtype::bf16 && w.rows() % 16 == 0 && m.K % 32 == 0 &&
      amx_bf16_usable()) {
    thread_local std::vector<uint16_t> xbf;
    xbf.resize(2 * amx_xv_bytes(m.T, m.K));
    amx_pack_bf16(m.x, m.T, m.K, xbf.data());
    m.how = path::amx;
    m.xbf = xbf.data();
    m.unit = 16;
    m.grain = 2;
    return m;
  }
  // BitNet's ternary t2_32: int8 tiles over rows expanded per call, x quantized per token by its
  // step (exact on BitNet's inputs); the bf16 tiles for rows whose block scales differ
  // (matmul.cpp's amx_t2)
  if (m.T >= gemm_min_tokens && w.type == dtype::t2_32 && w.rows() % 16 == 0 && m.K % 32 == 0 &&
      amx_bf16_usable() && amx_int8_usable()) {
    thread_local std::vector<uint16_t> xbf;
    thread_local std::vector<int8_t> xv;
    thread_local std::vector<float> dx, steps;
    xbf.resize(2 * amx_xv_bytes(m.T, m.K));
    amx_pack_bf16(m.x, m.T, m.K, xbf.data());
    if (!step) { // (each token's own)
      steps.resize(static_cast<size_t>(m.T));
      for (int64_t t = 0; t < m.T; ++t)
        steps[static_cast<size_t>(t)] = row_step(m.x + t * m.K, m.K);
      step = steps.data();
    }
    xv.resize(amx_xv_bytes(m.T, m.K));
    dx.resize(amx_dx_floats(m.T, m.K));
    amx_pack(m.x, m.T, m.K, xv.data(), dx.data(), step);
    m.how = path::amx;
    m.xbf = xbf.data();
    m.amx = {xv.data(), dx.data(), m.T, (m.T + 15) / 16 * 16, m.K};
    m.unit = 16;
    m.grain = 2;
    return m;
  }
  if (m.T >= gemm_min_tokens && amx_kq_takes(w)) {
    thread_local std::vector<int8_t> xv;
    thread_local std::vector<float> dx, xs;
    xv.resize(amx_xv_bytes(m.T, m.K));
    dx.resize(amx_dx_floats(m.T, m.K));
    xs.resize(amx_dx_floats(m.T, m.K));
    amx_pack_rows(m.x, m.T, m.K, xv.data(), dx.data(), xs.data());
    m.how = path::amx;
    m.amx_rows = true;
    m.amx = {xv.data(), dx.data(), m.T, (m.T + 15) / 16 * 16, m.K, xs.data()};
    m.unit = 16;
    m.grain = 2;
    return m;
  }
  if (m.T >= gemm_min_tokens && (amx_int8_takes(w) || amx_iq4_takes(w))) {
    // each tile order in buffers of its own: range() may plan a fused op's weight without the
    // layout while this plan's activations are still in use
    thread_local std::vector<int8_t> xv_rows, xv_vnni;
    thread_local std::vector<float> dx_rows, dx_vnni;
    m.amx_rows = w.packed && (amx_reads_packed(w) || amx_iq4_takes(w));
    auto& xv = m.amx_rows ? xv_rows : xv_vnni;
    auto& dx = m.amx_rows ? dx_rows : dx_vnni;
    xv.resize(amx_xv_bytes(m.T, m.K));
    dx.resize(amx_dx_floats(m.T, m.K));
    if (m.amx_rows)
      amx_pack_rows(m.x, m.T, m.K, xv.data(), dx.data());
    else
      amx_pack(m.x, m.T, m.K, xv.data(), dx.data());
    m.how = path::amx;
    m.amx = {xv.data(), dx.data(), m.T, (m.T + 15) / 16 * 16, m.K};
    m.unit = 16;
    m.grain = 2;
    return m;
  }
#ifdef TROUPE_HAVE_BLAS
  const bool blas = blas_forced();
  constexpr bool have_blas = true;
#else // built without BLAS (the GPU check's build): the portable loops take large steps too
  constexpr bool blas = false, have_blas = false;
#endif
  static const bool isa512 = std::string(tab.isa) == "avx512"; // the table never changes
  static const bool simd = std::string(tab.isa) != "portable";
  // q4_0 / q8_0 weights with the packed layout take its kernels for any number of tokens: a
  // group's rows stay in L1 while every token passes, where the int8 GEMM streams the
  // activations once per row (q4_0 prefill 1.1-1.5x on AVX2, 1.9-2.6x on AVX-512, bench/README).
  // Q4_K / Q5_K too (Q4_K_M / Q5_K_M pp256 on AVX2 1.29x / 1.08x, AVX-512 1.1-1.4x); Q6_K's
  // keeps its GEMM, over rows unpacked from the layout (prefill_unpacks).
  const bool packed_all = w.packed && prefill_packed(tab, w.type);
  if (m.T >= gemm_min_tokens && int8_acts(w.type) && gemm_for(tab, w.type) && !blas &&
      !packed_all) {
    // the codes' offsets: q4_0's nibbles are value + 8, q8_0's bytes (AVX-512) value + 128,
    // Q6_K's codes value + 32, MXFP4's looked-up codes twice the value + 12; the Q4_K / Q5_K
    // minimums go through xs
    const dtype t = w.type;
    const int offset = t == dtype::q4_0                           ? 8
                       : t == dtype::q8_0                         ? tab.q8_offset
                       : t == dtype::q6_k                         ? 32
                       : t == dtype::mxfp4                        ? 12
                       : t == dtype::iq4_nl || t == dtype::iq4_xs ? tab.iq4_offset
                                                                  : 0;
    m.how = path::int8;
    m.gq = gemm_for(tab, t);
    int8_tiles(tab, offset, is_kquant(t), m);
    m.grain = is_kquant(t) ? 2 : 8;
    if (w.packed && prefill_unpacks(tab, t)) { // whole groups of the layout
      m.unpacks = true;
      m.unit = tab.pack_rows;
      m.grain = 1;
    }
    return m;
  }
  if (m.T >= gemm_min_tokens && (simd || have_blas) && !packed_all) {
    // AVX-512 and AVX2: our GEMM with the tokens in the lanes; elsewhere a BLAS sgemm
    // (TROUPE_BLAS=1 forces it)
    const bool ours = simd && !blas;
    m.how = ours ? path::nt : path::blas;
    m.unit = ours ? (isa512 ? tn_group : nt_group) : blas_tile;
    if (ours) {
      thread_local std::vector<float> xtf;
      const int64_t L = isa512 ? 16 : 8;
      float* xt = aligned64(xtf, (m.T + L - 1) / L * L * m.K);
      pack_tokens(m.x, m.T, m.K, L, xt);
      m.xtf = xt;
      m.tn = isa512 ? gemm_tn_avx512 : gemm_tn_avx2;
    }
    m.grain = ours ? 4 : 1;
    return m;
  }
  m.fn = gemv_for(tab, w.type);
  if (m.fn && int8_kernel(w.type) && (!int8_acts(w.type) || !tab.quantize_q8)) m.fn = nullptr;
  if (!m.fn) {
    m.grain = 8;
    return m;
  }
  m.how = path::gemv;
  // about 64 KiB of weights per task: small enough to balance two cores, large enough to stream
  m.grain = std::max<int64_t>(1, (64 << 10) / std::max<int64_t>(wrow, 1));
  if (int8_acts(w.type)) {
    thread_local std::vector<int8_t> xq;
    thread_local std::vector<float> xd;
    xq.resize(m.T * m.K);
    xd.resize(m.T * (m.K / qk));
    for (int64_t t = 0; t < m.T; ++t)
      if (w.type == dtype::t2_32)
        quantize_per_row(m.x + t * m.K, m.K, step ? step + t : nullptr, xq.data() + t * m.K,
                         xd.data() + t * (m.K / qk));
      else
        tab.quantize_q8(m.x + t * m.K, m.K, xq.data() + t * m.K, xd.data() + t * (m.K / qk));
    m.xq = xq.data();
    m.xd = xd.data();
    if (is_kquant(w.type)) m.xs = run_sums(m.xq, m.xd, m.T, m.K);
    use_packed(tab, w, m);
  }
  return m;
}

} // namespace troupe::kernels::cpu::mm
