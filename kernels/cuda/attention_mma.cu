// attention_mma.cu: causal prefill attention on the tensor cores (mma.sync m16n8k16, bf16 or
// f16 by the cache's type, f32 accumulation), over a paged cache or a contiguous one, with GQA
// and an optional sliding window, chunks and a temperature on the scores. A block of 4 warps takes
// 64 query rows of one head (of one sequence: a paged call's blocks are numbered over its
// sequences' 64-row tiles), each warp 16 of them with q held in registers as the mma's A fragments.
// Keys come in tiles of 64: their K and V rows are copied (16 bytes a thread, through the block
// table) into shared memory, the warp's 16 x 64 scores are one set of mma's, masked, scaled and
// folded into an online softmax in registers (running max and sum per row, the output rescaled),
// and the probabilities, rounded to the cache's type, are the A fragments of the product with V.
// Fragment layouts are PTX's for m16n8k16: lane = 4 g + t; A (16 x 16) holds rows g and g + 8 at
// columns 2t, 2t + 1 and 2t + 8, 2t + 9; B (16 x 8) column g at rows 2t, 2t + 1, 2t + 8, 2t + 9; C
// (16 x 8) rows g and g + 8 at columns 2t, 2t + 1. The S fragments of two adjacent 8-key tiles are
// thus the A fragment of a 16-key slice, with no shuffle.
#include "kernels/cuda/attention.cuh"
#include "kernels/precision.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr int br = 64, bc = 64; // query rows per block, keys per tile

template <bool Bf>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (Bf) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

__device__ __forceinline__ uint32_t join2(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

template <bool Bf>
__device__ __forceinline__ void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (Bf)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int D, bool Bf>
__global__ void __launch_bounds__(128) attention_mma_kernel(attn_args a) {
  constexpr int dp = D + 8; // a padded shared row: the fragment loads hit distinct banks
  __shared__ __align__(16) uint16_t ks[bc * dp], vs[bc * dp];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t4 = lane % 4;
  const long long h = blockIdx.y, kh = h / (a.H / a.Hkv);
  // this block's rows: [row0, row0 + count) at positions pos0.., keys through `blocks`
  long long row0 = 0, count = 0, pos0 = 0;
  const int32_t* blocks = nullptr;
  if (a.seqs) {
    long long idx = blockIdx.x;
    for (long long si = 0; si < a.S && !count; ++si) {
      const int32_t* row = a.seqs + si * a.cols;
      const long long n = row[1], tiles = (n + br - 1) / br;
      if (idx < tiles) {
        row0 = row[0] + idx * br;
        count = n - idx * br < br ? n - idx * br : br;
        pos0 = row[2] + idx * br;
        blocks = row + 3;
      }
      idx -= tiles;
    }
  } else {
    row0 = blockIdx.x * static_cast<long long>(br);
    count = a.T - row0 < br ? a.T - row0 : br;
    pos0 = a.pos0 + row0;
  }
  if (count <= 0) return; // the whole block: no barrier has been passed
  // the warp's rows r0 (fragment rows g) and r1 (g + 8), and their positions (-1: no row)
  const int r0 = warp * 16 + g, r1 = r0 + 8;
  const long long qp0 = r0 < count ? pos0 + r0 : -1, qp1 = r1 < count ? pos0 + r1 : -1;
  uint32_t qa[D / 16][4];
  {
    const float* q0 = a.q + ((row0 + r0) * a.H + h) * D;
    const float* q1 = a.q + ((row0 + r1) * a.H + h) * D;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      const int d = kc * 16 + 2 * t4;
      const float2 z = make_float2(0.0f, 0.0f);
      const float2 x0 = qp0 >= 0 ? *reinterpret_cast<const float2*>(q0 + d) : z;
      const float2 x1 = qp1 >= 0 ? *reinterpret_cast<const float2*>(q1 + d) : z;
      const float2 x2 = qp0 >= 0 ? *reinterpret_cast<const float2*>(q0 + d + 8) : z;
      const float2 x3 = qp1 >= 0 ? *reinterpret_cast<const float2*>(q1 + d + 8) : z;
      qa[kc][0] = pack2<Bf>(x0.x, x0.y);
      qa[kc][1] = pack2<Bf>(x1.x, x1.y);
      qa[kc][2] = pack2<Bf>(x2.x, x2.y);
      qa[kc][3] = pack2<Bf>(x3.x, x3.y);
    }
  }
  float o[D / 8][4];
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; // l: this lane's columns only
  // scores in base 2, each row's scale (with a temperature, by its position; q itself was
  // rounded above, so the factor goes on the scores)
  const float sl2_0 = query_scale(a, qp0) * 1.4426950408889634f;
  const float sl2_1 = query_scale(a, qp1) * 1.4426950408889634f;
  const long long last = pos0 + count - 1; // the block's last position
  // the first row's first key (the window's start or its chunk's, the later): no row sees less
  long long first = a.window > 0 && pos0 - a.window + 1 > 0 ? pos0 - a.window + 1 : 0;
  if (a.chunk > 0 && pos0 - pos0 % a.chunk > first) first = pos0 - pos0 % a.chunk;
  const uint16_t* kc16 = static_cast<const uint16_t*>(a.k);
  const uint16_t* vc16 = static_cast<const uint16_t*>(a.v);
  for (long long kt = first / bc * bc; kt <= last; kt += bc) {
    // K and V rows of keys kt.. into shared memory, 8 elements (16 bytes) per copy
    for (int i = threadIdx.x; i < bc * (D / 8); i += 128) {
      const int r = i / (D / 8), c8 = (i % (D / 8)) * 8;
      const long long s = kt + r;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      if (s >= first && s <= last) {
        const long long slot = blocks ? static_cast<long long>(blocks[s / a.P]) * a.P + s % a.P : s;
        const long long off = (slot * a.Hkv + kh) * D + c8;
        kv = *reinterpret_cast<const uint4*>(kc16 + off);
        vv = *reinterpret_cast<const uint4*>(vc16 + off);
      }
      *reinterpret_cast<uint4*>(ks + r * dp + c8) = kv;
      *reinterpret_cast<uint4*>(vs + r * dp + c8) = vv;
    }
    __syncthreads();
    // scores of the warp's 16 rows against the 64 keys: 8 tiles of 8 keys
    float sc[bc / 8][4];
#pragma unroll
    for (int j = 0; j < bc / 8; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
      const uint16_t* kr = ks + (j * 8 + g) * dp + 2 * t4;
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc)
        mma<Bf>(sc[j], qa[kc], *reinterpret_cast<const uint32_t*>(kr + kc * 16),
                *reinterpret_cast<const uint32_t*>(kr + kc * 16 + 8));
    }
    // masked (causal, window, chunk, rows past the block's) and scaled; the rows' maxima
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < bc / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const long long key = kt + j * 8 + 2 * t4 + (i & 1), qp = i < 2 ? qp0 : qp1;
        const bool in = key <= qp && (a.window <= 0 || key > qp - a.window) &&
                        (a.chunk <= 0 || key >= qp - qp % a.chunk);
        sc[j][i] = in ? sc[j][i] * (i < 2 ? sl2_0 : sl2_1) : -INFINITY;
        if (i < 2)
          mx0 = fmaxf(mx0, sc[j][i]);
        else
          mx1 = fmaxf(mx1, sc[j][i]);
      }
    for (int off = 1; off < 4; off *= 2) { // the 4 lanes of a row
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1;
    const float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1); // 0 while no key was seen
    m0 = n0, m1 = n1;
    l0 *= c0, l1 *= c1;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt)
      o[nt][0] *= c0, o[nt][1] *= c0, o[nt][2] *= c1, o[nt][3] *= c1;
