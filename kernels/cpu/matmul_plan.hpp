// matmul_plan.hpp (cpu): how one matmul call runs, chosen once per call (matmul.cpp's header
// lists the paths): plan() picks the path for x and a weight like w, prepares the activations
// that path wants (quantized, tiled, split into bf16 halves) in thread-local buffers, and
// says how the output features are cut into work (unit, grain). matmul.cpp runs the plan
// over ranges of features; report.hpp counts the paths taken. Internal to kernels/cpu.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.hpp"
#include "kernels/cpu/amx.hpp"
#include "kernels/cpu/gemv.hpp"

namespace troupe::kernels::cpu {
// gemm_avx2.cpp / gemm_avx512.cpp (gemm_tn.hpp)
using gemm_tn_fn = void (*)(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb,
                            int64_t n, float* C, int64_t ldc, const void* next, int64_t next_bytes);
void gemm_tn_avx2(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb, int64_t n,
                  float* C, int64_t ldc, const void* next, int64_t next_bytes);
void gemm_tn_avx512(const float* xt, int64_t T, int64_t K, const float* B, int64_t ldb, int64_t n,
                    float* C, int64_t ldc, const void* next, int64_t next_bytes);
int64_t pack_tile16_avx512(const float* x, int64_t K, float* tile); // gemm_avx512.cpp

namespace mm {

constexpr int64_t chunk = 256;         // portable: values per expanded chunk (fits L1 with x)
constexpr int64_t gemm_min_tokens = 8; // from here on prefill paths beat the gemv kernels
constexpr int64_t blas_tile = 64;      // blas: rows per f32 tile (in L2)
// nt on AVX2: six output features per group, 16 tokens in the lanes of two ymm: 12
// accumulators (gemm_tn_avx2)
constexpr int64_t nt_group = 6;
// nt on AVX-512: twelve features per group, 32 tokens in the lanes of two zmm: 24
// accumulators, the two token vectors and one broadcast weight (gemm_tn_avx512)
constexpr int64_t tn_group = 12;

// amx_packed and int8_packed only name the counts of amx / int8 plans that read the packed
// layout (plan_t::amx_rows, plan_t::unpacks)
enum class path { gemv, int8, amx, nt, blas, portable, gemv_packed, amx_packed, int8_packed };

struct plan_t {
  path how = path::portable;
  const float* x = nullptr;
  int64_t T = 0, K = 0;
  gemv_fn fn = nullptr;
  gemv_fn fn_packed = nullptr;   // gemv_packed: from the packed layout, for weights that have it
  const int32_t* xsum = nullptr; // its sums of each 32 int8 activations
  const int8_t* xq = nullptr;    // gemv with quantized weights: x as int8 blocks and scales
  const float* xd = nullptr;
  const float* xs = nullptr;     // and, for the K-quants, their sums per 16 (gemv_args::xs)
  amx_acts amx{};                // amx: x packed into int8 tiles
  bool amx_rows = false;         // amx: in amx_pack_rows' order, for the packed layout
  const uint16_t* xbf = nullptr; // amx with bf16 weights: x packed into bf16 tiles
  gemm_q_fn gq = nullptr;        // int8: the kernel and x in its token tiles (gemm_q_args)
  const int8_t* xt = nullptr;
  const int32_t* corr = nullptr;
  int64_t lanes = 0, tiles = 0;
  bool unpacks = false;       // int8: Q6_K's rows unpacked from the packed layout per call
  const float* xtf = nullptr; // nt: x in tiles of 16 (AVX-512) or 8 (AVX2) tokens
  gemm_tn_fn tn = nullptr;    // nt: its kernel, over groups of `unit` features
  int64_t unit = 1;           // features per unit of work
  int64_t grain = 1;          // units per task
};

// Chooses the path for x and weights like w, quantizing x when the gemv kernel wants int8 (t2_32
// weights: per row, by `step` [T] where given, op.hpp's matmul src3).
plan_t plan(const tensor_view& x, const tensor_view& w, const float* step = nullptr);

gemv_fn gemv_for(const gemv_table& tab, dtype t);     // the table's decode kernel for t
gemv_fn packed_for(const gemv_table& tab, dtype t);   // ... for t laid out at load, or null
bool int8_acts(dtype t);                              // t's kernels take int8 activations
bool amx_int8_takes(const tensor_view& w);            // AMX int8 tiles take prefill with w
bool amx_reads_packed(const tensor_view& w);          // ... from w's packed layout
bool prefill_packed(const gemv_table& tab, dtype t);  // prefill of t runs on the packed kernel
bool prefill_unpacks(const gemv_table& tab, dtype t); // Q6_K: GEMM over rows unpacked per call
float* aligned64(std::vector<float>& buf, int64_t n); // n floats of buf from a 64-byte boundary

} // namespace mm
} // namespace troupe::kernels::cpu
