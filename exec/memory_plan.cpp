// memory_plan.cpp: sizing shards and searching placements (memory_plan.hpp).
#include "exec/memory_plan.hpp"

#include <algorithm>
#include <limits>
#include <map>
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

// Byte counts that saturate rather than wrap (a target of 2^62 tokens does not fit anywhere)
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

// A shard's bytes at a target: its weights and step arena, the KV of every token, and the
// recurrent state of every sequence (linear attention keeps one per sequence, whatever its length)
int64_t shard_need(const shard_memory& s, int64_t tokens, int64_t seqs) {
  return sat_add(sat_add(s.fixed_bytes(), sat_mul(s.kv_bytes_per_token, tokens)),
                 sat_mul(s.state_bytes_per_seq, seqs));
}

// The KV tokens a shard has room for beside its weights, arena and the sequences' states, at most
// `bound` (a shard without KV leaves it as it is)
int64_t kv_room(const shard_memory& s, int64_t budget, int64_t seqs, int64_t bound) {
  const int64_t room = budget - sat_add(s.fixed_bytes(), sat_mul(s.state_bytes_per_seq, seqs));
  return std::min(bound, room <= 0                  ? 0
                         : s.kv_bytes_per_token > 0 ? room / s.kv_bytes_per_token
                                                    : bound);
}

// Bytes of a weight as the shard holds it: matrices row by row in their dtype (or `to` when
// quantized at load), 1-D weights and constants in f32.
int64_t weight_bytes(const value& v, dtype type) {
  if (v.dims.empty()) return 0;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < v.dims.size(); ++i) rows *= v.dims[i];
  return rows * row_bytes(v.dims.size() == 1 ? dtype::f32 : type, v.dims.back());
}

shard_memory measure_shard(const graph::graph& g, const memory_options& o) {
  shard_memory sm;
  std::vector<char> read(g.values.size(), 0), kv(g.values.size(), 0);
  std::vector<char> rec(g.values.size(), 0);
  for (const auto& n : g.nodes) {
    for (vid v : n.in) {
      if (v == graph::none) continue;
      read[static_cast<size_t>(v)] = 1;
      if (g[v].kind == value_kind::state && graph::recurrent(g[v].state))
        rec[static_cast<size_t>(v)] = 1;
    }
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
    if (rec[i]) sm.state_bytes_per_seq += v.row_elems() * static_cast<int64_t>(sizeof(float));
    if (!read[i] || v.kind != value_kind::weight || v.empty) continue;
    const std::string key = graph::weight_identity(v);
    if (!key.empty() && !held.insert(key).second) continue; // one copy of a shared tensor
    sm.weight_bytes += weight_bytes(v, quantized[i] ? o.quantize : v.type);
  }
  const graph::arena_layout arena = graph::plan_arena(g);
  sm.arena_bytes = (arena.row_bytes + arena.scratch_row_bytes) * std::max<int64_t>(o.step_rows, 16);
  return sm;
}

} // namespace

namespace {

// Shards sized once each: the whole graph built once, and a shard (layers, rank) that another
// candidate holds too measured once. (Ranks of a stage are not taken as alike: an expert's
// FFN is cut from its own width, so even ranks of equal head and row counts may differ.)
class shard_sizer {
 public:
  shard_sizer(const model_source& m, graph::graph whole, const memory_options& o)
      : m_(m)
      , whole_(std::move(whole))
      , o_(o) {}

  expected<shard_memory> size(const shard_spec& spec) {
    const std::string key =
        fmt::format("{}-{} {}{} tp{}.{} ep{}", spec.layer_begin, spec.layer_end, spec.first_stage,
                    spec.last_stage, spec.tp_size, spec.tp_rank, spec.expert_parallel);
    if (auto it = seen_.find(key); it != seen_.end()) return it->second;
    TROUPE_TRY_ASSIGN(sg, cut_for_shard(m_.config, whole_, spec));
    shard_memory sm = measure_shard(sg.g, o_);
    sm.layer_begin = spec.layer_begin;
    sm.layer_end = spec.layer_end;
    seen_.emplace(key, sm);
    return sm;
  }

 private:
  const model_source& m_;
  graph::graph whole_;
  const memory_options& o_;
  std::map<std::string, shard_memory> seen_;
};

} // namespace

expected<std::vector<shard_memory>> measure_placement(const model_source& m, const placement& p,
                                                      const memory_options& o) {
  TROUPE_TRY_ASSIGN(whole, arch::build_graph(m));
  shard_sizer sizer(m, std::move(whole), o);
  std::vector<shard_memory> out;
  for (size_t s = 0; s < p.stages.size(); ++s)
    for (int r = 0; r < p.stages[s].tp; ++r) {
      TROUPE_TRY_ASSIGN(sm, sizer.size(p.shard(s, r)));
      sm.stage = static_cast<int>(s);
      sm.rank = r;
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
    if (v.type == dtype::i32) continue; // a table (DeepSeek-V4's hash routing), not parameters
    if (!held.insert(graph::weight_identity(v)).second) continue;
    int64_t n = 1;
    for (int64_t d : v.dims) n *= d;
    if (!v.w.segments.empty() && !v.dims.empty() && v.dims[0] > 0) {
      // the stored rows it reads, each once (Beam's gate bias repeats each head's over its D)
      std::set<int64_t> rows;
      for (auto [a, c] : v.w.segments)
        for (int64_t r = a; r < a + c; ++r) rows.insert(r);
      n = n / v.dims[0] * static_cast<int64_t>(rows.size());
    }
    total += n;
  }
  return total;
}

