// sampler.cpp: penalties, truncation and the seeded draw (sampler.hpp). Order of processing
// follows the common engines: penalties -> temperature -> top-k -> softmax -> top-p -> min-p.
#include "core/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace troupe {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int32_t argmax(std::span<const float> x) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(x.size()); ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

} // namespace

status sampling_params::validate() const {
  auto bad = [](std::string_view field, std::string_view why) {
    return make_error(errc::invalid_argument, "{} {}", field, why);
  };
  if (!(temperature >= 0.0f && temperature <= 2.0f))
    return bad("temperature", "must be between 0 and 2");
  if (top_k < 0) return bad("top_k", "must be 0 (off) or positive");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", "must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", "must be in [0, 1]");
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f))
    return bad("repetition_penalty", "must be in (0, 10]");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return bad("presence_penalty", "must be between -2 and 2");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return bad("frequency_penalty", "must be between -2 and 2");
  if (top_logprobs < 0 || top_logprobs > 20) return bad("top_logprobs", "must be between 0 and 20");
  for (auto [t, b] : logit_bias)
    if (t < 0 || !(b >= -100.0f && b <= 100.0f))
      return bad("logit_bias", "needs token ids >= 0 and biases between -100 and 100");
  return {};
}

double sample_uniform(uint64_t seed, uint64_t step) {
  const uint64_t r = splitmix64(splitmix64(seed) ^ (step * 0xd1b54a32d192ed03ull + 1));
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
}

namespace {

// log-sum-exp of the raw logits, for logprobs
double log_sum_exp(std::span<const float> logits) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v) - mx);
  return mx + std::log(s);
}

// The n best ids by raw logit (descending, ties: lower id) with their logprobs.
std::vector<std::pair<int32_t, float>> top_n(std::span<const float> logits, int n, double lse) {
  const auto V = static_cast<int32_t>(logits.size());
  std::vector<int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  n = std::min(n, V);
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<std::pair<int32_t, float>> out;
  for (int32_t i = 0; i < n; ++i)
    out.emplace_back(idx[i], static_cast<float>(logits[idx[i]] - lse));
  return out;
}

} // namespace

sample_result score(std::span<const float> logits, int32_t target, int top) {
  sample_result out;
  if (logits.empty() || target < 0 || target >= static_cast<int32_t>(logits.size())) return out;
  const double lse = log_sum_exp(logits);
  out.token = target;
  out.logprob = static_cast<float>(logits[target] - lse);
  if (top > 0) out.top = top_n(logits, top, lse);
  return out;
}

sample_result sample(std::span<const float> logits, const sampling_params& p,
                     std::span<const int32_t> history, uint64_t step,
                     std::span<const int32_t> suppress, std::span<const uint64_t> allow) {
  sample_result out;
  const auto V = static_cast<int32_t>(logits.size());
  if (V == 0) return out;
  // log-sum-exp of the raw logits, for logprobs
  const double lse = p.logprobs || p.top_logprobs > 0 ? log_sum_exp(logits) : 0.0;
  std::vector<float> x(logits.begin(), logits.end());
  for (auto [t, b] : p.logit_bias)
    if (t >= 0 && t < V) x[t] += b;
  if (p.has_penalties() && !history.empty()) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t t : history)
      if (t >= 0 && t < V) ++counts[t];
    for (auto [t, n] : counts) {
      float& v = x[t];
      if (p.repetition_penalty != 1.0f)
        v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
      v -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
    }
  }
  for (int32_t t : suppress)
    if (t >= 0 && t < V) x[t] = -INFINITY;
  if (!allow.empty())
    for (int32_t t = 0; t < V; ++t) {
      const auto w = static_cast<size_t>(t >> 6);
      if (w >= allow.size() || !((allow[w] >> (t & 63)) & 1)) x[t] = -INFINITY;
    }
  if (p.greedy()) {
    out.token = argmax(x);
  } else {
    // candidates sorted by processed logit (descending, ties: lower id)
    std::vector<int32_t> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    const int32_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
    auto better = [&x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
    idx.resize(k);
    std::vector<double> prob(k);
    const double mx = x[idx[0]] / p.temperature;
    double sum = 0;
    for (int32_t i = 0; i < k; ++i) sum += prob[i] = std::exp(x[idx[i]] / p.temperature - mx);
    for (auto& q : prob) q /= sum;
    int32_t keep = k;
    if (p.top_p < 1.0f) {
      double cum = 0;
      for (int32_t i = 0; i < k; ++i) {
        cum += prob[i];
        if (cum >= p.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    if (p.min_p > 0.0f) {
      const double floor = p.min_p * prob[0];
      int32_t m = 0;
      while (m < keep && prob[m] >= floor) ++m;
      keep = std::max(m, 1);
    }
    double total = 0;
    for (int32_t i = 0; i < keep; ++i) total += prob[i];
    const double u = sample_uniform(p.seed, step) * total;
    double cum = 0;
    out.token = idx[keep - 1];
    for (int32_t i = 0; i < keep; ++i) {
      cum += prob[i];
      if (u < cum) {
        out.token = idx[i];
        break;
      }
    }
  }
  if (p.logprobs || p.top_logprobs > 0) {
    out.logprob = static_cast<float>(logits[out.token] - lse);
    if (p.top_logprobs > 0) out.top = top_n(logits, p.top_logprobs, lse);
  }
  return out;
}

} // namespace troupe
