// gemm_amx.cpp: the AMX int8 kernels of amx.hpp. Built with -mamx-tile -mamx-int8 and
// AVX-512; called only after amx_int8_usable() (gemv.cpp, compiled for any CPU) said yes.
// Tiles: tmm0 weights (16 rows x 32 bytes), tmm1 activations of a token tile (8 rows x 64
// bytes, VNNI order), tmm2..tmm5 four rotating 16 x 16 int32 products, so the products of
// a block are scaled three blocks later, when the tile unit has long finished them. Each
// thread loads this configuration once.
#include <immintrin.h>

#include <cstdint>

#include <cstring>

#include "kernels/cpu/amx.hpp"

#include "core/half.hpp"
#include "kernels/cpu/kquant_codes.hpp"

namespace troupe::kernels::cpu {

namespace {

struct tile_config {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

enum class tiles { none, int8, int8_packed, int8_packed16, bf16 };

// Loads the tile shapes of one kernel on this thread (kept until the other kernel runs).
void configure_thread(tiles want) {
  static thread_local tiles loaded = tiles::none;
  if (loaded == want) return;
  tile_config c;
  std::memset(&c, 0, sizeof c);
  c.palette = 1;
  if (want == tiles::int8) {
    c.rows[0] = 16, c.colsb[0] = 32; // weights: 16 features x one block
    c.rows[1] = 8, c.colsb[1] = 64;  // activations: 32 values x 16 tokens, 4 values per dword
  } else if (want == tiles::int8_packed) {
    c.rows[0] = 16, c.colsb[0] = 32;         // activations: 16 tokens x one block
    c.rows[1] = 8, c.colsb[1] = 64;          // weights: 32 values x 16 features, 4 values per dword
  } else if (want == tiles::int8_packed16) { // Q6_K: a scale per 16 values
    c.rows[0] = 16, c.colsb[0] = 16;         // activations: 16 tokens x half a block
    c.rows[1] = 4, c.colsb[1] = 64;          // weights: 16 values x 16 features
  } else {
    c.rows[0] = 16, c.colsb[0] = 64; // weights: 16 features x 32 bf16
    c.rows[1] = 16, c.colsb[1] = 64; // the next 16 features
    c.rows[6] = 16, c.colsb[6] = 64; // activations: 32 values x 16 tokens, pairs per dword
    c.rows[7] = 16, c.colsb[7] = 64; // their low halves
  }
  for (int i = 2; i < 6; ++i) c.rows[i] = 16, c.colsb[i] = 64; // products: 16 x 16 of 32 bits
  _tile_loadconfig(&c);
  loaded = want;
}

// Streams `lines` cache lines from `next` into L1, `per_step` at a time.
struct prefetcher {
  const char* next;
  int64_t lines, per_step, done = 0;
  void step() {
    for (int64_t i = 0; i < per_step && done < lines; ++i, ++done)
      _mm_prefetch(next + done * 64, _MM_HINT_T0);
  }
};

int64_t pad16(int64_t T) {
  return (T + 15) / 16 * 16;
}

} // namespace

int64_t amx_xv_bytes(int64_t T, int64_t K) {
  return pad16(T) * K;
}

int64_t amx_dx_floats(int64_t T, int64_t K) {
  return pad16(T) * (K / 32);
}

namespace {

// Quantizes 32 values of x (scale = max|x| / 127, nearest) into q; returns the scale and, in
// *sum, the sum of the codes. x == nullptr (a padding token): zeros.
inline float quantize32(const float* x, int8_t* q, int32_t* sum) {
  if (!x) {
    std::memset(q, 0, 32);
    *sum = 0;
    return 0.0f;
  }
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float scale = amax / 127.0f;
  const __m512 inv = _mm512_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
  const __m128i q0 = _mm512_cvtsepi32_epi8(
      _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, inv), _MM_FROUND_TO_NEAREST_INT)));
  const __m128i q1 = _mm512_cvtsepi32_epi8(
      _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, inv), _MM_FROUND_TO_NEAREST_INT)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), q0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), q1);
  *sum =
      _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_cvtepi8_epi32(q0), _mm512_cvtepi8_epi32(q1)));
  return scale;
}

// 32 values of x as int8 multiples of `step` (clamped to +-127); returns the step
inline float quantize32_by(const float* x, float step, int8_t* q) {
  if (!x || step == 0.0f) {
    std::memset(q, 0, 32);
    return 0.0f;
  }
  const __m512 inv = _mm512_set1_ps(1.0f / step);
  for (int h = 0; h < 2; ++h) {
    const __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * h), inv),
                                          _MM_FROUND_TO_NEAREST_INT);
    const __m512 c =
        _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * h),
                     _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(c)));
  }
  return step;
}

} // namespace

