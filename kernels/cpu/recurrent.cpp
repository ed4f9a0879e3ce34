// recurrent.cpp (cpu): linear attention's ops with a state per sequence (op.hpp): causal_conv,
// gated_delta and ssm_scan (Mamba-2: over (sequence, head) pairs, each head's [P, N] state
// decayed and updated in place token by token, the loops over N vectorised; Mamba-1: blocks of
// 64 channel-heads, an exp per state value; lru_scan, blocks of 64 channels; mlstm_scan, xLSTM's
// matrix memory per (sequence, head)). The convolution and
// the scans' work are built for AVX-512, AVX2 and the baseline (TROUPE_CPU_DISPATCH). The
// convolution runs over (sequence, head) pairs in parallel, a head's channels in the vector lanes
// (the SiLU's exp vectorised too, where the op has one); the delta rule over (sequence, value head)
// pairs, each head's [Dk, Dv] state updated in place, token by token, in two passes per token
// (decay and S^T k in one, the rank-one update and S^T q in the other), the inner loops over Dv
// vectorised
// (-fopenmp-simd). Prefill walks its tokens in order too; a chunked form (WY blocks, as
// flash-linear-attention computes it) would trade that for matmuls.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/convert.hpp"
#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {

namespace {

// exp(x) for the SiLU, written so that `omp simd` loops vectorise it: 2^n p(r) with |r| <=
// ln2 / 2 (Cephes' polynomial, within 2 ulp of expf over the range a SiLU reaches)
inline float exp_simd(float x) {
  x = std::min(std::max(x, -87.3f), 88.3f);
  // round to nearest by the 1.5 x 2^23 trick (std::nearbyint is a libm call on the baseline
  // target, which keeps the loops around it scalar)
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

// softplus(v) = log(1 + e^v), vectorisable: max(v, 0) + log1p(e^-|v|), the log1p of y in (0, 1]
// as 2 atanh(y / (2 + y)) by its series (s <= 1/3: seven terms, within 1e-7 relative)
inline float softplus_simd(float v) {
  const float y = exp_simd(-std::fabs(v));
  const float s = y / (2.0f + y), s2 = s * s;
  float p = 1.0f / 13.0f;
  p = p * s2 + 1.0f / 11.0f;
  p = p * s2 + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  return std::max(v, 0.0f) + 2.0f * s * p;
}

// One head's channels (Dc of them, contiguous in x's rows and in the state's tap rows) of one
// sequence: the taps transposed (wt[j * C + c]) so every loop runs over d.
TROUPE_CPU_DISPATCH
void conv_head(const float* wt, int64_t C, int64_t K, int64_t c0, int64_t Dc, const float* xs,
               const state_row& s, float* st, float* out, const float* zeros, const float* bias,
               bool silu) {
  // the rows the sequence's window reads, oldest first: K - 1 state rows, then its new inputs
  auto row = [&](int64_t i) -> const float* {
    if (i < K - 1) return s.pos0 > 0 ? st + i * Dc : zeros;
    return xs + (s.begin + i - (K - 1)) * C + c0;
  };
  for (int64_t t = 0; t < s.count; ++t) {
    float* o = out + (s.begin + t) * C + c0;
    const float* w0 = wt + c0;
    const float* r0 = row(t);
    if (bias) {
      const float* b = bias + c0;
#pragma omp simd
      for (int64_t d = 0; d < Dc; ++d) o[d] = b[d] + w0[d] * r0[d];
    } else {
#pragma omp simd
      for (int64_t d = 0; d < Dc; ++d) o[d] = w0[d] * r0[d];
    }
    for (int64_t j = 1; j < K; ++j) {
      const float* wj = wt + j * C + c0;
      const float* rj = row(t + j);
#pragma omp simd
      for (int64_t d = 0; d < Dc; ++d) o[d] += wj[d] * rj[d];
    }
    if (!silu) continue;
#pragma omp simd
    for (int64_t d = 0; d < Dc; ++d) o[d] = o[d] / (1.0f + exp_simd(-o[d]));
  }
  // the state keeps the last K - 1 rows: read from rows at or after the one written
  for (int64_t j = 0; j < K - 1; ++j) {
    const float* src = row(s.count + j);
    if (src == st + j * Dc) continue;
    std::memcpy(st + j * Dc, src, static_cast<size_t>(Dc) * sizeof(float));
  }
}

// Channels of one value each (Dc = 1: Mamba-1's, a state of K - 1 inputs per channel): a block
// of channels [c0, c1) of one sequence, token by token with the channels in the vector lanes;
// the block's state gathered into rows first (win[j][c]) and scattered back after.
TROUPE_CPU_DISPATCH
void conv_channels(const float* wt, int64_t C, int64_t K, const float* xs, const state_row& s,
                   float* state, float* out, const float* bias, bool silu, int64_t c0, int64_t c1) {
  constexpr int64_t B = 256;
  const int64_t nb = c1 - c0;
  float win[64][B]; // the K - 1 latest inputs before the token, oldest first (K <= 65)
  for (int64_t j = 0; j < K - 1; ++j)
    for (int64_t c = 0; c < nb; ++c) win[j][c] = s.pos0 > 0 ? state[(c0 + c) * (K - 1) + j] : 0.0f;
  for (int64_t t = 0; t < s.count; ++t) {
    const float* xt = xs + (s.begin + t) * C + c0;
    float* o = out + (s.begin + t) * C + c0;
#pragma omp simd
    for (int64_t c = 0; c < nb; ++c)
      o[c] = (bias ? bias[c0 + c] : 0.0f) + wt[(K - 1) * C + c0 + c] * xt[c];
    for (int64_t j = 0; j < K - 1; ++j) {
      const float* wj = wt + j * C + c0;
      const float* r = win[j];
#pragma omp simd
      for (int64_t c = 0; c < nb; ++c) o[c] += wj[c] * r[c];
    }
    if (silu) {
#pragma omp simd
      for (int64_t c = 0; c < nb; ++c) o[c] = o[c] / (1.0f + exp_simd(-o[c]));
    }
    // shift the window by one input
    for (int64_t j = 0; j + 1 < K - 1; ++j) std::memcpy(win[j], win[j + 1], sizeof(float) * nb);
    if (K > 1) std::memcpy(win[K - 2], xt, sizeof(float) * nb);
  }
  for (int64_t j = 0; j < K - 1; ++j)
    for (int64_t c = 0; c < nb; ++c) state[(c0 + c) * (K - 1) + j] = win[j][c];
}

void causal_conv(const op_args& a, const exec_ctx& ctx) {
  const auto& x = a.src[0];
  const int64_t Hc = x.dims[1], Dc = x.dims[2], C = Hc * Dc, K = a.src[1].dims[1];
  if (Dc == 1 && K <= 65) { // one value per channel: blocks of channels in the vector lanes
    thread_local std::vector<float> w32, wt1;
    const float* w = a.src[1].as<float>();
    if (a.src[1].type != dtype::f32) {
      w32.resize(static_cast<size_t>(C * K));
      to_f32(a.src[1].type, a.src[1].data, w32.data(), C * K);
      w = w32.data();
    }
    wt1.resize(static_cast<size_t>(C * K)); // the taps transposed [K, C]
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < K; ++j) wt1[static_cast<size_t>(j * C + c)] = w[c * K + j];
    w = wt1.data();
    const tensor_view& table = a.src[3];
    const int64_t S = table.rows(), blocks = (C + 255) / 256;
    const float* bias = a.src[4].data ? a.src[4].as<float>() : nullptr;
    const exec_ctx& run_on = x.dims[0] * C * K >= (int64_t{1} << 16) ? ctx : exec_ctx{};
    parallel(run_on, S * blocks, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const state_row s = state_row_at(table, i / blocks);
        const int64_t c0 = i % blocks * 256, c1 = std::min(C, c0 + 256);
        conv_channels(w, C, K, x.as<float>(), s, a.src[2].as<float>() + s.slot * C * (K - 1),
                      a.dst.as<float>(), bias, !a.p.conv_plain, c0, c1);
      }
    });
    return;
  }
  // the taps transposed [K, C] (and widened from bf16 / f16 as published): a few thousand
  thread_local std::vector<float> wt, w32, zeros;
  const float* w = a.src[1].as<float>();
  if (a.src[1].type != dtype::f32) {
    w32.resize(static_cast<size_t>(C * K));
    to_f32(a.src[1].type, a.src[1].data, w32.data(), C * K);
    w = w32.data();
  }
  wt.resize(static_cast<size_t>(C * K));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) wt[static_cast<size_t>(j * C + c)] = w[c * K + j];
  zeros.assign(static_cast<size_t>(Dc), 0.0f);
  const float* xs = x.as<float>();
  float* state = a.src[2].as<float>();
  float* out = a.dst.as<float>();
  const tensor_view& table = a.src[3];
  const int64_t S = table.rows();
  const float* wtp = wt.data();
  const float* zp = zeros.data();
  const float* bias = a.src[4].data ? a.src[4].as<float>() : nullptr;
  // a few decode rows are less work than waking the pool: inline below ~64K channel-steps
  const exec_ctx& run_on = x.dims[0] * C * K >= (int64_t{1} << 16) ? ctx : exec_ctx{};
  parallel(run_on, S * Hc, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const state_row s = state_row_at(table, i / Hc);
      const int64_t h = i % Hc;
      float* st = state + (s.slot * Hc + h) * (K - 1) * Dc; // [K - 1, Dc]
      conv_head(wtp, C, K, h * Dc, Dc, xs, s, st, out, zp, bias, !a.p.conv_plain);
    }
  });
}

