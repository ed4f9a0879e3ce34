// recurrent.cpp (ref): the ops of linear attention with a state per sequence (op.hpp):
// causal_conv (a short depthwise convolution over each sequence's latest inputs),
// gated_delta (the gated delta rule, token by token), ssm_scan (Mamba-2's selective state
// space, token by token), lru_scan (a diagonal linear recurrence, Griffin's RG-LRU) and mlstm_scan
// (xLSTM's matrix memory with its normaliser and stabiliser). f64 math
// over the f32 state; written from the equations in op.hpp, as the specification the CPU kernels
// are tested against.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {

namespace {

void causal_conv(const op_args& a, const exec_ctx&) {
  const auto& x = a.src[0];
  const int64_t Hc = x.dims[1], Dc = x.dims[2], C = Hc * Dc, K = a.src[1].dims[1];
  std::vector<float> w(static_cast<size_t>(C * K));
  to_f32(a.src[1].type, a.src[1].data, w.data(), C * K);
  float* state = a.src[2].as<float>();
  for (int64_t si = 0; si < a.src[3].rows(); ++si) {
    const state_row s = state_row_at(a.src[3], si);
    float* st = state + s.slot * C * (K - 1); // [Hc, K - 1, Dc]
    // the sequence's inputs, oldest first: K - 1 from before this step, then its new rows
    std::vector<double> hist(static_cast<size_t>((K - 1 + s.count) * C), 0.0);
    if (s.pos0 > 0)
      for (int64_t h = 0; h < Hc; ++h)
        for (int64_t j = 0; j < K - 1; ++j)
          for (int64_t d = 0; d < Dc; ++d)
            hist[static_cast<size_t>(j * C + h * Dc + d)] = st[(h * (K - 1) + j) * Dc + d];
    for (int64_t t = 0; t < s.count; ++t)
      for (int64_t c = 0; c < C; ++c)
        hist[static_cast<size_t>((K - 1 + t) * C + c)] = x.as<float>()[(s.begin + t) * C + c];
    const float* bias = a.src[4].data ? a.src[4].as<float>() : nullptr;
    for (int64_t t = 0; t < s.count; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double acc = bias ? bias[c] : 0.0;
        for (int64_t j = 0; j < K; ++j)
          acc += static_cast<double>(w[c * K + j]) * hist[static_cast<size_t>((t + j) * C + c)];
        a.dst.as<float>()[(s.begin + t) * C + c] =
            static_cast<float>(a.p.conv_plain ? acc : acc / (1.0 + std::exp(-acc)));
      }
    for (int64_t h = 0; h < Hc; ++h)
      for (int64_t j = 0; j < K - 1; ++j)
        for (int64_t d = 0; d < Dc; ++d)
          st[(h * (K - 1) + j) * Dc + d] =
              static_cast<float>(hist[static_cast<size_t>((s.count + j) * C + h * Dc + d)]);
  }
}

void gated_delta(const op_args& a, const exec_ctx&) {
  const auto &q = a.src[0], &k = a.src[1], &v = a.src[2];
  const int64_t Hk = q.dims[1], Dk = q.dims[2], Hv = v.dims[1], Dv = v.dims[2];
  const int64_t rep = std::max<int64_t>(Hv / Hk, 1);
  float* state = a.src[7].as<float>();
  for (int64_t si = 0; si < a.src[8].rows(); ++si) {
    const state_row s = state_row_at(a.src[8], si);
    for (int64_t h = 0; h < Hv; ++h) {
      float* st = state + (s.slot * Hv + h) * Dk * Dv; // [Dk, Dv]
      std::vector<double> S(static_cast<size_t>(Dk * Dv), 0.0);
      if (s.pos0 > 0)
        for (int64_t i = 0; i < Dk * Dv; ++i) S[static_cast<size_t>(i)] = st[i];
      const int64_t kh = a.p.delta_tiled ? (a.p.head0 + h) % Hk : h / rep;
      const double a5 = a.src[5].as<float>()[h];
      const double A = a.p.delta_neg_a ? -a5 : std::exp(a5);       // exp(A_log)
      const bool per_channel = a.src[3].numel() != q.dims[0] * Hv; // (KDA: a per key channel)
      std::vector<double> decay(static_cast<size_t>(Dk));
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t t = s.begin + i;
        const float* qt = q.as<float>() + (t * Hk + kh) * Dk;
        const float* kt = k.as<float>() + (t * Hk + kh) * Dk;
        const float* vt = v.as<float>() + (t * Hv + h) * Dv;
        double qn = 0, kn = 0;
        for (int64_t d = 0; d < Dk; ++d) qn += double{qt[d]} * qt[d], kn += double{kt[d]} * kt[d];
        const double qs = 1.0 / std::sqrt(qn + 1e-6) / std::sqrt(static_cast<double>(Dk));
        const double ks = 1.0 / std::sqrt(kn + 1e-6);
        for (int64_t d = 0; d < Dk; ++d) {
          const double x = per_channel
                               ? double{a.src[3].as<float>()[(t * Hv + h) * Dk + d]} +
                                     a.src[6].as<float>()[h * Dk + d]
                               : double{a.src[3].as<float>()[t * Hv + h]} + a.src[6].as<float>()[h];
          const double softplus = x > 20 ? x : std::log1p(std::exp(x));
          // GLM-5.3's safe gate: g = bound sigmoid(exp(A_log) x), bounded below by `bound`
          decay[static_cast<size_t>(d)] =
              a.p.delta_bound < 0 ? std::exp(double{a.p.delta_bound} / (1.0 + std::exp(-A * x)))
                                  : std::exp(-A * softplus);
        }
        const double beta = (a.p.delta_beta_scale != 0 ? double{a.p.delta_beta_scale} : 1.0) /
                            (1.0 + std::exp(-double{a.src[4].as<float>()[t * Hv + h]}));
        for (int64_t d = 0; d < Dk; ++d)
          for (int64_t e = 0; e < Dv; ++e) S[static_cast<size_t>(d * Dv + e)] *= decay[d];
        for (int64_t e = 0; e < Dv; ++e) {
          double mem = 0; // (S^T k)[e]
          for (int64_t d = 0; d < Dk; ++d) mem += S[static_cast<size_t>(d * Dv + e)] * kt[d] * ks;
          const double delta = beta * (vt[e] - mem);
          for (int64_t d = 0; d < Dk; ++d) S[static_cast<size_t>(d * Dv + e)] += kt[d] * ks * delta;
        }
        float* out = a.dst.as<float>() + (t * Hv + h) * Dv;
        for (int64_t e = 0; e < Dv; ++e) {
          double o = 0;
          for (int64_t d = 0; d < Dk; ++d) o += S[static_cast<size_t>(d * Dv + e)] * qt[d] * qs;
          out[e] = static_cast<float>(o);
        }
      }
      for (int64_t i = 0; i < Dk * Dv; ++i) st[i] = static_cast<float>(S[static_cast<size_t>(i)]);
    }
  }
}

