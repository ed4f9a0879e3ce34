// bench_util.hpp: small helpers shared by the end-to-end benchmarks: medians and
// percentiles, a clock, synthesizing the bench-134m model when it is missing, and printing
// the command line that produced a result (every number names its command).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "arch/synth.hpp"

namespace troupe::bench {

using clock = std::chrono::steady_clock;

inline double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

inline double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

inline std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

/// The bench-134m model at `dtype` in `dir` (made with `troupe synth` logic when missing).
inline std::string bench_model(const std::string& dir, const std::string& dtype_name) {
  const std::string path = dir + "/bench-134m-" + dtype_name + ".gguf";
  if (std::filesystem::exists(path)) return path;
  std::filesystem::create_directories(dir);
  synth_options o;
  o.preset = "bench-134m";
  o.type = *parse_dtype(dtype_name);
  o.out = path;
  o.vocab_gguf = std::string(TROUPE_SOURCE_DIR) + "/models/llama2-tiny-random/llama-2-tiny-random.gguf";
  std::fprintf(stderr, "synthesizing %s ...\n", path.c_str());
  if (auto st = synthesize(o); !st) std::fprintf(stderr, "synth failed: %s\n", st.error().to_string().c_str());
  return path;
}

} // namespace troupe::bench
