// amx.hpp: matrix multiplication on Intel AMX tiles for the batched decode and prefill
// matmuls: int8 for quantized weights (q8_0, q4_0, Q4_K, Q5_K, Q6_K) with q8-quantized activations,
// and bf16 weights (TDPBF16PS, f32 sums) with each activation split into two bf16 values, hi + lo,
// which carry 16 bits of its mantissa: the products are those of f32 activations to about
// 2^-16, where rounding activations to bf16 alone would lose 2^-9. A weight tile is 16
// output features x one 32-value block (q8_0 rows load straight from the checkpoint's
// layout, stride = row bytes; q4_0 blocks are unpacked to int8 first); an activation tile
// is 16 tokens x the same block in the VNNI order the tile unit wants. Weights with the
// decode kernels' packed layout (groups of 16 rows) swap the roles: that layout is already
// the VNNI order, so the weights are the right operand as they lie and the activations the
// left one, 16 tokens x 32 bytes (amx_gemm_q_packed); Q4_K / Q5_K have only that path
// (amx_gemm_kq_packed: per-sub-block scales, minimums through the tokens' block sums), and Q6_K
// (amx_gemm_q6k_packed: a scale per 16 values, so products of 16 tokens x 16 values). TDPBSSD
// makes the 16 x 16 int32 dot products of one block, which are scaled by the weight block's f16
// scale times each token's activation scale and summed into f32 accumulators. Used only when the
// CPU has AMX-TILE and AMX-INT8 and Linux grants the tile state (arch_prctl); otherwise the
// AVX-512 / AVX2 paths run. TROUPE_AMX=0 turns it off. No standard-library templates here
// (see gemv.hpp). Tests: the matmul and matmul_swiglu cases of the op harness.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

/// True when AMX int8 tiles can be used in this process (checked once).
bool amx_int8_usable();
/// True when AMX bf16 tiles can be used too.
bool amx_bf16_usable();

/// Activations quantized for the AMX kernel: tokens padded to a multiple of 16.
struct amx_acts {
  const int8_t* xv; // [T16 / 16][K / 32][8][16][4]: per (token tile, block) one B tile
  const float* dx;  // [T16 / 16][K / 32][16]: per-token scales of each block
  int64_t T, T16, K;
  const float* xs = nullptr; // amx_pack_rows' block sums, as dx (the K-quant kernel's)
};

/// Bytes of xv and floats of dx for T tokens of K values.
int64_t amx_xv_bytes(int64_t T, int64_t K);
int64_t amx_dx_floats(int64_t T, int64_t K);

/// Quantizes x [T, K] (K a multiple of 32) per 32 values (scale = max|x| / 127) into the
/// tile layout; padded tokens are zeros. With `step` [T], each token by its step instead (every
/// block's scale the step: x's values its integer multiples, BitNet's rounded inputs).
void amx_pack(const float* x, int64_t T, int64_t K, int8_t* xv, float* dx,
              const float* step = nullptr);

/// Floats of scratch the int8 kernels need for rows of K values: four int32 product tiles, the
/// 16 rows' block scales (and K-quant minimums; Q6_K: scales per 16 values) and their unpacked
/// codes.
inline int64_t amx_work_floats(int64_t K) {
  return 4 * 256 + K / 32 * (32 + 128);
}

/// y[t * ldy + n - ycol0] = sum_k x[t, k] W[n, k] (+ bias[n]) for n in [n0, n1), n1 - n0 a
/// multiple of 16; W rows of `row_bytes` in q8_0 (q4 = false) or q4_0 (q4 = true).
/// work: amx_work_floats(a.K) floats of the calling thread, 64-byte aligned.
void amx_gemm_q(const amx_acts& a, const uint8_t* w, int64_t row_bytes, bool q4, int64_t n0,
                int64_t n1, float* y, int64_t ldy, int64_t ycol0, const float* bias, float* work);

