// op.cpp: op names and argument checks (op.hpp).
#include "kernels/op.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace troupe::kernels {
namespace {

constexpr std::array<std::string_view, op_count> op_names = {
    "embedding",   "matmul",        "rmsnorm",
    "layernorm",   "rope",          "silu",
    "gelu_erf",    "gelu_tanh",     "tanh",
    "rsqrt",       "swiglu",        "softmax",
    "add",         "mul",           "scale",
    "sum_rows",    "attention",     "paged_attention",
    "kv_store",    "argmax",        "topk",
    "convert",     "quantize",      "dequantize",
    "add_rmsnorm", "matmul_swiglu", "rope_kv_store",
    "clamp",       "relu",          "sigmoid",
    "exp",         "abs",           "recip",
    "elementwise", "matmul_qkv",    "moe",
    "concat",      "head_matmul",   "moe_router",
    "causal_conv", "gated_delta",   "ssm_scan",
    "dsa_select",  "kv_compress",   "hc_pre",
    "hc_post",     "pos_scale",     "slice",
    "lru_scan",    "mlstm_scan",
};

bool is_float(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
}

status fail(const op_args& a, std::string_view what) {
  return make_error(errc::shape_mismatch, "{}: {}", to_string(a.kind), what);
}

} // namespace

std::string_view to_string(op o) {
  return op_names[static_cast<size_t>(o)];
}

double alibi_slope(int64_t h, int64_t n, double max_bias) {
  int64_t m = 1;
  while (m * 2 <= n) m *= 2;
  if (h < m) return std::pow(std::pow(2.0, -max_bias / m), static_cast<double>(h + 1));
  return std::pow(std::pow(2.0, -max_bias / (2 * m)), static_cast<double>(2 * (h - m) + 1));
}

bool parse_op(std::string_view name, op& out) {
  for (size_t i = 0; i < op_names.size(); ++i) {
    if (op_names[i] == name) {
      out = static_cast<op>(i);
      return true;
    }
  }
  return false;
}

std::string_view to_string(backend b) {
  switch (b) {
  case backend::ref:
    return "ref";
  case backend::cpu:
    return "cpu";
  case backend::cuda:
    return "cuda";
  }
  return "?";
}

