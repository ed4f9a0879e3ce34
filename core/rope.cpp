// rope.cpp: inverse frequencies for each rope scaling (rope.hpp). The llama3 and YaRN
// branches follow the published formulas (Meta's Llama 3.1 reference, the YaRN paper).
#include "core/rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace troupe {
namespace {

double yarn_get_mscale(double scale, double m) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * m * std::log(scale) + 1.0;
}

// Dimension index at which a frequency completes `rotations` turns over the original context.
double yarn_correction_dim(double rotations, int dim, double base, double ctx) {
  return dim * std::log(ctx / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

} // namespace

std::string_view to_string(rope_scaling s) {
  switch (s) {
  case rope_scaling::none:
    return "none";
  case rope_scaling::linear:
    return "linear";
  case rope_scaling::llama3:
    return "llama3";
  case rope_scaling::yarn:
    return "yarn";
  case rope_scaling::longrope:
    return "longrope";
  case rope_scaling::factors:
    return "factors";
  }
  return "?";
}

bool rope_spec::operator==(const rope_spec& o) const {
  return layout == o.layout && rot_dim == o.rot_dim && theta == o.theta && scaling == o.scaling &&
         factor == o.factor && low_freq_factor == o.low_freq_factor &&
         high_freq_factor == o.high_freq_factor && orig_ctx == o.orig_ctx &&
         beta_fast == o.beta_fast && beta_slow == o.beta_slow && attn_factor == o.attn_factor &&
         mscale == o.mscale && mscale_all_dim == o.mscale_all_dim &&
         yarn_truncate == o.yarn_truncate && short_factor == o.short_factor &&
         long_factor == o.long_factor && use_long == o.use_long && turning == o.turning &&
         rot_offset == o.rot_offset && inverse == o.inverse && learned == o.learned;
}

rope_table rope_inv_freq(const rope_spec& spec) {
  rope_table out;
  const int half = spec.rot_dim / 2;
  out.inv_freq.resize(half);
  for (int i = 0; i < half; ++i)
    out.inv_freq[i] = 1.0 / std::pow(spec.theta, (2.0 * i) / spec.rot_dim);
  switch (spec.scaling) {
  case rope_scaling::none:
    break;
  case rope_scaling::linear:
    for (auto& f : out.inv_freq) f /= spec.factor;
    break;
  case rope_scaling::llama3: {
    const double low_wavelen = spec.orig_ctx / spec.low_freq_factor;
    const double high_wavelen = spec.orig_ctx / spec.high_freq_factor;
    // in transformers' order: with high_freq_factor <= low_freq_factor (Llama 4 Scout's 1 and
    // 1) no band is smoothed, a wavelength past low_wavelen is divided and the rest kept
    for (auto& f : out.inv_freq) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_wavelen) { // low frequency: interpolated
        f /= spec.factor;
        continue;
      }
      if (wavelen < high_wavelen) continue; // high frequency: unchanged
      const double smooth = (spec.orig_ctx / wavelen - spec.low_freq_factor) /
                            (spec.high_freq_factor - spec.low_freq_factor);
      f = (1.0 - smooth) * f / spec.factor + smooth * f;
    }
    break;
  }
  case rope_scaling::yarn: {
    const int dim = spec.rot_dim;
    double low = yarn_correction_dim(spec.beta_fast, dim, spec.theta, spec.orig_ctx);
    double high = yarn_correction_dim(spec.beta_slow, dim, spec.theta, spec.orig_ctx);
    if (spec.yarn_truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001; // avoid a zero-width ramp
    for (int i = 0; i < half; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp; // share of the original frequency
      const double f = out.inv_freq[i];
      out.inv_freq[i] = f / spec.factor * (1.0 - extrapolation) + f * extrapolation;
    }
    if (spec.attn_factor > 0)
      out.attn_factor = spec.attn_factor;
    else if (spec.mscale > 0 && spec.mscale_all_dim > 0)
      out.attn_factor = yarn_get_mscale(spec.factor, spec.mscale) /
                        yarn_get_mscale(spec.factor, spec.mscale_all_dim);
    else
      out.attn_factor = yarn_get_mscale(spec.factor, 1.0);
    break;
  }
  case rope_scaling::longrope: {
    const auto& ext = spec.use_long ? spec.long_factor : spec.short_factor;
    for (int i = 0; i < half && i < static_cast<int>(ext.size()); ++i) out.inv_freq[i] /= ext[i];
    out.attn_factor = spec.attn_factor > 0 ? spec.attn_factor : 1.0;
    break;
  }
  case rope_scaling::factors:
    for (int i = 0; i < half && i < static_cast<int>(spec.short_factor.size()); ++i)
      out.inv_freq[i] /= spec.short_factor[i];
    break;
  }
  for (int i = 0; i < half && i < static_cast<int>(spec.learned.size()); ++i)
    out.inv_freq[i] *= spec.learned[i];
  if (spec.turning > 0) // proportional: the pairs past `turning` stand still
    for (int i = spec.turning; i < half; ++i) out.inv_freq[i] = 0.0;
  return out;
}

} // namespace troupe
