// kquant_codes.hpp: a K-quant block's unsigned codes and scales as 256-bit vectors (layouts in
// core/kquant.hpp; and MXFP4's scales and code tables), shared by the int8 decode kernels
// (gemv_kquant.hpp) and the GEMM for 8+ tokens (gemm_kquant.hpp), so each format's bit layout is
// decoded in one place. Included by the per-ISA files only, which compile it with their own -m
// flags; internal linkage, so the copies never merge.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "core/kquant_blocks.hpp"

namespace troupe::kernels::cpu {
namespace {
namespace kqc {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// MXFP4's block scale as the int8 kernels want it (codes doubled into integers): a table load
// per block (building the float's bits with a branch cost a fifth of the decode kernel's time)
inline float mx_scale(uint8_t e) {
  return kq::e8m0_half(e);
}

// MXFP4's E2M1 codes doubled (kq::mxfp4_twice), and plus 12 for the GEMM's unsigned operand
// (offset 12 in gemm_q_args): vpshufb tables, one per 128 bits.
inline constexpr const int8_t* mx_twice = kq::mxfp4_twice;
struct code_table {
  alignas(16) int8_t v[16];
};
// 16 values plus an offset (the bytes wrap: value + 128 reads back as unsigned)
constexpr code_table plus(const int8_t* values, int offset) {
  code_table t{};
  for (int i = 0; i < 16; ++i) t.v[i] = static_cast<int8_t>(values[i] + offset);
  return t;
}
inline constexpr code_table mx_unsigned_table = plus(kq::mxfp4_twice, 12);
inline constexpr const int8_t* mx_unsigned = mx_unsigned_table.v;

// IQ4_NL / IQ4_XS's values (kq::iq4_values), and plus 128 for the AVX-512 GEMM's unsigned
// operand (offset 128; the AVX2 one moves the sign onto the activations instead)
inline constexpr code_table iq4_unsigned_table = plus(kq::iq4_values, 128);
inline constexpr const int8_t* iq4_unsigned = iq4_unsigned_table.v;

// IQ4_XS sub-block s's scale - 32 (core/kquant.hpp: low nibble s of scales_l, bits 2s..2s+1
// of scales_h above it), for the block at `blk`.
inline int iq4xs_scale(const uint8_t* blk, int s) {
  const unsigned h = static_cast<unsigned>(blk[2]) | (static_cast<unsigned>(blk[3]) << 8);
  return static_cast<int>(((blk[4 + s / 2] >> (4 * (s % 2))) & 0x0f) |
                          (((h >> (2 * s)) & 3) << 4)) -
         32;
}
// The same for G rows at once (pack_iq4_xs's group of a 256-value block: the rows' d,
// scales_h, scales_l one vector each): d x (scale - 32) of sub-block s, row r in lane r.
struct iq4xs_rows8 { // 8 rows (AVX2 layout: d at 0, scales_h at 16, scales_l at 32)
  __m256 d;
  __m256i h, l;
  explicit iq4xs_rows8(const uint8_t* blk)
      : d(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))))
      , h(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16))))
      , l(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32))) {}
  __m256 scale(int s) const {
    const __m256i sc = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32(l, 4 * s), _mm256_set1_epi32(0x0f)),
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2 * s), _mm256_set1_epi32(3)), 4));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(sc, _mm256_set1_epi32(32))));
  }
};
#ifdef __AVX512F__
struct iq4xs_rows16 { // 16 rows (AVX-512 layout: d at 0, scales_h at 32, scales_l at 64)
  __m512 d;
  __m512i h, l;
  explicit iq4xs_rows16(const uint8_t* blk)
      : d(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))))
      , h(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32))))
      , l(_mm512_loadu_si512(blk + 64)) {}
  __m512 scale(int s) const {
    const __m512i sc = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(l, 4 * s), _mm512_set1_epi32(0x0f)),
        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2 * s), _mm512_set1_epi32(3)), 4));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(sc, _mm512_set1_epi32(32))));
  }
};
#endif

inline __m128i table16(const int8_t* t) {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(t));
}

// sum(w * x) of 32 int8 pairs as 8 int32 lanes, w signed (its sign moves onto x, so maddubs
// takes |w| unsigned; |w| * |x| pairs stay within int16 for q8_0 and MXFP4 weights)
inline __m256i signed_dot(__m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline __m256i bits(__m256i v, int shift, int mask) { // (v >> shift) & mask in every byte
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

// Q4_K / Q5_K: the 6-bit scales (bytes 0-7) and minimums (8-15) of the 8 groups from the 12
// packed bytes (kq::scale_min, four at a time in 32-bit words).
inline __m128i scales_k45(const uint8_t* s) {
  uint32_t w[3];
  __builtin_memcpy(w, s, 12);
  const uint32_t sc_lo = w[0] & 0x3f3f3f3fu, m_lo = w[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4);
  return _mm_set_epi32(static_cast<int>(m_hi), static_cast<int>(m_lo), static_cast<int>(sc_hi),
                       static_cast<int>(sc_lo));
}

// Q4_K (Q5 false) / Q5_K: the codes of groups 2j (lo) and 2j + 1 (hi) of block b; qh is Q5_K's
// 32 bytes of fifth bits (bit g of byte l: value l of group g), loaded once per block.
template <bool Q5>
inline void k45_codes(const uint8_t* b, __m256i qh, int j, __m256i& lo, __m256i& hi) {
  const __m256i v = load32(b + (Q5 ? 48 : 16) + 32 * j); // group 2j low nibbles, 2j + 1 high
  lo = bits(v, 0, 0x0f);
  hi = bits(v, 4, 0x0f);
  if constexpr (Q5) {
    lo = _mm256_or_si256(lo, _mm256_slli_epi16(bits(qh, 2 * j, 1), 4));
    hi = _mm256_or_si256(hi, _mm256_slli_epi16(bits(qh, 2 * j + 1, 1), 4));
  }
}

// Q6_K: the codes (value + 32) of group g of block b: half h = g / 4 of ql[64 h ..] (low
// nibbles of its first or second 32 bytes for k = g % 4 of 0 / 1, high ones for 2 / 3) and
// bits 2k, 2k + 1 of qh[32 h ..].
inline __m256i q6_codes(const uint8_t* b, int g) {
  const int h = g / 4, k = g % 4;
  return _mm256_or_si256(bits(load32(b + 64 * h + 32 * (k % 2)), 4 * (k / 2), 0x0f),
                         _mm256_slli_epi16(bits(load32(b + 128 + 32 * h), 2 * k, 3), 4));
}

} // namespace kqc
} // namespace
} // namespace troupe::kernels::cpu