void amx_t2_q8_rows(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t K, uint8_t* out) {
  const __m256i shifts = _mm256_set_epi64x(6, 4, 2, 0), three = _mm256_set1_epi8(3),
                one = _mm256_set1_epi8(1);
  const uint16_t unit = 0x3c00; // f16 1.0
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < K / 32; ++b) {
      const uint8_t* blk = w + r * row_bytes + b * 12;
      uint8_t* o = out + (r * (K / 32) + b) * 34;
      long long bits;
      std::memcpy(&bits, blk + 4, 8);
      const __m256i v = _mm256_sub_epi8(
          _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(bits), shifts), three), one);
      std::memcpy(o, &unit, 2);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 2), v);
    }
}

void amx_pack(const float* x, int64_t T, int64_t K, int8_t* xv, float* dx, const float* step) {
  const int64_t nb = K / 32, T16 = pad16(T);
  for (int64_t tt = 0; tt < T16 / 16; ++tt)
    for (int64_t b = 0; b < nb; ++b) {
      int8_t* tile = xv + (tt * nb + b) * 512;
      float* d = dx + (tt * nb + b) * 16;
      for (int64_t t = 0; t < 16; ++t) {
        const int64_t tok = tt * 16 + t;
        alignas(32) int8_t q[32];
        int32_t sum;
        d[t] = step ? quantize32_by(tok < T ? x + tok * K + b * 32 : nullptr,
                                    tok < T ? step[tok] : 0, q)
                    : quantize32(tok < T ? x + tok * K + b * 32 : nullptr, q, &sum);
        // VNNI order: row r holds values 4r .. 4r + 3 of every token, token t at byte 4t
        for (int r = 0; r < 8; ++r) std::memcpy(tile + r * 64 + t * 4, q + 4 * r, 4);
      }
    }
}

void amx_pack_rows(const float* x, int64_t T, int64_t K, int8_t* xa, float* dx, float* xs) {
  const int64_t nb = K / 32, T16 = pad16(T);
  for (int64_t tt = 0; tt < T16 / 16; ++tt)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t at = (tt * nb + b) * 16; // this block's first token in dx and xs
      for (int64_t t = 0; t < 16; ++t) {
        const int64_t tok = tt * 16 + t;
        int32_t sum;
        dx[at + t] = quantize32(tok < T ? x + tok * K + b * 32 : nullptr, xa + (at + t) * 32, &sum);
        // the block's sum as the kernel sees it: scale x the sum of its codes
        if (xs) xs[at + t] = dx[at + t] * static_cast<float>(sum);
      }
    }
}

namespace {

// acc[r] += int32 products of row r x (token scales dx) x (row r's weight scale dw[r])
inline void scale_tile(const int32_t* prod, __m512 dx, const float* dw, __m512* acc) {
  for (int r = 0; r < 16; ++r)
    acc[r] =
        _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(prod + r * 16)), dx),
                        _mm512_set1_ps(dw[r]), acc[r]);
}

// One block: weights x activations into product tile C, stored to prod slot C - 2. (The
// tile intrinsics paste their tile number into assembly text: it must be a literal.)
#define TROUPE_AMX_ISSUE(C)                                                                        \
  do {                                                                                             \
    _tile_loadd(0, wt, astride);                                                                   \
    _tile_loadd(1, xt, 64);                                                                        \
    _tile_zero(C);                                                                                 \
    _tile_dpbssd(C, 0, 1);                                                                         \
    _tile_stored(C, prod + ((C)-2) * 256, 64);                                                     \
  } while (0)

constexpr int lag = 3; // blocks between a product's tile op and its scaling

} // namespace

