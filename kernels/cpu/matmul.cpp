// matmul.cpp (cpu): y = x W^T (+ bias) for W in f32, f16, bf16, q8_0, q4_0, the K-quants and
// MXFP4 (int8 gemv kernels; expanded block by block on the blas / nt / portable paths), the
// other GGUF formats (expanded everywhere), and the fused
// matmul_swiglu (gate and up matmuls with the SwiGLU applied to each tile while it is in L1,
// so neither product goes to memory, and one quantization of x serves both). A call picks a
// path once (`plan`, matmul_plan.cpp), then workers take disjoint ranges of output features (each
// reads its slice of W once, whatever T is):
//   gemv      few tokens with a SIMD table: gemv.hpp's kernels, int8 activations for
//             quantized weights (quantized once per call, or already q8_0 from the norm)
//   gemv_packed the same for q8_0 / q4_0 / K-quant weights laid out at load in groups of 8 or
//             16 interleaved rows (tensor_view::packed, pack_q4_0 / pack_q4_k / ...): the
//             rows in the lanes
//   nt        prefill on AVX-512 / AVX2: our f32 GEMMs with the tokens in the lanes (x laid
//             out once per call) over groups of 12 / 6 features (f16 / bf16 / expanded rows
//             converted once per call, the next group's rows prefetched meanwhile)
//   int8      prefill and batched decode with q8_0 / q4_0 / Q4_K / Q5_K / Q6_K / MXFP4 weights
//             without AMX: int8 dot products with the tokens in the lanes (gemv.hpp's
//             gemm_q_args), x tiled once per call; Q6_K weights with the packed layout are
//             put back as published ~128 KiB of rows at a time (so only the layout stays
//             resident)
//   amx       prefill and batched decode with q8_0 / q4_0 / K-quant / bf16 weights where
//             the CPU has AMX (amx.hpp): int8 tiles with activations quantized once per call
//             (from the decode kernels' packed layout where the weight has it, so the
//             published rows are released as they are without AMX; Q4_K / Q5_K / Q6_K only
//             from it), or bf16 tiles with
//             activations split once per call into two bf16 halves
//   blas      prefill on the portable table (or TROUPE_BLAS=1): single-threaded sgemm on f32
//             tiles
//   portable  plain loops, weights expanded in chunks of 256 values
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef TROUPE_HAVE_BLAS
#include <cblas.h>
#endif

#include "core/half.hpp"
#include "core/kquant.hpp"
#include "kernels/cpu/amx.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/matmul_plan.hpp"
#include "kernels/cpu/report.hpp"
#include "kernels/precision.hpp"

#ifdef TROUPE_HAVE_BLAS
extern "C" void openblas_set_num_threads(int);
#endif

