// passes.cpp: the pipeline and tensor-parallel cuts, dead-node removal and fusion
// (passes.hpp).
#include "graph/passes.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace troupe::graph {

using kernels::op;

namespace {

// Replaces every read of `from` by `to` in nodes [first, end).
void rewrite_reads(graph& g, vid from, vid to, size_t first = 0) {
  for (size_t i = first; i < g.nodes.size(); ++i)
    for (vid& v : g.nodes[i].in)
      if (v == from) v = to;
}

// Rows [a, b) of the concatenation of `segs` (each (first row, count)), as segments.
std::vector<std::pair<int64_t, int64_t>>
take_rows(const std::vector<std::pair<int64_t, int64_t>>& segs, int64_t a, int64_t b) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t at = 0; // logical row where the segment starts
  for (auto [first, count] : segs) {
    const int64_t lo = std::max(a, at), hi = std::min(b, at + count);
    if (lo < hi) out.emplace_back(first + (lo - at), hi - lo);
    at += count;
  }
  return out;
}

} // namespace

status cut_pipeline(graph& g, const shard_cut& c) {
  if (c.layer_begin < 0 || c.layer_end > g.n_layer || c.layer_begin >= c.layer_end)
    return make_error(errc::invalid_argument, "layers [{}, {}) outside the model's {}",
                      c.layer_begin, c.layer_end, g.n_layer);
  if (static_cast<int>(g.residual.size()) != g.n_layer + 1)
    return make_error(errc::internal,
                      "graph: the family recorded {} residual streams for {} layers",
                      g.residual.size(), g.n_layer);
  auto keep = [&](const node& n) {
    if (n.layer < 0) return c.first_stage && c.layer_begin == 0;
    if (n.layer >= g.n_layer) return c.last_stage && c.layer_end == g.n_layer;
    return n.layer >= c.layer_begin && n.layer < c.layer_end;
  };
  if (!(c.first_stage && c.layer_begin == 0)) {
    const vid hidden = g.input(input_kind::hidden);
    g[hidden].dims = g[g.residual[static_cast<size_t>(c.layer_begin)]].dims;
    rewrite_reads(g, g.residual[static_cast<size_t>(c.layer_begin)], hidden);
  }
  std::vector<node> kept;
  for (auto& n : g.nodes)
    if (keep(n)) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
  // every activation a stage reads is made on it (a family that puts a node of a layer's work
  // in another layer would leave a stage reading a value nothing writes)
  std::vector<char> made(g.values.size(), 0);
  for (const node& n : g.nodes) {
    for (vid v : n.in)
      if (v != none && g[v].kind == value_kind::activation && !made[static_cast<size_t>(v)])
        return make_error(errc::internal,
                          "graph: layers [{}, {}) read {}, which a node outside them makes",
                          c.layer_begin, c.layer_end, g[v].name);
    for (vid v : n.out)
      if (v != none) made[static_cast<size_t>(v)] = 1;
  }
  for (auto& v : g.values) v.output = false;
  if (c.last_stage && c.layer_end == g.n_layer) {
    if (g.logits == none) return make_error(errc::internal, "graph: no logits");
    g[g.logits].output = true;
  } else {
    g[g.residual[static_cast<size_t>(c.layer_end)]].output = true;
  }
  return {};
}