void gated_delta(const op_args& a, const exec_ctx& ctx) {
  const auto &q = a.src[0], &k = a.src[1], &v = a.src[2];
  const int64_t Hk = q.dims[1], Dk = q.dims[2], Hv = v.dims[1], Dv = v.dims[2];
  const int64_t rep = std::max<int64_t>(Hv / Hk, 1);
  const tensor_view& table = a.src[8];
  const float *av = a.src[3].as<float>(), *bv = a.src[4].as<float>();
  const float *A_log = a.src[5].as<float>(), *dt_bias = a.src[6].as<float>();
  float* state = a.src[7].as<float>();
  const int64_t S = table.rows();
  const bool per_channel = a.src[3].numel() != q.dims[0] * Hv; // (KDA: a per key channel)
  parallel(ctx, S * Hv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> kn(static_cast<size_t>(Dk)), qn(static_cast<size_t>(Dk)),
        mem(static_cast<size_t>(Dv)), decay(static_cast<size_t>(Dk));
    for (int64_t i = i0; i < i1; ++i) {
      const state_row s = state_row_at(table, i / Hv);
      const int64_t h = i % Hv, kh = a.p.delta_tiled ? (a.p.head0 + h) % Hk : h / rep;
      float* st = state + (s.slot * Hv + h) * Dk * Dv; // [Dk, Dv]
      if (s.pos0 == 0)
        for (int64_t j = 0; j < Dk * Dv; ++j) st[j] = 0.0f;
      const float A = a.p.delta_neg_a ? -A_log[h] : std::exp(A_log[h]); // exp(A_log)
      for (int64_t n = 0; n < s.count; ++n) {
        const int64_t t = s.begin + n;
        const float* qt = q.as<float>() + (t * Hk + kh) * Dk;
        const float* kt = k.as<float>() + (t * Hk + kh) * Dk;
        const float* vt = v.as<float>() + (t * Hv + h) * Dv;
        float qq = 0, kk = 0;
        for (int64_t d = 0; d < Dk; ++d) qq += qt[d] * qt[d], kk += kt[d] * kt[d];
        const float qs = 1.0f / std::sqrt(qq + 1e-6f) / std::sqrt(static_cast<float>(Dk));
        const float ks = 1.0f / std::sqrt(kk + 1e-6f);
        for (int64_t d = 0; d < Dk; ++d) qn[d] = qt[d] * qs, kn[d] = kt[d] * ks;
        for (int64_t d = 0; d < (per_channel ? Dk : 1); ++d) {
          const float x = per_channel ? av[(t * Hv + h) * Dk + d] + dt_bias[h * Dk + d]
                                      : av[t * Hv + h] + dt_bias[h];
          const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
          decay[static_cast<size_t>(d)] =
              a.p.delta_bound < 0 // (GLM-5.3's safe gate)
                  ? std::exp(a.p.delta_bound / (1.0f + std::exp(-A * x)))
                  : std::exp(-A * softplus);
        }
        if (!per_channel) std::fill(decay.begin() + 1, decay.end(), decay[0]);
        const float beta = (a.p.delta_beta_scale != 0 ? a.p.delta_beta_scale : 1.0f) /
                           (1.0f + std::exp(-bv[t * Hv + h]));
        float* m = mem.data();
        for (int64_t e = 0; e < Dv; ++e) m[e] = 0.0f;
        for (int64_t d = 0; d < Dk; ++d) { // decay, and S^T k
          float* row = st + d * Dv;
          const float kd = kn[d], dd = decay[static_cast<size_t>(d)];
#pragma omp simd
          for (int64_t e = 0; e < Dv; ++e) {
            row[e] *= dd;
            m[e] += row[e] * kd;
          }
        }
        for (int64_t e = 0; e < Dv; ++e) m[e] = beta * (vt[e] - m[e]); // delta
        float* o = a.dst.as<float>() + (t * Hv + h) * Dv;
        for (int64_t e = 0; e < Dv; ++e) o[e] = 0.0f;
        for (int64_t d = 0; d < Dk; ++d) { // S += k delta^T, and S^T q
          float* row = st + d * Dv;
          const float kd = kn[d], qd = qn[d];
#pragma omp simd
          for (int64_t e = 0; e < Dv; ++e) {
            row[e] += kd * m[e];
            o[e] += row[e] * qd;
          }
        }
      }
    }
  });
}

