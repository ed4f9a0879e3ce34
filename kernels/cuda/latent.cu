// latent.cu: DeepSeek's latent-attention ops and routing (op.hpp): concat along the last dim,
// head_matmul in both orientations (W_h [N, K]: one warp per output, lanes over K; W_h [K, N]:
// one thread per output, consecutive threads on consecutive n so the rows are read coalesced),
// and moe_router (softmax or sigmoid scores, the correction bias for the choice, group-limited
// top-k, renormalisation and scale), one thread per token row with its arrays in shared
// memory: a router has a few hundred experts at most, and the choice is sequential anyway.
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

__global__ void concat_kernel(const float* x, const float* y, float* out, long long R, long long A,
                              long long B) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < R * (A + B);
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / (A + B), c = i % (A + B);
    out[i] = c < A ? x[r * A + c] : y[r * B + (c - A)];
  }
}

template <int Kind> // W [H * N, K]
__global__ void head_rows_kernel(const float* x, const uint8_t* w, long long rb, float* y,
                                 long long T, long long H, long long Kx, long long K, long long N) {
  const long long o = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (o >= T * H * N) return;
  const long long n = o % N, h = (o / N) % H, t = o / (N * H);
  const uint8_t* row = w + (h * N + n) * rb;
  const float* xv = x + (t * H + h) * Kx;
  float s = 0.0f;
  for (long long k = lane; k < K; k += 32) s += weight_value<Kind>(row, k) * xv[k];
  s = warp_sum(s);
  if (lane == 0) y[o] = s;
}

template <int Kind> // W [H * K, N]
__global__ void head_cols_kernel(const float* x, const uint8_t* w, long long rb, float* y,
                                 long long T, long long H, long long Kx, long long K, long long N) {
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < T * H * N;
       o += (long long)gridDim.x * blockDim.x) {
    const long long n = o % N, h = (o / N) % H, t = o / (N * H);
    const float* xv = x + (t * H + h) * Kx;
    float s = 0.0f;
    for (long long k = 0; k < K; ++k) s += xv[k] * weight_value<Kind>(w + (h * K + k) * rb, n);
    y[o] = s;
  }
}

struct router_args {
  const float* logits;
  const float* bias;
  int32_t* ids;
  float* weights;
  long long T, E;
  int k, n_group, topk_group;
  bool sigmoid, norm, group_max;
  float scale, eps;
};

// Shared memory: score [E], choice [E], group score [G], group allowed [G] (as floats).
__global__ void router_kernel(router_args a) {
  extern __shared__ float sh[];
  const long long t = blockIdx.x;
  if (threadIdx.x != 0) return;
  const long long E = a.E, G = a.n_group > 1 ? a.n_group : 1, per = E / G;
  const long long keep = a.n_group > 1 ? a.topk_group : 1;
  float *score = sh, *choice = sh + E, *gscore = sh + 2 * E, *allowed = sh + 2 * E + G;
  const float* l = a.logits + t * E;
  if (a.sigmoid) {
    for (long long e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + expf(-l[e]));
  } else {
    float mx = -INFINITY, sum = 0.0f;
    for (long long e = 0; e < E; ++e) mx = fmaxf(mx, l[e]);
    for (long long e = 0; e < E; ++e) sum += score[e] = expf(l[e] - mx);
    for (long long e = 0; e < E; ++e) score[e] /= sum;
  }
  for (long long e = 0; e < E; ++e) choice[e] = score[e] + (a.bias ? a.bias[e] : 0.0f);
  for (long long g = 0; g < G; ++g) { // the sum of a group's two best (or its best)
    float b1 = -INFINITY, b2 = -INFINITY;
    for (long long e = g * per; e < (g + 1) * per; ++e) {
      if (choice[e] > b1) {
        b2 = b1;
        b1 = choice[e];
      } else if (choice[e] > b2) {
        b2 = choice[e];
      }
    }
    gscore[g] = b1 + (per > 1 && !a.group_max ? b2 : 0.0f);
    allowed[g] = G == 1 ? 1.0f : 0.0f;
  }
  for (long long i = 0; i < keep && G > 1; ++i) { // the best groups, lower index on ties
    long long best = -1;
    for (long long g = 0; g < G; ++g)
      if (allowed[g] == 0.0f && (best < 0 || gscore[g] > gscore[best])) best = g;
    allowed[best] = 1.0f;
  }
  // k experts of the allowed groups by choice score (lower index on ties); their scores
  float prev_c = 0.0f, sum = 0.0f;
  long long prev = -1;
  for (int j = 0; j < a.k; ++j) {
    long long best = -1;
    for (long long e = 0; e < E; ++e) {
      if (allowed[e / per] == 0.0f) continue;
      const bool after = prev < 0 || choice[e] < prev_c || (choice[e] == prev_c && e > prev);
      if (after && (best < 0 || choice[e] > choice[best])) best = e;
    }
    a.ids[t * a.k + j] = static_cast<int32_t>(best);
    sum += score[best];
    prev = best, prev_c = choice[best];
  }
  for (int j = 0; j < a.k; ++j) {
    float w = score[a.ids[t * a.k + j]];
    if (a.norm) w /= sum + a.eps;
    a.weights[t * a.k + j] = w * a.scale;
  }
}

