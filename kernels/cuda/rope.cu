// rope.cu: rotary embedding (rope), the KV-cache store (kv_store), and both in one pass
// (rope_kv_store: k rotated into its cache slot in the cache's element type, and, with the
// attention's whole prologue, v stored and q rotated with the same angles). One block per
// token: its cos / sin (computed in double from the spec's inverse frequencies, as the CPU
// does, then rounded to f32) are made once in shared memory for all heads. Layouts as
// core/rope.hpp: interleaved pairs (2i, 2i + 1) or neox halves (i, i + rot_dim / 2); the
// dimensions past rot_dim are copied.
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

constexpr int max_half = 256; // rot_dim <= 512 (supports() in cuda_device.cpp)

struct rope_table_arg {
  double inv_freq[max_half];
  double attn_factor;
  int half, neox;
};

// rotates H heads of D values (x -> y, may alias) with the token's cos / sin in shared memory
__device__ void rotate(const float* x, float* y, long long H, long long D, const float* cs,
                       const float* sn, int half, bool neox) {
  const long long pairs = H * half;
  for (long long i = threadIdx.x; i < pairs; i += blockDim.x) {
    const long long h = i / half;
    const int p = static_cast<int>(i % half);
    const long long ia = h * D + (neox ? p : 2 * p), ib = h * D + (neox ? p + half : 2 * p + 1);
    const float xa = x[ia], xb = x[ib];
    y[ia] = xa * cs[p] - xb * sn[p];
    y[ib] = xa * sn[p] + xb * cs[p];
  }
  if (x != y) {
    const long long rest = D - 2 * half;
    for (long long i = threadIdx.x; i < H * rest; i += blockDim.x) {
      const long long h = i / rest, d = 2 * half + i % rest;
      y[h * D + d] = x[h * D + d];
    }
  }
}

__device__ void angles(const rope_table_arg& tb, int pos, float* cs, float* sn) {
  for (int i = threadIdx.x; i < tb.half; i += blockDim.x) {
    const double a = static_cast<double>(pos) * tb.inv_freq[i];
    cs[i] = static_cast<float>(cos(a) * tb.attn_factor);
    sn[i] = static_cast<float>(sin(a) * tb.attn_factor);
  }
  __syncthreads();
}

__global__ void rope_kernel(const float* x, const int32_t* pos, float* y, long long H, long long D,
                            rope_table_arg tb) {
  __shared__ float cs[max_half], sn[max_half];
  const long long t = blockIdx.x;
  angles(tb, pos[t], cs, sn);
  rotate(x + t * H * D, y + t * H * D, H, D, cs, sn, tb.half, tb.neox);
}

// a row of n f32 values into a cache row of element kind e
__device__ void store_row(const float* x, void* cache, long long row0, long long n, int e) {
  for (long long i = threadIdx.x; i < n; i += blockDim.x) store_elem(cache, row0 + i, e, x[i]);
}

// k rotated into the k cache (through shared memory for a 16-bit cache), v into the v cache,
// q rotated into qo; v and q optional
__global__ void rope_store_kernel(const float* k, const int32_t* pos, const int32_t* slots,
                                  void* kc, int ke, const float* v, void* vc, const float* q,
                                  float* qo, long long Hkv, long long Hq, long long D,
                                  rope_table_arg tb) {
  extern __shared__ float kbuf[]; // [Hkv * D]
  __shared__ float cs[max_half], sn[max_half];
  const long long t = blockIdx.x, row = Hkv * D;
  angles(tb, pos[t], cs, sn);
  const long long slot = slots[t];
  if (ke == e_f32) {
    rotate(k + t * row, static_cast<float*>(kc) + slot * row, Hkv, D, cs, sn, tb.half, tb.neox);
  } else {
    rotate(k + t * row, kbuf, Hkv, D, cs, sn, tb.half, tb.neox);
    __syncthreads();
    store_row(kbuf, kc, slot * row, row, ke);
  }
  if (v) store_row(v + t * row, vc, slot * row, row, ke);
  if (q) rotate(q + t * Hq * D, qo + t * Hq * D, Hq, D, cs, sn, tb.half, tb.neox);
}

__global__ void kv_store_kernel(const float* x, const int32_t* slots, void* cache, int e,
                                long long row) {
  const long long t = blockIdx.x;
  store_row(x + t * row, cache, slots[t] * row, row, e);
}

rope_table_arg table_of(const rope_spec& spec) {
  const auto tb = rope_inv_freq(spec);
  rope_table_arg a{};
  a.half = spec.rot_dim / 2;
  a.neox = spec.layout == rope_layout::neox;
  a.attn_factor = tb.attn_factor;
  for (int i = 0; i < a.half && i < max_half; ++i) a.inv_freq[i] = tb.inv_freq[i];
  return a;
}

} // namespace

int rope_max_rot_dim() {
  return 2 * max_half;
}

status launch_rope(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].dims[0], H = a.src[0].dims[1], D = a.src[0].dims[2];
  if (T == 0) return {};
  rope_kernel<<<static_cast<unsigned>(T), 128, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.src[1].as<int32_t>(), a.dst.as<float>(), H, D, table_of(a.p.rope));
  return check_launch("rope", c);
}

status launch_rope_kv_store(const op_args& a, const exec_ctx& c) {
  const auto &k = a.src[0], &v = a.src[3], &q = a.src[4];
  const long long T = k.dims[0], Hkv = k.dims[1], D = k.dims[2];
  if (T == 0) return {};
  const int ke = elem_of(a.dst.type);
  const size_t shared = ke == e_f32 ? 0 : static_cast<size_t>(Hkv * D) * sizeof(float);
  rope_store_kernel<<<static_cast<unsigned>(T), 128, shared, stream_of(c)>>>(
      k.as<float>(), a.src[1].as<int32_t>(), a.src[2].as<int32_t>(), a.dst.data, ke,
      v.data ? v.as<float>() : nullptr, v.data ? a.dst2.data : nullptr,
      q.data ? q.as<float>() : nullptr, q.data ? a.dst3.as<float>() : nullptr, Hkv,
      q.data ? q.dims[1] : 0, D, table_of(a.p.rope));
  return check_launch("rope_kv_store", c);
}

status launch_kv_store(const op_args& a, const exec_ctx& c) {
  const long long T = a.src[0].dims[0];
  if (T == 0) return {};
  kv_store_kernel<<<static_cast<unsigned>(T), 128, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.src[1].as<int32_t>(), a.dst.data, elem_of(a.dst.type),
      a.src[0].numel() / T);
  return check_launch("kv_store", c);
}

} // namespace troupe::kernels::cuda