// Mamba-1's work items [i0, i1): blocks of 64 channel-heads of one sequence (ssm_scan)
TROUPE_CPU_DISPATCH
void scan_m1_items(const op_args& a, int64_t i0, int64_t i1, int64_t blocks) {
  constexpr int64_t Hb = 64; // heads a work item takes
  const auto &x = a.src[0], &B = a.src[3], &Cm = a.src[4];
  const int64_t H = x.dims[1], G = B.dims[1], N = B.dims[2];
  const tensor_view& table = a.src[8];
  const float *dtv = a.src[1].as<float>(), *A_in = a.src[2].as<float>();
  const float *Dv = a.src[5].as<float>(), *dt_bias = a.src[6].as<float>();
  float* state = a.src[7].as<float>();
  float dtb[Hb], Ab[Hb * 64], dA[64];
  const float dt_min0 = a.p.scan_dt_min; // (0: no clamp, a softplus being positive)
  for (int64_t i = i0; i < i1; ++i) {
    const state_row s = state_row_at(table, i / blocks);
    const int64_t h0 = i % blocks * Hb, nh = std::min(Hb, H - h0);
    float* st = state + (s.slot * H + h0) * N;                        // [nh, N]
    const float dt_min = s.count == 1 && s.pos0 > 0 ? 0.0f : dt_min0; // (a decode step: none)
    if (s.pos0 == 0) std::memset(st, 0, sizeof(float) * static_cast<size_t>(nh * N));
    const float* ah = A_in + h0 * N;
    if (a.p.delta_neg_a) {
      std::memcpy(Ab, ah, sizeof(float) * static_cast<size_t>(nh * N));
    } else {
#pragma omp simd
      for (int64_t e = 0; e < nh * N; ++e) Ab[e] = -exp_simd(ah[e]);
    }
    for (int64_t n = 0; n < s.count; ++n) {
      const int64_t t = s.begin + n;
      const float* vt = dtv + t * H + h0;
#pragma omp simd
      for (int64_t k = 0; k < nh; ++k) {
        const float v = vt[k] + dt_bias[h0 + k];
        dtb[k] = std::max(v > 20.0f ? v : softplus_simd(v), dt_min);
      }
      const float* xt = x.as<float>() + t * H + h0;
      const float* bt = B.as<float>() + t * G * N; // (one group)
      const float* ct = Cm.as<float>() + t * G * N;
      float* o = a.dst.as<float>() + t * H + h0;
      for (int64_t k = 0; k < nh; ++k) {
        float* row = st + k * N;
        const float* av = Ab + k * N;
        const float dt = dtb[k], xd = dt * xt[k];
#pragma omp simd
        for (int64_t e = 0; e < N; ++e) dA[e] = exp_simd(dt * av[e]);
        float y = 0;
#pragma omp simd reduction(+ : y)
        for (int64_t e = 0; e < N; ++e) {
          row[e] = dA[e] * row[e] + xd * bt[e];
          y += row[e] * ct[e];
        }
        o[k] = y + Dv[h0 + k] * xt[k];
      }
    }
  }
}