void ssm_scan(const op_args& a, const exec_ctx&) {
  const auto &x = a.src[0], &B = a.src[3], &Cm = a.src[4];
  const int64_t H = x.dims[1], P = x.dims[2], G = B.dims[1], N = B.dims[2], rep = H / G;
  float* state = a.src[7].as<float>();
  for (int64_t si = 0; si < a.src[8].rows(); ++si) {
    const state_row s = state_row_at(a.src[8], si);
    for (int64_t h = 0; h < H; ++h) {
      float* st = state + (s.slot * H + h) * P * N; // [P, N]
      std::vector<double> S(static_cast<size_t>(P * N), 0.0);
      if (s.pos0 > 0)
        for (int64_t i = 0; i < P * N; ++i) S[static_cast<size_t>(i)] = st[i];
      const bool per_state = a.src[2].numel() == H * N; // an A per state value (Mamba-1)
      auto A = [&](int64_t n) {
        const double a2 = a.src[2].as<float>()[per_state ? h * N + n : h];
        return a.p.delta_neg_a ? a2 : -std::exp(a2);
      };
      const bool unit = a.p.scan_unit_dt; // d = 1, no D term
      const double D = unit ? 0.0 : a.src[5].as<float>()[h];
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t t = s.begin + i, grp = h / rep;
        const double v =
            unit ? 0.0 : double{a.src[1].as<float>()[t * H + h]} + a.src[6].as<float>()[h];
        double dt = unit ? 1.0 : v > 20 ? v : std::log1p(std::exp(v));
        if (!unit && a.p.scan_dt_min > 0 && !(s.count == 1 && s.pos0 > 0)) // (a decode step: not)
          dt = std::max(dt, double{a.p.scan_dt_min});
        const float* xt = x.as<float>() + (t * H + h) * P;
        const float* bt = B.as<float>() + (t * G + grp) * N;
        const float* ct = Cm.as<float>() + (t * G + grp) * N;
        float* out = a.dst.as<float>() + (t * H + h) * P;
        for (int64_t p = 0; p < P; ++p) {
          double y = 0;
          for (int64_t n = 0; n < N; ++n) {
            double& e = S[static_cast<size_t>(p * N + n)];
            e = std::exp(dt * A(n)) * e + dt * xt[p] * bt[n];
            y += e * ct[n];
          }
          out[p] = static_cast<float>(y + D * xt[p]);
        }
      }
      for (int64_t i = 0; i < P * N; ++i) st[i] = static_cast<float>(S[static_cast<size_t>(i)]);
    }
  }
}

