// moe.cpp (ref): mixture-of-experts FFN over routing already chosen (op.hpp `moe`): for each
// token and each of its k choices, the chosen expert's SwiGLU FFN (optionally with biases and
// GPT-OSS's clamped activation; or ungated, relu(up x)^2: Nemotron-H), weighted and summed. The
// experts' rows are dequantized to f32 and every dot product accumulated in f64. An expert id
// outside [0, E) (and the zero-computation experts past it) is an error; with expert parallelism
// the weights hold experts p.expert0 .. and the others' choices are skipped.
#include <algorithm>
#include <cmath>

#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {
namespace {

// y = W[r0 .. r0 + n) x, W rows of K values of any dtype
void rows_times(const tensor_view& w, int64_t r0, int64_t n, const std::vector<double>& x,
                std::vector<double>& y) {
  const int64_t K = w.cols();
  std::vector<float> row(static_cast<size_t>(K));
  y.assign(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    to_f32(w.type, w.row(r0 + i), row.data(), K);
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += x[static_cast<size_t>(k)] * row[static_cast<size_t>(k)];
    y[static_cast<size_t>(i)] = acc;
  }
}

status moe(const op_args& a, const exec_ctx&) {
  const auto &x = a.src[0], &ids = a.src[1], &wts = a.src[2];
  const auto &wg = a.src[3], &wu = a.src[4], &wd = a.src[5];
  const auto &bg = a.src[6], &bu = a.src[7], &bd = a.src[8];
  const double limit = a.p.swiglu_limit, alpha = a.p.swiglu_alpha;
  const int64_t T = x.rows(), C = x.cols(), k = ids.cols(), F = wd.cols(), E = wg.rows() / F;
  std::vector<double> xin(static_cast<size_t>(C)), g, u, h(static_cast<size_t>(F)), y;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) xin[static_cast<size_t>(c)] = x.row<float>(t)[c];
    std::vector<double> out(static_cast<size_t>(C), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t id = ids.row<int32_t>(t)[j], all = a.p.n_expert > 0 ? a.p.n_expert : E;
      if (id < 0 || id >= all + a.p.zero_experts)
        return make_error(errc::invalid_argument, "moe: token {} chose expert {} of {}", t, id,
                          all + a.p.zero_experts);
      if (id >= all) { // a zero-computation expert: its weight times x (one shard adds it)
        if (!a.p.zero_elsewhere)
          for (int64_t c = 0; c < C; ++c)
            out[static_cast<size_t>(c)] += wts.row<float>(t)[j] * xin[static_cast<size_t>(c)];
        continue;
      }
      const int64_t e = id - a.p.expert0;
      if (e < 0 || e >= E) continue; // another shard's expert
      if (!a.p.moe_relu2) rows_times(wg, e * F, F, xin, g);
      rows_times(wu, e * F, F, xin, u);
      for (int64_t f = 0; f < F; ++f) {
        double uv = u[static_cast<size_t>(f)];
        if (bu.data) uv += bu.as<float>()[e * F + f];
        if (a.p.moe_relu2) { // Nemotron-H: relu(up)^2, no gate
          h[static_cast<size_t>(f)] = uv > 0 ? uv * uv : 0.0;
          continue;
        }
        double gv = g[static_cast<size_t>(f)];
        if (bg.data) gv += bg.as<float>()[e * F + f];
        if (a.p.moe_gelu) { // Gemma 4: gelu_tanh(g) u
          const double k = std::sqrt(2.0 / std::acos(-1.0));
          h[static_cast<size_t>(f)] =
              0.5 * gv * (1.0 + std::tanh(k * (gv + 0.044715 * gv * gv * gv))) * uv;
        } else if (limit > 0 && a.p.moe_clamp && a.p.moe_clamp_after) { // min(silu(g), L)
          uv = std::clamp(uv, -limit, limit);
          h[static_cast<size_t>(f)] = std::min(gv / (1.0 + std::exp(-gv)), limit) * uv;
        } else if (limit > 0 && a.p.moe_clamp) { // DeepSeek-V4: silu(min(g, L)) clamp(u)
          gv = std::min(gv, limit);
          uv = std::clamp(uv, -limit, limit);
          h[static_cast<size_t>(f)] = gv / (1.0 + std::exp(-gv)) * uv;
        } else if (limit > 0) { // GPT-OSS: (clamp(u) + 1) * g sigmoid(alpha g), g capped above
          gv = std::min(gv, limit);
          uv = std::clamp(uv, -limit, limit);
          h[static_cast<size_t>(f)] = (uv + 1.0) * gv / (1.0 + std::exp(-alpha * gv));
        } else {
          h[static_cast<size_t>(f)] = gv / (1.0 + std::exp(-gv)) * uv;
        }
      }
      rows_times(wd, e * C, C, h, y);
      if (bd.data)
        for (int64_t c = 0; c < C; ++c) y[static_cast<size_t>(c)] += bd.as<float>()[e * C + c];
      if (a.p.moe_post_norm) { // Ergo: the expert's output RMS-normed times its row
        double ss = 0;
        for (int64_t c = 0; c < C; ++c) ss += y[static_cast<size_t>(c)] * y[static_cast<size_t>(c)];
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(C) + a.p.eps);
        for (int64_t c = 0; c < C; ++c)
          y[static_cast<size_t>(c)] *= inv * a.src[9].row<float>(id)[c];
      }
      const double w = wts.row<float>(t)[j] *
                       (a.src[9].data && !a.p.moe_post_norm ? a.src[9].as<float>()[id] : 1.0);
      for (int64_t c = 0; c < C; ++c) out[static_cast<size_t>(c)] += w * y[static_cast<size_t>(c)];
    }
    for (int64_t c = 0; c < C; ++c)
      a.dst.row<float>(t)[c] = static_cast<float>(out[static_cast<size_t>(c)]);
  }
  return {};
}

} // namespace

void register_moe(registry& r) {
  r.add(
      op::moe, backend::ref, "any", [](const op_args& a) { return all_contiguous(a); }, moe);
}

} // namespace troupe::kernels::ref
