// compose_util.hpp: what the composites (compose.cpp, compose_moe.cpp) share: running a
// primitive through the registry (native kernels only, so a composite never recurses) and the
// temporaries of one call (the executor's scratch arena when it gives one, else device memory).
#pragma once

#include <vector>

#include "kernels/device.hpp"
#include "kernels/registry.hpp"

namespace troupe::kernels::compose {

inline status prim(const registry& r, backend b, const op_args& a, const exec_ctx& c) {
  auto k = r.find(b, a, lookup::native_only);
  if (!k) // supports() checked every primitive; a caller that skipped it gets an error
    return make_error(errc::unsupported, "composite: no native {} kernel for {}", to_string(b),
                      to_string(a.kind));
  return k->run(a, c);
}

// Temporaries of one composite call: from the caller's scratch arena when it gives one (the
// executor plans it: no allocation per step), else allocated on the backend's device.
struct scratch {
  const exec_ctx& ctx;
  std::vector<device_buffer> bufs;
  expected<tensor_view> make(backend b, int64_t rows, int64_t cols) {
    const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
    if (ctx.scratch) {
      void* p = ctx.scratch->alloc(bytes);
      if (!p)
        return make_error(errc::out_of_memory, "composite: scratch arena exhausted ({} bytes)",
                          bytes);
      return tensor_view(p, dtype::f32, shape{rows, cols});
    }
    device* dev = get_device(b);
    if (!dev) return make_error(errc::unavailable, "composite: no {} device", to_string(b));
    TROUPE_TRY_ASSIGN(buf, device_buffer::allocate(*dev, bytes));
    bufs.push_back(std::move(buf));
    return tensor_view(bufs.back().data(), dtype::f32, shape{rows, cols});
  }
};

} // namespace troupe::kernels::compose

namespace troupe::kernels {
/// The mixture-of-experts composite (compose_moe.cpp), registered by register_composites.
void register_moe_composite(registry& r);
} // namespace troupe::kernels