namespace troupe::kernels::cpu {
using namespace mm; // this file runs the plans matmul_plan.cpp makes
namespace {

// report.hpp's counters: [path][weight dtype][prefill]
constexpr int n_paths = 9, n_types = 32;
std::atomic<uint64_t> uses[n_paths][n_types][2];

void count(const plan_t& m, dtype w, int matmuls) {
  const auto t = static_cast<size_t>(w);
  if (t < n_types)
    uses[static_cast<int>(m.amx_rows  ? path::amx_packed
                          : m.unpacks ? path::int8_packed
                                      : m.how)][t][m.T >= gemm_min_tokens ? 1 : 0]
        .fetch_add(matmuls, std::memory_order_relaxed);
}

std::string path_name(path p, dtype w) {
  const std::string isa = gemv_kernels().isa;
  switch (p) {
  case path::gemv: {
    // AMD's mix (gemv.cpp) runs some dtypes on the AVX2 table's kernel
    const bool avx2_kernel = gemv_for(gemv_kernels(), w) == gemv_for(*gemv_avx2_table(), w);
    return "gemv " + (avx2_kernel ? std::string("avx2") : isa) + (int8_acts(w) ? " (int8)" : "");
  }
  case path::gemv_packed: // decode, and prefill where the table takes it (not a GEMM's tiles)
    return "packed " +
           std::string(gemv_kernels().q4_0_packed == gemv_avx2_table()->q4_0_packed ? "avx2"
                                                                                    : isa) +
           " (int8, " + std::to_string(gemv_kernels().pack_rows) + " rows laid out at load)";
  case path::int8:
    return "int8 gemm " + isa + (isa == "avx512" ? " (vpdpbusd)" : " (maddubs)");
  case path::amx:
    return w == dtype::bf16    ? "amx bf16"
           : w == dtype::t2_32 ? "amx int8 (ternary rows expanded per call)"
                               : "amx int8";
  case path::amx_packed:
    return "amx int8 packed (16 rows laid out at load)";
  case path::int8_packed:
    return "int8 gemm " + isa + (isa == "avx512" ? " (vpdpbusd" : " (maddubs") +
           ", packed: " + std::to_string(gemv_kernels().pack_rows) +
           " rows laid out at load, unpacked per call)";
  case path::nt:
    return "f32 gemm " + isa + (w == dtype::f32 ? "" : " (weights expanded)");
  case path::blas:
    return std::string("blas sgemm") + (w == dtype::f32 ? "" : " (weights expanded)");
  case path::portable:
    return "portable loops";
  }
  return "?";
}

// Expands weight rows [n0, n0 + nn) to f32 (f32 rows are used in place), followed by zero
// rows up to `pad` rows when nn is short of it (f32 rows then copied).
const float* f32_rows(const tensor_view& w, int64_t n0, int64_t nn, int64_t K,
                      std::vector<float>& buf, int64_t pad = 0) {
  const int64_t wrow = row_bytes(w.type, K);
  const char* base = static_cast<const char*>(w.data) + n0 * wrow;
  if (w.type == dtype::f32 && nn >= pad) return reinterpret_cast<const float*>(base);
  buf.resize(std::max(nn, pad) * K);
  if (pad > nn) std::fill(buf.begin() + nn * K, buf.end(), 0.0f);
  if (w.type == dtype::f32) {
    std::memcpy(buf.data(), base, static_cast<size_t>(nn * K) * sizeof(float));
    return buf.data();
  }
  const auto to_f16 = gemv_kernels().f16_to_f32;
  for (int64_t r = 0; r < nn; ++r) {
    if (w.type == dtype::f16 && to_f16)
      to_f16(reinterpret_cast<const uint16_t*>(base + r * wrow), buf.data() + r * K, K);
    else
      dequant_row(w.type, base + r * wrow, 0, K, buf.data() + r * K);
  }
  return buf.data();
}

// t2_32 rows [n0, n1) through the AMX tiles, a span of rows at a time expanded into L2 (y as
// range's): where each row of the span has one scale (BitNet's: one a matrix), the ternary
// values as q8_0 rows of scale 1 on the int8 tiles with x quantized by its rows' steps (exact on
// BitNet's inputs), the scales applied to the outputs in f32; else on the bf16 tiles twice, the
// values times bf16(d) and times the rest of d (amx_t2_rows), summed.
void amx_t2(const plan_t& m, const tensor_view& w, const float* bias, int64_t n0, int64_t n1,
            float* y, int64_t ldy, float* work) {
  const int64_t T = m.T, K = m.K, nb = K / 32, rb = row_bytes(w.type, K);
  const int64_t span = std::max<int64_t>(16, (256 << 10) / (2 * K) / 16 * 16);
  thread_local std::vector<uint16_t> rows;
  thread_local std::vector<float> scale, rest;
  thread_local std::vector<uint8_t> q8;
  rows.resize(static_cast<size_t>(span * K));
  scale.resize(static_cast<size_t>(span));
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t n = n0; n < n1; n += span) {
    const int64_t nn = std::min(span, n1 - n);
    const uint8_t* first = base + n * rb;
    bool one = true; // every row of the span with one scale
    for (int64_t r = 0; r < nn && one; ++r) {
      const uint8_t* row = first + r * rb;
      std::memcpy(&scale[static_cast<size_t>(r)], row, 4);
      for (int64_t b = 1; b < nb && one; ++b) one = std::memcmp(row, row + b * 12, 4) == 0;
    }
    const float* bn = one || !bias ? nullptr : bias + n;
    if (one) { // int8 tiles: x by its steps, the values with a scale of 1 (q8_0 rows)
      q8.resize(static_cast<size_t>(nn * nb * 34));
      amx_t2_q8_rows(first, rb, nn, K, q8.data());
      amx_gemm_q(m.amx, q8.data(), nb * 34, false, 0, nn, y, ldy, n0 - n, nullptr, work);
    } else {
      amx_t2_rows(first, rb, nn, K, 1, rows.data());
      amx_gemm_bf16(m.xbf, T, K, rows.data(), 0, nn, y, ldy, n0 - n, bn, work);
    }
    if (one) {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < nn; ++r) {
          float& o = y[t * ldy + n + r - n0];
          o = o * scale[static_cast<size_t>(r)] + (bias ? bias[n + r] : 0.0f);
        }
      continue;
    }
    rest.resize(static_cast<size_t>(T * nn));
    amx_t2_rows(first, rb, nn, K, 2, rows.data());
    amx_gemm_bf16(m.xbf, T, K, rows.data(), 0, nn, rest.data(), nn, 0, nullptr, work);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < nn; ++r)
        y[t * ldy + n + r - n0] += rest[static_cast<size_t>(t * nn + r)];
  }
}

