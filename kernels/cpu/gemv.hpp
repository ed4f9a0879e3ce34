// gemv.hpp: the decode matmul kernels: y[t, n] = dot(x[t], W[n]) for a few tokens t and a
// slice [n0, n1) of output features, reading each weight row once for all tokens. One
// implementation per instruction set, chosen at start-up from the CPU's flags:
//   avx512: AVX-512 F/BW/VL + VNNI (int8 dot products for q8_0 / q4_0), F16C
//   avx2:   AVX2 + FMA + F16C (maddubs for the int8 dot products)
//   both:   the K-quants, MXFP4 and IQ4_NL / IQ4_XS on int8 activations (gemv_kquant.hpp,
//           gemv_lookup4.hpp) and
//           DeepSeek's FP8 (f8_b128) on f32 ones (gemv_f8.hpp), BitNet's ternary t2_32 on int8
//           ones quantized per row (gemv_t2.hpp): 256-bit code in both files
//   (portable: the generic loops of matmul.cpp; on AMD's AVX-512 cores gemv.cpp mixes in the
//   AVX2 float and q8_0 kernels)
// The tables also carry the int8 GEMMs for 8+ tokens without AMX (gemm_q_args below).
// Quantized weights use activations quantized on the fly to int8 per 32 values (q8 with an
// f32 scale), the way the int8 dot product wants them. The per-ISA files are compiled with
// their own -m flags and use no standard-library templates, so nothing from them can leak
// into code that runs on a lesser CPU. Tests: the matmul cases of the op harness.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

struct gemv_args {
  const float* x;   // [T, K] f32 activations (float kernels)
  const int8_t* xq; // [T, K] int8 activations (quantized kernels)
  const float* xd;  // [T, K / 32] their scales
  const float* xs;  // [T, K / 16] K-quants: xd times the sum of each 16 int8 activations
  int64_t T, K;
  const uint8_t* w; // weight rows
  int64_t row_bytes;
  int64_t n0, n1; // output features to compute
  float* y;       // [T, ldy]; feature n goes to column n - ycol0
  int64_t ldy;
  const float* bias; // [N] or null
  int64_t ycol0;     // the feature in y's column 0 (0 when y holds all N)
  // the packed kernels (gemv_table::q4_0_packed ...): w's rows as pack_q4_0 / pack_q4_k / ...
  // lay them out in groups of the table's pack_rows (n0 and n1 multiples of it), and for q4_0 /
  // q8_0 the sums of each 32 int8 activations [T, K / 32]
  const uint8_t* wp;
  const int32_t* xsum;
};

using gemv_fn = void (*)(const gemv_args&);

// Prefill and batched decode with q8_0 / q4_0 weights (gemm_int8_*.cpp): int8 dot products
// with the tokens in the vector lanes, so the published weight rows are read in place (4
// bytes broadcast at a time) and only the activations are rearranged, once per call
// (matmul.cpp): tile j holds `lanes` tokens, and for each 4 values of k the 4 int8 values of
// every token side by side (k-group g of tile j at xt + (j * K / 4 + g) * lanes * 4).
// The kernels take the weight codes as the unsigned operand: q4_0's nibbles (value + 8), or
// q8_0's bytes + 128 (`q8_offset` 128; 0 where the kernel uses a sign trick instead), and
// start each block's int32 sums at -offset * sum(x of the block) (`corr`), which undoes it.
struct gemm_q_args {
  const int8_t* xt;    // [tiles][K / 4][lanes * 4]
  const float* xd;     // [tiles][K / 32][lanes] activation scales (0 in padding lanes)
  const int32_t* corr; // [tiles][K / 32][lanes] -offset * sum of the block's int8 values
                       // (K-quants: [tiles][K / 16][lanes], offset 32 for Q6_K, else 0)
  const float* xs;     // K-quants: [tiles][K / 32][lanes] xd * sum of the block's values
  int64_t lanes, tiles, T, K;
  const uint8_t* w; // weight rows, as published
  int64_t row_bytes;
  int64_t n0, n1; // output features to compute
  float* y;       // [T, ldy]; feature n to column n - ycol0
  int64_t ldy, ycol0;
  const float* bias; // [N] or null
  // Q6_K's kernel: bytes the caller reads next (the next rows of the packed layout), brought
  // into L2 a slice per row while these multiply (null: none)
  const void* next = nullptr;
  int64_t next_bytes = 0;
};
using gemm_q_fn = void (*)(const gemm_q_args&);
using quantize_fn = void (*)(const float* x, int64_t K, int8_t* q, float* d);

