// attention.cu: causal attention with GQA over a paged KV cache (paged_attention) or a
// contiguous one (attention), with a sliding window, Gemma 2's soft-cap, ALiBi and GPT-OSS's
// sinks, chunks and Llama 4's temperature, as op.hpp defines them; caches in f32, f16 or bf16; head
// dims up to 1024 (MLA's latent cache is 576). One block of 4 warps per (query row, query head):
// each warp takes every 4th key, a key's dot product over the warp's lanes (each lane holds D / 32
// of q and of the output), an online softmax per warp (running max, sum and rescaled accumulator),
// and the 4 warps merge at the end. Key rows are read coalesced, once per query head. Prefill of
// 16+ rows from a 16-bit cache with head dims of 64 or 128 and plain causal scores (a window
// allowed) runs on the tensor cores instead (attention_mma.cu), unless exact activations
// were asked for (precision.hpp: the tensor cores round q and the probabilities), and decode
// rows with the common head sizes spread their keys over a whole block (attention_decode.cu).
#include "kernels/cuda/attention.cuh"

namespace troupe::kernels::cuda {
namespace {

constexpr int warps = 4;

template <int NJ> // dims per lane: D <= 32 NJ
__global__ void __launch_bounds__(32 * warps) attention_kernel(attn_args a) {
  __shared__ float wm[warps], wl[warps];
  __shared__ float wacc[warps][32 * NJ];
  const long long t = blockIdx.x, h = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const long long kh = h / (a.H / a.Hkv), D = a.D;
  // the query's position and its keys (paged: through its sequence's block table)
  long long qpos = 0, first = 0;
  const int32_t* blocks = nullptr;
  if (!locate_row(a, t, qpos, first, blocks)) return; // the executor's batches cover every row
  const float slope = head_slope(a, h), scale = query_scale(a, qpos);
  float qv[NJ], acc[NJ];
  const float* qr = a.q + (t * a.H + h) * D;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const long long d = lane + 32 * j;
    qv[j] = d < D ? qr[d] : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (long long s = first + warp; s <= qpos; s += warps) {
    long long slot = s;
    if (blocks) slot = static_cast<long long>(blocks[s / a.P]) * a.P + s % a.P;
    const long long base = (slot * a.Hkv + kh) * D;
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const long long d = lane + 32 * j;
      if (d < D) dot += qv[j] * load_elem(a.k, base + d, a.e);
    }
    float sc = warp_sum(dot) * scale;
    if (a.softcap > 0) sc = a.softcap * tanhf(sc / a.softcap);
    sc += slope * static_cast<float>(s - qpos);
    const float mn = fmaxf(m, sc);
    const float corr = expf(m - mn), p = expf(sc - mn); // exp(-inf) = 0 on the first key
    l = l * corr + p;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const long long d = lane + 32 * j;
      acc[j] = acc[j] * corr + (d < D ? p * load_elem(a.v, base + d, a.e) : 0.0f);
    }
    m = mn;
  }
  if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
  for (int j = 0; j < NJ; ++j) wacc[warp][lane + 32 * j] = acc[j];
  __syncthreads();
  if (warp != 0) return;
  float M = -INFINITY;
  for (int w = 0; w < warps; ++w) M = fmaxf(M, wm[w]);
  const bool sink = a.sinks != nullptr;
  if (sink) M = fmaxf(M, a.sinks[h]);
  float L = sink ? expf(a.sinks[h] - M) : 0.0f;
  float f[warps];
  for (int w = 0; w < warps; ++w) {
    f[w] = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - M); // a warp that saw no key adds nothing
    L += wl[w] * f[w];
  }
  float* o = a.out + (t * a.H + h) * D;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const long long d = lane + 32 * j;
    if (d >= D) continue;
    float s = 0.0f;
    for (int w = 0; w < warps; ++w) s += wacc[w][lane + 32 * j] * f[w];
    o[d] = s / L;
  }
}

status run(const attn_args& a, const exec_ctx& c) {
  if (a.T == 0) return {};
  if (attention_mma_takes(a)) return launch_attention_mma(a, c);
  if (attention_decode_takes(a)) return launch_attention_decode(a, c);
  const dim3 grid(static_cast<unsigned>(a.T), static_cast<unsigned>(a.H));
  auto s = stream_of(c);
  if (a.D <= 64)
    attention_kernel<2><<<grid, 32 * warps, 0, s>>>(a);
  else if (a.D <= 128)
    attention_kernel<4><<<grid, 32 * warps, 0, s>>>(a);
  else if (a.D <= 256)
    attention_kernel<8><<<grid, 32 * warps, 0, s>>>(a);
  else if (a.D <= 576)
    attention_kernel<18><<<grid, 32 * warps, 0, s>>>(a);
  else
    attention_kernel<32><<<grid, 32 * warps, 0, s>>>(a);
  return check_launch("attention", c);
}

attn_args common(const op_args& x, const tensor_view& cache, const tensor_view& sinks) {
  attn_args a{};
  a.q = x.src[0].as<float>();
  a.out = x.dst.as<float>();
  a.k = x.src[1].data;
  a.v = x.src[2].data;
  a.e = elem_of(cache.type);
  a.T = x.src[0].dims[0];
  a.H = x.src[0].dims[1];
  a.D = x.src[0].dims[2];
  a.scale = x.p.scale;
  a.softcap = x.p.softcap;
  a.alibi_max_bias = x.p.alibi_max_bias;
  a.alibi_heads = x.p.alibi_heads;
  a.head0 = x.p.head0;
  a.sinks = sinks.data ? sinks.as<float>() : nullptr;
  a.window = x.p.window;
  a.chunk = x.p.chunk;
  a.temp_floor = x.p.temp_floor;
  a.temp_scale = x.p.temp_scale;
  a.temp_offset = x.p.temp_offset;
  return a;
}

} // namespace

int attention_max_head_dim() {
  return 1024;
}

status launch_attention(const op_args& x, const exec_ctx& c) {
  attn_args a = common(x, x.src[1], x.src[3]);
  a.Hkv = x.src[1].dims[1];
  a.pos0 = x.p.pos0;
  return run(a, c);
}

status launch_paged_attention(const op_args& x, const exec_ctx& c) {
  attn_args a = common(x, x.src[1], x.src[4]);
  a.Hkv = x.src[1].dims[2];
  a.P = x.src[1].dims[1];
  a.seqs = x.src[3].as<int32_t>();
  a.S = x.src[3].rows();
  a.cols = x.src[3].cols();
  return run(a, c);
}

} // namespace troupe::kernels::cuda