// Per 16 features: their block scales (gathered) and q4_0 values are unpacked once, then
// every token tile runs the blocks with 16 f32 accumulators in registers.
void amx_gemm_q(const amx_acts& a, const uint8_t* w, int64_t row_bytes, bool q4, int64_t n0,
                int64_t n1, float* y, int64_t ldy, int64_t ycol0, const float* bias, float* work) {
  configure_thread(tiles::int8);
  const int64_t nb = a.K / 32, ntt = a.T16 / 16;
  const int64_t bb = q4 ? 18 : 34;                            // block bytes
  int32_t* prod = reinterpret_cast<int32_t*>(work);           // [4][16][16], 64-byte aligned
  float* dw = work + 1024;                                    // [nb][16]
  int8_t* unpacked = reinterpret_cast<int8_t*>(dw + nb * 16); // [nb][16][32] (q4_0)
  const __m512i row_offsets =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* rows = w + n * row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      // the f16 scale at the start of block b of each of the 16 rows
      const __m512i s = _mm512_i32gather_epi32(row_offsets, rows + b * bb, 1);
      _mm512_storeu_ps(dw + b * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(s)));
    }
    if (q4)
      for (int64_t b = 0; b < nb; ++b)
        for (int r = 0; r < 16; ++r) {
          const __m128i v =
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + r * row_bytes + b * bb + 2));
          const __m128i m = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
          int8_t* dst = unpacked + (b * 16 + r) * 32;
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                           _mm_sub_epi8(_mm_and_si128(v, m), eight));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16),
                           _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m), eight));
        }
    const uint8_t* a0 = q4 ? reinterpret_cast<const uint8_t*>(unpacked) : rows + 2;
    const int64_t astep = q4 ? 512 : bb, astride = q4 ? 32 : row_bytes;
    // the next 16 rows stream in while these compute: without it their first touch (the
    // scale gather) waits on DRAM one line at a time
    prefetcher pf{reinterpret_cast<const char*>(rows + 16 * row_bytes), 0, 0};
    pf.lines = n + 16 < n1 ? 16 * row_bytes / 64 + 1 : 0;
    pf.per_step = (pf.lines + ntt * nb - 1) / (ntt * nb);
    for (int64_t tt = 0; tt < ntt; ++tt) {
      const int8_t* xb = a.xv + tt * nb * 512;
      const float* dx = a.dx + tt * nb * 16;
      __m512 acc[16];
      for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* wt = a0 + b * astep;
        const int8_t* xt = xb + b * 512;
        pf.step();
        switch (b & 3) {
        case 0:
          TROUPE_AMX_ISSUE(2);
          break;
        case 1:
          TROUPE_AMX_ISSUE(3);
          break;
        case 2:
          TROUPE_AMX_ISSUE(4);
          break;
        default:
          TROUPE_AMX_ISSUE(5);
          break;
        }
        if (b >= lag) {
          const int64_t d = b - lag;
          scale_tile(prod + (d & 3) * 256, _mm512_loadu_ps(dx + d * 16), dw + d * 16, acc);
        }
      }
      for (int64_t d = nb > lag ? nb - lag : 0; d < nb; ++d)
        scale_tile(prod + (d & 3) * 256, _mm512_loadu_ps(dx + d * 16), dw + d * 16, acc);
      const int64_t tn = a.T - tt * 16 < 16 ? a.T - tt * 16 : 16;
      alignas(64) float out[16];
      for (int r = 0; r < 16; ++r) {
        _mm512_store_ps(out, acc[r]);
        const float add = bias ? bias[n + r] : 0.0f;
        for (int64_t t = 0; t < tn; ++t) y[(tt * 16 + t) * ldy + n + r - ycol0] = out[t] + add;
      }
    }
  }
}

namespace {

// acc[t] += int32 products of token t x (token t's scale dx[t]) x (the 16 features' scales dw)
inline void scale_tile_t(const int32_t* prod, const float* dx, __m512 dw, __m512* acc) {
  for (int t = 0; t < 16; ++t)
    acc[t] =
        _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(prod + t * 16)), dw),
                        _mm512_set1_ps(dx[t]), acc[t]);
}

// One block of the packed kernel: activations x weights into product tile C, stored to prod
// slot C - 2.
#define TROUPE_AMX_ISSUE_PACKED(C)                                                                 \
  do {                                                                                             \
    _tile_loadd(0, xt, 32);                                                                        \
    _tile_loadd(1, wt, 64);                                                                        \
    _tile_zero(C);                                                                                 \
    _tile_dpbssd(C, 0, 1);                                                                         \
    _tile_stored(C, prod + ((C)-2) * 256, 64);                                                     \
  } while (0)

} // namespace