// Mamba-2's work items [i0, i1): (sequence, head) pairs (ssm_scan)
TROUPE_CPU_DISPATCH
void scan_items(const op_args& a, int64_t i0, int64_t i1) {
  const auto &x = a.src[0], &B = a.src[3], &Cm = a.src[4];
  const int64_t H = x.dims[1], P = x.dims[2], G = B.dims[1], N = B.dims[2], rep = H / G;
  const tensor_view& table = a.src[8];
  const float *dtv = a.src[1].as<float>(), *A_in = a.src[2].as<float>();
  const float *Dv = a.src[5].as<float>(), *dt_bias = a.src[6].as<float>();
  float* state = a.src[7].as<float>();
  const bool per_state = a.src[2].numel() == H * N; // an A per state value (Mamba-1)
  const bool unit = a.p.scan_unit_dt;               // d = 1, no D term (MiniMax's lightning)
  std::vector<float> Av(per_state ? static_cast<size_t>(N) : 0), dA(Av.size());
  for (int64_t i = i0; i < i1; ++i) {
    const state_row s = state_row_at(table, i / H);
    const int64_t h = i % H, grp = h / rep;
    float* st = state + (s.slot * H + h) * P * N; // [P, N]
    if (s.pos0 == 0)
      for (int64_t j = 0; j < P * N; ++j) st[j] = 0.0f;
    const float A = per_state ? 0.0f : a.p.delta_neg_a ? A_in[h] : -std::exp(A_in[h]);
    // (the step clamped below, except a decode step's: transformers' recurrent step)
    const float dt_min = s.count == 1 && s.pos0 > 0 ? 0.0f : a.p.scan_dt_min;
    if (per_state) {
      const float* ah = A_in + h * N;
      float* av = Av.data();
      if (a.p.delta_neg_a)
        std::memcpy(av, ah, static_cast<size_t>(N) * sizeof(float));
      else
#pragma omp simd
        for (int64_t e = 0; e < N; ++e) av[e] = -exp_simd(ah[e]);
    }
    for (int64_t n = 0; n < s.count; ++n) {
      const int64_t t = s.begin + n;
      const float v = unit ? 0.0f : dtv[t * H + h] + dt_bias[h];
      const float dt = unit ? 1.0f : std::max(v > 20.0f ? v : std::log1p(std::exp(v)), dt_min);
      const float decay = per_state ? 0.0f : std::exp(dt * A);
      if (per_state) {
        const float* av = Av.data();
        float* da = dA.data();
#pragma omp simd
        for (int64_t e = 0; e < N; ++e) da[e] = exp_simd(dt * av[e]);
      }
      const float* xt = x.as<float>() + (t * H + h) * P;
      const float* bt = B.as<float>() + (t * G + grp) * N;
      const float* ct = Cm.as<float>() + (t * G + grp) * N;
      float* o = a.dst.as<float>() + (t * H + h) * P;
      for (int64_t p = 0; p < P; ++p) {
        float* row = st + p * N;
        const float xd = dt * xt[p];
        float y = 0;
        if (per_state) {
          const float* da = dA.data();
#pragma omp simd reduction(+ : y)
          for (int64_t e = 0; e < N; ++e) {
            row[e] = da[e] * row[e] + xd * bt[e];
            y += row[e] * ct[e];
          }
        } else {
#pragma omp simd reduction(+ : y)
          for (int64_t e = 0; e < N; ++e) {
            row[e] = decay * row[e] + xd * bt[e];
            y += row[e] * ct[e];
          }
        }
        o[p] = unit ? y : y + Dv[h] * xt[p];
      }
    }
  }
}