// Output features [n0, n1) of x W^T (+ bias) into y: token t, feature n at y[t * ldy + n - n0].
// Runs on the calling thread.
void range(const plan_t& m, const tensor_view& w, const float* bias, int64_t n0, int64_t n1,
           float* y, int64_t ldy) {
  const int64_t T = m.T, K = m.K;
  thread_local std::vector<float> rows;
  switch (m.how) {
  case path::gemv:
  case path::gemv_packed: {
    gemv_args g{};
    g.x = m.x;
    g.xq = m.xq;
    g.xd = m.xd;
    g.xs = m.xs;
    g.T = T;
    g.K = K;
    g.w = static_cast<const uint8_t*>(w.data);
    g.row_bytes = row_bytes(w.type, K);
    g.n0 = n0;
    g.n1 = n1;
    g.y = y;
    g.ldy = ldy;
    g.bias = bias;
    g.ycol0 = n0;
    // a weight of a fused op without the packed layout, or a range off its groups: as published
    if (m.fn_packed && w.packed && n0 % m.unit == 0 && n1 % m.unit == 0) {
      g.wp = static_cast<const uint8_t*>(w.packed);
      g.xsum = m.xsum;
      m.fn_packed(g);
    } else {
      m.fn(g);
    }
    return;
  }
  case path::int8:
  case path::int8_packed: { // (a plan's how is never int8_packed: counts only)
    gemm_q_args g{};
    g.xt = m.xt;
    g.xd = m.xd;
    g.corr = m.corr;
    g.xs = m.xs;
    g.lanes = m.lanes;
    g.tiles = m.tiles;
    g.T = T;
    g.K = K;
    g.w = static_cast<const uint8_t*>(w.data);
    g.row_bytes = row_bytes(w.type, K);
    g.n0 = n0;
    g.n1 = n1;
    g.y = y;
    g.ldy = ldy;
    g.ycol0 = n0;
    g.bias = bias;
    if (!m.unpacks || !w.packed || n0 % m.unit != 0 || n1 % m.unit != 0) { // as published
      m.gq(g);
      return;
    }
    // groups put back as published, ~128 KiB at a time (in L2), then the GEMM over them: each
    // token tile's activations then stay in L1 over that many rows (one group at a time was
    // 10-15% slower than the published rows, kernels_bench BM_matmul/q6_k*/64/768/2048)
    const gemv_table& tab = gemv_kernels();
    const int64_t span = m.unit * std::max<int64_t>(1, (128 << 10) / (m.unit * g.row_bytes));
    thread_local std::vector<uint8_t> published;
    published.resize(static_cast<size_t>(span * g.row_bytes));
    for (int64_t n = n0; n < n1; n += span) {
      const int64_t nn = std::min(span, n1 - n);
      for (int64_t r = 0; r < nn; r += m.unit)
        tab.unpack_q6_k(static_cast<const uint8_t*>(w.packed) + (n + r) * g.row_bytes, K,
                        published.data() + r * g.row_bytes);
      g.w = published.data();
      g.n0 = 0;
      g.n1 = nn;
      g.ycol0 = n0 - n; // row r of the span to column n + r - n0
      g.bias = bias ? bias + n : nullptr;
      g.next = static_cast<const uint8_t*>(w.packed) + (n + nn) * g.row_bytes;
      g.next_bytes = std::min(span, n1 - n - nn) * g.row_bytes;
      m.gq(g);
    }
    return;
  }
  case path::amx:
  case path::amx_packed: { // (a plan's how is never amx_packed: counts only)
    thread_local std::vector<float> work;
    float* aligned = aligned64(work, amx_work_floats(K));
    if (m.xbf && w.type == dtype::t2_32)
      amx_t2(m, w, bias, n0, n1, y, ldy, aligned);
    else if (m.xbf)
      amx_gemm_bf16(m.xbf, T, K, static_cast<const uint16_t*>(w.data), n0, n1, y, ldy, n0, bias,
                    aligned);
    else if (m.amx_rows && w.packed && n0 % 16 == 0 && w.type == dtype::q6_k)
      amx_gemm_q6k_packed(m.amx, static_cast<const uint8_t*>(w.packed), row_bytes(w.type, K), n0,
                          n1, y, ldy, n0, bias, aligned);
    else if (m.amx_rows && w.packed && n0 % 16 == 0 && is_kquant(w.type))
      amx_gemm_kq_packed(m.amx, static_cast<const uint8_t*>(w.packed), row_bytes(w.type, K),
                         w.type == dtype::q5_k, n0, n1, y, ldy, n0, bias, aligned);
    else if (m.amx_rows && w.packed && n0 % 16 == 0)
      amx_gemm_q_packed(m.amx, static_cast<const uint8_t*>(w.packed), row_bytes(w.type, K),
                        w.type == dtype::q4_0     ? amx_codes::q4_0
                        : w.type == dtype::q8_0   ? amx_codes::q8_0
                        : w.type == dtype::iq4_xs ? amx_codes::iq4_xs
                                                  : amx_codes::iq4_nl,
                        n0, n1, y, ldy, n0, bias, aligned);
    else if (m.amx_rows) { // a fused op's weight without the layout: planned as published
      // (per call: this only meets weights a load left without their layout)
      tensor_view published = w;
      published.packed = nullptr;
      range(plan(tensor_view(const_cast<float*>(m.x), dtype::f32, {T, K}), published), published,
            bias, n0, n1, y, ldy);
    } else {
      amx_gemm_q(m.amx, static_cast<const uint8_t*>(w.data), row_bytes(w.type, K),
                 w.type == dtype::q4_0, n0, n1, y, ldy, n0, bias, aligned);
    }
    return;
  }
  case path::nt: {
    const int64_t wrow = row_bytes(w.type, K);
    for (int64_t n = n0; n < n1; n += m.unit) {
      const int64_t nn = std::min(m.unit, n1 - n), next = std::min(m.unit, n1 - n - nn);
      // the kernel reads all the group's rows: a short group goes through the buffer, padded
      const float* b = f32_rows(w, n, nn, K, rows, m.unit);
      m.tn(m.xtf, T, K, b, K, nn, y + (n - n0), ldy,
           static_cast<const char*>(w.data) + (n + nn) * wrow, next > 0 ? next * wrow : 0);
    }
    break;
  }
  case path::blas: {
#ifdef TROUPE_HAVE_BLAS
    static const bool single = [] {
      openblas_set_num_threads(1); // our threads, not the library's
      return true;
    }();
    (void)single;
    for (int64_t n = n0; n < n1; n += blas_tile) {
      const int64_t nn = std::min(blas_tile, n1 - n);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T),
                  static_cast<int>(nn), static_cast<int>(K), 1.0f, m.x, static_cast<int>(K),
                  f32_rows(w, n, nn, K, rows), static_cast<int>(K), 0.0f, y + (n - n0),
                  static_cast<int>(ldy));
    }
#endif
    break;
  }
  case path::portable: {
    const int64_t wrow = row_bytes(w.type, K);
    alignas(64) float buf[chunk];
    thread_local std::vector<float> acc;
    acc.resize(T);
    for (int64_t n = n0; n < n1; ++n) {
      const char* wr = static_cast<const char*>(w.data) + n * wrow;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += chunk) {
        const int64_t len = std::min(chunk, K - k0);
        const float* wp;
        if (w.type == dtype::f32) {
          wp = reinterpret_cast<const float*>(wr) + k0;
        } else {
          dequant_row(w.type, wr, k0, len, buf);
          wp = buf;
        }
        for (int64_t t = 0; t < T; ++t) acc[t] += dot_f32(m.x + t * K + k0, wp, len);
      }
      for (int64_t t = 0; t < T; ++t) y[t * ldy + n - n0] = acc[t];
    }
    break;
  }
  }
  if (bias)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = n0; n < n1; ++n) y[t * ldy + n - n0] += bias[n];
}

