// attention_decode.cu: attention for the few query rows of decode steps (fewer than 16: the
// tensor-core kernel takes larger steps), over a paged or contiguous cache in f32, f16 or bf16,
// with every score modifier (window, chunks, temperature, soft-cap, ALiBi, sinks). A block of 256
// threads takes one (query row, head) and spreads the keys over all its threads: lanes in groups of
// LPK = the 16-byte pieces of a key row (8, 16 or 32), so a group reads a key's row in one
// coalesced load and sums its dot product in log2(LPK) shuffles, and 256 / LPK keys are in flight
// at once, four rounds of them before any is used. Keys come in chunks of 512: their cache slots
// (through the block table) and then their scores go to shared memory, the chunk's maximum and
// sum fold into an online softmax, and each group accumulates p v for its keys' V rows; the
// groups' partial outputs meet in shared memory at the end, in a fixed order.
#include "kernels/cuda/attention.cuh"

namespace troupe::kernels::cuda {
namespace {

constexpr int threads = 256, chunk = 512, rounds = 4;

// The 16-byte pieces at `piece` of the chunk's rows j0, j0 + G, ... (`rounds` of them, all
// loaded before any is used), zeros for rows past n.
template <int G>
__device__ __forceinline__ void load_rounds(const uint8_t* cache, const long long* slots,
                                            long long piece, int j0, int n, uint4* raw) {
#pragma unroll
  for (int r = 0; r < rounds; ++r) {
    const int j = j0 + r * G;
    raw[r] =
        j < n ? *reinterpret_cast<const uint4*>(cache + slots[j] + piece) : make_uint4(0, 0, 0, 0);
  }
}

template <int LPK, int E>
__global__ void __launch_bounds__(threads) attention_decode_kernel(attn_args a) {
  constexpr int V = E == e_f32 ? 4 : 8; // values per 16-byte piece
  constexpr int D = LPK * V, G = threads / LPK;
  constexpr int eb = E == e_f32 ? 4 : 2; // bytes per element
  __shared__ float sc[chunk];
  __shared__ long long slots[chunk];
  __shared__ float red[G][D];
  __shared__ float tmp[32];
  const long long t = blockIdx.x, h = blockIdx.y;
  const int li = threadIdx.x % LPK, grp = threadIdx.x / LPK;
  const long long kh = h / (a.H / a.Hkv);
  long long qpos = 0, first = 0;
  const int32_t* blocks = nullptr;
  if (!locate_row(a, t, qpos, first, blocks)) return; // the whole block: no barrier passed
  const float slope = head_slope(a, h), scale = query_scale(a, qpos);
  float q[V];
  {
    const float4* qr = reinterpret_cast<const float4*>(a.q + (t * a.H + h) * D + li * V);
#pragma unroll
    for (int i = 0; i < V / 4; ++i) {
      const float4 x = qr[i];
      q[4 * i] = x.x, q[4 * i + 1] = x.y, q[4 * i + 2] = x.z, q[4 * i + 3] = x.w;
    }
  }
  const auto* kc = static_cast<const uint8_t*>(a.k);
  const auto* vc = static_cast<const uint8_t*>(a.v);
  const long long piece = li * V * eb; // this lane's bytes within a row
  float m = -INFINITY, l = 0.0f, acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.0f;
  for (long long c0 = first; c0 <= qpos; c0 += chunk) {
    const int n = static_cast<int>(qpos - c0 + 1 < chunk ? qpos - c0 + 1 : chunk);
    for (int j = threadIdx.x; j < n; j += threads) {
      const long long s = c0 + j;
      const long long slot = blocks ? static_cast<long long>(blocks[s / a.P]) * a.P + s % a.P : s;
      slots[j] = ((slot * a.Hkv + kh) * D) * eb;
    }
    __syncthreads();
    // every lane runs every round (a warp holds several groups, and the shuffles need all of
    // its lanes): the bounds are the block's, the keys past n load nothing
    for (int base = 0; base < n; base += G * rounds) {
      uint4 raw[rounds];
      load_rounds<G>(kc, slots, piece, base + grp, n, raw);
#pragma unroll
      for (int r = 0; r < rounds; ++r) {
        const int j = base + grp + r * G;
        float kv[V];
        unpack16<E>(raw[r], kv);
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < V; ++i) dot += q[i] * kv[i];
#pragma unroll
        for (int off = LPK / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        if (li == 0 && j < n) {
          float s = dot * scale;
          if (a.softcap > 0) s = a.softcap * tanhf(s / a.softcap);
          sc[j] = s + slope * static_cast<float>(c0 + j - qpos);
        }
      }
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n; j += threads) mx = fmaxf(mx, sc[j]);
    const float mn = fmaxf(m, block_max(mx, tmp));
    const float corr = expf(m - mn); // 0 on the first chunk
    float ps = 0.0f;
    for (int j = threadIdx.x; j < n; j += threads) {
      const float p = expf(sc[j] - mn);
      sc[j] = p;
      ps += p;
    }
    l = l * corr + block_sum(ps, tmp); // its barriers publish the probabilities too
    m = mn;
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] *= corr;
    for (int base = 0; base < n; base += G * rounds) {
      uint4 raw[rounds];
      load_rounds<G>(vc, slots, piece, base + grp, n, raw);
#pragma unroll
      for (int r = 0; r < rounds; ++r) {
        const int j = base + grp + r * G;
        if (j >= n) break;
        float vv[V];
        unpack16<E>(raw[r], vv);
        const float p = sc[j];
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] += p * vv[i];
      }
    }
    __syncthreads(); // scores and slots are read before the next chunk writes them
  }
#pragma unroll
  for (int i = 0; i < V; ++i) red[grp][li * V + i] = acc[i];
  __syncthreads();
  float f = 1.0f, L = l;
  if (a.sinks) { // one more logit in the denominator
    const float sink = a.sinks[h], M = fmaxf(m, sink);
    f = expf(m - M);
    L = l * f + expf(sink - M);
  }
  float* o = a.out + (t * a.H + h) * D;
  for (int d = threadIdx.x; d < D; d += threads) {
    float s = 0.0f;
    for (int g = 0; g < G; ++g) s += red[g][d];
    o[d] = L > 0 ? s * f / L : 0.0f;
  }
}