// a diagonal linear recurrence per channel (lru_scan): work items of 64 channels of one
// sequence, the channels in the vector lanes, token by token
void lru_scan(const op_args& a, const exec_ctx& ctx) {
  constexpr int64_t Wb = 64;
  const int64_t W = a.src[0].cols(), S = a.src[3].rows(), blocks = (W + Wb - 1) / Wb;
  const bool norm = a.p.lru_norm;
  parallel(ctx, S * blocks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const state_row s = state_row_at(a.src[3], it / blocks);
      const int64_t c0 = (it % blocks) * Wb, n = std::min(Wb, W - c0);
      float h[Wb];
      float* st = a.src[2].as<float>() + s.slot * W + c0;
      for (int64_t c = 0; c < n; ++c) h[c] = s.pos0 > 0 ? st[c] : 0.0f;
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t t = s.begin + i;
        const float* at = a.src[0].as<float>() + t * W + c0;
        const float* u = a.src[1].as<float>() + t * W + c0;
        float* out = a.dst.as<float>() + t * W + c0;
        const bool scaled = norm && s.pos0 + i > 0;
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) {
          const float m = scaled ? std::sqrt(1.0f - at[c] * at[c]) : 1.0f;
          h[c] = at[c] * h[c] + m * u[c];
          out[c] = h[c];
        }
      }
      std::copy_n(h, n, st);
    }
  });
}