expected<memory_plan> plan_memory(const model_source& m, const device_pool& pool,
                                  plan_target target, const memory_options& o,
                                  std::optional<int> tp, std::optional<int> pp,
                                  bool expert_parallel) {
  const model_config& c = m.config;
  if (pool.machines < 1 || pool.per_machine < 1 || pool.bytes <= 0 ||
      !(pool.usable > 0 && pool.usable <= 1)) // (NaN fails both)
    return make_error(errc::invalid_argument,
                      "devices: at least one machine of one device with memory, a usable "
                      "fraction in (0, 1]");
  if (o.step_rows < 1 || o.step_rows > (int64_t{1} << 24))
    return make_error(errc::invalid_argument, "step rows {}: give 1 .. 16777216", o.step_rows);
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
  const int64_t total = int64_t{pool.machines} * pool.per_machine;
  const int64_t budget = pool.budget();
  const int64_t tokens = sat_mul(target.context, target.seqs);
  std::set<std::pair<int, int>> tried;
  TROUPE_TRY_ASSIGN(built, arch::build_graph(m));
  shard_sizer sizer(m, std::move(built), o);
  // a placement of t x p, measured; the reason it cannot be cut when it cannot
  auto attempt = [&](int t, int p) -> expected<std::string> {
    if (!tried.insert({t, p}).second) return std::string();
    if (p > c.n_layer) return fmt::format("{} stages for {} layers", p, c.n_layer);
    if (int64_t{pool.machines} * (pool.per_machine / t) < p)
      return fmt::format("{} stages of TP {} need {} machines of {} devices", p, t,
                         (p + pool.per_machine / t - 1) / (pool.per_machine / t), pool.per_machine);
    auto place = even_placement(c, t, p);
    if (!place) return place.error().message;
    if (expert_parallel)
      if (auto st = set_expert_parallel(c, *place, t); !st) return st.error().message;
    for (size_t st = 0; st < place->stages.size(); ++st)
      for (int r = 0; r < t; ++r)
        if (auto d = plan_shard(c, place->shard(st, r)); !d) return d.error().message;
    plan_candidate k;
    k.place = std::move(*place);
    k.devices = t * p;
    k.kv_tokens = std::numeric_limits<int64_t>::max();
    // shard by shard, stopping at the first that does not fit (the rest would not change
    // the answer; the candidate is then partial: its fullest device at least this)
    for (size_t st = 0; st < k.place.stages.size() && !k.partial; ++st)
      for (int r = 0; r < t && !k.partial; ++r) {
        TROUPE_TRY_ASSIGN(s, sizer.size(k.place.shard(st, r)));
        s.stage = static_cast<int>(st);
        s.rank = r;
        k.most_bytes = std::max(k.most_bytes, shard_need(s, tokens, target.seqs));
        k.kv_tokens = kv_room(s, budget, target.seqs, k.kv_tokens);
        k.shards.push_back(s);
        k.partial = k.most_bytes > budget && !(st + 1 == k.place.stages.size() && r + 1 == t);
      }
    k.fits = k.most_bytes <= budget;
    plan.tried.push_back(std::move(k));
    return std::string();
  };
  if (tp && pp) {
    if (int64_t{*tp} * *pp > total)
      return make_error(errc::invalid_argument, "--tp {} --pp {} needs {} devices, there are {}",
                        *tp, *pp, *tp * *pp, total);
    TROUPE_TRY_ASSIGN(why, attempt(*tp, *pp));
    if (!why.empty())
      return make_error(errc::invalid_argument, "--tp {} --pp {}: {}", *tp, *pp, why);
  } else {
    // a lower bound on the devices: the whole model's weights over the budget (cutting only
    // adds: a vocabulary or KV heads replicated); an upper one: a layer a stage, a machine's
    // devices a stage
    TROUPE_TRY_ASSIGN(whole, sizer.size(even_placement(c, 1, 1)->shard(0, 0)));
    const int64_t weights = whole.weight_bytes;
    const int64_t least = std::max<int64_t>(1, (weights + budget - 1) / budget);
    const int64_t most = std::min<int64_t>(total, c.n_layer * int64_t{pool.per_machine});
    if (least > most) {
      plan.why_none = fmt::format(
          "the weights alone ({:.2f} GiB) need at least {} devices of {:.2f} GiB usable; a "
          "placement here uses at most {} ({} layers, {} devices a machine, {} machines)",
          static_cast<double>(weights) / (1 << 30), least, static_cast<double>(budget) / (1 << 30),
          most, c.n_layer, pool.per_machine, pool.machines);
      return plan;
    }
    // the fewest stages of TP t, layers packed: a stage takes layers while every rank of it
    // still holds the target (measured exactly; the first and last stages carry the
    // embedding, the lm_head and the logits, so an even split wastes room elsewhere);
    // 0: a layer alone does not fit
    std::map<int, std::pair<int, placement>> packs;
    auto packed = [&](int t) -> expected<std::pair<int, placement>*> {
      if (auto it = packs.find(t); it != packs.end()) return &it->second;
      placement pl;
      int begin = 0;
      while (begin < c.n_layer) {
        int end = begin;
        for (; end < c.n_layer; ++end) {
          bool holds = true;
          for (int r = 0; r < t && holds; ++r) {
            shard_spec spec;
            spec.layer_begin = begin;
            spec.layer_end = end + 1;
            spec.tp_rank = r;
            spec.tp_size = t;
            spec.first_stage = begin == 0;
            spec.last_stage = end + 1 == c.n_layer;
            spec.expert_parallel = expert_parallel;
            if (!plan_shard(c, spec)) return &packs[t];
            TROUPE_TRY_ASSIGN(sm, sizer.size(spec));
            holds = shard_need(sm, tokens, target.seqs) <= budget;
          }
          if (!holds) break;
        }
        if (end == begin) return &packs[t]; // (0 stages)
        stage_spec st;
        st.layer_begin = begin;
        st.layer_end = end;
        st.tp = t;
        st.expert_parallel = expert_parallel;
        pl.stages.push_back(st);
        begin = end;
      }
      auto& slot = packs[t];
      slot = {static_cast<int>(pl.stages.size()), std::move(pl)};
      return &slot;
    };
    std::string last_why;
    for (int64_t d = least; d <= most && plan.chosen < 0; ++d) {
      for (int t = static_cast<int>(std::min<int64_t>(d, pool.per_machine)); t >= 1; --t) {
        if (d % t || (tp && t != *tp) || (pp && d / t != *pp)) continue;
        const int p = static_cast<int>(d / t);
        const size_t before = plan.tried.size();
        TROUPE_TRY_ASSIGN(why, attempt(t, p));
        if (!why.empty()) last_why = why;
        if (plan.tried.size() > before && plan.tried.back().fits) continue;
        if (pp || int64_t{pool.machines} * (pool.per_machine / t) < p) continue;
        TROUPE_TRY_ASSIGN(pack, packed(t));
        if (pack->first != p) continue; // fewer: found at a smaller count; more: not here
        if (plan.tried.size() > before &&
            plan.tried.back().place.to_string() == pack->second.to_string())
          continue; // (the packing is the even cut just tried)
        plan_candidate k;
        k.place = pack->second;
        k.devices = t * p;
        k.packed = true;
        k.kv_tokens = std::numeric_limits<int64_t>::max();
        for (size_t st = 0; st < k.place.stages.size(); ++st)
          for (int r = 0; r < t; ++r) {
            TROUPE_TRY_ASSIGN(sm, sizer.size(k.place.shard(st, r)));
            sm.stage = static_cast<int>(st);
            sm.rank = r;
            k.most_bytes = std::max(k.most_bytes, shard_need(sm, tokens, target.seqs));
            k.kv_tokens = kv_room(sm, budget, target.seqs, k.kv_tokens);
            k.shards.push_back(sm);
          }
        k.fits = k.most_bytes <= budget;
        plan.tried.push_back(std::move(k));
      }
      for (size_t i = 0; i < plan.tried.size() && plan.chosen < 0; ++i)
        if (plan.tried[i].fits) plan.chosen = static_cast<int>(i);
    }
    if (plan.tried.empty())
      return make_error(errc::invalid_argument,
                        "{}: no placement of its {} layers ({} heads, {} KV heads) on these "
                        "devices can be cut{}",
                        m.path, c.n_layer, c.H, c.Hkv, last_why.empty() ? "" : ": " + last_why);
  }
  for (size_t i = 0; i < plan.tried.size() && plan.chosen < 0; ++i)
    if (plan.tried[i].fits) plan.chosen = static_cast<int>(i);
  if (plan.chosen >= 0 && !tp && !pp) { // the fewest stages, then the fewest devices
    const size_t stages = plan.tried[static_cast<size_t>(plan.chosen)].place.stages.size();
    for (int p = 1; p < static_cast<int>(stages) && plan.fewer_stages < 0; ++p)
      for (int t = 1; t <= pool.per_machine && int64_t{t} * p <= total; ++t) {
        const size_t before = plan.tried.size();
        if (auto why = attempt(t, p); !why) return why.error();
        if (plan.tried.size() > before && plan.tried.back().fits) {
          plan.fewer_stages = static_cast<int>(before);
          break;
        }
      }
  }
  return plan;
}

} // namespace troupe::exec
