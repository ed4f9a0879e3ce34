// cpu.hpp: the CPU backend's first working kernels: threaded over the shard's pool, inner
// loops written so the compiler vectorises them, with run-time dispatch by CPU flags through
// TROUPE_CPU_DISPATCH (GCC target_clones: AVX-512, AVX2+FMA, portable). Accumulation in f32
// with several independent partial sums. Tests: the op harness compares each with kernels/ref.
#pragma once

#include <cstdint>

#include "core/thread_pool.hpp"
#include "kernels/registry.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define TROUPE_CPU_DISPATCH                                                                        \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TROUPE_CPU_DISPATCH
#endif

namespace troupe::kernels::cpu {

void register_embedding(registry& r);
void register_matmul(registry& r);
void register_norm(registry& r);
void register_rope(registry& r);
void register_elementwise(registry& r);
void register_softmax(registry& r);
void register_reduce(registry& r);
void register_attention(registry& r);
void register_convert(registry& r);
void register_latent(registry& r);
void register_recurrent(registry& r);
void register_sparse(registry& r);
void register_hyper(registry& r);
void register_compress(registry& r);

/// Runs fn(begin, end) over [0, n) on the context's pool, or inline without one.
template <class F>
void parallel(const exec_ctx& ctx, int64_t n, int64_t grain, F&& fn) {
  if (ctx.pool && n > grain)
    ctx.pool->parallel_for(n, grain, fn);
  else if (n > 0)
    fn(0, n);
}

bool contiguous_args(const op_args& a);

/// Writes n f32 values as `type` (f32, f16, bf16, or q8_0 blocks, n a multiple of 32):
/// AVX2 + F16C / the decode kernels' q8 quantizer when the CPU has them (q8_0 values
/// rounded to nearest even; core/convert.hpp rounds halves away from zero, so an exact
/// tie may land one step apart), else core/convert.hpp.
void store_row(dtype type, const float* x, void* dst, int64_t n);

/// The CPU matmul kernel (matmul.cpp): y [T, N] = x [T, K] W^T (+ bias), W of any type its
/// registration accepts (f32, f16, bf16, q8_0, q4_0, the expanded formats).
void matmul(const op_args& a, const exec_ctx& ctx);

/// Bytes of weight `w` in the layout this CPU's decode kernels read fastest, made once at load
/// (tensor_view::packed), or 0 where they read the published rows: q4_0 / Q4_K / Q5_K / Q6_K (and
/// q8_0 on AVX-512) matrices of a multiple of the table's pack_rows (8 or 16), where it has the
/// packed GEMV (gemv.hpp, pack_q4_0 / pack_q8_0 / pack_q4_k / pack_q5_k / pack_q6_k).
int64_t packed_bytes(const tensor_view& w);
/// Lays `w` out that way into `out` (packed_bytes(w) bytes).
void pack(const tensor_view& w, void* out);
/// Whether the matmul kernels, once `w` has that layout, read only it for any number of tokens
/// (prefill too: q4_0, AVX-512's q8_0 / Q4_K / Q5_K, unless AMX takes their prefill), never
/// the published rows.
bool packed_only(const tensor_view& w);

/// One head x rotated in place at position pos by `spec` (rope.cpp: its angles remembered per
/// thread, as the rope kernels' are).
void rope_head(const rope_spec& spec, int32_t pos, float* x);

/// f32 dot product of n values.
float dot_f32(const float* x, const float* y, int64_t n);
/// out[0..n) = the f32 values of row `w` (stored as `type`) from element k0 (block aligned).
void dequant_row(dtype type, const void* w, int64_t k0, int64_t n, float* out);

} // namespace troupe::kernels::cpu