namespace {

// The token tiles of one group of 16 features against its nb blocks of weight tiles (block b
// at wt0 + b * wstep, in the VNNI order) with their scales dw[b][16] and, for the K-quants,
// minimums mw[b][16] (times each token's block sum, subtracted).
void packed_group_tiles(const amx_acts& a, const uint8_t* wt0, int64_t wstep, const float* dw,
                        const float* mw, int64_t n, float* y, int64_t ldy, int64_t ycol0,
                        const float* bias, prefetcher& pf, int32_t* prod) {
  const int64_t nb = a.K / 32, ntt = a.T16 / 16;
  const __m512 add = bias ? _mm512_loadu_ps(bias + n) : _mm512_setzero_ps();
  for (int64_t tt = 0; tt < ntt; ++tt) {
    const int8_t* xb = a.xv + tt * nb * 512;
    const float* dx = a.dx + tt * nb * 16;
    const float* xs = mw ? a.xs + tt * nb * 16 : nullptr;
    __m512 acc[16];
    for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
    auto scale = [&](int64_t d) {
      scale_tile_t(prod + (d & 3) * 256, dx + d * 16, _mm512_loadu_ps(dw + d * 16), acc);
      if (mw) {
        const __m512 m = _mm512_loadu_ps(mw + d * 16);
        for (int t = 0; t < 16; ++t)
          acc[t] = _mm512_fnmadd_ps(m, _mm512_set1_ps(xs[d * 16 + t]), acc[t]);
      }
    };
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* wt = wt0 + b * wstep;
      const int8_t* xt = xb + b * 512;
      pf.step();
      switch (b & 3) {
      case 0:
        TROUPE_AMX_ISSUE_PACKED(2);
        break;
      case 1:
        TROUPE_AMX_ISSUE_PACKED(3);
        break;
      case 2:
        TROUPE_AMX_ISSUE_PACKED(4);
        break;
      default:
        TROUPE_AMX_ISSUE_PACKED(5);
        break;
      }
      if (b >= lag) scale(b - lag);
    }
    for (int64_t d = nb > lag ? nb - lag : 0; d < nb; ++d) scale(d);
    const int64_t tn = a.T - tt * 16 < 16 ? a.T - tt * 16 : 16;
    for (int64_t t = 0; t < tn; ++t)
      _mm512_storeu_ps(y + (tt * 16 + t) * ldy + n - ycol0, _mm512_add_ps(acc[t], add));
  }
}

// Streams the next group of 16 rows into L1 over the token tiles of this one.
prefetcher next_group(const uint8_t* grp, int64_t row_bytes, int64_t n, int64_t n1,
                      const amx_acts& a) {
  prefetcher pf{reinterpret_cast<const char*>(grp + 16 * row_bytes), 0, 0};
  const int64_t steps = a.T16 / 16 * (a.K / 32);
  pf.lines = n + 16 < n1 ? 16 * row_bytes / 64 + 1 : 0;
  pf.per_step = (pf.lines + steps - 1) / steps;
  return pf;
}

} // namespace

// The packed layout's block of a 16-row group is the 16 f16 scales, then the codes as 8 (q8_0)
// or 4 (q4_0) lines of 16 rows x 4 bytes: q8_0's lines are a weight tile as they are (values
// 4c .. 4c + 3 of the 16 features in line c, the VNNI order), q4_0's are split into low and
// high nibbles (values 4c .. and 16 + 4c ..) into the same order once per group. The products
// come out token by row, so each token's 16 outputs are one store.
void amx_gemm_q_packed(const amx_acts& a, const uint8_t* wp, int64_t row_bytes, amx_codes codes,
                       int64_t n0, int64_t n1, float* y, int64_t ldy, int64_t ycol0,
                       const float* bias, float* work) {
  configure_thread(tiles::int8_packed);
  const bool xs = codes == amx_codes::iq4_xs;
  const bool q4 = codes != amx_codes::q8_0, iq4 = codes == amx_codes::iq4_nl || xs;
  const int64_t nb = a.K / 32;
  const int64_t bb = q4 ? 18 : 34, gb = 16 * bb;              // block bytes, a group's block bytes
  int32_t* prod = reinterpret_cast<int32_t*>(work);           // [4][16][16], 64-byte aligned
  float* dw = work + 1024;                                    // [nb][16]
  int8_t* unpacked = reinterpret_cast<int8_t*>(dw + nb * 32); // [nb][8][64] (q4_0)
  // where block b's 16 x 16 code bytes start in the group (IQ4_XS: sub-block b % 8 of its
  // block of 256, whose 16 d / scales_h / scales_l come first: pack_iq4_xs)
  const auto codes_of = [&](const uint8_t* grp, int64_t b) {
    return xs ? grp + (b / 8) * 16 * 136 + 128 + 256 * (b % 8) : grp + b * gb + 32;
  };
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* grp = wp + n / 16 * 16 * row_bytes;
    if (xs) { // d x (the sub-block's 6-bit scale - 32), as the decode kernel takes them
      for (int64_t b = 0; b < nb / 8; ++b) {
        const kqc::iq4xs_rows16 rows(grp + b * 16 * 136);
        for (int s = 0; s < 8; ++s) _mm512_storeu_ps(dw + (b * 8 + s) * 16, rows.scale(s));
      }
    } else {
      for (int64_t b = 0; b < nb; ++b)
        _mm512_storeu_ps(dw + b * 16, _mm512_cvtph_ps(_mm256_loadu_si256(
                                          reinterpret_cast<const __m256i*>(grp + b * gb))));
    }
    if (q4) { // q4_0: nibble - 8; IQ4_NL / IQ4_XS: the value the nibble indexes
      const __m512i m = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
      // the zero-masked form: the plain one trips GCC 12's -Wuninitialized (bug 105593)
      const __m512i lut = _mm512_maskz_broadcast_i32x4(0xffff, kqc::table16(kq::iq4_values));
      const auto values = [&](__m512i nib) {
        return iq4 ? _mm512_shuffle_epi8(lut, nib) : _mm512_sub_epi8(nib, eight);
      };
      for (int64_t b = 0; b < nb; ++b)
        for (int c = 0; c < 4; ++c) {
          const __m512i v = _mm512_loadu_si512(codes_of(grp, b) + c * 64);
          int8_t* dst = unpacked + b * 512;
          _mm512_store_si512(dst + c * 64, values(_mm512_and_si512(v, m)));
          _mm512_store_si512(dst + (4 + c) * 64,
                             values(_mm512_and_si512(_mm512_srli_epi16(v, 4), m)));
        }
    }
    prefetcher pf = next_group(grp, row_bytes, n, n1, a);
    if (q4)
      packed_group_tiles(a, reinterpret_cast<const uint8_t*>(unpacked), 512, dw, nullptr, n, y, ldy,
                         ycol0, bias, pf, prod);
    else
      packed_group_tiles(a, grp + 32, gb, dw, nullptr, n, y, ldy, ycol0, bias, pf, prod);
  }
}

