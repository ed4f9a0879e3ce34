// op_cases_v4.cpp: harness cases for DeepSeek-V4's ops (op_cases.hpp) and Mistral Large 4's
// pos_scale: the hyper-connections
// (hc_pre for a layer and for the head, HY-V4's independent form and GLM-5.3's mean head,
// hc_post, and Gemma 3n's AltUp prediction with slice), kv_compress (plain and overlapping windows,
// GLM-5.3's pools without norm, f32 and bf16 caches, the entries rotated in their last dims with
// YaRN), paged_attention over a window plus compressed entries (all, or an indexer's picks with -1
// and not-yet-closed ones; sinks), and dsa_select over compressed entries. One step of three
// sequences (a prefill from 0, a decode at 22, a continued chunk from 5) through shuffled blocks.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "case_util.hpp"

namespace troupe::kernels::harness {

namespace {

constexpr int64_t P = 4, NB = 24, MB = 7, T = 17; // rows: 13 + 1 + 3

std::vector<int32_t> seq_table(gen& g) {
  std::vector<int32_t> blocks(NB - 1);
  std::iota(blocks.begin(), blocks.end(), 1);
  std::shuffle(blocks.begin(), blocks.end(), g.rng);
  const int32_t rows[3][3] = {{0, 13, 0}, {13, 1, 22}, {14, 3, 5}};
  std::vector<int32_t> t;
  int used = 0;
  for (const auto& r : rows) {
    t.insert(t.end(), {r[0], r[1], r[2]});
    const int need = (r[2] + r[1] + P - 1) / P;
    for (int b = 0; b < MB; ++b) t.push_back(b < need ? blocks[static_cast<size_t>(used + b)] : 0);
    used += need;
  }
  return t;
}

rope_spec v4_rope(int64_t D) {
  rope_spec r;
  r.layout = rope_layout::interleaved;
  r.rot_dim = 8;
  r.rot_offset = static_cast<int>(D - 8);
  r.theta = 160000.0;
  r.scaling = rope_scaling::yarn;
  r.factor = 4.0;
  r.orig_ctx = 16;
  r.attn_factor = 1.0;
  return r;
}

} // namespace

void v4_cases(std::vector<op_case>& out_cases) {
  { // Mistral Large 4's softmax scaling: positions from 0 to 4095, a factor per token and head
    const int64_t Tq = 9, Hq = 6, Dq = 40;
    op_case c;
    c.name = fmt::format("pos_scale(T={},H={},D={})", Tq, Hq, Dq);
    gen g(c.name);
    c.kind = op::pos_scale;
    c.src = {from_floats(dtype::f32, {Tq, Hq, Dq}, g.normal(Tq * Hq * Dq)),
             from_ints({Tq}, {0, 1, 2, 7, 63, 64, 511, 2048, 4095}),
             from_floats(dtype::f32, {Hq}, g.uniform(Hq, -0.3f, 0.5f)),
             from_floats(dtype::f32, {Hq}, g.uniform(Hq, 0.5f, 1.5f))};
    c.dst = out(dtype::f32, {Tq, Hq, Dq});
    c.tol = {1e-12, 1e-5};
    out_cases.push_back(std::move(c));
  }
  { // Beam's scalable softmax: (1 + (p + 1) / 2048) ^ 0.1, every head alike
    const int64_t Tq = 9, Hq = 4, Dq = 24;
    op_case c;
    c.name = fmt::format("pos_scale(T={},H={},D={},power)", Tq, Hq, Dq);
    gen g(c.name);
    c.kind = op::pos_scale;
    c.src = {from_floats(dtype::f32, {Tq, Hq, Dq}, g.normal(Tq * Hq * Dq)),
             from_ints({Tq}, {0, 1, 2, 7, 63, 2047, 2048, 100000, 4095}), absent(), absent()};
    c.dst = out(dtype::f32, {Tq, Hq, Dq});
    c.p.temp_floor = 2048, c.p.temp_offset = 1, c.p.temp_scale = 0.1f;
    c.tol = {1e-12, 1e-5};
    out_cases.push_back(std::move(c));
  }
  { // HY-V4's independent form: pre and post (times 2), no comb
    const int64_t N = 4, C = 48;
    op_case c;
    c.name = fmt::format("hc_pre(T=5,N={},C={},independent)", N, C);
    gen g(c.name);
    c.kind = op::hc_pre;
    c.src = {from_floats(dtype::f32, {5, N * C}, g.normal(5 * N * C)),
             from_floats(dtype::f32, {2 * N, N * C}, g.normal(2 * N * N * C, 0.1f)),
             from_floats(dtype::f32, {2 * N}, g.normal(2 * N, 0.5f)),
             from_floats(dtype::f32, {2}, g.uniform(2, 0.5f, 1.5f))};
    c.dst = out(dtype::f32, {5, C});
    c.dst2 = out(dtype::f32, {5, N});
    c.p.eps = 1e-6f;
    c.p.bias = 1e-6f;
    c.p.scale = 2.0f;
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  { // and its post: each stream its own residual
    const int64_t N = 4, C = 48;
    op_case c;
    c.name = fmt::format("hc_post(T=5,N={},C={},independent)", N, C);
    gen g(c.name);
    c.kind = op::hc_post;
    c.src = {from_floats(dtype::f32, {5, N * C}, g.normal(5 * N * C)),
             from_floats(dtype::f32, {5, C}, g.normal(5 * C)),
             from_floats(dtype::f32, {5, N}, g.uniform(5 * N, 0.0f, 2.0f))};
    c.dst = out(dtype::f32, {5, N * C});
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  { // Gemma 3n's AltUp: each stream's prediction from all (mix [T, N N]; y unread), and a
    // stream taken out of them
    const int64_t N = 4, C = 48;
    op_case c;
    c.name = fmt::format("hc_post(T=5,N={},C={},altup)", N, C);
    gen g(c.name);
    c.kind = op::hc_post;
    c.src = {from_floats(dtype::f32, {5, N * C}, g.normal(5 * N * C)),
             from_floats(dtype::f32, {5, C}, g.normal(5 * C)),
             from_floats(dtype::f32, {5, N * N}, g.normal(5 * N * N))};
    c.dst = out(dtype::f32, {5, N * C});
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
    op_case s;
    s.name = fmt::format("slice(T=5,A={},col0={},B={})", N * C, 2 * C, C);
    gen gs(s.name);
    s.kind = op::slice;
    s.src = {from_floats(dtype::f32, {5, N * C}, gs.normal(5 * N * C))};
    s.dst = out(dtype::f32, {5, C});
    s.p.col0 = 2 * C;
    s.p.cols = C;
    s.tol = {0, 0};
    out_cases.push_back(std::move(s));
  }
  { // GLM-5.3's head: the streams' mean
    op_case c;
    c.name = "hc_pre(T=5,N=4,C=48,mean)";
    gen g(c.name);
    c.kind = op::hc_pre;
    c.src = {from_floats(dtype::f32, {5, 4 * 48}, g.normal(5 * 4 * 48))};
    c.dst = out(dtype::f32, {5, 48});
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  for (bool head : {false, true}) {
    const int64_t N = 4, C = 48, M = head ? N : N * (N + 2);
    op_case c;
    c.name = fmt::format("hc_pre(T=5,N={},C={},{})", N, C, head ? "head" : "layer");
    gen g(c.name);
    c.kind = op::hc_pre;
    c.src = {from_floats(dtype::f32, {5, N * C}, g.normal(5 * N * C)),
             from_floats(dtype::f32, {M, N * C}, g.normal(M * N * C, 0.1f)),
             from_floats(dtype::f32, {M}, g.normal(M, 0.5f)),
             from_floats(dtype::f32, {head ? 1 : 3}, g.uniform(head ? 1 : 3, 0.5f, 1.5f))};
    c.dst = out(dtype::f32, {5, C});
    if (!head) c.dst2 = out(dtype::f32, {5, N * (N + 1)});
    c.p.eps = 1e-6f;
    c.p.bias = 1e-6f;
    c.p.k = 20;
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  {
    const int64_t N = 4, C = 48;
    op_case c;
    c.name = fmt::format("hc_post(T=5,N={},C={})", N, C);
    gen g(c.name);
    c.kind = op::hc_post;
    c.src = {from_floats(dtype::f32, {5, N * C}, g.normal(5 * N * C)),
             from_floats(dtype::f32, {5, C}, g.normal(5 * C)),
             from_floats(dtype::f32, {5, N * (N + 1)}, g.uniform(5 * N * (N + 1), 0.0f, 2.0f))};
    c.dst = out(dtype::f32, {5, N * C});
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  // GLM-5.3's pooled keys: windows of 4, no norm, no rotation
  {
    const int64_t m = 4, Dc = 16;
    op_case c;
    c.name = fmt::format("kv_compress(S=3,P={},m={},Dc={},plain,no_norm,no_rope)", P, m, Dc);
    gen g(c.name);
    c.kind = op::kv_compress;
    c.src = {from_floats(dtype::f32, {NB, P, 1, 2 * Dc}, g.normal(NB * P * 2 * Dc)),
             from_floats(dtype::f32, {m, Dc}, g.normal(m * Dc, 0.5f)), absent(),
             from_ints({3, 3 + MB}, seq_table(g))};
    c.dst = from_floats(dtype::f32, {NB, P, 1, Dc}, std::vector<float>(NB * P * Dc, 0.0f));
    c.p.compress = m;
    c.tol = {1e-10, 1e-5};
    out_cases.push_back(std::move(c));
  }
  // kv_compress: windows of 8 (plain, Dc 32) and of 4 overlapping (Dc 16, rows of 2 x 32)
  for (dtype kv : {dtype::f32, dtype::bf16})
    for (bool overlap : {false, true}) {
      const int64_t m = overlap ? 4 : 8, Dc = overlap ? 16 : 32, W = overlap ? 2 * Dc : Dc;
      op_case c;
      c.name = fmt::format("kv_compress(S=3,P={},m={},Dc={},{},cache={})", P, m, Dc,
                           overlap ? "overlap" : "plain", name(kv));
      gen g(c.name);
      c.kind = op::kv_compress;
      c.src = {from_floats(kv, {NB, P, 1, 2 * W}, g.normal(NB * P * 2 * W)),
               from_floats(dtype::f32, {m, W}, g.normal(m * W, 0.5f)),
               from_floats(dtype::f32, {Dc}, g.uniform(Dc, 0.5f, 1.5f)),
               from_ints({3, 3 + MB}, seq_table(g))};
      c.dst = from_floats(kv, {NB, P, 1, Dc}, std::vector<float>(NB * P * Dc, 0.0f));
      c.p.compress = m;
      c.p.eps = 1e-6f;
      c.p.rope = v4_rope(Dc);
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-5, 2e-2};
      out_cases.push_back(std::move(c));
    }
  // attention over the window of 8 and the entries of 4 tokens each (all, or 3 picked), sinks
  for (dtype kv : {dtype::f32, dtype::bf16})
    for (bool picked : {false, true}) {
      const int64_t H = 8, D = 32, m = 4, K = 3;
      op_case c;
      c.name = fmt::format("paged_attention_compressed(S=3,P={},H={},D={},W=8,m={},{},kv={})", P, H,
                           D, m, picked ? "picked" : "all", name(kv));
      gen g(c.name);
      c.kind = op::paged_attention;
      const std::vector<int32_t> seqs = seq_table(g);
      host_tensor cache = from_floats(kv, {NB, P, 1, D}, g.normal(NB * P * D));
      std::vector<int32_t> pick(static_cast<size_t>(T * K));
      for (auto& x : pick) x = static_cast<int32_t>(g.integer(-1, 6)); // some -1, some not closed
      c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D, 0.3f)),
               cache,
               cache,
               from_ints({3, 3 + MB}, seqs),
               from_floats(dtype::f32, {H}, g.normal(H, 1.0f)),
               picked ? from_ints({T, K}, pick) : absent(),
               from_floats(kv, {NB, P, 1, D}, g.normal(NB * P * D))};
      c.dst = out(dtype::f32, {T, H, D});
      c.p.scale = 1.0f / std::sqrt(static_cast<float>(D));
      c.p.window = 8;
      c.p.compress = m;
      c.p.block_size = P;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      out_cases.push_back(std::move(c));
    }
  for (bool expand : {false, true}) { // (expanded: GLM-5.3's pools as their positions, the tail)
    const int64_t Hi = 8, Di = 16, K = 3, m = 4;
    op_case c;
    c.name = fmt::format("dsa_select(S=3,P={},H={},D={},K={},compress={}{})", P, Hi, Di, K, m,
                         expand ? ",expand" : "");
    gen g(c.name);
    c.kind = op::dsa_select;
    c.src = {from_floats(dtype::f32, {T, Hi, Di}, g.normal(T * Hi * Di)),
             from_floats(dtype::f32, {NB, P, 1, Di}, g.normal(NB * P * Di)),
             from_ints({3, 3 + MB}, seq_table(g)),
             from_floats(dtype::f32, {T, Hi}, g.normal(T * Hi))};
    c.dst = out(dtype::i32, {T, expand ? K * m + m - 1 : K});
    c.p.scale = 0.25f;
    c.p.k = static_cast<int>(K);
    c.p.compress = m;
    c.p.expand = expand;
    c.tol = {0, 0};
    out_cases.push_back(std::move(c));
  }
}

} // namespace troupe::kernels::harness