struct gemv_table {
  const char* isa;
  gemv_fn f32, f16, bf16, q8_0, q4_0;
  gemv_fn q2_k, q3_k, q4_k, q5_k, q6_k; // gemv_kquant.hpp
  gemv_fn mxfp4;                        // gemv_lookup4.hpp
  gemv_fn iq4_nl, iq4_xs;               // gemv_lookup4.hpp
  gemv_fn f8_b128;                      // gemv_f8.hpp (f32 activations)
  gemv_fn t2_32;         // gemv_t2.hpp (int8 activations quantized per row: xd the same over a row)
  gemv_fn q8_0_packed;   // q8_0 from the packed layout (gemv_args::wp)
  gemv_fn q4_0_packed;   // q4_0 from the packed layout
  gemv_fn q4_k_packed;   // Q4_K from the packed layout
  gemv_fn q5_k_packed;   // Q5_K from the packed layout
  gemv_fn q6_k_packed;   // Q6_K from the packed layout
  gemv_fn iq4_nl_packed; // IQ4_NL from the packed layout (pack_q4_0's)
  gemv_fn iq4_xs_packed; // IQ4_XS from the packed layout
  int pack_rows;         // rows per group of that layout (8 or 16)
  // Q6_K's packed group of pack_rows rows back to those rows as published (G x K / 256 x 210
  // bytes), the int8 GEMM's input where only the layout stays resident (gemm_int8_*.cpp)
  void (*unpack_q6_k)(const uint8_t* grp, int64_t K, uint8_t* rows);
  quantize_fn quantize_q8; // x row -> int8 blocks of 32 with f32 scales
  void (*f16_to_f32)(const uint16_t* src, float* dst, int64_t n); // F16C row conversion
  gemm_q_fn gemm_q8_0, gemm_q4_0;                                 // 8+ tokens (gemm_q_args)
  gemm_q_fn gemm_q4_k, gemm_q5_k, gemm_q6_k;                      // gemm_kquant.hpp
  gemm_q_fn gemm_mxfp4;                                           // offset 12
  gemm_q_fn gemm_iq4_nl, gemm_iq4_xs;                             // offset iq4_offset
  int gemm_lanes;                                                 // tokens per tile
  int q8_offset;                                                  // see gemm_q_args
  int iq4_offset; // 128 (codes looked up as value + 128) or 0 (sign trick)
};

/// The best table this CPU runs (null entries: use the portable path).
const gemv_table& gemv_kernels();

