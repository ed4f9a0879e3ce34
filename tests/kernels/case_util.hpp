// case_util.hpp: what every file of harness cases builds its inputs with: a generator seeded by
// the case name (a failing case reproduces exactly), tensors from floats or ints, outputs and
// absent arguments. Included by op_cases*.cpp only.
#pragma once

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/convert.hpp"
#include "op_cases.hpp"

namespace troupe::kernels::harness {

struct gen {
  std::mt19937_64 rng;
  explicit gen(const std::string& seed)
      : rng(std::hash<std::string>{}(seed)) {}

  std::vector<float> normal(int64_t n, float stddev = 1.0f, float mean = 0.0f) {
    std::normal_distribution<float> d(mean, stddev);
    std::vector<float> v(n);
    for (auto& x : v) {
      do x = d(rng);
      while (x == 0.0f);
    }
    return v;
  }
  std::vector<float> uniform(int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  }
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
};

inline host_tensor from_floats(dtype t, shape s, const std::vector<float>& v) {
  host_tensor h{t, s, std::vector<uint8_t>(row_bytes(t, s.cols()) * s.rows())};
  from_f32(t, v.data(), h.bytes.data(), static_cast<int64_t>(v.size()));
  return h;
}

inline host_tensor from_ints(shape s, const std::vector<int32_t>& v) {
  host_tensor h{dtype::i32, s, std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(h.bytes.data(), v.data(), v.size() * 4);
  return h;
}

inline host_tensor out(dtype t, shape s) {
  return host_tensor{t, s, std::vector<uint8_t>(row_bytes(t, s.cols()) * s.rows())};
}

inline host_tensor absent() {
  return host_tensor{dtype::f32, shape{}, {}, false};
}

// The weight types every matmul-like op is checked with, and their tolerances.
inline tolerance tol_for(dtype w) {
  switch (w) {
  case dtype::f32:
    return {1e-10, 1e-4};
  case dtype::f16:
  case dtype::bf16: // AMX: activations as two bf16 halves, 16 bits of mantissa
    return {1e-8, 1e-3};
  default:
    return {5e-4, 5e-2}; // quantized: leaves room for q8 activations in dot products
  }
}

inline const dtype weight_types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0};

} // namespace troupe::kernels::harness
