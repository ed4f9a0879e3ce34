// metrics.hpp: a fixed-bucket histogram (Prometheus-style cumulative buckets) for latencies
// such as time to first token and inter-token latency, or for token counts, and its text
// exposition. Plain data:
// copied into stats messages. Not thread-safe (each owner updates its own).
// Tests: tests/actors/gateway_api_test.cpp (the exposition through /metrics)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

struct histogram {
  std::vector<double> bounds;  // upper bounds (le), ascending; +Inf is implicit
  std::vector<int64_t> counts; // per bucket, not cumulative; size bounds + 1
  double sum = 0;
  int64_t count = 0;

  static histogram latency_seconds(); // 1 ms .. 60 s
  static histogram long_seconds();    // 10 ms .. 1 h: end-to-end, queue, prefill, decode time
  static histogram token_counts();    // 1, 2, 5, 10, ... 500000: prompt and generation lengths
  void observe(double v);
  /// Value below which a fraction q of observations fall (linear inside a bucket).
  double quantile(double q) const;
  /// "name_bucket{le=...} n" lines, then name_sum and name_count. `labels` (may be empty):
  /// extra label pairs for every line, as `model_name="m"`.
  std::string exposition(const std::string& name, const std::string& help,
                         const std::string& labels = "") const;
};

} // namespace troupe