/// q4_0's packed layout, made once at load: rows in groups of G (8 for the AVX2 kernels, 16
/// for the AVX-512 ones), and per group and block of 32 values the G rows' f16 scales (2G
/// bytes), then 4 chunks of 4G bytes where chunk c holds bytes 4c..4c+3 of each row's 16 code
/// bytes, row by row (its low nibbles are values 4c..4c+3, its high ones 16+4c..16+4c+3). A
/// 32-bit lane then holds one row: the GEMV keeps G rows in the vector lanes and broadcasts the
/// activations. Same size as the published rows.
void pack_q4_0(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out);
/// q8_0's: as q4_0's, with 8 chunks of 4G bytes (chunk c: code bytes 4c..4c+3 of each row).
void pack_q8_0(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out);
/// Q4_K's: rows in groups of G; per group and block of 256 values the G rows' d (2G bytes),
/// dmin (2G), their 12 scale bytes as 3 chunks of 4G (chunk i: bytes 4i..4i+3 of each row),
/// then for each 32-byte run p of codes (groups 2p and 2p + 1) 8 chunks of 4G (chunk c: bytes
/// 4c..4c+3 of each row's run). Same size as the published rows.
void pack_q4_k(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out);
/// Q5_K's: as Q4_K's, with the rows' 32 qh bytes (the 5th bits: bit g of qh[l] for value l of
/// group g) as 8 chunks of 4G (chunk c: qh bytes 4c..4c+3 of each row) between the scales and
/// the codes. Same size as the published rows.
void pack_q5_k(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out);
/// Q6_K's: rows in groups of G; per group and block of 256 values the G rows' d (2G bytes),
/// their 16 int8 scales as 4 chunks of 4G (chunk i: scales 4i..4i+3 of each row), their 128
/// ql bytes as 32 chunks of 4G (chunk c: ql bytes 4c..4c+3), then their 64 qh bytes as 16
/// chunks of 4G. Same size as the published rows.
void pack_q6_k(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out);
/// IQ4_XS's: rows in groups of G; per group and block of 256 values the G rows' d (2G bytes),
/// scales_h (2G), scales_l (4G: 4 bytes a row), then for each 32-value sub-block s 4 chunks of
/// 4G (chunk c: bytes 4c..4c+3 of each row's 16 code bytes of s). Same size as the published
/// rows. (IQ4_NL's blocks are laid out as q4_0's: pack_q4_0.)
void pack_iq4_xs(const uint8_t* w, int64_t N, int64_t K, int G, uint8_t* out);

// per-ISA tables (gemv_avx512.cpp, gemv_avx2.cpp) and their int8 GEMMs (gemm_int8_*.cpp)
const gemv_table* gemv_avx512_table();
const gemv_table* gemv_avx2_table();
// bf16 without the AVX-512 table's even / odd split for single tokens (AMD's mix, gemv.cpp)
void gemv_bf16_unsplit_avx512(const gemv_args& a);
void gemm_q8_0_avx512(const gemm_q_args& a);
void gemm_q4_0_avx512(const gemm_q_args& a);
void gemm_mxfp4_avx512(const gemm_q_args& a);
void gemm_iq4_nl_avx512(const gemm_q_args& a);
void gemm_iq4_xs_avx512(const gemm_q_args& a);
void gemm_q8_0_avx2(const gemm_q_args& a);
void gemm_q4_0_avx2(const gemm_q_args& a);
void gemm_mxfp4_avx2(const gemm_q_args& a);
void gemm_iq4_nl_avx2(const gemm_q_args& a);
void gemm_iq4_xs_avx2(const gemm_q_args& a);
void gemm_q4_k_avx512(const gemm_q_args& a);
void gemm_q5_k_avx512(const gemm_q_args& a);
void gemm_q6_k_avx512(const gemm_q_args& a);
void gemm_q4_k_avx2(const gemm_q_args& a);
// the packed-layout kernels the tables name (packed_avx512.cpp, packed_avx2.cpp)
namespace packed_avx512 {
void gemv_q8_0_x16(const gemv_args& a);
void gemv_q4_0_x16(const gemv_args& a);
void gemv_q4_k_x16(const gemv_args& a);
void gemv_q5_k_x16(const gemv_args& a);
void gemv_q6_k_x16(const gemv_args& a);
void gemv_iq4_nl_x16(const gemv_args& a);
void gemv_iq4_xs_x16(const gemv_args& a);
} // namespace packed_avx512
namespace packed_avx2 {
void gemv_q4_0_x8(const gemv_args& a);
void gemv_q4_k_x8(const gemv_args& a);
void gemv_q5_k_x8(const gemv_args& a);
void gemv_q6_k_x8(const gemv_args& a);
void gemv_iq4_nl_x8(const gemv_args& a);
void gemv_iq4_xs_x8(const gemv_args& a);
} // namespace packed_avx2
void gemm_q5_k_avx2(const gemm_q_args& a);
void gemm_q6_k_avx2(const gemm_q_args& a);
void unpack_q6_k_x16(const uint8_t* grp, int64_t K, uint8_t* rows);
void unpack_q6_k_x8(const uint8_t* grp, int64_t K, uint8_t* rows);

} // namespace troupe::kernels::cpu
