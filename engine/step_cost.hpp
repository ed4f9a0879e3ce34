// step_cost.hpp: how long a step takes as a function of its tokens, learnt from the steps the
// engine ran: seconds = fixed + per_token * tokens, fitted by exponentially weighted least
// squares (recent steps count most, so the fit follows the model, the machine and its load).
// The scheduler asks how many tokens fit a target step time, so that a step carrying decoding
// streams takes only the prefill share that keeps it near the target (stall-free batching).
// Tests: tests/engine/scheduler_test.cpp
#pragma once

#include <cstdint>

namespace troupe {

class step_cost {
 public:
  /// `decay`: the weight an observation keeps per later observation.
  explicit step_cost(double decay = 0.97)
      : decay_(decay) {}

  void observe(int32_t tokens, double seconds);
  /// Whether the fit is usable: observations of different sizes, and a positive cost per token.
  bool fitted() const;
  double per_token() const;
  double fixed() const;
  /// The largest token count predicted to run within `seconds` (0 when even the fixed part
  /// does not fit), and never more than twice the largest step seen lately: the line is not
  /// trusted far beyond the sizes it was fitted on. Only meaningful when fitted().
  int32_t tokens_within(double seconds) const;

 private:
  double decay_;
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  double largest_ = 0; // decays like the weights
};

} // namespace troupe