// Runs fn(n0, n1) over the plan's units of output features, on the pool.
template <class F>
void over_features(const exec_ctx& ctx, const plan_t& m, int64_t N, F&& fn) {
  parallel(ctx, (N + m.unit - 1) / m.unit, m.grain,
           [&](int64_t u0, int64_t u1) { fn(u0 * m.unit, std::min(N, u1 * m.unit)); });
}

} // namespace

void matmul(const op_args& a, const exec_ctx& ctx) {
  const auto& w = a.src[1];
  const int64_t N = w.rows();
  const float* bias = a.src[2].data ? a.src[2].as<float>() : nullptr;
  float* y = a.dst.as<float>();
  const plan_t m = plan(a.src[0], w, a.src[3].data ? a.src[3].as<float>() : nullptr);
  count(m, w.type, 1);
  over_features(ctx, m, N, [&](int64_t n0, int64_t n1) { range(m, w, bias, n0, n1, y + n0, N); });
}

namespace {

// exp(x) as 2^n * p(r), |r| <= ln2 / 2, a degree-6 polynomial (within 2 ulp of expf over
// the range silu needs); plain arithmetic and a bit cast, so the loop below vectorises.
inline float exp_poly(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  constexpr float round_magic = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer
  const float fx = (x * 1.44269504088896341f + round_magic) - round_magic;
  float r = x - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + (r + 1.0f);
  const int32_t bits = (static_cast<int32_t>(fx) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

TROUPE_CPU_DISPATCH
void swiglu_tile(const float* g, const float* u, int64_t ld, int64_t T, int64_t nn, float* y,
                 int64_t ldy) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < nn; ++j) {
      const float gv = g[t * ld + j];
      y[t * ldy + j] = gv / (1.0f + exp_poly(-gv)) * u[t * ld + j];
    }
}

// Gate and up for one tile of features at a time into L1/L2 buffers, then the SwiGLU
// straight into dst: the [T, F] products are never written to memory. Decode tiles are
// long, so each weight stream runs long enough for the prefetcher; prefill tiles are a
// multiple of nt_group that keeps T x tile products in L2.
constexpr int64_t swiglu_tile_gemv = 256, swiglu_tile_gemm = 48;

void matmul_swiglu(const op_args& a, const exec_ctx& ctx) {
  const auto& wg = a.src[1];
  const auto& wu = a.src[2];
  const int64_t T = a.src[0].rows(), F = wg.rows();
  float* y = a.dst.as<float>();
  const plan_t m = plan(a.src[0], wg); // same dtype and shape for up: one plan, one quantization
  count(m, wg.type, 2);
  const int64_t tile =
      m.how == path::gemv || m.how == path::gemv_packed ? swiglu_tile_gemv : swiglu_tile_gemm;
  over_features(ctx, m, F, [&](int64_t n0, int64_t n1) {
    thread_local std::vector<float> g, u;
    g.resize(T * tile);
    u.resize(T * tile);
    for (int64_t c0 = n0; c0 < n1; c0 += tile) {
      const int64_t c1 = std::min(n1, c0 + tile), nn = c1 - c0;
      range(m, wg, nullptr, c0, c1, g.data(), nn);
      range(m, wu, nullptr, c0, c1, u.data(), nn);
      swiglu_tile(g.data(), u.data(), nn, T, nn, y + c0, F);
    }
  });
}

// q, k and v of one input: one plan (one quantization of x), one pass over the pool across
// the concatenated output features, each range written into its projection's destination.
void matmul_qkv(const op_args& a, const exec_ctx& ctx) {
  const tensor_view* w[3] = {&a.src[1], &a.src[2], &a.src[3]};
  float* y[3] = {a.dst.as<float>(), a.dst2.as<float>(), a.dst3.as<float>()};
  const int64_t n[3] = {w[0]->rows(), w[1]->rows(), w[2]->rows()};
  const plan_t m = plan(a.src[0], *w[0]);
  count(m, w[0]->type, 3);
  over_features(ctx, m, n[0] + n[1] + n[2], [&](int64_t n0, int64_t n1) {
    int64_t base = 0;
    for (int i = 0; i < 3; base += n[i], ++i) {
      const int64_t lo = std::max(n0, base) - base, hi = std::min(n1, base + n[i]) - base;
      if (lo < hi) range(m, *w[i], nullptr, lo, hi, y[i] + lo, n[i]);
    }
  });
}

// K-quants: int8 decode kernels; prefill tiles (and the portable path) expand them
bool weight_type(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16 || t == dtype::q8_0 ||
         t == dtype::q4_0 || is_expanded(t);
}

// x: f32, or q8_0 where the decode kernels take int8 activations as they are (quantized
// weights, a few tokens, a SIMD table); prefill wants f32 activations.
bool x_ok(const tensor_view& x, dtype w) {
  if (x.type == dtype::f32) return true;
  const gemv_table& tab = gemv_kernels();
  return x.type == dtype::q8_0 && int8_acts(w) && x.rows() < gemm_min_tokens && tab.quantize_q8 &&
         gemv_for(tab, w) && w != dtype::t2_32; // (t2_32: activations quantized per row)
}

} // namespace