template <int Kind>
void head(const op_args& a, cudaStream_t s, bool tr) {
  const auto &x = a.src[0], &w = a.src[1];
  const long long T = x.dims[0], H = x.dims[1], Kx = x.dims[2], N = a.dst.dims[2];
  const long long K = tr ? w.rows() / H : w.cols();
  const long long rb = row_bytes(w.type, w.cols());
  const auto* wp = static_cast<const uint8_t*>(w.data);
  if (tr)
    head_cols_kernel<Kind><<<grid_for(T * H * N), 256, 0, s>>>(x.as<float>(), wp, rb,
                                                               a.dst.as<float>(), T, H, Kx, K, N);
  else
    head_rows_kernel<Kind><<<static_cast<unsigned>((T * H * N * 32 + 255) / 256), 256, 0, s>>>(
        x.as<float>(), wp, rb, a.dst.as<float>(), T, H, Kx, K, N);
}

} // namespace

status launch_concat(const op_args& a, const exec_ctx& c) {
  const long long R = a.src[0].rows(), A = a.src[0].cols(), B = a.src[1].cols();
  concat_kernel<<<grid_for(R * (A + B)), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), a.src[1].as<float>(), a.dst.as<float>(), R, A, B);
  return check_launch("concat", c);
}

status launch_head_matmul(const op_args& a, const exec_ctx& c) {
  if (a.src[0].dims[0] == 0) return {};
  const bool tr = a.p.k != 0;
  with_weight_kind(a.src[1].type,
                   [&](auto kind) { head<decltype(kind)::value>(a, stream_of(c), tr); });
  return check_launch("head_matmul", c);
}

status launch_moe_router(const op_args& a, const exec_ctx& c) {
  router_args r{};
  r.logits = a.src[0].as<float>();
  r.bias = a.src[1].data ? a.src[1].as<float>() : nullptr;
  r.ids = a.dst.as<int32_t>();
  r.weights = a.dst2.as<float>();
  r.T = a.src[0].rows();
  r.E = a.src[0].cols();
  r.k = a.p.k;
  r.n_group = a.p.n_group;
  r.topk_group = a.p.topk_group;
  r.sigmoid = a.p.router_sigmoid;
  r.norm = a.p.router_norm;
  r.group_max = a.p.group_max;
  r.scale = a.p.scale;
  r.eps = a.p.router_eps;
  if (r.T == 0) return {};
  const long long G = r.n_group > 1 ? r.n_group : 1;
  const size_t shared = static_cast<size_t>(2 * r.E + 2 * G) * sizeof(float);
  router_kernel<<<static_cast<unsigned>(r.T), 32, shared, stream_of(c)>>>(r);
  return check_launch("moe_router", c);
}

} // namespace troupe::kernels::cuda
