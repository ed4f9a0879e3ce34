// memory_plan.cpp: sizing shards and searching placements (memory_plan.hpp).
#include "exec/memory_plan.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "arch/family.hpp"
#include "exec/shard_graph.hpp"
#include "exec/weights.hpp"
#include "graph/arena.hpp"

namespace troupe::exec {

namespace {

using graph::value;
using graph::value_kind;
using graph::vid;

// Bytes of a weight as the shard holds it: matrices row by row in their dtype (or `to` when
// quantized at load), 1-D weights and constants in f32.
int64_t weight_bytes(const value& v, dtype type) {
  if (v.dims.empty()) return 0;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < v.dims.size(); ++i) rows *= v.dims[i];
  return rows * row_bytes(v.dims.size() == 1 ? dtype::f32 : type, v.dims.back());
}

// What identifies a weight's bytes: its tensor, the rows and columns taken (a tied lm_head
// reads the embedding's)
std::string identity(const value& v) {
  if (v.w.constant) return {};
  std::string key = v.w.name;
  for (const auto& p : v.w.parts) key.append(1, '+').append(p);
  for (auto [a, n] : v.w.segments) key += fmt::format("|{}:{}", a, n);
  key += fmt::format("|{}:{}", v.w.col0, v.w.cols);
  return key;
}

shard_memory measure_shard(const graph::graph& g, const memory_options& o) {
  shard_memory sm;
  std::vector<char> read(g.values.size(), 0), kv(g.values.size(), 0);
  for (const auto& n : g.nodes) {
    for (vid v : n.in)
      if (v != graph::none) read[static_cast<size_t>(v)] = 1;
    for (vid v : n.out)
      if (g[v].kind == value_kind::state) kv[static_cast<size_t>(v)] = 1;
  }
  // the matrices --quantize would quantize (exec/quantize_weights.cpp's rule)
  std::vector<char> quantized(g.values.size(), 0);
  if (o.quantize != dtype::f32) {
    auto can = [&](vid v) {
      const value& x = g[v];
      return x.dims.size() == 2 && x.dims[0] > 1 &&
             (x.type == dtype::f32 || x.type == dtype::f16 || x.type == dtype::bf16) &&
             !x.w.transposed && x.dims[1] % block_elems(o.quantize) == 0;
    };
    const std::vector<char> readers = block_format_readers(g, can);
    for (size_t v = 0; v < g.values.size(); ++v)
      quantized[v] = g.values[v].kind == value_kind::weight && !g.values[v].empty && readers[v] &&
                     can(static_cast<vid>(v));
  }
  std::set<std::string> held;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const value& v = g.values[i];
    if (kv[i]) sm.kv_bytes_per_token += row_bytes(o.kv_dtype, v.row_elems());
    if (!read[i] || v.kind != value_kind::weight || v.empty) continue;
    const std::string key = identity(v);
    if (!key.empty() && !held.insert(key).second) continue; // one copy of a shared tensor
    sm.weight_bytes += weight_bytes(v, quantized[i] ? o.quantize : v.type);
  }
  const graph::arena_layout arena = graph::plan_arena(g);
  sm.arena_bytes = (arena.row_bytes + arena.scratch_row_bytes) * std::max<int64_t>(o.step_rows, 16);
  return sm;
}

// Whether every shard of `p` can be cut (heads, KV heads and experts split that way).
bool cuttable(const model_config& c, const placement& p) {
  for (size_t s = 0; s < p.stages.size(); ++s)
    for (int r = 0; r < p.stages[s].tp; ++r)
      if (!plan_shard(c, p.shard(s, r))) return false;
  return true;
}

} // namespace

expected<std::vector<shard_memory>> measure_placement(const model_source& m, const placement& p,
                                                      const memory_options& o) {
  TROUPE_TRY_ASSIGN(whole, arch::build_graph(m));
  std::vector<shard_memory> out;
  for (size_t s = 0; s < p.stages.size(); ++s)
    for (int r = 0; r < p.stages[s].tp; ++r) {
      const shard_spec spec = p.shard(s, r);
      TROUPE_TRY_ASSIGN(sg, cut_for_shard(m.config, whole, spec));
      shard_memory sm = measure_shard(sg.g, o);
      sm.stage = static_cast<int>(s);
      sm.rank = r;
      sm.layer_begin = spec.layer_begin;
      sm.layer_end = spec.layer_end;
      out.push_back(sm);
    }
  return out;
}

expected<int64_t> count_parameters(const model_source& m) {
  TROUPE_TRY_ASSIGN(g, arch::build_graph(m));
  std::vector<char> read(g.values.size(), 0);
  for (const auto& n : g.nodes)
    for (vid v : n.in)
      if (v != graph::none) read[static_cast<size_t>(v)] = 1;
  std::set<std::string> held;
  int64_t total = 0;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const value& v = g.values[i];
    if (!read[i] || v.kind != value_kind::weight || v.empty || v.w.constant) continue;
    if (!held.insert(identity(v)).second) continue;
    int64_t n = 1;
    for (int64_t d : v.dims) n *= d;
    total += n;
  }
  return total;
}