// Q4_K / Q5_K (pack_q4_k / pack_q5_k, groups of 16 rows): per 256-value block, 16 d, 16 dmin,
// 3 lines of the 12 scale bytes, (Q5_K: 8 lines of qh), then 4 x 8 lines of codes whose low
// nibbles are sub-block 2p and high nibbles sub-block 2p + 1 (values 4c .. 4c + 3 in line c):
// each sub-block becomes a weight tile of codes 0..15 (Q5_K: bit j of qh adds 16), its scale
// d x sc and its minimum dmin x m, which meets each token's block sum.
void amx_gemm_kq_packed(const amx_acts& a, const uint8_t* wp, int64_t row_bytes, bool q5,
                        int64_t n0, int64_t n1, float* y, int64_t ldy, int64_t ycol0,
                        const float* bias, float* work) {
  configure_thread(tiles::int8_packed);
  const int64_t nb = a.K / 32, nsb = a.K / 256;
  const int64_t gb = 16 * (q5 ? 176 : 144); // a group's block bytes
  int32_t* prod = reinterpret_cast<int32_t*>(work);
  float* dw = work + 1024;                                    // [nb][16]
  float* mw = dw + nb * 16;                                   // [nb][16]
  int8_t* unpacked = reinterpret_cast<int8_t*>(mw + nb * 16); // [nb][8][64]
  const __m512i low = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* grp = wp + n / 16 * 16 * row_bytes;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* blk = grp + s * gb;
      alignas(64) float d[16], dm[16];
      _mm512_store_ps(d,
                      _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))));
      _mm512_store_ps(
          dm, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32))));
      for (int r = 0; r < 16; ++r) {
        uint8_t q[12];
        for (int i = 0; i < 3; ++i) std::memcpy(q + 4 * i, blk + 64 + i * 64 + r * 4, 4);
        for (int j = 0; j < 8; ++j) {
          const int sc = j < 4 ? q[j] & 63 : (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
          const int m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
          dw[(s * 8 + j) * 16 + r] = d[r] * static_cast<float>(sc);
          mw[(s * 8 + j) * 16 + r] = dm[r] * static_cast<float>(m);
        }
      }
      const uint8_t* codes = blk + (q5 ? 768 : 256);
      for (int p = 0; p < 4; ++p)
        for (int c = 0; c < 8; ++c) {
          const __m512i v = _mm512_loadu_si512(codes + p * 512 + c * 64);
          __m512i lo = _mm512_and_si512(v, low);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
          if (q5) {
            const __m512i h = _mm512_loadu_si512(blk + 256 + c * 64);
            lo = _mm512_or_si512(
                lo, _mm512_and_si512(_mm512_slli_epi16(_mm512_srli_epi16(h, 2 * p), 4), bit4));
            hi = _mm512_or_si512(
                hi, _mm512_and_si512(_mm512_slli_epi16(_mm512_srli_epi16(h, 2 * p + 1), 4), bit4));
          }
          _mm512_store_si512(unpacked + (s * 8 + 2 * p) * 512 + c * 64, lo);
          _mm512_store_si512(unpacked + (s * 8 + 2 * p + 1) * 512 + c * 64, hi);
        }
    }
    prefetcher pf = next_group(grp, row_bytes, n, n1, a);
    packed_group_tiles(a, reinterpret_cast<const uint8_t*>(unpacked), 512, dw, mw, n, y, ldy, ycol0,
                       bias, pf, prod);
  }
}