status cut_tensor(graph& g, const shard_cut& c) {
  if (c.tp_size <= 1) return {};
  // this rank's units of v's axis: its layer's where heads or KV heads vary by layer
  auto range_of = [&c](const value& v) {
    static const std::vector<std::pair<int64_t, int64_t>> none;
    const auto& per_layer = v.along == axis::heads      ? c.layer_heads
                            : v.along == axis::kv_heads ? c.layer_kv_heads
                                                        : none;
    return v.layer >= 0 && v.layer < static_cast<int>(per_layer.size())
               ? per_layer[static_cast<size_t>(v.layer)]
               : c.of(v.along);
  };
  // weights and caches: this rank's slice
  std::vector<int64_t> full_rows(g.values.size(), 0);
  for (size_t i = 0; i < g.values.size(); ++i) {
    value& v = g.values[i];
    if (v.kind == value_kind::state) { // the first dim is heads: this rank's (all when not cut)
      if (v.along != axis::none) v.dims[0] = range_of(v).second;
      continue;
    }
    if (v.kind != value_kind::weight || v.empty) continue;
    const int64_t groups = std::max<int64_t>(v.groups, 1);
    if (v.split == cut::none && !(c.expert_parallel && groups > 1)) continue;
    // whole experts: rows of experts [e0, e0 + n) (their biases too, which TP leaves whole)
    if (c.expert_parallel && groups > 1) {
      const int64_t R = v.dims[0] / groups, e0 = c.expert0, n = c.experts;
      if (n <= 0 || e0 + n > groups || v.dims[0] % groups)
        return make_error(errc::invalid_argument, "{}: experts [{}, {}) of {}", v.name, e0, e0 + n,
                          groups);
      const auto segs = v.w.segments.empty()
                            ? std::vector<std::pair<int64_t, int64_t>>{{0, v.dims[0]}}
                            : v.w.segments;
      v.w.segments = take_rows(segs, e0 * R, (e0 + n) * R);
      full_rows[i] = v.dims[0];
      v.dims[0] = n * R;
      v.groups = n;
      v.split = cut::none; // each expert whole: its down projection sums nothing partial
      continue;
    }
    if (v.dims[0] % groups)
      return make_error(errc::internal, "graph: {} rows of {} in {} groups", v.dims[0], v.name,
                        groups);
    const int64_t width = v.split == cut::out ? v.dims[0] / groups : v.dims[1];
    int64_t a = 0, b = 0;
    if (v.along == axis::ffn) { // from the weight's own width (an expert's, a shared one's)
      const int64_t blk = std::max<int64_t>(c.ffn_block, 1);
      if (width % blk)
        return make_error(errc::invalid_argument,
                          "{}: FFN width {} is not a multiple of the block {} TP cuts it by",
                          v.name, width, blk);
      a = width / blk * c.tp_rank / c.tp_size * blk;
      b = width / blk * (c.tp_rank + 1) / c.tp_size * blk;
      if (b <= a)
        return make_error(errc::invalid_argument, "{}: TP {} leaves rank {} none of its {} rows",
                          v.name, c.tp_size, c.tp_rank, width);
    } else {
      const auto [u0, un] = range_of(v);
      if (un <= 0)
        return make_error(errc::internal, "graph: no {} range for {}", static_cast<int>(v.along),
                          v.name);
      a = u0 * v.unit, b = (u0 + un) * v.unit;
    }
    full_rows[i] = v.dims[0];
    if (v.split == cut::out) {
      if (b > width)
        return make_error(errc::shape_mismatch, "{}: rows [{}, {}) of {}", v.name, a, b, width);
      // segments are rows of the logical [N, K] matrix (after a transpose); stacked matrices
      // each give the same rows
      const auto segs = v.w.segments.empty()
                            ? std::vector<std::pair<int64_t, int64_t>>{{0, v.dims[0]}}
                            : v.w.segments;
      std::vector<std::pair<int64_t, int64_t>> taken;
      for (int64_t e = 0; e < groups; ++e)
        for (auto sg : take_rows(segs, e * width + a, e * width + b)) taken.push_back(sg);
      v.w.segments = std::move(taken);
      v.dims[0] = groups * (b - a);
    } else { // cut::in: columns
      if (v.dims.size() < 2 || b > v.dims[1])
        return make_error(errc::shape_mismatch, "{}: columns [{}, {}) of {}", v.name, a, b,
                          v.dims.size() < 2 ? 0 : v.dims[1]);
      v.w.col0 += a;
      v.w.cols = b - a;
      v.dims[1] = b - a;
    }
  }
  // collectives
  std::vector<node> out;
  out.reserve(g.nodes.size() + 2 * static_cast<size_t>(g.n_layer) + 4);
  std::vector<std::pair<vid, vid>> renames; // (old, new) applied to later nodes
  // n, then its output summed in place over the group; later readers read the sum
  auto then_all_reduce = [&](const node& n) {
    const vid part = n.out[0];
    out.push_back(n);
    value s = g[part];
    s.name += "_sum";
    s.alias = part; // summed in place
    s.output = false;
    const vid sum = g.add_value(s);
    node ar;
    ar.kind = node_kind::all_reduce;
    ar.in = {part};
    ar.out = {sum};
    ar.layer = n.layer;
    ar.name = g[sum].name;
    out.push_back(ar);
    renames.emplace_back(part, sum);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    node n = g.nodes[i];
    for (auto& v : n.in)
      for (auto [from, to] : renames)
        if (v == from) v = to;
    const bool has_w = n.kind == node_kind::op && n.in.size() > 1 && n.in[1] != none;
    const value* w = has_w ? &g[n.in[1]] : nullptr;
    const value* table = n.kind == node_kind::op && n.op == op::embedding ? &g[n.in[0]] : nullptr;
    if (table && table->kind == value_kind::weight && table->split == cut::out &&
        table->along == axis::vocab) {
      n.in[1] = g.input(input_kind::tokens_local); // ids relative to this rank's rows
      n.note = "vocabulary-parallel";
      then_all_reduce(n);
      continue;
    }
    const bool matmul =
        n.kind == node_kind::op && (n.op == op::matmul || n.op == op::matmul_swiglu);
    if (matmul && w && w->split == cut::in) {
      then_all_reduce(n);
      continue;
    }
    // experts: each rank sums part of every expert's FFN rows (TP), or runs whole experts of
    // its own for every token (EP); the all-reduce adds the rest either way
    if (n.kind == node_kind::op && n.op == op::moe && n.in.size() > 5 &&
        (c.expert_parallel || g[n.in[5]].split == cut::in)) {
      if (c.expert_parallel) {
        n.p.expert0 = static_cast<int>(c.expert0);
        // (at least the experts the family set: ZAYA's skip experts, which no shard holds)
        n.p.n_expert =
            std::max(n.p.n_expert, static_cast<int>(full_rows[static_cast<size_t>(n.in[3])] /
                                                    std::max<int64_t>(g[n.in[5]].dims[1], 1)));
        n.note =
            fmt::format("experts {}-{} of {}", c.expert0, c.expert0 + c.experts - 1, n.p.n_expert);
        n.p.zero_elsewhere = c.expert0 != 0; // (the identity experts: added by the first)
      } else {
        if (n.p.moe_post_norm) // (the norm of each expert's whole output: not of a part)
          return make_error(errc::unsupported,
                            "{}: each expert's output is RMS-normed whole (Ergo's experts): "
                            "tensor parallelism splits them by their rows; spread them with "
                            "expert parallelism (--ep) instead",
                            n.name);
        if (n.in.size() > 8 && c.tp_rank != 0)
          n.in[8] = none; // the down bias: added once, by the first rank, before the sum
        n.p.zero_elsewhere = c.tp_rank != 0;
      }
      then_all_reduce(n);
      continue;
    }
    if (matmul && w && w->split == cut::out && w->along == axis::vocab) { // lm_head
      const vid part = n.out[0];
      out.push_back(n);
      value s = g[part];
      s.name += "_all";
      s.output = false;
      s.dims = {full_rows[static_cast<size_t>(n.in[1])]};
      const vid all = g.add_value(s);
      node ag;
      ag.kind = node_kind::all_gather;
      ag.in = {part};
      ag.out = {all};
      ag.layer = n.layer;
      ag.name = g[all].name;
      out.push_back(ag);
      renames.emplace_back(part, all);
      if (g.logits == part) {
        g[part].output = false;
        g.logits = all;
        g[all].output = true;
      }
      continue;
    }
    if (n.kind == node_kind::op && n.op == op::paged_attention)
      n.p.head0 = static_cast<int>(c.of(axis::heads).first); // ALiBi slopes are per global head
    if (n.kind == node_kind::op && n.op == op::gated_delta)  // tiled value heads: by global index
      n.p.head0 = static_cast<int>(c.of(axis::lin_v_heads).first);
    out.push_back(n);
  }
  g.nodes = std::move(out);
  for (auto [from, to] : renames) {
    if (g[from].output) {
      g[from].output = false;
      g[to].output = true;
    }
    if (g.logits == from) g.logits = to;
    for (auto& r : g.residual)
      if (r == from) r = to;
  }
  return {};
}