int64_t packed_bytes(const tensor_view& w) {
  const gemv_table& tab = gemv_kernels();
  static const bool off = [] { // TROUPE_PACK=0: decode from the published rows (A/B)
    const char* e = std::getenv("TROUPE_PACK");
    return e && std::string(e) == "0";
  }();
  if (off || !packed_for(tab, w.type) || !tab.quantize_q8 || !int8_acts(w.type) ||
      w.dims.rank != 2 || !w.contiguous() || w.rows() % tab.pack_rows != 0 ||
      w.cols() % block_elems(w.type) != 0)
    return 0;
  return w.nbytes();
}

void pack(const tensor_view& w, void* out) {
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto* dst = static_cast<uint8_t*>(out);
  const int G = gemv_kernels().pack_rows;
  if (w.type == dtype::q4_k)
    pack_q4_k(src, w.rows(), w.cols(), G, dst);
  else if (w.type == dtype::q5_k)
    pack_q5_k(src, w.rows(), w.cols(), G, dst);
  else if (w.type == dtype::q6_k)
    pack_q6_k(src, w.rows(), w.cols(), G, dst);
  else if (w.type == dtype::q8_0)
    pack_q8_0(src, w.rows(), w.cols(), G, dst);
  else if (w.type == dtype::iq4_xs)
    pack_iq4_xs(src, w.rows(), w.cols(), G, dst);
  else // q4_0, and IQ4_NL (the same block layout)
    pack_q4_0(src, w.rows(), w.cols(), G, dst);
}