#pragma unroll
    for (int j = 0; j < bc / 8; ++j) {
      sc[j][0] = exp2f(sc[j][0] - b0), sc[j][1] = exp2f(sc[j][1] - b0);
      sc[j][2] = exp2f(sc[j][2] - b1), sc[j][3] = exp2f(sc[j][3] - b1);
      l0 += sc[j][0] + sc[j][1];
      l1 += sc[j][2] + sc[j][3];
    }
    // o += p V, 16 keys at a time: p's A fragment from two score tiles, V's B fragments by
    // column (two 16-bit reads each: V is stored by key)
#pragma unroll
    for (int kc = 0; kc < bc / 16; ++kc) {
      const uint32_t pa[4] = {pack2<Bf>(sc[2 * kc][0], sc[2 * kc][1]),
                              pack2<Bf>(sc[2 * kc][2], sc[2 * kc][3]),
                              pack2<Bf>(sc[2 * kc + 1][0], sc[2 * kc + 1][1]),
                              pack2<Bf>(sc[2 * kc + 1][2], sc[2 * kc + 1][3])};
      const uint16_t* v0 = vs + (kc * 16 + 2 * t4) * dp + g;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        const uint16_t* v = v0 + nt * 8;
        mma<Bf>(o[nt], pa, join2(v[0], v[dp]), join2(v[8 * dp], v[9 * dp]));
      }
    }
    __syncthreads(); // the tile is read by every warp before the next one lands
  }
  for (int off = 1; off < 4; off *= 2) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float i0 = l0 > 0 ? 1.0f / l0 : 0.0f, i1 = l1 > 0 ? 1.0f / l1 : 0.0f;
  float* out0 = a.out + ((row0 + r0) * a.H + h) * D + 2 * t4;
  float* out1 = a.out + ((row0 + r1) * a.H + h) * D + 2 * t4;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
    if (qp0 >= 0)
      *reinterpret_cast<float2*>(out0 + nt * 8) = make_float2(o[nt][0] * i0, o[nt][1] * i0);
    if (qp1 >= 0)
      *reinterpret_cast<float2*>(out1 + nt * 8) = make_float2(o[nt][2] * i1, o[nt][3] * i1);
  }
}

template <int D, bool Bf>
void launch(const attn_args& a, dim3 grid, cudaStream_t s) {
  attention_mma_kernel<D, Bf><<<grid, 128, 0, s>>>(a);
}

} // namespace

bool attention_mma_takes(const attn_args& a) {
  return a.T >= 16 && (a.e == e_f16 || a.e == e_bf16) && (a.D == 64 || a.D == 128) &&
         a.softcap == 0 && a.alibi_max_bias == 0 && !a.sinks && !exact_activations();
}

status launch_attention_mma(const attn_args& a, const exec_ctx& c) {
  // blocks: the 64-row tiles of every sequence (a bound: ceil(T / 64) + S; the extra ones exit)
  const long long tiles = (a.T + br - 1) / br + (a.seqs ? a.S : 0);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(a.H));
  auto s = stream_of(c);
  const bool bf = a.e == e_bf16;
  if (a.D == 64)
    bf ? launch<64, true>(a, grid, s) : launch<64, false>(a, grid, s);
  else
    bf ? launch<128, true>(a, grid, s) : launch<128, false>(a, grid, s);
  return check_launch("attention (tensor cores)", c);
}

} // namespace troupe::kernels::cuda
