// exact_activations.hpp (tests): the fixtures whose weights are MXFP4 (GPT-OSS as published)
// are compared with transformers, which multiplies the dequantized weights with f32
// activations; for them a test switches the CPU kernels to that arithmetic
// (kernels/precision.hpp) while it runs. The int8-activation path is checked against the
// reference backend instead (FastKernels.LogitsWithinEachDtypeTolerance).
#pragma once

#include <string>

#include "kernels/precision.hpp"

namespace troupe::test {

class exact_for_fixture {
 public:
  explicit exact_for_fixture(const std::string& name)
      : was_(kernels::exact_activations()) {
    if (name.find("mxfp4") != std::string::npos) kernels::set_exact_activations(true);
  }
  ~exact_for_fixture() { kernels::set_exact_activations(was_); }
  exact_for_fixture(const exact_for_fixture&) = delete;
  exact_for_fixture& operator=(const exact_for_fixture&) = delete;

 private:
  bool was_;
};

} // namespace troupe::test
