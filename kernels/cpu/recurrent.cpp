// recurrent.cpp (cpu): linear attention's ops with a state per sequence (op.hpp): causal_conv
// and gated_delta. The convolution runs over channels in parallel; the delta rule over (sequence,
// value head) pairs, each head's [Dk, Dv] state updated in place, token by token, in two passes
// per token (decay and S^T k in one, the rank-one update and S^T q in the other), the inner
// loops over Dv vectorised (-fopenmp-simd). Prefill walks its tokens in order too; a chunked
// form (WY blocks, as flash-linear-attention computes it) would trade that for matmuls.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/convert.hpp"
#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {

namespace {

struct seq_row {
  int64_t begin, count, pos0, slot;
};

seq_row seq_at(const tensor_view& table, int64_t i) {
  const int32_t* r = table.row<int32_t>(i);
  return {r[0], r[1], r[2], r[3]};
}

inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

void causal_conv(const op_args& a, const exec_ctx& ctx) {
  const auto& x = a.src[0];
  const int64_t Hc = x.dims[1], Dc = x.dims[2], C = Hc * Dc, K = a.src[1].dims[1];
  thread_local std::vector<float> w32;
  const float* w = a.src[1].as<float>();
  if (a.src[1].type != dtype::f32) { // bf16 / f16 taps as published: a few thousand values
    w32.resize(static_cast<size_t>(C * K));
    to_f32(a.src[1].type, a.src[1].data, w32.data(), C * K);
    w = w32.data();
  }
  const float* xs = x.as<float>();
  float* state = a.src[2].as<float>();
  float* out = a.dst.as<float>();
  const tensor_view& table = a.src[3];
  // a decode step's few taps per channel are cheap: whole blocks of channels per task
  const int64_t rows = table.rows() > 0 ? std::max<int64_t>(x.dims[0], 1) : 1;
  const int64_t grain = std::max<int64_t>(256, 16384 / rows);
  parallel(ctx, C, grain, [&](int64_t c0, int64_t c1) {
    thread_local std::vector<float> hist;
    for (int64_t si = 0; si < table.rows(); ++si) {
      const seq_row s = seq_at(table, si);
      float* st = state + s.slot * C * (K - 1);
      hist.resize(static_cast<size_t>(K - 1 + s.count));
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t h = c / Dc, d = c % Dc;
        float* sc = st + h * (K - 1) * Dc + d; // tap j at sc[j * Dc]
        for (int64_t j = 0; j < K - 1; ++j)
          hist[static_cast<size_t>(j)] = s.pos0 > 0 ? sc[j * Dc] : 0.0f;
        for (int64_t t = 0; t < s.count; ++t)
          hist[static_cast<size_t>(K - 1 + t)] = xs[(s.begin + t) * C + c];
        const float* wc = w + c * K;
        for (int64_t t = 0; t < s.count; ++t) {
          float acc = 0;
          for (int64_t j = 0; j < K; ++j) acc += wc[j] * hist[static_cast<size_t>(t + j)];
          out[(s.begin + t) * C + c] = silu(acc);
        }
        for (int64_t j = 0; j < K - 1; ++j) sc[j * Dc] = hist[static_cast<size_t>(s.count + j)];
      }
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
  parallel(ctx, S * Hv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> kn(static_cast<size_t>(Dk)), qn(static_cast<size_t>(Dk)),
        mem(static_cast<size_t>(Dv));
    for (int64_t i = i0; i < i1; ++i) {
      const seq_row s = seq_at(table, i / Hv);
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
        const float x = av[t * Hv + h] + dt_bias[h];
        const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
        const float decay = std::exp(-A * softplus);
        const float beta = 1.0f / (1.0f + std::exp(-bv[t * Hv + h]));
        float* m = mem.data();
        for (int64_t e = 0; e < Dv; ++e) m[e] = 0.0f;
        for (int64_t d = 0; d < Dk; ++d) { // decay, and S^T k
          float* row = st + d * Dv;
          const float kd = kn[d];
#pragma omp simd
          for (int64_t e = 0; e < Dv; ++e) {
            row[e] *= decay;
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

} // namespace

void register_recurrent(registry& r) {
  r.add(op::causal_conv, backend::cpu, "any", contiguous_args, causal_conv);
  r.add(op::gated_delta, backend::cpu, "f32", contiguous_args, gated_delta);
}

} // namespace troupe::kernels::cpu
