// registry.cpp: kernel lookup with composite fallback (registry.hpp).
#include "kernels/registry.hpp"

#include <algorithm>
#include <optional>

namespace troupe::kernels {

const registry& registry::global() {
  static const registry instance = [] {
    registry r;
    register_ref_kernels(r);
    register_cpu_kernels(r);
    register_cuda_kernels(r);
    register_composites(r);
    return r;
  }();
  return instance;
}

void registry::add(op o, backend b, std::string variant, supports_fn supports, run_fn run) {
  native_.push_back({o, b, std::move(variant), supports, run, nullptr});
}

void registry::add(op o, backend b, std::string variant, supports_fn supports, checked_run_fn run) {
  native_.push_back({o, b, std::move(variant), supports, nullptr, run});
}

void registry::add_composite(op o, std::string variant, composite_supports_fn supports,
                             composite_run_fn run) {
  composite_.push_back({o, std::move(variant), supports, run});
}

std::optional<kernel> registry::find(backend b, const op_args& args, lookup mode) const {
  if (mode != lookup::composed_only) {
    for (const auto& e : native_) {
      if (e.o != args.kind || e.b != b || !e.supports(args)) continue;
      kernel k;
      k.name = fmt::format("{}/{}/{}", to_string(b), to_string(e.o), e.variant);
      k.where = b;
      if (e.checked_run) {
        k.run = e.checked_run;
      } else {
        k.run = [run = e.run](const op_args& a, const exec_ctx& c) -> status {
          run(a, c);
          return {};
        };
      }
      return k;
    }
  }
  if (mode != lookup::native_only) {
    for (const auto& e : composite_) {
      if (e.o != args.kind || !e.supports(*this, b, args)) continue;
      kernel k;
      k.name = fmt::format("{}/{}/composed({})", to_string(b), to_string(e.o), e.variant);
      k.where = b;
      k.composed = true;
      auto run = e.run;
      const registry* self = this;
      k.run = [self, b, run](const op_args& a, const exec_ctx& c) { return run(*self, b, a, c); };
      return k;
    }
  }
  return std::nullopt;
}

std::vector<backend> registry::backends() const {
  std::vector<backend> out;
  for (const auto& e : native_)
    if (std::find(out.begin(), out.end(), e.b) == out.end()) out.push_back(e.b);
  std::sort(out.begin(), out.end());
  return out;
}

status run_op(const registry& r, backend b, const op_args& args, const exec_ctx& ctx) {
  auto k = r.find(b, args);
  if (!k)
    return make_error(errc::unsupported, "no {} kernel for {} (src0 {} {})", to_string(b),
                      to_string(args.kind), name(args.src[0].type), args.src[0].dims.to_string());
  return k->run(args, ctx);
}

} // namespace troupe::kernels