/// Like amx_pack, with each (token tile, block) as 16 token rows of 32 bytes (the left
/// operand of the packed kernels): xa [T16 / 16][K / 32][16][32]; xs (optional, as dx) gets
/// each block's sum as quantized (scale x the sum of its codes).
void amx_pack_rows(const float* x, int64_t T, int64_t K, int8_t* xa, float* dx,
                   float* xs = nullptr);

/// What the codes of a 32-value block stand for: q8_0's int8 values, q4_0's nibbles - 8,
/// IQ4_NL's nibbles looked up (kq::iq4_values); IQ4_XS's as IQ4_NL's, in its layout
/// (pack_iq4_xs), each 32 values scaled by d x (their 6-bit scale - 32).
enum class amx_codes { q8_0, q4_0, iq4_nl, iq4_xs };

/// Like amx_gemm_q from the packed layout of the decode kernels (pack_q8_0 / pack_q4_0 with
/// groups of 16 rows, IQ4_NL's as q4_0's, IQ4_XS's pack_iq4_xs; wp the layout of the view's first
/// row, n0 and n1 multiples of 16), with activations from amx_pack_rows: the published rows are not
/// read. work: amx_work_floats(a.K).
void amx_gemm_q_packed(const amx_acts& a, const uint8_t* wp, int64_t row_bytes, amx_codes codes,
                       int64_t n0, int64_t n1, float* y, int64_t ldy, int64_t ycol0,
                       const float* bias, float* work);

/// Q4_K (q5 = false) / Q5_K weights from their packed layout (pack_q4_k / pack_q5_k, groups
/// of 16 rows), activations from amx_pack_rows with block sums (a.xs). As amx_gemm_q_packed.
void amx_gemm_kq_packed(const amx_acts& a, const uint8_t* wp, int64_t row_bytes, bool q5,
                        int64_t n0, int64_t n1, float* y, int64_t ldy, int64_t ycol0,
                        const float* bias, float* work);

/// Q6_K weights from their packed layout (pack_q6_k, groups of 16 rows), activations from
/// amx_pack_rows: products of 16 values (a scale per 16). As amx_gemm_q_packed.
void amx_gemm_q6k_packed(const amx_acts& a, const uint8_t* wp, int64_t row_bytes, int64_t n0,
                         int64_t n1, float* y, int64_t ldy, int64_t ycol0, const float* bias,
                         float* work);

/// bf16 weights: x [T, K] as hi = bf16(x) and lo = bf16(x - hi), in tiles of 16 tokens x 32
/// values in VNNI pairs: xv [T16 / 16][K / 32][hi, lo][16][16][2] (amx_xv_bytes(T, K) * 2
/// uint16 values).
void amx_pack_bf16(const float* x, int64_t T, int64_t K, uint16_t* xv);

/// t2_32 rows (ternary weights) as q8_0 rows for amx_gemm_q: the values with a scale of 1.
void amx_t2_q8_rows(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t K, uint8_t* out);

/// t2_32 rows (BitNet's ternary weights, `rows` of row_bytes from w) as bf16 rows [rows, K] for
/// amx_gemm_bf16: part 0 the ternary values (exact), 1 each times bf16(d) of its block, 2 times
/// the rest d - bf16(d) (parts 1 and 2 sum to the values in about f32's precision).
void amx_t2_rows(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t K, int part,
                 uint16_t* out);

/// Like amx_gemm_q for bf16 weights [N, K] (K a multiple of 32) with TDPBF16PS: products of
/// bf16 values summed in f32 over all of K in the tiles. work: 1024 floats, 64-byte aligned.
void amx_gemm_bf16(const uint16_t* xv, int64_t T, int64_t K, const uint16_t* w, int64_t n0,
                   int64_t n1, float* y, int64_t ldy, int64_t ycol0, const float* bias,
                   float* work);

} // namespace troupe::kernels::cpu