bool packed_only(const tensor_view& w) {
  const gemv_table& tab = gemv_kernels();
  return packed_bytes(w) > 0 && (prefill_packed(tab, w.type) || prefill_unpacks(tab, w.type)) &&
         (!amx_int8_takes(w) || amx_reads_packed(w));
}

std::vector<matmul_use> matmul_uses() {
  std::vector<matmul_use> out;
  for (int p = 0; p < n_paths; ++p)
    for (int t = 0; t < n_types; ++t)
      for (int pre = 0; pre < 2; ++pre)
        if (const uint64_t c = uses[p][t][pre].load(std::memory_order_relaxed)) {
          const auto w = static_cast<dtype>(t);
          const auto how = static_cast<path>(p);
          const bool int8 = how == path::int8 || how == path::amx_packed ||
                            how == path::int8_packed || (how == path::amx && w != dtype::bf16) ||
                            ((how == path::gemv || how == path::gemv_packed) && int8_acts(w));
          out.push_back({std::string(name(w)), path_name(how, w), pre == 1, int8, c});
        }
  std::sort(out.begin(), out.end(),
            [](const matmul_use& a, const matmul_use& b) { return a.calls > b.calls; });
  return out;
}

void reset_matmul_uses() {
  for (auto& p : uses)
    for (auto& t : p)
      for (auto& c : t) c.store(0, std::memory_order_relaxed);
}

