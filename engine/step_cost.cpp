// step_cost.cpp: the weighted least-squares fit of step_cost.hpp.
#include "engine/step_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace troupe {

void step_cost::observe(int32_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  const double x = tokens;
  w_ = decay_ * w_ + 1;
  sx_ = decay_ * sx_ + x;
  sy_ = decay_ * sy_ + seconds;
  sxx_ = decay_ * sxx_ + x * x;
  sxy_ = decay_ * sxy_ + x * seconds;
  largest_ = std::max(decay_ * largest_, x);
}

bool step_cost::fitted() const {
  if (w_ < 3) return false;
  const double var = sxx_ / w_ - (sx_ / w_) * (sx_ / w_);
  return var >= 4 && per_token() > 0; // token counts that differ by a few at least
}

double step_cost::per_token() const {
  const double den = w_ * sxx_ - sx_ * sx_;
  return den > 0 ? (w_ * sxy_ - sx_ * sy_) / den : 0;
}

double step_cost::fixed() const {
  return w_ > 0 ? std::max(0.0, (sy_ - per_token() * sx_) / w_) : 0;
}

int32_t step_cost::tokens_within(double seconds) const {
  const double b = per_token();
  if (b <= 0) return std::numeric_limits<int32_t>::max();
  const double n = std::min((seconds - fixed()) / b, 2 * largest_);
  if (n <= 0) return 0;
  return n >= std::numeric_limits<int32_t>::max() ? std::numeric_limits<int32_t>::max()
                                                  : static_cast<int32_t>(n);
}

} // namespace troupe