void lru_scan(const op_args& a, const exec_ctx&) {
  const int64_t W = a.src[0].cols();
  float* state = a.src[2].as<float>();
  for (int64_t si = 0; si < a.src[3].rows(); ++si) {
    const state_row s = state_row_at(a.src[3], si);
    float* st = state + s.slot * W;
    for (int64_t c = 0; c < W; ++c) {
      double h = s.pos0 > 0 ? st[c] : 0.0;
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t t = s.begin + i;
        const double at = a.src[0].as<float>()[t * W + c], u = a.src[1].as<float>()[t * W + c];
        const bool first = s.pos0 + i == 0;
        h = at * h + (a.p.lru_norm && !first ? std::sqrt(1 - at * at) : 1.0) * u;
        a.dst.as<float>()[t * W + c] = static_cast<float>(h);
      }
      st[c] = static_cast<float>(h);
    }
  }
}

// the mLSTM cell as op.hpp writes it: C, n and m kept apart in f64 over the sequence's tokens
void mlstm_scan(const op_args& a, const exec_ctx&) {
  const auto &q = a.src[0], &k = a.src[1], &v = a.src[2];
  const int64_t H = q.dims[1], Dk = q.dims[2], Dv = v.dims[2];
  float* state = a.src[5].as<float>();
  for (int64_t si = 0; si < a.src[6].rows(); ++si) {
    const state_row s = state_row_at(a.src[6], si);
    for (int64_t h = 0; h < H; ++h) {
      float* st = state + (s.slot * H + h) * (Dk + 1) * (Dv + 1);
      std::vector<double> C(static_cast<size_t>(Dk * Dv), 0.0), n(static_cast<size_t>(Dk), 0.0);
      double m = 0;
      if (s.pos0 > 0) {
        for (int64_t d = 0; d < Dk; ++d) {
          for (int64_t e = 0; e < Dv; ++e)
            C[static_cast<size_t>(d * Dv + e)] = st[d * (Dv + 1) + e];
          n[static_cast<size_t>(d)] = st[d * (Dv + 1) + Dv];
        }
        m = st[Dk * (Dv + 1)];
      }
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t t = s.begin + i;
        const double f = a.src[4].as<float>()[t * H + h], in = a.src[3].as<float>()[t * H + h];
        const double lf = -std::log1p(std::exp(-f)); // log(sigmoid(f))
        const double m_new = std::max(lf + m, in);
        const double fa = std::exp(lf + m - m_new), ia = std::exp(in - m_new);
        const float* qt = q.as<float>() + (t * H + h) * Dk;
        const float* kt = k.as<float>() + (t * H + h) * Dk;
        const float* vt = v.as<float>() + (t * H + h) * Dv;
        for (int64_t d = 0; d < Dk; ++d) {
          for (int64_t e = 0; e < Dv; ++e) {
            double& c = C[static_cast<size_t>(d * Dv + e)];
            c = fa * c + ia * kt[d] * vt[e];
          }
          n[static_cast<size_t>(d)] = fa * n[static_cast<size_t>(d)] + ia * kt[d];
        }
        m = m_new;
        double qn = 0;
        const double qs = 1.0 / std::sqrt(static_cast<double>(Dk));
        for (int64_t d = 0; d < Dk; ++d) qn += qs * qt[d] * n[static_cast<size_t>(d)];
        const double den = std::max(std::fabs(qn), std::exp(-m)) + a.p.eps;
        for (int64_t e = 0; e < Dv; ++e) {
          double y = 0;
          for (int64_t d = 0; d < Dk; ++d) y += qs * qt[d] * C[static_cast<size_t>(d * Dv + e)];
          a.dst.as<float>()[(t * H + h) * Dv + e] = static_cast<float>(y / den);
        }
      }
      std::fill_n(st, (Dk + 1) * (Dv + 1), 0.0f);
      for (int64_t d = 0; d < Dk; ++d) {
        for (int64_t e = 0; e < Dv; ++e)
          st[d * (Dv + 1) + e] = static_cast<float>(C[static_cast<size_t>(d * Dv + e)]);
        st[d * (Dv + 1) + Dv] = static_cast<float>(n[static_cast<size_t>(d)]);
      }
      st[Dk * (Dv + 1)] = static_cast<float>(m);
    }
  }
}

} // namespace

void register_recurrent(registry& r) {
  r.add(op::causal_conv, backend::ref, "any", all_contiguous, causal_conv);
  r.add(op::gated_delta, backend::ref, "any", all_contiguous, gated_delta);
  r.add(op::ssm_scan, backend::ref, "f32", all_contiguous, ssm_scan);
  r.add(op::lru_scan, backend::ref, "f32", all_contiguous, lru_scan);
  r.add(op::mlstm_scan, backend::ref, "f32", all_contiguous, mlstm_scan);
}

} // namespace troupe::kernels::ref