void remove_dead(graph& g) {
  std::vector<char> live(g.values.size(), 0);
  for (size_t i = 0; i < g.values.size(); ++i) live[i] = g.values[i].output;
  std::vector<char> keep(g.nodes.size(), 0);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const node& n = g.nodes[k];
    bool needed = false;
    for (vid v : n.out)
      if (v != none && (live[static_cast<size_t>(v)] || g[v].kind == value_kind::state))
        needed = true;
    if (!needed) continue;
    keep[k] = 1;
    for (vid v : n.in)
      if (v != none) live[static_cast<size_t>(v)] = 1;
  }
  std::vector<node> out;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (keep[k]) out.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(out);
}

int fuse(graph& g, const fuse_options& o) {
  int fused = 0;
  auto ok = [&](const node& n) { return !o.supported || o.supported(n, g); };
  auto is_op = [](const node& n, op x) { return n.kind == node_kind::op && n.op == x; };
  std::vector<char> gone(g.nodes.size(), 0);
  auto consumers = g.consumers();
  auto only_reader = [&](vid v, size_t reader) {
    const auto& c = consumers[static_cast<size_t>(v)];
    return c.size() == 1 && c[0] == reader && !g[v].output;
  };
  auto first_reader = [&](vid v) -> int64_t {
    const auto& c = consumers[static_cast<size_t>(v)];
    return c.empty() ? -1 : static_cast<int64_t>(*std::min_element(c.begin(), c.end()));
  };
  // q, k and v matmuls of one input -> matmul_qkv (at q's place: its inputs are all there);
  // likewise a short convolution's B, C and x (three row ranges of one in_proj, LFM2), and
  // three row ranges of one tensor cut by heads (MiniMax's lightning q, k, v of qkv_proj)
  if (o.qkv)
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      node& q = g.nodes[k];
      auto plain = [&](const node& m) {
        return is_op(m, op::matmul) && (m.in.size() < 3 || m.in[2] == none) &&
               (m.in.size() < 4 || m.in[3] == none) && !g[m.out[0]].output; // (no bias, no step)
      };
      if (gone[k] || !plain(q)) continue;
      const value& w0 = g[q.in[1]];
      const bool conv = w0.along == axis::lin_v_heads; // then of one tensor, as B, C, x are
      if (w0.along != axis::heads && !conv) continue;
      auto partner = [&](const value& w) {
        return conv ? w.along == axis::lin_v_heads && w.w.name == w0.w.name
                    : w.along == axis::kv_heads || w.along == axis::kv_heads_full;
      };
      // (the partners a query's k and v; else, for one cut by heads, two more row ranges of
      // its own tensor: never a gated attention's gate, which has no third)
      auto find = [&](const std::function<bool(const value&)>& fits, int64_t& kk, int64_t& kv) {
        kk = kv = -1;
        for (size_t j = k + 1; j < g.nodes.size() && (kk < 0 || kv < 0); ++j) {
          const node& m = g.nodes[j];
          if (gone[j] || !plain(m) || m.in[0] != q.in[0] || !fits(g[m.in[1]])) continue;
          (kk < 0 ? kk : kv) = static_cast<int64_t>(j);
        }
        return kk >= 0 && kv >= 0;
      };
      int64_t kk = -1, kv = -1;
      if (!find(partner, kk, kv) &&
          !(w0.along == axis::heads &&
            find([&](const value& w) { return w.along == axis::heads && w.w.name == w0.w.name; },
                 kk, kv)))
        continue;
      const node &mk = g.nodes[static_cast<size_t>(kk)], &mv = g.nodes[static_cast<size_t>(kv)];
      const value &wq = g[q.in[1]], &wk = g[mk.in[1]], &wv = g[mv.in[1]];
      if (wq.type != wk.type || wq.type != wv.type || wq.dims.size() != 2 || wk.dims.size() != 2 ||
          wv.dims.size() != 2 || wq.dims[1] != wk.dims[1] || wq.dims[1] != wv.dims[1])
        continue;
      node f = q;
      f.op = op::matmul_qkv;
      f.in = {q.in[0], q.in[1], mk.in[1], mv.in[1]};
      f.out = {q.out[0], mk.out[0], mv.out[0]};
      f.note = conv ? "fused the three matmuls of one in_proj (B, C, x)"
                    : "fused matmul(q) + matmul(k) + matmul(v)";
      if (!ok(f)) continue;
      q = f;
      gone[static_cast<size_t>(kk)] = gone[static_cast<size_t>(kv)] = 1;
      ++fused;
    }
  // gate / up + swiglu -> matmul_swiglu (at the swiglu's place)
  if (o.gate_up)
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      node& s = g.nodes[k];
      if (!is_op(s, op::swiglu) || s.in.size() < 2) continue;
      const auto prod = g.producers();
      const int64_t pg = prod[static_cast<size_t>(s.in[0])],
                    pu = prod[static_cast<size_t>(s.in[1])];
      if (pg < 0 || pu < 0) continue;
      node& mg = g.nodes[static_cast<size_t>(pg)];
      node& mu = g.nodes[static_cast<size_t>(pu)];
      if (!is_op(mg, op::matmul) || !is_op(mu, op::matmul) || mg.in[0] != mu.in[0]) continue;
      auto nobias = [](const node& m) { // (nor a step of x's rows)
        return (m.in.size() < 3 || m.in[2] == none) && (m.in.size() < 4 || m.in[3] == none);
      };
      if (!nobias(mg) || !nobias(mu) || !only_reader(s.in[0], k) || !only_reader(s.in[1], k))
        continue;
      const value &wg = g[mg.in[1]], &wu = g[mu.in[1]];
      if (wg.type != wu.type || wg.dims != wu.dims) continue;
      node f = s;
      f.op = op::matmul_swiglu;
      f.in = {mg.in[0], mg.in[1], mu.in[1]};
      f.note = "fused matmul(gate) + matmul(up) + swiglu";
      if (!ok(f)) continue;
      s = f;
      gone[static_cast<size_t>(pg)] = gone[static_cast<size_t>(pu)] = 1;
      ++fused;
    }
  // rope + kv_store -> rope_kv_store (at the store's place)
  if (o.rope_store)
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      node& st = g.nodes[k];
      if (!is_op(st, op::kv_store)) continue;
      const auto prod = g.producers();
      const int64_t pr = prod[static_cast<size_t>(st.in[0])];
      if (pr < 0 || gone[static_cast<size_t>(pr)]) continue;
      node& r = g.nodes[static_cast<size_t>(pr)];
      if (!is_op(r, op::rope) || !only_reader(st.in[0], k)) continue;
      node f = st;
      f.op = op::rope_kv_store;
      f.in = {r.in[0], r.in[1], st.in[1]};
      f.p.rope = r.p.rope;
      f.note = "fused rope + kv_store";
      if (!ok(f)) continue;
      st = f;
      gone[static_cast<size_t>(pr)] = 1;
      ++fused;
    }
  // rope_kv_store + the layer's v store and q rope -> one rope_kv_store (the attention's
  // prologue), at the place of the last of them: its readers (the attention) all come later
  if (o.rope_store && o.prologue) {
    consumers = g.consumers(); // the fusions above rewrote some readers
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const node& st = g.nodes[k];
      if (gone[k] || !is_op(st, op::rope_kv_store) || st.in.size() != 3) continue;
      const value& kc = g[st.out[0]];
      int64_t jv = -1, jq = -1;
      for (size_t j = 0; j < g.nodes.size(); ++j) {
        const node& m = g.nodes[j];
        if (gone[j] || m.layer != st.layer || j == k) continue;
        if (jv < 0 && is_op(m, op::kv_store) && m.in[1] == st.in[2] && m.out[0] != st.out[0]) {
          const value& vc = g[m.out[0]];
          if (vc.kind == value_kind::state && vc.state == state_kind::v_cache &&
              vc.layer == kc.layer && vc.dims == kc.dims && !g[m.in[0]].output)
            jv = static_cast<int64_t>(j);
        }
        if (jq < 0 && is_op(m, op::rope) && m.in[1] == st.in[1] && m.p.rope == st.p.rope &&
            m.in[0] != st.in[0] && !g[m.out[0]].output && g[m.in[0]].dims.size() == 2 &&
            g[m.in[0]].dims.back() == g[st.in[0]].dims.back())
          jq = static_cast<int64_t>(j);
      }
      // the fused node stands at the last of its parts: a part whose result is read before
      // that place stays a node of its own
      auto place = [&]() {
        return static_cast<size_t>(std::max({static_cast<int64_t>(k), jv, jq}));
      };
      auto read_after = [&](vid v, size_t at) {
        for (size_t r : consumers[static_cast<size_t>(v)])
          if (!gone[r] && r <= at) return false;
        return true;
      };
      for (int round = 0; round < 2; ++round) {
        if (jq >= 0 && !read_after(g.nodes[static_cast<size_t>(jq)].out[0], place())) jq = -1;
        if (jv >= 0 && !read_after(g.nodes[static_cast<size_t>(jv)].out[0], place())) jv = -1;
      }
      if (jv < 0 && jq < 0) continue;
      const size_t at = place();
      if (!read_after(st.out[0], at)) continue;
      node f = st;
      f.in = {st.in[0], st.in[1], st.in[2], none, none};
      f.out = {st.out[0], none, none};
      if (jv >= 0) {
        const node& sv = g.nodes[static_cast<size_t>(jv)];
        f.in[3] = sv.in[0];
        f.out[1] = sv.out[0];
      }
      if (jq >= 0) {
        const node& rq = g.nodes[static_cast<size_t>(jq)];
        f.in[4] = rq.in[0];
        f.out[2] = rq.out[0];
      }
      while (f.in.back() == none) f.in.pop_back();
      while (f.out.back() == none) f.out.pop_back();
      f.note += std::string(jv >= 0 ? " + kv_store(v)" : "") + (jq >= 0 ? " + rope(q)" : "");
      if (!ok(f)) continue;
      for (int64_t j : {static_cast<int64_t>(k), jv, jq})
        if (j >= 0) gone[static_cast<size_t>(j)] = 1;
      gone[at] = 0;
      g.nodes[at] = std::move(f);
      fused += (jv >= 0) + (jq >= 0);
    }
  }
  // add + rmsnorm -> add_rmsnorm (at the add's place)
  if (o.add_norm)
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      node& a = g.nodes[k];
      if (gone[k] || !is_op(a, op::add) || a.in.size() < 2) continue;
      const vid s = a.out[0];
      const value &x = g[a.in[0]], &r = g[a.in[1]];
      if (x.r != rows::tokens || r.r != rows::tokens || x.dims != r.dims) continue;
      const int64_t nb = first_reader(s);
      if (nb < 0) continue;
      // the first reader must be the norm; other readers (the next residual) come after it
      node& b = g.nodes[static_cast<size_t>(nb)];
      if (gone[static_cast<size_t>(nb)] || !is_op(b, op::rmsnorm) || b.in[0] != s) continue;
      node f = a;
      f.op = op::add_rmsnorm;
      f.in = {a.in[0], a.in[1], b.in[1]};
      f.out = {b.out[0], s};
      f.p = b.p;
      f.name = g[b.out[0]].name;
      f.note = "fused add + rmsnorm";
      if (!ok(f)) continue;
      a = f;
      gone[static_cast<size_t>(nb)] = 1;
      ++fused;
    }
  std::vector<node> out;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!gone[k]) out.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(out);
  // norm whose readers are all int8-activation matmuls -> write q8_0
  if (o.norm_quant) {
    consumers = g.consumers();
    for (node& n : g.nodes) {
      if (!(is_op(n, op::rmsnorm) || is_op(n, op::add_rmsnorm))) continue;
      const vid h = n.out[0];
      if (g[h].type != dtype::f32 || g[h].output) continue;
      const auto& readers = consumers[static_cast<size_t>(h)];
      if (readers.empty()) continue;
      bool all = true;
      g[h].type = dtype::q8_0; // tentatively, so the readers are asked with int8 input
      for (size_t r : readers) {
        const node& m = g.nodes[r];
        const bool mm =
            is_op(m, op::matmul) || is_op(m, op::matmul_swiglu) || is_op(m, op::matmul_qkv);
        if (!mm || m.in[0] != h || !is_quantized(g[m.in[1]].type) || !ok(m)) all = false;
      }
      if (all && ok(n)) {
        n.note += (n.note.empty() ? "" : "; ") + std::string("writes q8_0 for the matmuls");
        ++fused;
      } else {
        g[h].type = dtype::f32;
      }
    }
  }
  return fused;
}

} // namespace troupe::graph
