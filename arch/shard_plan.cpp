// shard_plan.cpp: slicing arithmetic and placement parsing (shard_plan.hpp).
#include "arch/shard_plan.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <sstream>
#include <system_error>

namespace troupe {

expected<shard_dims> plan_shard(const model_config& c, const shard_spec& s) {
  const int64_t tp = s.tp_size, r = s.tp_rank;
  if (tp <= 0 || r < 0 || r >= tp)
    return make_error(errc::invalid_argument, "tp rank {} of {}", r, tp);
  if (c.H % tp)
    return make_error(errc::invalid_argument, "{} attention heads cannot be split over TP {}", c.H,
                      tp);
  for (size_t l = 0; l < c.heads_by_layer.size(); ++l)
    if (c.heads_by_layer[l] % tp)
      return make_error(errc::invalid_argument,
                        "layer {}'s {} attention heads cannot be split over TP {}", l,
                        c.heads_by_layer[l], tp);
  shard_dims d;
  d.Hs = c.H / tp;
  d.h0 = r * d.Hs;
  auto kv_cut = [&](int64_t Hkv, int64_t& first, int64_t& count) -> status {
    if (Hkv >= tp) {
      if (Hkv % tp)
        return make_error(errc::invalid_argument, "{} KV heads cannot be split over TP {}", Hkv,
                          tp);
      count = Hkv / tp;
      first = r * count;
    } else {
      if (tp % Hkv)
        return make_error(errc::invalid_argument,
                          "TP {} is not a multiple of the {} KV heads to replicate", tp, Hkv);
      count = 1;
      first = r * Hkv / tp; // every rank holding query heads of one group replicates its KV head
    }
    return {};
  };
  TROUPE_TRY(kv_cut(c.Hkv, d.kv0, d.Hkv_s));
  for (int64_t Hkv : c.kv_heads_by_layer) {
    auto& [first, count] = d.layer_kv.emplace_back();
    TROUPE_TRY(kv_cut(Hkv, first, count));
  }
  // (Doge's dynamic mask sums dt_proj over the ranks' values: each KV head on one rank only)
  if (c.doge && c.Hkv < tp)
    return make_error(errc::invalid_argument,
                      "Doge's dynamic mask reads every KV head's values once: TP {} exceeds its {} "
                      "KV heads",
                      tp, c.Hkv);
  TROUPE_TRY(kv_cut(c.Hkv_full > 0 ? c.Hkv_full : c.Hkv, d.kvf0, d.Hkvf_s));
  auto split = [&](int64_t n, int64_t block, int64_t i) {
    const int64_t units = n / block;
    int64_t b = units * i / tp * block;
    return i == tp ? n : b;
  };
  const int64_t fb = s.ffn_block > 0 ? s.ffn_block : 1;
  if (c.F % fb)
    return make_error(errc::invalid_argument, "FFN size {} is not a multiple of the block {}", c.F,
                      fb);
  d.f0 = split(c.F, fb, r);
  d.Fs = split(c.F, fb, r + 1) - d.f0;
  if (d.Fs <= 0)
    return make_error(errc::invalid_argument, "TP {} leaves shard {} no FFN rows", tp, r);
  // gated DeltaNet: key heads and their value heads split alike (a short convolution's channel
  // groups are its value heads); Mamba-2's one group of B and C is whole on every rank
  if (c.lin_k_heads > 0 || c.lin_v_heads > 0) {
    // (Zamba's mixer: x_proj and dt_proj per mamba head, each head whole on one rank)
    if (c.zamba && c.ssm_dt_rank > 0 && c.lin_k_heads % tp)
      return make_error(errc::invalid_argument,
                        "Zamba's {} mamba heads cannot be split over TP {} (each head's x_proj "
                        "reads all of its channels)",
                        c.lin_k_heads, tp);
    const bool whole_group = c.mamba && c.lin_k_heads == 1 && !(c.zamba && c.ssm_dt_rank > 0);
    if ((c.lin_k_heads % tp && !whole_group) || c.lin_v_heads % tp)
      return make_error(
          errc::invalid_argument,
          "{} linear attention key heads (Mamba: groups) and {} value heads (Mamba: heads) cannot "
          "be split over TP {}",
          c.lin_k_heads, c.lin_v_heads, tp);
    d.Hlk_s = whole_group ? 1 : c.lin_k_heads / tp, d.lk0 = whole_group ? 0 : r * d.Hlk_s;
    d.Hlv_s = c.lin_v_heads / tp, d.lv0 = r * d.Hlv_s;
  }
  d.v0 = split(c.V, 1, r);
  d.Vs = split(c.V, 1, r + 1) - d.v0;
  d.e0 = 0;
  d.Es = c.n_expert;
  if (c.diff_attn && ((c.H / 2) % tp || (c.Hkv / 2) % tp))
    return make_error(errc::invalid_argument,
                      "DiffLlama's differential attention pairs head h with head h + H / 2 and "
                      "reads the value heads by halves: TP {} must divide each half ({} heads, {} "
                      "KV heads); choose another --tp, or pipeline stages (--pp)",
                      tp, c.H / 2, c.Hkv / 2);
  if (c.expert_post_norm && tp > 1 && !s.expert_parallel)
    return make_error(errc::invalid_argument,
                      "each expert's output is RMS-normed whole (Ergo's experts): TP {} would "
                      "split them by rows; spread them with expert parallelism (--ep {})",
                      tp, tp);
  if (s.expert_parallel) {
    if (c.n_expert <= 0)
      return make_error(errc::invalid_argument, "expert parallelism: the model has no experts");
    if (c.n_expert % tp)
      return make_error(errc::invalid_argument, "{} experts cannot be spread over {} shards",
                        c.n_expert, tp);
    d.Es = c.n_expert / tp;
    d.e0 = r * d.Es;
  }
  return d;
}

shard_spec placement::shard(size_t stage, int rank) const {
  const stage_spec& st = stages.at(stage);
  shard_spec spec;
  spec.layer_begin = st.layer_begin;
  spec.layer_end = st.layer_end;
  spec.tp_rank = rank;
  spec.tp_size = st.tp;
  spec.expert_parallel = st.expert_parallel;
  spec.first_stage = stage == 0;
  spec.last_stage = stage + 1 == stages.size();
  return spec;
}

int placement::total_shards() const {
  int n = 0;
  for (const auto& s : stages) n += s.tp;
  return n;
}

std::string placement::to_string() const {
  std::string out;
  for (const auto& s : stages) {
    if (!out.empty()) out += ",";
    out += fmt::format("{}-{}:tp{}{}", s.layer_begin, s.layer_end - 1, s.tp,
                       s.expert_parallel ? "ep" : "");
    for (size_t i = 0; i < s.devices.size(); ++i) out += (i ? ";" : "@") + s.devices[i];
  }
  return out;
}

expected<placement> even_placement(const model_config& c, int tp, int pp) {
  if (tp < 1 || pp < 1)
    return make_error(errc::invalid_argument, "--tp and --pp must be at least 1");
  if (pp > c.n_layer)
    return make_error(errc::invalid_argument, "--pp {} exceeds the model's {} layers", pp,
                      c.n_layer);
  placement p;
  // even stages; where a layer reads an earlier layer's work besides the residual (Gemma 4's
  // shared KV caches, GLM-5's shared sparse-attention selections), each cut moves to the nearest
  // layer no later layer reads across
  const int64_t L = c.n_layer;
  std::vector<uint8_t> valid(static_cast<size_t>(L) + 1, 1);
  std::vector<int64_t> above(static_cast<size_t>(L) + 1, 0); // valid cuts after b
  int64_t lowest = L; // the lowest layer read by any layer from b on
  for (int64_t b = L - 1; b >= 1; --b) {
    lowest = std::min(lowest, c.layer_reads_from(b));
    valid[static_cast<size_t>(b)] = lowest >= b;
    above[static_cast<size_t>(b - 1)] =
        above[static_cast<size_t>(b)] + valid[static_cast<size_t>(b)];
  }
  std::vector<int64_t> cuts;
  int64_t at = 0;
  for (int s = 1; s < pp; ++s) {
    at += L / pp + (s - 1 < L % pp ? 1 : 0); // the even split's cut
    int64_t best = -1;
    for (int64_t b = (cuts.empty() ? 1 : cuts.back() + 1); b < L; ++b) {
      // (and room above for the cuts still to make)
      if (!valid[static_cast<size_t>(b)] || above[static_cast<size_t>(b)] < pp - 1 - s) continue;
      if (best < 0 || std::abs(b - at) < std::abs(best - at)) best = b;
    }
    if (best < 0)
      return make_error(errc::invalid_argument,
                        "--pp {}: layers that read earlier layers' KV caches or selections leave "
                        "too few places to cut {} layers",
                        pp, L);
    cuts.push_back(best);
  }
  cuts.push_back(L);
  int begin = 0;
  for (int64_t end : cuts) {
    p.stages.push_back({begin, static_cast<int>(end), tp, {}});
    begin = static_cast<int>(end);
  }
  return p;
}

status set_expert_parallel(const model_config& c, placement& p, int ep) {
  if (ep == 1) return {};
  if (c.n_expert <= 0)
    return make_error(errc::invalid_argument, "--ep {}: the model has no experts", ep);
  for (auto& st : p.stages) {
    if (st.tp != ep)
      return make_error(errc::invalid_argument,
                        "--ep {}: expert parallelism spreads a stage's experts over its {} TP "
                        "shards (attention stays TP), so give --ep 1 or --ep {}",
                        ep, st.tp, st.tp);
    st.expert_parallel = true;
  }
  return {};
}

namespace {

// A non-negative integer, all of s.
bool parse_count(std::string_view s, int& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && out >= 0;
}

// "A" (b = a) or "A-B", non-negative.
bool parse_range(std::string_view s, int& a, int& b) {
  const auto dash = s.find('-');
  if (dash == std::string_view::npos) return parse_count(s, a) && parse_count(s, b);
  return parse_count(s.substr(0, dash), a) && parse_count(s.substr(dash + 1), b);
}

} // namespace

expected<placement> parse_placement(const model_config& c, const std::string& text) {
  placement p;
  std::stringstream ss(text);
  std::string item;
  int next = 0;
  auto bad = [&](std::string_view why) {
    return make_error(errc::invalid_argument, "--placement '{}': {}", text, why);
  };
  while (std::getline(ss, item, ',')) {
    stage_spec st;
    std::string devs;
    if (auto at = item.find('@'); at != std::string::npos) {
      devs = item.substr(at + 1);
      item = item.substr(0, at);
    }
    const auto colon = item.find(':');
    const std::string range = item.substr(0, colon);
    int a = 0, b = 0;
    if (!parse_range(range, a, b)) return bad(fmt::format("bad layer range '{}'", range));
    if (a != next)
      return bad(fmt::format("stage starting at layer {} should start at {}", a, next));
    if (b < a || b >= c.n_layer)
      return bad(fmt::format("layers {}-{} outside 0-{}", a, b, c.n_layer - 1));
    st.layer_begin = a;
    st.layer_end = b + 1;
    if (colon != std::string::npos) {
      std::string_view t = std::string_view(item).substr(colon + 1);
      if (t.rfind("tp", 0) == 0) t.remove_prefix(2);
      if (t.ends_with("ep")) {
        t.remove_suffix(2);
        st.expert_parallel = true;
      }
      if (!parse_count(t, st.tp) || st.tp < 1)
        return bad(fmt::format("bad TP width in '{}'", item));
      if (st.expert_parallel && c.n_expert <= 0)
        return bad(fmt::format("'{}': the model has no experts to spread", item));
    }
    std::stringstream ds(devs);
    for (std::string d; std::getline(ds, d, ';');) {
      if (d.empty()) continue;
      if (auto dev = parse_device(d); !dev) return bad(dev.error().message);
      st.devices.push_back(d);
    }
    if (st.devices.size() > 1 && static_cast<int>(st.devices.size()) != st.tp)
      return bad(fmt::format("stage {}-{} names {} devices for TP {} (give one, or one per rank)",
                             a, b, st.devices.size(), st.tp));
    next = b + 1;
    p.stages.push_back(std::move(st));
  }
  if (p.stages.empty()) return bad("no stages");
  if (next != c.n_layer)
    return bad(fmt::format("layers {}-{} are not placed", next, c.n_layer - 1));
  return p;
}

expected<shard_device> parse_device(std::string_view text) {
  shard_device d;
  d.text = std::string(text);
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      "device '{}': give cpu, cpu:A-B (CPUs to pin), cuda or cuda:N", text);
  };
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  const std::string_view rest =
      colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (kind == "cuda") {
    d.cuda = true;
    if (colon != std::string_view::npos && !parse_count(rest, d.index)) return bad();
    return d;
  }
  if (kind != "cpu") return bad();
  if (colon == std::string_view::npos) return d;
  int a = 0, b = 0;
  if (!parse_range(rest, a, b) || b < a || b - a > 4096) return bad();
  for (int cpu = a; cpu <= b; ++cpu) d.cpus.push_back(cpu);
  return d;
}

expected<shard_device> device_of(const stage_spec& s, int rank) {
  if (s.devices.empty()) {
    shard_device d;
    d.text = "cpu";
    return d;
  }
  if (s.devices.size() == 1) return parse_device(s.devices[0]);
  if (rank < 0 || rank >= static_cast<int>(s.devices.size()))
    return make_error(errc::invalid_argument, "TP rank {} of a stage with {} devices", rank,
                      s.devices.size());
  return parse_device(s.devices[static_cast<size_t>(rank)]);
}

} // namespace troupe
