// reduce.hpp: the one summation every communication group uses, so that a group in one
// process and a group across processes give the same bits: out[i] = in[0][i] + in[1][i] +
// ... + in[N-1][i], added in that order (never a tree, never reassociated), f32 accumulation,
// bf16 rounded once at the end (round to nearest even). `out` may alias one of the inputs.
// check_reducible() refuses the element types it does not sum.
// Header-only; used by inproc_group.cpp and ucx_group.cpp. Tests: through both groups' tests.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "core/expected.hpp"
#include "core/half.hpp"

namespace troupe::transport {

inline bool reducible(dtype type) {
  return type == dtype::f32 || type == dtype::bf16;
}
inline status check_reducible(dtype type, const char* op) {
  if (!reducible(type))
    return make_error(errc::unsupported, "{} of {} (f32 and bf16 only)", op, name(type));
  return {};
}

/// Sums elements [b, e) of `nin` inputs in rank order into out (same element type).
inline void sum_in_rank_order(const void* const* in, int nin, void* out, int64_t b, int64_t e,
                              dtype type) {
  if (type == dtype::f32) {
    auto* o = static_cast<float*>(out);
    for (int64_t i = b; i < e; ++i) {
      float acc = static_cast<const float*>(in[0])[i];
      for (int k = 1; k < nin; ++k) acc += static_cast<const float*>(in[k])[i];
      o[i] = acc;
    }
  } else {
    auto* o = static_cast<uint16_t*>(out);
    for (int64_t i = b; i < e; ++i) {
      float acc = bf16_to_f32(static_cast<const uint16_t*>(in[0])[i]);
      for (int k = 1; k < nin; ++k) acc += bf16_to_f32(static_cast<const uint16_t*>(in[k])[i]);
      o[i] = f32_to_bf16(acc);
    }
  }
}

} // namespace troupe::transport