// one token of the mLSTM cell over a head's state rows [Dk, W]: row d = fa row + ia k_d [v | 1],
// and o += q'_d row (o zeroed by the caller)
TROUPE_CPU_DISPATCH
void mlstm_rows(float* st, int64_t Dk, int64_t W, const float* kt, const float* qt, float ia,
                float fa, float qscale, const float* vp, float* o) {
  for (int64_t d = 0; d < Dk; ++d) {
    float* row = st + d * W;
    const float kd = ia * kt[d], qd = qscale * qt[d];
#pragma omp simd
    for (int64_t e = 0; e < W; ++e) {
      row[e] = fa * row[e] + kd * vp[e];
      o[e] += qd * row[e];
    }
  }
}

// xLSTM's mLSTM (mlstm_scan): over (sequence, head) pairs, the head's [Dk + 1, Dv + 1] state
// updated in place token by token in one pass over its rows: row d's memory and normaliser
// (column Dv, the update's value 1) decayed and raised by k_d times [v | 1], and q'_d times the
// new row summed into [q' C | q' . n], the loop over Dv + 1 vectorised
void mlstm_scan(const op_args& a, const exec_ctx& ctx) {
  const auto &q = a.src[0], &k = a.src[1], &v = a.src[2];
  const int64_t H = q.dims[1], Dk = q.dims[2], Dv = v.dims[2], W = Dv + 1;
  const tensor_view& table = a.src[6];
  const float *ig = a.src[3].as<float>(), *fg = a.src[4].as<float>();
  float* state = a.src[5].as<float>();
  const float qscale = 1.0f / std::sqrt(static_cast<float>(Dk)), eps = a.p.eps;
  parallel(ctx, table.rows() * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> ve(static_cast<size_t>(W)), acc(static_cast<size_t>(W));
    for (int64_t i = i0; i < i1; ++i) {
      const state_row s = state_row_at(table, i / H);
      const int64_t h = i % H;
      float* st = state + (s.slot * H + h) * (Dk + 1) * W; // [Dk + 1, Dv + 1]
      if (s.pos0 == 0) std::fill_n(st, (Dk + 1) * W, 0.0f);
      float& m = st[Dk * W];
      ve[static_cast<size_t>(Dv)] = 1.0f;
      for (int64_t n = 0; n < s.count; ++n) {
        const int64_t t = s.begin + n;
        const float* qt = q.as<float>() + (t * H + h) * Dk;
        const float* kt = k.as<float>() + (t * H + h) * Dk;
        std::copy_n(v.as<float>() + (t * H + h) * Dv, Dv, ve.data());
        const float f = fg[t * H + h], in = ig[t * H + h];
        const float lf = std::min(f, 0.0f) - std::log1p(std::exp(-std::fabs(f)));
        const float m_new = std::max(lf + m, in);
        const float fa = std::exp(lf + m - m_new), ia = std::exp(in - m_new);
        m = m_new;
        float* o = acc.data();
        std::fill(acc.begin(), acc.end(), 0.0f);
        mlstm_rows(st, Dk, W, kt, qt, ia, fa, qscale, ve.data(), o);
        const float den = std::max(std::fabs(o[Dv]), std::exp(-m_new)) + eps;
        float* out = a.dst.as<float>() + (t * H + h) * Dv;
        for (int64_t e = 0; e < Dv; ++e) out[e] = o[e] / den;
      }
    }
  });
}