namespace {

// One half block of the Q6_K kernel: 16 tokens x 16 values (stride 32) against 16 values x
// 16 features into product tile C, stored to prod slot C - 2.
#define TROUPE_AMX_ISSUE_HALF(C)                                                                   \
  do {                                                                                             \
    _tile_loadd(0, xh, 32);                                                                        \
    _tile_loadd(1, wh, 64);                                                                        \
    _tile_zero(C);                                                                                 \
    _tile_dpbssd(C, 0, 1);                                                                         \
    _tile_stored(C, prod + ((C)-2) * 256, 64);                                                     \
  } while (0)

// The token tiles of one group of 16 Q6_K rows: per 32-value block two products of 16 values
// (halves h = 0, 1: weight lines 4h .. 4h + 3 of the block's 8, activation bytes 16h ..), each
// scaled by its own d x sc (dw[2b + h][16]) and the tokens' block scale, four products apart.
void q6_group_tiles(const amx_acts& a, const uint8_t* wt0, const float* dw, int64_t n, float* y,
                    int64_t ldy, int64_t ycol0, const float* bias, prefetcher& pf, int32_t* prod) {
  const int64_t nb = a.K / 32, ntt = a.T16 / 16, np = 2 * nb;
  const __m512 add = bias ? _mm512_loadu_ps(bias + n) : _mm512_setzero_ps();
  for (int64_t tt = 0; tt < ntt; ++tt) {
    const int8_t* xb = a.xv + tt * nb * 512;
    const float* dx = a.dx + tt * nb * 16;
    __m512 acc[16];
    for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
    auto scale = [&](int64_t q) {
      scale_tile_t(prod + (q & 3) * 256, dx + q / 2 * 16, _mm512_loadu_ps(dw + q * 16), acc);
    };
    for (int64_t q = 0; q < np; ++q) {
      const int8_t* xh = xb + q / 2 * 512 + (q & 1) * 16;
      const uint8_t* wh = wt0 + q * 256;
      if ((q & 1) == 0) pf.step();
      switch (q & 3) {
      case 0:
        TROUPE_AMX_ISSUE_HALF(2);
        break;
      case 1:
        TROUPE_AMX_ISSUE_HALF(3);
        break;
      case 2:
        TROUPE_AMX_ISSUE_HALF(4);
        break;
      default:
        TROUPE_AMX_ISSUE_HALF(5);
        break;
      }
      if (q >= lag) scale(q - lag);
    }
    for (int64_t q = np > lag ? np - lag : 0; q < np; ++q) scale(q);
    const int64_t tn = a.T - tt * 16 < 16 ? a.T - tt * 16 : 16;
    for (int64_t t = 0; t < tn; ++t)
      _mm512_storeu_ps(y + (tt * 16 + t) * ldy + n - ycol0, _mm512_add_ps(acc[t], add));
  }
}

} // namespace

// Q6_K (pack_q6_k, groups of 16 rows): per 256-value block the 16 rows' d (32 bytes), 4 lines
// of their 16 int8 scales (line i: scales 4i .. 4i + 3 of each row), 32 lines of ql and 16 of
// qh (line c: bytes 4c .. 4c + 3 of each row). Sub-block g = 4h + p of 32 values takes its low
// 4 bits from ql lines 16h + 8(p & 1) + c (the high nibbles when p >= 2) and its top 2 from
// qh line 8h + c, bits 2p, 2p + 1: line c holds values 4c .. 4c + 3 of the 16 rows, the tile
// unit's order. The codes are unpacked once per group as signed values (code - 32), the
// scales as d x sc per 16 values.
void amx_gemm_q6k_packed(const amx_acts& a, const uint8_t* wp, int64_t row_bytes, int64_t n0,
                         int64_t n1, float* y, int64_t ldy, int64_t ycol0, const float* bias,
                         float* work) {
  configure_thread(tiles::int8_packed16);
  const int64_t nsb = a.K / 256, gb = 16 * 210; // a group's block bytes
  int32_t* prod = reinterpret_cast<int32_t*>(work);
  float* dw = work + 1024;                                // [K / 16][16]
  int8_t* unpacked = reinterpret_cast<int8_t*>(dw + a.K); // [K / 32][8][64]
  const __m512i low = _mm512_set1_epi8(0x0f), two = _mm512_set1_epi8(0x03),
                off = _mm512_set1_epi8(32);
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* grp = wp + n / 16 * 16 * row_bytes;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* blk = grp + s * gb;
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
      for (int i = 0; i < 4; ++i) {
        const __m512i sc = _mm512_loadu_si512(blk + 32 + 64 * i);
        for (int j = 0; j < 4; ++j) // byte j of each row's dword: scale 4i + j, sign-extended
          _mm512_storeu_ps(dw + (s * 16 + 4 * i + j) * 16,
                           _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(
                                                _mm512_slli_epi32(sc, 24 - 8 * j), 24))));
      }
      for (int g = 0; g < 8; ++g) {
        const int h = g / 4, p = g % 4;
        for (int c = 0; c < 8; ++c) {
          const __m512i ql = _mm512_loadu_si512(blk + 288 + 64 * (16 * h + 8 * (p & 1) + c));
          const __m512i qh = _mm512_loadu_si512(blk + 2336 + 64 * (8 * h + c));
          const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(ql, 4 * (p >> 1)), low);
          const __m512i hi =
              _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2 * p), two), 4);
          _mm512_store_si512(unpacked + (s * 8 + g) * 512 + c * 64,
                             _mm512_sub_epi8(_mm512_or_si512(lo, hi), off));
        }
      }
    }
    prefetcher pf = next_group(grp, row_bytes, n, n1, a);
    q6_group_tiles(a, reinterpret_cast<const uint8_t*>(unpacked), dw, n, y, ldy, ycol0, bias, pf,
                   prod);
  }
}