expected<memory_plan> plan_memory(const model_source& m, const device_pool& pool,
                                  plan_target target, const memory_options& o,
                                  std::optional<int> tp, std::optional<int> pp,
                                  bool expert_parallel) {
  const model_config& c = m.config;
  if (pool.machines < 1 || pool.per_machine < 1 || pool.bytes <= 0 || pool.usable <= 0 ||
      pool.usable > 1)
    return make_error(errc::invalid_argument,
                      "devices: at least one machine of one device with memory, a usable "
                      "fraction in (0, 1]");
  if (target.context <= 0) target.context = c.ctx;
  if (target.context <= 0 || target.seqs < 1)
    return make_error(errc::invalid_argument,
                      "give --context (the model states no maximum) and --seqs of at least 1");
  if ((tp && *tp < 1) || (pp && *pp < 1))
    return make_error(errc::invalid_argument, "--tp and --pp must be at least 1");
  if (tp && *tp > pool.per_machine)
    return make_error(errc::invalid_argument,
                      "--tp {}: a machine has {} devices (a stage's shards share one machine)", *tp,
                      pool.per_machine);
  memory_plan plan;
  plan.target = target;
  const int total = pool.machines * pool.per_machine;
  const int64_t budget = pool.budget();
  auto attempt = [&](int t, int p) -> status {
    if (p > c.n_layer || pool.machines * (pool.per_machine / t) < p) return {};
    auto place = even_placement(c, t, p);
    if (!place) return {};
    if (expert_parallel && !set_expert_parallel(c, *place, t)) return {};
    if (!cuttable(c, *place)) return {};
    plan_candidate k;
    k.place = std::move(*place);
    k.devices = t * p;
    TROUPE_TRY_ASSIGN(shards, measure_placement(m, k.place, o));
    k.shards = std::move(shards);
    k.kv_tokens = std::numeric_limits<int64_t>::max();
    const int64_t tokens = target.context * target.seqs;
    for (const auto& s : k.shards) {
      k.most_bytes = std::max(k.most_bytes, s.fixed_bytes() + s.kv_bytes_per_token * tokens);
      const int64_t room = budget - s.fixed_bytes();
      k.kv_tokens = std::min(k.kv_tokens, room <= 0                  ? 0
                                          : s.kv_bytes_per_token > 0 ? room / s.kv_bytes_per_token
                                                                     : k.kv_tokens);
    }
    k.fits = k.most_bytes <= budget;
    plan.tried.push_back(std::move(k));
    return {};
  };
  if (tp && pp) {
    if (*tp * *pp > total)
      return make_error(errc::invalid_argument, "--tp {} --pp {} needs {} devices, there are {}",
                        *tp, *pp, *tp * *pp, total);
    TROUPE_TRY(attempt(*tp, *pp));
  } else {
    for (int d = 1; d <= total && plan.chosen < 0; ++d) {
      for (int t = std::min(d, pool.per_machine); t >= 1; --t) {
        if (d % t || (tp && t != *tp) || (pp && d / t != *pp)) continue;
        TROUPE_TRY(attempt(t, d / t));
      }
      for (size_t i = 0; i < plan.tried.size() && plan.chosen < 0; ++i)
        if (plan.tried[i].fits) plan.chosen = static_cast<int>(i);
    }
  }
  if (plan.tried.empty())
    return make_error(errc::invalid_argument,
                      "{}: no placement of its {} layers ({} heads, {} KV heads) on these "
                      "devices can be cut",
                      m.path, c.n_layer, c.H, c.Hkv);
  for (size_t i = 0; i < plan.tried.size() && plan.chosen < 0; ++i)
    if (plan.tried[i].fits) plan.chosen = static_cast<int>(i);
  if (plan.chosen >= 0 && !tp && !pp) {
    const plan_candidate& k = plan.tried[static_cast<size_t>(plan.chosen)];
    const int chosen_tp = k.place.stages[0].tp;
    const size_t stages = k.place.stages.size();
    for (int t = pool.per_machine; t > chosen_tp && stages > 1 && plan.fewer_stages < 0; --t)
      for (int p = 1; p < static_cast<int>(stages) && t * p <= total; ++p) {
        const size_t before = plan.tried.size();
        TROUPE_TRY(attempt(t, p));
        if (plan.tried.size() > before && plan.tried.back().fits) {
          plan.fewer_stages = static_cast<int>(before);
          break;
        }
      }
  }
  return plan;
}

} // namespace troupe::exec