status check_args(const op_args& a) {
  const auto& s0 = a.src[0];
  const auto& d = a.dst;
  if (!d.data) return fail(a, "no destination");
  switch (a.kind) {
  case op::embedding:
    if (a.src[1].type != dtype::i32 || d.type != dtype::f32)
      return fail(a, "ids must be i32, dst f32");
    if (d.rows() != a.src[1].numel() || d.cols() != s0.cols()) return fail(a, "dst must be [T, C]");
    return {};
  case op::matmul:
    if ((s0.type != dtype::f32 && s0.type != dtype::q8_0) || d.type != dtype::f32)
      return fail(a, "x must be f32 or q8_0, dst f32");
    if (s0.cols() != a.src[1].cols()) return fail(a, "x [T, K] and W [N, K] disagree on K");
    if (d.rows() != s0.rows() || d.cols() != a.src[1].rows()) return fail(a, "dst must be [T, N]");
    if (a.src[2].data && a.src[2].numel() != d.cols()) return fail(a, "bias must be [N]");
    if (a.src[3].data && (a.src[3].type != dtype::f32 || a.src[3].numel() != s0.rows()))
      return fail(a, "the step of x's rows must be f32 [T, 1]");
    return {};
  case op::rmsnorm:
  case op::layernorm:
    if (a.src[1].numel() != s0.cols()) return fail(a, "weight must be [C]");
    if (d.dims != s0.dims) return fail(a, "dst shape must equal x");
    if (is_quantized(d.type) && (d.type != dtype::q8_0 || a.kind != op::rmsnorm))
      return fail(a, "only rmsnorm quantizes, to q8_0");
    return {};
  case op::rope:
    if (s0.dims.rank != 3 || a.src[1].numel() != s0.dims[0]) return fail(a, "x [T, H, D], pos [T]");
    if (a.p.rope.rot_dim <= 0 || a.p.rope.rot_offset < 0 ||
        a.p.rope.rot_offset + a.p.rope.rot_dim > s0.dims[2] || a.p.rope.rot_dim % 2)
      return fail(a, "rot_dim must be even, rot_offset + rot_dim <= D");
    return {};
  case op::clamp:
  case op::relu:
  case op::sigmoid:
  case op::exp:
  case op::abs:
  case op::recip:
  case op::silu:
  case op::gelu_erf:
  case op::gelu_tanh:
  case op::tanh:
  case op::rsqrt:
  case op::scale:
  case op::softmax:
    if (d.numel() != s0.numel()) return fail(a, "dst must match src0");
    return {};
  case op::swiglu:
    if (a.src[1].dims != s0.dims || d.dims != s0.dims) return fail(a, "gate, up, dst must match");
    return {};
  case op::elementwise: {
    if (!a.p.program) return fail(a, "no program");
    for (const auto& s : a.src) {
      if (!s.data) continue;
      const bool full = s.numel() == d.numel();
      const bool row = s.rows() == 1 && s.cols() == d.cols();
      const bool col = s.rows() == d.rows() && s.cols() == 1;
      if (!(full || row || col)) return fail(a, "a source must be [T, C], [1, C] or [T, 1]");
    }
    return {};
  }
  case op::add:
  case op::mul: {
    const auto& s1 = a.src[1];
    // src1 [T or 1, C1] with C1 dividing C: its value j meets the j-th group of C / C1 (a
    // head's values for a gate per head; [T, 1] and [1, C] the common cases)
    const bool rows = s1.rows() == s0.rows() || s1.rows() == 1;
    const bool cols = s1.cols() > 0 && s0.cols() % s1.cols() == 0;
    if (!(rows && cols)) return fail(a, "src1 must be [T or 1, C1] with C1 dividing C");
    if (d.numel() != s0.numel()) return fail(a, "dst must match src0");
    return {};
  }
  case op::sum_rows:
    if (d.numel() != s0.rows()) return fail(a, "dst must be [T, 1]");
    return {};
  case op::attention:
    if (s0.dims.rank != 3 || a.src[1].dims.rank != 3 || a.src[2].dims != a.src[1].dims)
      return fail(a, "q [T, H, D], k and v [S, Hkv, D]");
    if (s0.dims[1] % a.src[1].dims[1] != 0) return fail(a, "H must be a multiple of Hkv");
    if (a.p.pos0 + s0.dims[0] > a.src[1].dims[0]) return fail(a, "keys do not cover the queries");
    if (a.src[3].data && (a.src[3].type != dtype::f32 || a.src[3].numel() != s0.dims[1]))
      return fail(a, "sinks must be f32 [H]");
    return {};
  case op::paged_attention:
    if (s0.dims.rank != 3 || a.src[1].dims.rank != 4 || a.src[2].dims != a.src[1].dims)
      return fail(a, "q [T, H, D], caches [NB, P, Hkv, D]");
    if (s0.dims[1] % a.src[1].dims[2] != 0) return fail(a, "H must be a multiple of Hkv");
    if (a.src[3].type != dtype::i32 || a.src[3].dims.rank != 2 || a.src[3].cols() < 3)
      return fail(a, "seqs must be i32 [S, 3 + MB]");
    if (a.src[4].data && (a.src[4].type != dtype::f32 || a.src[4].numel() != s0.dims[1]))
      return fail(a, "sinks must be f32 [H]");
    if (a.src[5].data && (a.src[5].type != dtype::i32 || a.src[5].dims.rank != 2 ||
                          a.src[5].rows() != s0.dims[0] || (a.p.window > 0 && !a.src[6].data) ||
                          a.p.chunk > 0 || a.p.temp_floor > 0 || a.p.alibi_max_bias > 0))
      return fail(a, "a selection is i32 [T, K], without windows, chunks, temperature or ALiBi");
    if (a.p.sel_per_kv && (!a.src[5].data || a.src[5].cols() % a.src[1].dims[2] || a.src[6].data))
      return fail(a, "a selection per KV head: [T, Hkv K] (no compressed entries)");
    if (a.src[6].data &&
        (a.p.compress <= 0 || a.src[6].dims.rank != 4 || a.src[6].dims[2] != 1 ||
         a.src[6].dims[3] != s0.dims[2] || a.src[6].dims[1] != a.src[1].dims[1] || a.p.chunk > 0 ||
         a.p.temp_floor > 0 || a.p.alibi_max_bias > 0 || a.p.softcap > 0))
      return fail(a, "compressed entries [NB, P, 1, D] need p.compress, and no chunks, "
                     "temperature, ALiBi or soft-cap");
    if (a.src[7].data &&
        (a.src[7].type != dtype::f32 || a.src[7].dims.rank != 3 || a.src[7].dims[0] != s0.dims[0] ||
         a.src[7].dims[1] != s0.dims[1] || a.src[7].dims[2] < 1 || a.src[5].data || a.src[6].data))
      return fail(a, "relative biases are f32 [T, H, E] (without a selection or compressed "
                     "entries)");
    return {};
  case op::dsa_select:
    if (s0.type != dtype::f32 || s0.dims.rank != 3 || a.src[1].dims.rank != 4 ||
        a.src[1].dims[2] != 1 || a.src[1].dims[3] != s0.dims[2])
      return fail(a, "q f32 [T, Hi, Di], an index cache [NB, P, 1, Di]");
    if (a.src[2].type != dtype::i32 || a.src[2].dims.rank != 2 || a.src[2].cols() < 3)
      return fail(a, "seqs must be i32 [S, 3 + MB]");
    if (a.p.block > 0) { // MiniMax M3's: each head its blocks, no head weights
      if (a.p.k <= 0 || a.p.local_blocks < 0 || a.p.local_blocks > a.p.k || a.p.compress > 0 ||
          d.type != dtype::i32 || d.dims.rank != 2 || d.rows() != s0.dims[0] ||
          d.cols() != s0.dims[1] * a.p.k * a.p.block)
        return fail(a, "blocks: p.k >= p.local_blocks, dst i32 [T, Hi k block], no compression");
      return {};
    }
    if (a.src[3].type != dtype::f32 || a.src[3].rows() != s0.dims[0] ||
        a.src[3].cols() != s0.dims[1])
      return fail(a, "head weights f32 [T, Hi]");
    if (d.type != dtype::i32 || d.dims.rank != 2 || d.rows() != s0.dims[0] || d.cols() <= 0)
      return fail(a, "dst i32 [T, K]");
    if (a.p.compress < 0) return fail(a, "p.compress must be >= 0");
    if (a.p.expand && (a.p.compress <= 0 || d.cols() != a.p.k * a.p.compress + a.p.compress - 1))
      return fail(a, "expanded entries need p.compress = m and dst [T, k m + m - 1]");
    return {};
  case op::kv_compress: {
    const auto &src = a.src[0], &ape = a.src[1], &w = a.src[2], &seqs = a.src[3];
    if (src.dims.rank != 4 || d.dims.rank != 4 || src.dims[2] != 1 || d.dims[2] != 1 ||
        src.dims[0] != d.dims[0] || src.dims[1] != d.dims[1])
      return fail(a, "source [NB, P, 1, 2 W] and dst [NB, P, 1, Dc] caches of one geometry");
    const int64_t W = src.dims[3] / 2, Dc = d.dims[3];
    if (src.dims[3] % 2 || (W != Dc && W != 2 * Dc))
      return fail(a, "the source rows hold kv and gate of Dc or 2 Dc values each");
    if (a.p.compress <= 0 || ape.type != dtype::f32 || ape.rows() != a.p.compress ||
        ape.cols() != W)
      return fail(a, "ape must be f32 [m, W] with m = p.compress > 0");
    if (w.data && (w.type != dtype::f32 || w.numel() != Dc))
      return fail(a, "the norm weight is f32 [Dc] (or none)");
    if (seqs.type != dtype::i32 || seqs.dims.rank != 2 || seqs.cols() < 3)
      return fail(a, "seqs must be i32 [S, 3 + MB]");
    if (a.p.rope.rot_dim % 2 || a.p.rope.rot_dim < 0 || a.p.rope.rot_offset < 0 ||
        a.p.rope.rot_offset + a.p.rope.rot_dim > Dc)
      return fail(a, "rot_dim must be even, rot_offset + rot_dim <= Dc");
    return {};
  }
  case op::hc_pre: {
    const auto &fn = a.src[1], &base = a.src[2], &sc = a.src[3];
    const int64_t C = d.cols(), M = fn.data ? fn.rows() : 0;
    const int64_t N = C > 0 ? s0.cols() / C : 0;
    if (s0.type != dtype::f32 || d.type != dtype::f32 || N <= 0 || s0.cols() != N * C ||
        d.rows() != s0.rows())
      return fail(a, "x f32 [T, N C], dst f32 [T, C]");
    if (!fn.data) // the streams' mean
      return base.data || sc.data || a.dst2.data ? fail(a, "the mean takes no base, scale or mix")
                                                 : status{};
    if (fn.type != dtype::f32 || fn.cols() != N * C || base.type != dtype::f32 ||
        base.numel() != M || sc.type != dtype::f32)
      return fail(a, "fn f32 [M, N C], base f32 [M], scale f32");
    if (M == N * (N + 2)) {
      if (sc.numel() != 3 || !a.dst2.data || a.dst2.type != dtype::f32 ||
          a.dst2.numel() != s0.rows() * N * (N + 1))
        return fail(a, "a layer's mix: scale [3], dst2 f32 [T, N (N + 1)]");
    } else if (M == 2 * N && N > 1) { // (N = 1 would read as a head)
      if (sc.numel() != 2 || !a.dst2.data || a.dst2.type != dtype::f32 ||
          a.dst2.numel() != s0.rows() * N)
        return fail(a, "an independent layer's post: scale [2], dst2 f32 [T, N]");
    } else if (M != N || sc.numel() != 1) {
      return fail(a, "M must be N (N + 2) (scale [3]) or N (the head: scale [1])");
    }
    return {};
  }
  case op::hc_post: {
    const auto &y = a.src[1], &mix = a.src[2];
    const int64_t C = y.cols(), N = C > 0 ? s0.cols() / C : 0;
    if (s0.type != dtype::f32 || y.type != dtype::f32 || mix.type != dtype::f32 ||
        d.type != dtype::f32 || N <= 0 || s0.cols() != N * C || y.rows() != s0.rows() ||
        mix.rows() != s0.rows() ||
        (mix.cols() != N * (N + 1) && mix.cols() != N && (N < 2 || mix.cols() != N * N)) ||
        d.dims != s0.dims)
      return fail(a, "x f32 [T, N C], y f32 [T, C], mix f32 [T, N (N + 1)], [T, N] or [T, N N], "
                     "dst like x");
    return {};
  }
  case op::lru_scan: {
    const auto &u = a.src[1], &st = a.src[2], &table = a.src[3];
    const int64_t W = s0.cols();
    if (s0.type != dtype::f32 || u.type != dtype::f32 || d.type != dtype::f32 ||
        u.numel() != s0.numel() || d.numel() != s0.numel() || u.cols() != W || d.cols() != W)
      return fail(a, "a, u and dst must be f32 [T, W]");
    if (st.type != dtype::f32 || st.dims.rank < 2 || st.dims[0] <= 0 ||
        st.numel() / st.dims[0] != W)
      return fail(a, "state must be f32 [NS, W]");
    if (table.type != dtype::i32 || table.dims.rank != 2 || table.cols() != 4)
      return fail(a, "the state table must be i32 [S, 4]");
    return {};
  }
  case op::mlstm_scan: {
    const auto &k = a.src[1], &v = a.src[2], &st = a.src[5], &table = a.src[6];
    if (s0.type != dtype::f32 || s0.dims.rank != 3 || k.type != dtype::f32 || k.dims != s0.dims ||
        v.type != dtype::f32 || v.dims.rank != 3 || v.dims[0] != s0.dims[0] ||
        v.dims[1] != s0.dims[1] || d.type != dtype::f32 || d.dims != v.dims)
      return fail(a, "q, k f32 [T, H, Dk], v and dst f32 [T, H, Dv]");
    const int64_t T = s0.dims[0], H = s0.dims[1], Dk = s0.dims[2], Dv = v.dims[2];
    for (int i : {3, 4})
      if (a.src[i].type != dtype::f32 || a.src[i].numel() != T * H)
        return fail(a, "the gates must be f32 [T, H]");
    if (st.type != dtype::f32 || st.dims.rank != 4 || st.dims[1] != H || st.dims[2] != Dk + 1 ||
        st.dims[3] != Dv + 1)
      return fail(a, "state must be f32 [NS, H, Dk + 1, Dv + 1]");
    if (table.type != dtype::i32 || table.dims.rank != 2 || table.cols() != 4)
      return fail(a, "the state table must be i32 [S, 4]");
    return {};
  }
  case op::slice:
    if (s0.type != dtype::f32 || d.type != dtype::f32 || d.rows() != s0.rows() || a.p.col0 < 0 ||
        d.cols() != a.p.cols || a.p.col0 + a.p.cols > s0.cols())
      return fail(a, "f32 [T, A] into f32 [T, p.cols], columns p.col0 .. within A");
    return {};
  case op::kv_store:
    if (a.src[1].type != dtype::i32 || a.src[1].numel() != s0.dims[0])
      return fail(a, "slots i32 [T]");
    return {};
  case op::pos_scale: {
    const auto &pos = a.src[1], &sc = a.src[2], &b = a.src[3];
    const bool power = !sc.data && !b.data; // (Beam's: a factor of the position alone)
    if (s0.type != dtype::f32 || s0.dims.rank != 3 || d.type != dtype::f32 || d.dims != s0.dims ||
        pos.type != dtype::i32 || pos.numel() != s0.dims[0] ||
        (!power && (sc.type != dtype::f32 || sc.numel() != s0.dims[1] || b.type != dtype::f32 ||
                    b.numel() != s0.dims[1])) ||
        (power && a.p.temp_floor <= 0))
      return fail(a, "x f32 [T, H, D], positions i32 [T], scale and bias f32 [H] (or none and "
                     "p.temp_floor > 0), dst like x");
    return {};
  }
  case op::causal_conv: {
    const auto& st = a.src[2];
    if (s0.type != dtype::f32 || s0.dims.rank != 3 || d.dims != s0.dims)
      return fail(a, "x and dst must be f32 [T, Hc, Dc]");
    const int64_t Hc = s0.dims[1], Dc = s0.dims[2];
    if (!is_float(a.src[1].type) || a.src[1].dims.rank != 2 || a.src[1].dims[0] != Hc * Dc ||
        a.src[1].dims[1] < 1)
      return fail(a, "w must be f32, f16 or bf16 [Hc * Dc, K]");
    if (st.type != dtype::f32 || st.dims.rank != 4 || st.dims[1] != Hc ||
        st.dims[2] != a.src[1].dims[1] - 1 || st.dims[3] != Dc)
      return fail(a, "state must be f32 [NS, Hc, K - 1, Dc]");
    if (a.src[3].type != dtype::i32 || a.src[3].dims.rank != 2 || a.src[3].cols() != 4)
      return fail(a, "the state table must be i32 [S, 4]");
    if (a.src[4].data && (a.src[4].type != dtype::f32 || a.src[4].numel() != Hc * Dc))
      return fail(a, "bias must be f32 [Hc * Dc]");
    return {};
  }
  case op::ssm_scan: {
    const auto &x = s0, &B = a.src[3], &st = a.src[7];
    if (x.type != dtype::f32 || x.dims.rank != 3 || d.dims != x.dims || d.type != dtype::f32)
      return fail(a, "x and dst must be f32 [T, H, P]");
    const int64_t T = x.dims[0], H = x.dims[1], P = x.dims[2];
    if (B.type != dtype::f32 || B.dims.rank != 3 || B.dims[0] != T || a.src[4].dims != B.dims ||
        a.src[4].type != dtype::f32)
      return fail(a, "B and C must be f32 [T, G, N]");
    const int64_t G = B.dims[1], N = B.dims[2];
    if (G <= 0 || H % G != 0) return fail(a, "H must be a multiple of G");
    if (a.p.scan_unit_dt) { // (dt, D and dt_bias unread)
      if (a.src[2].type != dtype::f32 || a.src[2].numel() != H)
        return fail(a, "A must be f32 [H] with a unit dt");
    } else {
      if (a.src[1].type != dtype::f32 || a.src[1].numel() != T * H)
        return fail(a, "dt must be f32 [T, H]");
      for (int i : {5, 6})
        if (a.src[i].type != dtype::f32 || a.src[i].numel() != H)
          return fail(a, "D and dt_bias must be f32 [H]");
      if (a.src[2].type != dtype::f32 || (a.src[2].numel() != H && a.src[2].numel() != H * N))
        return fail(a, "A_log must be f32 [H] or [H, N]");
    }
    if (st.type != dtype::f32 || st.dims.rank != 4 || st.dims[1] != H || st.dims[2] != P ||
        st.dims[3] != N)
      return fail(a, "state must be f32 [NS, H, P, N]");
    if (a.src[8].type != dtype::i32 || a.src[8].dims.rank != 2 || a.src[8].cols() != 4)
      return fail(a, "the state table must be i32 [S, 4]");
    return {};
  }
  case op::gated_delta: {
    const auto &q = s0, &k = a.src[1], &v = a.src[2], &st = a.src[7];
    if (q.dims.rank != 3 || k.dims != q.dims || v.dims.rank != 3 || v.dims[0] != q.dims[0] ||
        d.dims != v.dims)
      return fail(a, "q, k [T, Hk, Dk], v and dst [T, Hv, Dv]");
    const int64_t T = q.dims[0], Hk = q.dims[1], Hv = v.dims[1];
    if (Hk <= 0 || (!a.p.delta_tiled && Hv % Hk != 0))
      return fail(a, "Hv must be a multiple of Hk");
    // a per head, or per head and key channel (Kimi's KDA: then dt_bias per channel too)
    const int64_t per = a.src[3].numel() == T * Hv * q.dims[2] ? q.dims[2] : 1;
    if (a.src[3].type != dtype::f32 || a.src[3].numel() != T * Hv * per ||
        a.src[4].type != dtype::f32 || a.src[4].numel() != T * Hv)
      return fail(a, "a must be f32 [T, Hv] or [T, Hv, Dk], b f32 [T, Hv]");
    if (a.src[5].type != dtype::f32 || a.src[5].numel() != Hv || a.src[6].type != dtype::f32 ||
        a.src[6].numel() != Hv * per)
      return fail(a, "A_log must be f32 [Hv], dt_bias [Hv] (or [Hv * Dk] with a per channel)");
    if (st.type != dtype::f32 || st.dims.rank != 4 || st.dims[1] != Hv || st.dims[2] != q.dims[2] ||
        st.dims[3] != v.dims[2])
      return fail(a, "state must be f32 [NS, Hv, Dk, Dv]");
    if (a.src[8].type != dtype::i32 || a.src[8].dims.rank != 2 || a.src[8].cols() != 4)
      return fail(a, "the state table must be i32 [S, 4]");
    for (int i : {0, 1, 2})
      if (a.src[i].type != dtype::f32) return fail(a, "q, k, v must be f32");
    return {};
  }
  case op::add_rmsnorm:
    if (a.src[1].dims != s0.dims || d.dims != s0.dims || a.dst2.dims != s0.dims)
      return fail(a, "x, r, dst and dst2 must all be [T, C]");
    if (is_quantized(d.type) && d.type != dtype::q8_0) return fail(a, "dst must be f32 or q8_0");
    if (a.src[2].numel() != s0.cols()) return fail(a, "weight must be [C]");
    return {};
  case op::matmul_swiglu:
    if ((s0.type != dtype::f32 && s0.type != dtype::q8_0) || d.type != dtype::f32)
      return fail(a, "x must be f32 or q8_0, dst f32");
    if (a.src[1].dims != a.src[2].dims || a.src[1].type != a.src[2].type)
      return fail(a, "gate and up weights must have one shape and dtype");
    if (s0.cols() != a.src[1].cols()) return fail(a, "x [T, K] and W [F, K] disagree on K");
    if (d.rows() != s0.rows() || d.cols() != a.src[1].rows()) return fail(a, "dst must be [T, F]");
    return {};
  case op::matmul_qkv:
    if ((s0.type != dtype::f32 && s0.type != dtype::q8_0) || d.type != dtype::f32 ||
        a.dst2.type != dtype::f32 || a.dst3.type != dtype::f32)
      return fail(a, "x must be f32 or q8_0, dst, dst2 and dst3 f32");
    for (int i = 1; i <= 3; ++i)
      if (a.src[i].dims.rank != 2 || a.src[i].type != a.src[1].type || a.src[i].cols() != s0.cols())
        return fail(a, "Wq, Wk and Wv must be [N, K] of x's K and one dtype");
    if (d.rows() != s0.rows() || d.cols() != a.src[1].rows() || a.dst2.rows() != s0.rows() ||
        a.dst2.cols() != a.src[2].rows() || a.dst3.rows() != s0.rows() ||
        a.dst3.cols() != a.src[3].rows())
      return fail(a, "dst, dst2 and dst3 must be [T, Nq], [T, Nk], [T, Nv]");
    return {};
  case op::concat:
    if (s0.type != dtype::f32 || a.src[1].type != dtype::f32 || d.type != dtype::f32 ||
        s0.rows() != a.src[1].rows() || d.rows() != s0.rows() ||
        d.cols() != s0.cols() + a.src[1].cols())
      return fail(a, "f32 [.., A] and [.., B] of the same rows into [.., A + B]");
    return {};
  case op::head_matmul: {
    const auto& w = a.src[1];
    if (s0.type != dtype::f32 || d.type != dtype::f32 || s0.dims.rank != 3 || d.dims.rank != 3 ||
        d.dims[0] != s0.dims[0] || d.dims[1] != s0.dims[1] || w.dims.rank != 2)
      return fail(a, "x f32 [T, H, Kx], W [H * N, K] or [H * K, N] -> dst f32 [T, H, N]");
    const int64_t H = s0.dims[1], N = d.dims[2];
    const int64_t K = a.p.k ? w.rows() / std::max<int64_t>(H, 1) : w.cols();
    if ((a.p.k ? w.rows() % H || w.cols() != N : w.rows() != H * N) || K > s0.dims[2] || K <= 0)
      return fail(a, "W does not hold H blocks of the shape x and dst imply");
    return {};
  }
  case op::moe_router:
    if (s0.type != dtype::f32 || a.p.k <= 0 || a.p.k > s0.cols())
      return fail(a, "logits f32 [T, E], k in [1, E]");
    if (d.type != dtype::i32 || d.numel() != s0.rows() * a.p.k || !a.dst2.data ||
        a.dst2.numel() != d.numel())
      return fail(a, "dst i32 [T, k], dst2 f32 [T, k]");
    if (a.src[1].data && a.src[1].numel() != s0.cols()) return fail(a, "bias must be [E]");
    if (a.src[2].data &&
        (a.src[2].type != dtype::i32 || a.src[2].numel() != s0.rows() ||
         a.src[3].type != dtype::i32 || a.src[3].dims.rank != 2 || a.src[3].cols() != a.p.k))
      return fail(a, "hash routing: token ids i32 [T], a table i32 [V, k]");
    if (a.p.n_group > 1 &&
        (s0.cols() % a.p.n_group || a.p.topk_group <= 0 || a.p.topk_group > a.p.n_group ||
         a.p.k > a.p.topk_group * (s0.cols() / a.p.n_group)))
      return fail(a, "n_group must divide E and topk_group groups must hold k experts");
    return {};
  case op::moe: {
    const auto &ids = a.src[1], &wts = a.src[2], &wg = a.src[3], &wu = a.src[4], &wd = a.src[5];
    if (s0.type != dtype::f32 || d.type != dtype::f32 || d.dims != s0.dims)
      return fail(a, "x and dst must be f32 [T, C]");
    if (ids.type != dtype::i32 || wts.type != dtype::f32 || ids.dims != wts.dims ||
        ids.rows() != s0.rows())
      return fail(a, "ids i32 and weights f32 must both be [T, k]");
    if (wg.dims != wu.dims || wg.type != wu.type || wd.type != wg.type || wg.cols() != s0.cols())
      return fail(a, "W_gate and W_up must be [E * F, C] of one dtype, W_down [E * C, F]");
    const int64_t F = wd.cols();
    if (F <= 0 || wg.rows() % F || wd.rows() != wg.rows() / F * s0.cols())
      return fail(a, "W_gate [E * F, C] and W_down [E * C, F] disagree on E or F");
    if (!moe_biases_ok(a)) return fail(a, "biases must be f32 [E * F], [E * F] and [E * C]");
    if (a.p.moe_post_norm &&
        (a.src[9].type != dtype::f32 || a.src[9].dims.rank != 2 || a.src[9].cols() != s0.cols()))
      return fail(a, "post-expert norms must be f32 [E_all, C]");
    return {};
  }
  case op::rope_kv_store:
    if (s0.dims.rank != 3 || a.src[1].type != dtype::i32 || a.src[2].type != dtype::i32 ||
        a.src[1].numel() != s0.dims[0] || a.src[2].numel() != s0.dims[0])
      return fail(a, "k [T, Hkv, D], pos and slots i32 [T]");
    if (a.p.rope.rot_dim <= 0 || a.p.rope.rot_offset < 0 ||
        a.p.rope.rot_offset + a.p.rope.rot_dim > s0.dims[2] || a.p.rope.rot_dim % 2)
      return fail(a, "rot_dim must be even, rot_offset + rot_dim <= D");
    if (a.src[3].data && (a.src[3].type != dtype::f32 || a.src[3].dims != s0.dims || !a.dst2.data ||
                          a.dst2.type != d.type || a.dst2.dims != d.dims))
      return fail(a, "v must be f32 like k, with dst2 a v cache like dst");
    if (a.src[4].data &&
        (a.src[4].type != dtype::f32 || a.src[4].dims.rank != 3 || a.src[4].dims[0] != s0.dims[0] ||
         a.src[4].dims[2] != s0.dims[2] || !a.dst3.data || a.dst3.type != dtype::f32 ||
         a.dst3.dims != a.src[4].dims))
      return fail(a, "q must be f32 [T, H, D] with k's T and D, dst3 like q");
    return {};
  case op::argmax:
    if (d.type != dtype::i32 || d.numel() != s0.rows()) return fail(a, "dst must be i32 [T]");
    return {};
  case op::topk:
    if (a.p.k <= 0 || a.p.k > s0.cols()) return fail(a, "k out of range");
    if (d.type != dtype::i32 || d.numel() != s0.rows() * a.p.k) return fail(a, "dst i32 [T, k]");
    if (!a.dst2.data || a.dst2.numel() != d.numel()) return fail(a, "dst2 f32 [T, k]");
    return {};
  case op::convert:
    if (!is_float(s0.type) || !is_float(d.type)) return fail(a, "convert takes f32/f16/bf16");
    if (d.numel() != s0.numel()) return fail(a, "dst must match src0");
    return {};
  case op::quantize:
  case op::dequantize: {
    const auto& q = a.kind == op::quantize ? d : s0;
    const auto& f = a.kind == op::quantize ? s0 : d;
    if (!is_quantized(q.type) || f.type != dtype::f32) return fail(a, "f32 <-> q8_0/q4_0");
    if (f.cols() % qk != 0 || f.numel() != q.numel()) return fail(a, "rows must be blocks of 32");
    return {};
  }
  }
  return fail(a, "unknown op");
}

bool moe_biases_ok(const op_args& a) {
  const int64_t F = a.src[5].cols(), C = a.src[0].cols(), EF = a.src[3].rows();
  const int64_t E = F > 0 ? EF / F : 0;
  auto ok = [](const tensor_view& b, int64_t n) {
    return !b.data || (b.type == dtype::f32 && b.numel() == n);
  };
  return ok(a.src[6], EF) && ok(a.src[7], EF) && ok(a.src[8], E * C);
}

} // namespace troupe::kernels