void amx_t2_rows(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t K, int part,
                 uint16_t* out) {
  const __m512i ternary = _mm512_castsi128_si512(_mm_setr_epi16(
      static_cast<short>(0xbf80), 0, static_cast<short>(0x3f80), 0, 0, 0, 0, 0)); // -1, 0, 1
  const __m256i shifts = _mm256_set_epi64x(6, 4, 2, 0), three = _mm256_set1_epi8(3);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < K / 32; ++b) {
      const uint8_t* blk = w + r * row_bytes + b * 12;
      long long bits;
      std::memcpy(&bits, blk + 4, 8);
      const __m256i codes =
          _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(bits), shifts), three);
      __m512i table = ternary;
      if (part != 0) {
        float d;
        std::memcpy(&d, blk, 4);
        uint32_t u;
        const uint16_t hi = f32_to_bf16(d);
        u = static_cast<uint32_t>(hi) << 16;
        float dh;
        std::memcpy(&dh, &u, 4);
        const uint16_t v = part == 1 ? hi : f32_to_bf16(d - dh);
        table = _mm512_castsi128_si512(_mm_setr_epi16(static_cast<short>(v ^ 0x8000), 0,
                                                      static_cast<short>(v), 0, 0, 0, 0, 0));
      }
      _mm512_storeu_si512(out + r * K + b * 32,
                          _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(codes), table));
    }
}

void amx_pack_bf16(const float* x, int64_t T, int64_t K, uint16_t* xv) {
  const int64_t nb = K / 32, T16 = pad16(T);
  for (int64_t tt = 0; tt < T16 / 16; ++tt)
    for (int64_t b = 0; b < nb; ++b) {
      uint32_t* hi_tile = reinterpret_cast<uint32_t*>(xv + (tt * nb + b) * 1024);
      uint32_t* lo_tile = hi_tile + 256;
      for (int64_t t = 0; t < 16; ++t) {
        const int64_t tok = tt * 16 + t;
        alignas(64) uint16_t hi[32], lo[32];
        if (tok < T) {
          const float* xr = x + tok * K + b * 32;
          const __m512 x0 = _mm512_loadu_ps(xr), x1 = _mm512_loadu_ps(xr + 16);
          // x = hi + lo + O(2^-16 x): hi its nearest bf16, lo the nearest bf16 of the rest
          const __m512bh h = _mm512_cvtne2ps_pbh(x1, x0);
          const __m512i hb = (__m512i)h;
          const __m512 h0 = _mm512_castsi512_ps(
              _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hb)), 16));
          const __m512 h1 = _mm512_castsi512_ps(
              _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hb, 1)), 16));
          _mm512_store_si512(hi, hb);
          _mm512_store_si512(
              lo, (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(x1, h1), _mm512_sub_ps(x0, h0)));
        } else {
          std::memset(hi, 0, sizeof hi);
          std::memset(lo, 0, sizeof lo);
        }
        // VNNI order: row r holds values 2r, 2r + 1 of every token, token t at dword t
        const uint32_t* hp = reinterpret_cast<const uint32_t*>(hi);
        const uint32_t* lp = reinterpret_cast<const uint32_t*>(lo);
        for (int r = 0; r < 16; ++r) hi_tile[r * 16 + t] = hp[r], lo_tile[r * 16 + t] = lp[r];
      }
    }
}