void ssm_scan(const op_args& a, const exec_ctx& ctx) {
  const int64_t H = a.src[0].dims[1], P = a.src[0].dims[2], G = a.src[3].dims[1];
  const int64_t N = a.src[3].dims[2], S = a.src[8].rows();
  const bool per_state = a.src[2].numel() == H * N; // an A per state value (Mamba-1)
  if (per_state && !a.p.scan_unit_dt && P == 1 && G == 1 &&
      N <= 64) {               // Mamba-1: blocks of channel-heads
    constexpr int64_t Hb = 64; // heads a work item takes
    const int64_t blocks = (H + Hb - 1) / Hb;
    parallel(ctx, S * blocks, 1, [&](int64_t i0, int64_t i1) { scan_m1_items(a, i0, i1, blocks); });
    return;
  }
  parallel(ctx, S * H, 1, [&](int64_t i0, int64_t i1) { scan_items(a, i0, i1); });
}

} // namespace

void register_recurrent(registry& r) {
  r.add(op::ssm_scan, backend::cpu, "f32", contiguous_args, ssm_scan);
  r.add(op::lru_scan, backend::cpu, "f32", contiguous_args, lru_scan);
  r.add(op::mlstm_scan, backend::cpu, "f32", contiguous_args, mlstm_scan);
  r.add(op::causal_conv, backend::cpu, "any", contiguous_args, causal_conv);
  r.add(op::gated_delta, backend::cpu, "f32", contiguous_args, gated_delta);
}

} // namespace troupe::kernels::cpu