void register_matmul(registry& r) {
  r.add(
      op::matmul, backend::cpu, "f32|f16|bf16|q8_0|q4_0|expanded",
      [](const op_args& a) {
        const dtype t = a.src[1].type;
        return weight_type(t) && contiguous_args(a) && x_ok(a.src[0], t) &&
               a.src[1].cols() % block_elems(t) == 0;
      },
      matmul);
  r.add(
      op::matmul_swiglu, backend::cpu, "f32|f16|bf16|q8_0|q4_0|expanded",
      [](const op_args& a) {
        const dtype t = a.src[1].type;
        return weight_type(t) && a.src[2].type == t && contiguous_args(a) && x_ok(a.src[0], t) &&
               a.src[1].cols() % block_elems(t) == 0;
      },
      matmul_swiglu);
  // each projection's rows a multiple of 16 (the AMX tiles' feature unit), so a range never
  // splits a tile between two projections
  r.add(
      op::matmul_qkv, backend::cpu, "f32|f16|bf16|q8_0|q4_0|expanded",
      [](const op_args& a) {
        const dtype t = a.src[1].type;
        return weight_type(t) && a.src[2].type == t && a.src[3].type == t && contiguous_args(a) &&
               a.dst3.contiguous() && x_ok(a.src[0], t) && a.src[1].cols() % block_elems(t) == 0 &&
               a.src[1].rows() % 16 == 0 && a.src[2].rows() % 16 == 0 && a.src[3].rows() % 16 == 0;
      },
      matmul_qkv);
}

} // namespace troupe::kernels::cpu