namespace {

// Writes product tile `prod` (16 features from n x 16 tokens from t0) to y.
void write_tile(const float* prod, int64_t n, int64_t t0, int64_t T, float* y, int64_t ldy,
                int64_t ycol0, const float* bias) {
  const int64_t tn = T - t0 < 16 ? T - t0 : 16;
  for (int r = 0; r < 16; ++r) {
    const float add = bias ? bias[n + r] : 0.0f;
    for (int64_t t = 0; t < tn; ++t) y[(t0 + t) * ldy + n + r - ycol0] = prod[r * 16 + t] + add;
  }
}

} // namespace

// 32 features (weight tiles tmm0, tmm1) x 2 token tiles (products tmm2..tmm5) per pass: each
// tile load feeds two or four TDPBF16PS, the most the eight tiles allow with the activations'
// hi and lo halves in tmm6 and tmm7. A last group of 16 features takes tmm0 alone.
void amx_gemm_bf16(const uint16_t* xv, int64_t T, int64_t K, const uint16_t* w, int64_t n0,
                   int64_t n1, float* y, int64_t ldy, int64_t ycol0, const float* bias,
                   float* work) {
  configure_thread(tiles::bf16);
  const int64_t nb = K / 32, ntt = pad16(T) / 16, wstride = K * 2;
  float* out = work; // [4][16][16]
  for (int64_t n = n0; n < n1;) {
    const int64_t nn = n1 - n >= 32 ? 32 : 16;
    const uint16_t* rows = w + n * K;
    prefetcher pf{reinterpret_cast<const char*>(rows + nn * K), 0, 0};
    if (n + nn < n1) {
      pf.lines = (n1 - n - nn >= 32 ? 32 : 16) * K * 2 / 64;
      pf.per_step = (pf.lines + nb * ((ntt + 1) / 2) - 1) / (nb * ((ntt + 1) / 2));
    }
    for (int64_t tt = 0; tt < ntt; tt += 2) {
      const bool two = tt + 1 < ntt;
      const uint16_t* x0 = xv + tt * nb * 1024;
      const uint16_t* x1 = x0 + nb * 1024;
      _tile_zero(2);
      _tile_zero(3);
      _tile_zero(4);
      _tile_zero(5);
      for (int64_t b = 0; b < nb; ++b) {
        pf.step();
        _tile_loadd(0, rows + b * 32, wstride);
        if (nn == 32) _tile_loadd(1, rows + 16 * K + b * 32, wstride);
        if (two) {
          // the hi halves of both token tiles, then their lo halves: a product tile's two
          // accumulations stand four operations apart, so the tile unit never waits on one
          _tile_loadd(6, x0 + b * 1024, 64);
          _tile_loadd(7, x1 + b * 1024, 64);
          _tile_dpbf16ps(2, 0, 6);
          if (nn == 32) _tile_dpbf16ps(3, 1, 6);
          _tile_dpbf16ps(4, 0, 7);
          if (nn == 32) _tile_dpbf16ps(5, 1, 7);
          _tile_loadd(6, x0 + b * 1024 + 512, 64);
          _tile_loadd(7, x1 + b * 1024 + 512, 64);
          _tile_dpbf16ps(2, 0, 6);
          if (nn == 32) _tile_dpbf16ps(3, 1, 6);
          _tile_dpbf16ps(4, 0, 7);
          if (nn == 32) _tile_dpbf16ps(5, 1, 7);
        } else {
          _tile_loadd(6, x0 + b * 1024, 64);
          _tile_loadd(7, x0 + b * 1024 + 512, 64);
          _tile_dpbf16ps(2, 0, 6);
          if (nn == 32) _tile_dpbf16ps(3, 1, 6);
          _tile_dpbf16ps(2, 0, 7);
          if (nn == 32) _tile_dpbf16ps(3, 1, 7);
        }
      }
      _tile_stored(2, out, 64);
      write_tile(out, n, tt * 16, T, y, ldy, ycol0, bias);
      if (nn == 32) {
        _tile_stored(3, out, 64);
        write_tile(out, n + 16, tt * 16, T, y, ldy, ycol0, bias);
      }
      if (two) {
        _tile_stored(4, out, 64);
        write_tile(out, n, tt * 16 + 16, T, y, ldy, ycol0, bias);
        if (nn == 32) {
          _tile_stored(5, out, 64);
          write_tile(out, n + 16, tt * 16 + 16, T, y, ldy, ycol0, bias);
        }
      }
    }
    n += nn;
  }
}

} // namespace troupe::kernels::cpu
