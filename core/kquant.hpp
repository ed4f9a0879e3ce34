// kquant.hpp: GGUF's K-quant block formats (llama.cpp's "super-blocks" of 256 values; and its
// other formats the kernels expand, is_expanded), with
// GGUF's exact byte layout, so Q2_K ... Q6_K weights (the Q4_K_M / Q5_K_M files people
// download) load without conversion. Each block holds 256 values in sub-blocks of 16 or 32
// with their own scale (and for Q2/Q4/Q5_K a minimum), the scales themselves quantized
// against the block's f16 factors:
//   q2_k  84 bytes: scales[16] (4-bit scale | 4-bit min), qs[64] (2 bits), f16 d, dmin
//   q3_k 110 bytes: hmask[32] (3rd bit), qs[64] (2 bits), scales[12] (6-bit, -32), f16 d
//   q4_k 144 bytes: f16 d, dmin, scales[12] (6-bit scale and min per 32), qs[128] (4 bits)
//   q5_k 176 bytes: f16 d, dmin, scales[12], qh[32] (5th bit), qs[128]
//   q6_k 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], f16 d
// dequant_block() expands one block; the kernels call it per block (they cut rows only on
// block boundaries). Tests: tests/core/kquant_test.cpp (against gguf-py's dequantization).
#pragma once

#include <cstdint>
#include <functional>

#include "core/dtype.hpp"

namespace troupe {

inline constexpr int64_t qk_k = 256; // values per K-quant block

/// Whether `t` is one of the K-quant formats.
inline bool is_kquant(dtype t) {
  return t == dtype::q2_k || t == dtype::q3_k || t == dtype::q4_k || t == dtype::q5_k ||
         t == dtype::q6_k;
}
/// The formats the kernels expand block by block: the K-quants, and GGUF's 32-value q4_1
/// (x = d q + m), q5_0 (x = d (q - 16), the 5th bits in a 32-bit word) and q5_1 (d q + m),
/// which llama-quantize writes where a tensor's rows are not whole K-quant blocks, and the
/// OCP microscaling MXFP4 (GPT-OSS's experts: e8m0 scale byte e, qs[16] of 4-bit E2M1 codes,
/// value j < 16 the low nibble of qs[j], j + 16 its high one, x = fp4(q) 2^(e - 127)), and
/// f8_b128: DeepSeek-V3's block-scaled FP8 as Troupe stores it after loading (an f32 scale,
/// then 128 E4M3 bytes; the checkpoint's 128 x 128 tiles give every row the scale of its tile),
/// and GGUF's non-linear 4-bit formats, whose codes index a table of 16 int8 values
/// (kq::iq4_values): iq4_nl (f16 d, qs[16] as q4_0's: x = d v[q]) and iq4_xs (256 values:
/// f16 d, u16 scales_h, scales_l[4], qs[128]; eight sub-blocks of 32, sub-block i's 6-bit
/// scale s = low nibble i of scales_l | bits 2i..2i+1 of scales_h << 4, x = d (s - 32) v[q],
/// codes as q4_0's within each sub-block), and t2_32: BitNet b1.58's ternary weights as Troupe
/// stores them after loading (32 values: f32 d, then 8 bytes of 2-bit codes c = w + 1 in {0, 1,
/// 2}, value 8 i + j in bits 2 i .. 2 i + 1 of byte j; x = d w).
inline bool is_expanded(dtype t) {
  return is_kquant(t) || t == dtype::q4_1 || t == dtype::q5_0 || t == dtype::q5_1 ||
         t == dtype::mxfp4 || t == dtype::f8_b128 || t == dtype::iq4_nl || t == dtype::iq4_xs ||
         t == dtype::t2_32;
}

/// Expands one block of `t` (is_expanded) into block_elems(t) floats.
void dequant_block(dtype t, const void* block, float* out);

/// `blocks` random blocks of `t` (for `troupe synth` and tests; nothing quantizes to K-quants
/// here): random bytes from `next` (64-bit words), with the f16 factors set so that values
/// stay within about +-5 * sigma, as normal(0, sigma) weights mostly do.
void random_blocks(dtype t, int64_t blocks, float sigma, const std::function<uint64_t()>& next,
                   uint8_t* out);

} // namespace troupe
