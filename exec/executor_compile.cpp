// executor_compile.cpp: a shard's graph compiled once per row class (executor.hpp): the
// fusion passes where the backend has the fused kernels, a kernel for every node, an
// activation arena planned from the values' lifetimes, the scratch composites need, whether
// a device may record the plan as a graph; and what `troupe explain` prints of it.
#include <algorithm>

#include "exec/executor.hpp"
#include "exec/executor_impl.hpp"
#include "graph/arena.hpp"
#include "graph/passes.hpp"
#include "kernels/registry.hpp"

namespace troupe::exec {

using namespace detail;

status executor::compile(int tc, int nc) {
  auto p = std::make_unique<plan>();
  p->g = base_;
  const int64_t T = tc ? row_class_boundary : 1, N = nc ? row_class_boundary : 1, S = 1;
  const auto& reg = kernels::registry::global();
  static uint8_t dummy[64];
  // arguments of a node with representative row counts (placeholder pointers: for lookups)
  auto args_of = [&](const node& n, const graph::graph& g) {
    kernels::op_args a;
    a.kind = n.op;
    a.p = n.p;
    a.p.block_size = opt_.block_size;
    auto fake = [&](vid v) -> tensor_view {
      if (v == graph::none) return {};
      const value& x = g[v];
      if (x.kind == value_kind::weight) {
        if (x.empty) return {};
        const auto& t = weights_.views[static_cast<size_t>(v)];
        return tensor_view(dummy, x.type, t.data ? t.dims : fixed_shape(x.dims));
      }
      if (x.kind == value_kind::state && graph::recurrent(x.state))
        return tensor_view(dummy, dtype::f32, shape{1, x.dims[0], x.dims[1], x.dims[2]});
      if (x.kind == value_kind::state)
        return tensor_view(dummy, opt_.kv_dtype,
                           shape{opt_.kv_blocks, opt_.block_size, x.dims[0], x.dims[1]});
      if (x.kind == value_kind::input && x.input == graph::input_kind::seq_table)
        return tensor_view(dummy, dtype::i32, shape{S, 4});
      return tensor_view(dummy, x.type, make_shape(rows_of(x, T, N, S), x.dims));
    };
    for (size_t i = 0; i < n.in.size() && i < a.src.size(); ++i) a.src[i] = fake(n.in[i]);
    a.dst = fake(n.out[0]);
    if (n.out.size() > 1) a.dst2 = fake(n.out[1]);
    if (n.out.size() > 2) a.dst3 = fake(n.out[2]);
    return a;
  };
  if (opt_.fuse) {
    graph::fuse_options fo;
    fo.supported = [&](const node& n, const graph::graph& g) {
      return reg.find(be_->kind(), args_of(n, g), kernels::lookup::native_only).has_value();
    };
    graph::fuse(p->g, fo);
    TROUPE_TRY(graph::infer_shapes(p->g));
  }
  // a kernel for every op node: the backend's own (native, then composed), else the reference
  p->kernels.resize(p->g.nodes.size());
  for (size_t i = 0; i < p->g.nodes.size(); ++i) {
    const node& n = p->g.nodes[i];
    if (n.kind != node_kind::op) continue;
    const auto a = args_of(n, p->g);
    TROUPE_TRY(kernels::check_args(a));
    std::optional<kernels::kernel> k;
    for (auto b : be_->kernel_sources())
      if ((k = reg.find(b, a))) break;
    if (!k)
      return make_error(errc::unsupported, "{}: no {} kernel for {} ({} x {}) at node {}",
                        source_->path, kernels::to_string(be_->kind()), kernels::to_string(n.op),
                        name(a.src[0].type), name(a.src[1].type), n.name);
    p->kernels[i] = std::move(*k);
  }
  // the arena: activations by lifetime, largest first (graph/arena.hpp)
  const auto& g = p->g;
  graph::arena_layout arena = graph::plan_arena(g);
  p->offset = std::move(arena.offset);
  p->arena_row_bytes = arena.row_bytes;
  p->scratch_row_bytes = arena.scratch_row_bytes;
  p->capturable = true;
  for (const node& n : g.nodes)
    if (((n.kind == node_kind::all_reduce || n.kind == node_kind::all_gather) &&
         spec_.tp_size > 1) ||
        (n.kind == node_kind::op && n.op == kernels::op::moe))
      p->capturable = false;
  plans_[static_cast<size_t>(tc * 2 + nc)] = std::move(p);
  return {};
}

int64_t executor::decode_weight_bytes() const {
  std::vector<char> counted(base_.values.size(), 0);
  int64_t n = 0;
  for (const auto& nd : base_.nodes)
    for (size_t k = 0; k < nd.in.size(); ++k) {
      const vid v = nd.in[k];
      if (v == graph::none || base_[v].kind != value_kind::weight ||
          counted[static_cast<size_t>(v)])
        continue;
      if (nd.kind == node_kind::op && nd.op == kernels::op::embedding && k == 0) continue;
      counted[static_cast<size_t>(v)] = 1;
      int64_t bytes = weights_.views[static_cast<size_t>(v)].data
                          ? weights_.views[static_cast<size_t>(v)].nbytes()
                          : 0;
      // a token reads k of a layer's E experts (its stacked weights' share k / E)
      if (nd.kind == node_kind::op && nd.op == kernels::op::moe && k >= 3) {
        const int64_t E = std::max<int64_t>(base_[v].groups, 1), used = base_[nd.in[1]].dims.back();
        bytes = bytes / E * std::min(used, E);
      }
      n += bytes;
    }
  return n;
}

std::string executor::explain(bool all_plans) const {
  std::string out = "# the shard's graph after the pipeline and tensor cuts (before fusion)\n" +
                    base_.to_string();
  const char* names[] = {"decode: rows < 8, logit rows < 8", "decode: rows < 8, logit rows >= 8",
                         "prefill: rows >= 8, logit rows < 8",
                         "prefill: rows >= 8, logit rows >= 8"};
  for (size_t k = 0; k < plans_.size(); ++k) {
    if (!all_plans && k != 0 && k != 2) continue;
    const plan& p = *plans_[k];
    int native = 0, composed = 0, reference = 0, fused = 0;
    std::string body;
    const std::string lines = p.g.to_string();
    size_t at = 0;
    for (size_t i = 0; i < p.g.nodes.size(); ++i) {
      const size_t eol = lines.find('\n', at);
      std::string line = lines.substr(at, eol - at);
      at = eol + 1;
      const node& n = p.g.nodes[i];
      if (n.note.rfind("fused", 0) == 0 || n.note.find("q8_0") != std::string::npos) ++fused;
      if (n.kind == node_kind::op) {
        const auto& k2 = p.kernels[i];
        line += "  -> " + k2.name;
        if (k2.composed)
          ++composed;
        else if (k2.where == kernels::backend::ref && be_->kind() != kernels::backend::ref)
          ++reference, line += " (reference: the backend lacks it)";
        else
          ++native;
      }
      body += line + "\n";
    }
    out += fmt::format("\n# plan for {}: {} nodes, {} fused by the passes; kernels: {} native, "
                       "{} composed, {} reference; arena {} bytes per row\n",
                       names[k], p.g.nodes.size(), fused, native, composed, reference,
                       p.arena_row_bytes);
    out += body;
  }
  return out;
}

} // namespace troupe::exec
