// metrics.cpp: histogram buckets, quantiles and exposition text (metrics.hpp).
#include "core/metrics.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace troupe {

histogram histogram::latency_seconds() {
  histogram h;
  h.bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

histogram histogram::long_seconds() {
  histogram h;
  h.bounds = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,  5,
              10,   20,    40,   60,  120,  300, 600, 1800, 3600};
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

histogram histogram::token_counts() {
  histogram h;
  for (double decade = 1; decade <= 100000; decade *= 10)
    for (double m : {1.0, 2.0, 5.0}) h.bounds.push_back(m * decade);
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

void histogram::observe(double v) {
  const size_t i = std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin();
  ++counts[i];
  sum += v;
  ++count;
}

double histogram::quantile(double q) const {
  if (count == 0) return 0;
  const double target = q * static_cast<double>(count);
  double cum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (cum + counts[i] >= target && counts[i] > 0) {
      const double lo = i == 0 ? 0 : bounds[i - 1];
      const double hi = i < bounds.size() ? bounds[i] : bounds.back() * 2;
      return lo + (hi - lo) * (target - cum) / counts[i];
    }
    cum += counts[i];
  }
  return bounds.empty() ? 0 : bounds.back();
}

std::string histogram::exposition(const std::string& name, const std::string& help,
                                  const std::string& labels) const {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  const std::string sep = labels.empty() ? "" : ",";
  const std::string only = labels.empty() ? "" : "{" + labels + "}";
  int64_t cum = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cum += counts[i];
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, bounds[i], cum);
  }
  cum += counts.empty() ? 0 : counts.back();
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n{}_sum{} {}\n{}_count{} {}\n", name, labels,
                     sep, cum, name, only, sum, name, only, count);
  return out;
}

} // namespace troupe
