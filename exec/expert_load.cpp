// expert_load.cpp: the process-wide expert token counters (expert_load.hpp).
#include "exec/expert_load.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

namespace troupe::exec {
namespace {

struct layer_counts {
  int n = 0;
  std::unique_ptr<std::atomic<int64_t>[]> tokens;
};

struct table {
  std::mutex mu; // guards growth of `layers` (counts themselves are atomics)
  std::vector<std::shared_ptr<layer_counts>> layers;
};

table& global() {
  static table t;
  return t;
}

std::shared_ptr<layer_counts> layer_of(int layer, int n_expert) {
  auto& t = global();
  std::lock_guard<std::mutex> lk(t.mu);
  if (static_cast<int>(t.layers.size()) <= layer) t.layers.resize(static_cast<size_t>(layer) + 1);
  auto& l = t.layers[static_cast<size_t>(layer)];
  if (!l || l->n < n_expert) { // first use, or a model with more experts loaded later
    auto grown = std::make_shared<layer_counts>();
    grown->n = n_expert;
    grown->tokens = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(n_expert));
    for (int e = 0; e < n_expert; ++e)
      grown->tokens[static_cast<size_t>(e)] =
          l && e < l->n ? l->tokens[static_cast<size_t>(e)].load() : 0;
    l = std::move(grown);
  }
  return l;
}

} // namespace

void count_experts(int layer, int n_expert, std::span<const int32_t> ids) {
  if (layer < 0 || n_expert <= 0) return;
  const auto l = layer_of(layer, n_expert);
  for (int32_t e : ids)
    if (e >= 0 && e < l->n)
      l->tokens[static_cast<size_t>(e)].fetch_add(1, std::memory_order_relaxed);
}

std::vector<expert_count> expert_counts() {
  std::vector<std::shared_ptr<layer_counts>> layers;
  {
    auto& t = global();
    std::lock_guard<std::mutex> lk(t.mu);
    layers = t.layers;
  }
  std::vector<expert_count> out;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (!layers[l]) continue;
    for (int e = 0; e < layers[l]->n; ++e)
      out.push_back({static_cast<int>(l), e, layers[l]->tokens[static_cast<size_t>(e)].load()});
  }
  return out;
}

std::vector<int64_t> flatten(const std::vector<expert_count>& counts) {
  std::vector<int64_t> out;
  out.reserve(counts.size() * 3);
  for (const auto& c : counts) out.insert(out.end(), {c.layer, c.expert, c.tokens});
  return out;
}

expected<std::vector<expert_count>> unflatten(std::span<const int64_t> v) {
  if (v.size() % 3)
    return make_error(errc::protocol_error, "expert counts: {} values, not triples", v.size());
  constexpr int64_t limit = int64_t{1} << 20; // layers and experts of any published model
  std::vector<expert_count> out;
  out.reserve(v.size() / 3);
  for (size_t i = 0; i < v.size(); i += 3) {
    if (v[i] < 0 || v[i] >= limit || v[i + 1] < 0 || v[i + 1] >= limit || v[i + 2] < 0)
      return make_error(errc::protocol_error,
                        "expert counts: entry {} (layer {}, expert {}, tokens {}) out of range",
                        i / 3, v[i], v[i + 1], v[i + 2]);
    out.push_back({static_cast<int>(v[i]), static_cast<int>(v[i + 1]), v[i + 2]});
  }
  return out;
}

std::vector<expert_count> merge_counts(std::vector<expert_count> a,
                                       const std::vector<expert_count>& b) {
  a.insert(a.end(), b.begin(), b.end());
  auto key = [](const expert_count& c) { return std::pair{c.layer, c.expert}; };
  std::sort(a.begin(), a.end(), [&](const auto& x, const auto& y) { return key(x) < key(y); });
  std::vector<expert_count> out;
  for (const auto& c : a) {
    if (!out.empty() && key(out.back()) == key(c))
      out.back().tokens += c.tokens;
    else
      out.push_back(c);
  }
  return out;
}

} // namespace troupe::exec
