// moe.cu: the mixture-of-experts op (op.hpp `moe`) in two kernels, reading only the chosen
// experts' rows: (1) for every (token, choice) pair and FFN row f, one warp computes gate and
// up (with their biases) and the activation (SwiGLU, or GPT-OSS's clamped form) into hidden
// [T k, F]; (2) for every token and model dim c, one warp sums over the token's choices
// weight * (down_e[c] . hidden + bias). With expert parallelism a choice of another shard's
// expert adds nothing here; an id outside the model's experts sets an error flag that the
// launcher reads back (one synchronisation per MoE layer) and reports as invalid_argument.
// Temporaries (hidden, the flag) come from the executor's scratch.
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

struct moe_args {
  const float* x;       // [T, C]
  const int32_t* ids;   // [T, k]
  const float* weights; // [T, k]
  const uint8_t *wg, *wu, *wd;
  long long rb_gu, rb_d; // row bytes of gate / up rows (C values) and down rows (F values)
  const float *bg, *bu, *bd;
  float* hidden; // [T k, F]
  float* y;      // [T, C]
  int* bad;      // set when an id is outside [0, n_expert)
  long long T, k, C, F, E;
  int expert0, n_expert;
  float alpha, limit; // clamped SwiGLU when limit > 0
};

template <int Kind>
__global__ void moe_hidden_kernel(moe_args a) {
  const long long o = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (o >= a.T * a.k * a.F) return;
  const long long f = o % a.F, pair = o / a.F, t = pair / a.k;
  const int id = a.ids[pair];
  if (id < 0 || id >= a.n_expert) {
    if (lane == 0) *a.bad = 1;
    return;
  }
  const long long e = id - a.expert0;
  if (e < 0 || e >= a.E) return; // another shard's expert
  const uint8_t* g = a.wg + (e * a.F + f) * a.rb_gu;
  const uint8_t* u = a.wu + (e * a.F + f) * a.rb_gu;
  const float* xr = a.x + t * a.C;
  float sg = 0.0f, su = 0.0f;
  for (long long c = lane; c < a.C; c += 32) {
    sg += weight_value<Kind>(g, c) * xr[c];
    su += weight_value<Kind>(u, c) * xr[c];
  }
  sg = warp_sum(sg);
  su = warp_sum(su);
  if (lane != 0) return;
  if (a.bg) sg += a.bg[e * a.F + f];
  if (a.bu) su += a.bu[e * a.F + f];
  float h;
  if (a.limit > 0) {
    const float gv = fminf(sg, a.limit), uv = fminf(fmaxf(su, -a.limit), a.limit);
    h = (uv + 1.0f) * gv / (1.0f + expf(-a.alpha * gv));
  } else {
    h = sg / (1.0f + expf(-sg)) * su;
  }
  a.hidden[pair * a.F + f] = h;
}

template <int Kind>
__global__ void moe_out_kernel(moe_args a) {
  const long long o = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (o >= a.T * a.C) return;
  const long long c = o % a.C, t = o / a.C;
  float total = 0.0f;
  for (long long j = 0; j < a.k; ++j) {
    const long long pair = t * a.k + j;
    const long long e = static_cast<long long>(a.ids[pair]) - a.expert0;
    if (a.ids[pair] < 0 || a.ids[pair] >= a.n_expert || e < 0 || e >= a.E) continue;
    const uint8_t* d = a.wd + (e * a.C + c) * a.rb_d;
    const float* h = a.hidden + pair * a.F;
    float s = 0.0f;
    for (long long f = lane; f < a.F; f += 32) s += weight_value<Kind>(d, f) * h[f];
    s = warp_sum(s);
    total += a.weights[pair] * (s + (a.bd ? a.bd[e * a.C + c] : 0.0f));
  }
  if (lane == 0) a.y[o] = total;
}

template <int Kind>
void run(const moe_args& m, cudaStream_t s) {
  const long long wh = m.T * m.k * m.F, wo = m.T * m.C;
  moe_hidden_kernel<Kind><<<static_cast<unsigned>((wh * 32 + 255) / 256), 256, 0, s>>>(m);
  moe_out_kernel<Kind><<<static_cast<unsigned>((wo * 32 + 255) / 256), 256, 0, s>>>(m);
}

} // namespace

status launch_moe(const op_args& a, const exec_ctx& c) {
  moe_args m{};
  m.x = a.src[0].as<float>();
  m.ids = a.src[1].as<int32_t>();
  m.weights = a.src[2].as<float>();
  m.wg = static_cast<const uint8_t*>(a.src[3].data);
  m.wu = static_cast<const uint8_t*>(a.src[4].data);
  m.wd = static_cast<const uint8_t*>(a.src[5].data);
  m.C = a.src[0].cols();
  m.F = a.src[5].cols();
  m.T = a.src[0].rows();
  m.k = a.src[1].cols();
  m.E = a.src[3].rows() / m.F;
  m.rb_gu = row_bytes(a.src[3].type, m.C);
  m.rb_d = row_bytes(a.src[5].type, m.F);
  m.bg = a.src[6].data ? a.src[6].as<float>() : nullptr;
  m.bu = a.src[7].data ? a.src[7].as<float>() : nullptr;
  m.bd = a.src[8].data ? a.src[8].as<float>() : nullptr;
  m.expert0 = a.p.expert0;
  m.n_expert = a.p.n_expert > 0 ? a.p.n_expert : static_cast<int>(m.E);
  m.alpha = a.p.swiglu_alpha;
  m.limit = a.p.swiglu_limit;
  m.y = a.dst.as<float>();
  if (m.T == 0) return {};
  // hidden [T k, F] and the flag: the executor's scratch, else a temporary (op harness)
  const size_t hb = static_cast<size_t>(m.T * m.k * m.F) * sizeof(float) + 64;
  void* mem = c.scratch ? c.scratch->alloc(hb) : nullptr;
  bool owned = false;
  if (!mem) {
    if (auto e = cudaMalloc(&mem, hb); e != cudaSuccess)
      return make_error(errc::out_of_memory, "moe temporaries: {}", cudaGetErrorString(e));
    owned = true;
  }
  m.hidden = static_cast<float*>(mem);
  m.bad = reinterpret_cast<int*>(static_cast<char*>(mem) + hb - 64);
  auto s = stream_of(c);
  cudaMemsetAsync(m.bad, 0, sizeof(int), s);
  with_weight_kind(a.src[3].type, [&](auto kind) { run<decltype(kind)::value>(m, s); });
  int bad = 0;
  cudaMemcpyAsync(&bad, m.bad, sizeof(int), cudaMemcpyDeviceToHost, s);
  const cudaError_t e = cudaStreamSynchronize(s);
  if (owned) cudaFree(mem);
  if (e != cudaSuccess)
    return make_error(errc::internal, "cuda kernel moe failed: {}", cudaGetErrorString(e));
  if (bad)
    return make_error(errc::invalid_argument, "moe: an expert id outside [0, {})", m.n_expert);
  return check_launch("moe", c);
}

} // namespace troupe::kernels::cuda