template <int E>
status launch_elem(const attn_args& a, const exec_ctx& c) {
  const dim3 grid(static_cast<unsigned>(a.T), static_cast<unsigned>(a.H));
  constexpr int V = E == e_f32 ? 4 : 8;
  auto s = stream_of(c);
  if (a.D == 8 * V)
    attention_decode_kernel<8, E><<<grid, threads, 0, s>>>(a);
  else if (a.D == 16 * V)
    attention_decode_kernel<16, E><<<grid, threads, 0, s>>>(a);
  else
    attention_decode_kernel<32, E><<<grid, threads, 0, s>>>(a);
  return check_launch("attention (decode rows)", c);
}

} // namespace

bool attention_decode_takes(const attn_args& a) {
  const long long v = a.e == e_f32 ? 4 : 8;
  const bool aligned = reinterpret_cast<uintptr_t>(a.q) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(a.k) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(a.v) % 16 == 0;
  return a.T < 16 && aligned && (a.D == 8 * v || a.D == 16 * v || a.D == 32 * v);
}

status launch_attention_decode(const attn_args& a, const exec_ctx& c) {
  if (a.T == 0) return {};
  switch (a.e) {
  case e_f16:
    return launch_elem<e_f16>(a, c);
  case e_bf16:
    return launch_elem<e_bf16>(a, c);
  default:
    return launch_elem<e_f32>(a, c);
  }
}

} // namespace troupe::kernels::cuda
