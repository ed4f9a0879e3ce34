// registry.hpp: the op registry: (op, backend) -> kernels, each with a `supports()` test on
// the concrete arguments (dtypes, shapes). Lookup tries a backend's native kernels first;
// when none fits, a composite builds the op from primitives the backend has (swiglu =
// mul(silu(gate), up); gelu_tanh from mul/add/tanh/scale; layernorm from sum_rows, add, mul,
// scale, rsqrt) so a backend missing an op still runs the model. Executors resolve kernels
// once, when a model is loaded, and keep the `kernel` handles. Registration happens in
// registry::global() through explicit calls (no static initialisers, which static libraries
// drop). Thread-safe for lookups after construction.
// Tests: tests/kernels/registry_test.cpp, tests/kernels/test_ops.cpp (the harness)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/op.hpp"

namespace troupe::kernels {

class registry;

using supports_fn = bool (*)(const op_args&);
/// A kernel that cannot fail once supports() accepted its arguments (host loops).
using run_fn = void (*)(const op_args&, const exec_ctx&);
/// A kernel that can (a device launch, an allocation): its status goes to the caller.
using checked_run_fn = status (*)(const op_args&, const exec_ctx&);
using composite_supports_fn = bool (*)(const registry&, backend, const op_args&);
using composite_run_fn = status (*)(const registry&, backend, const op_args&, const exec_ctx&);

/// A resolved kernel: a name for logs ("cpu/matmul/q8_0", "cpu/swiglu/composed") and a
/// callable that reports failure as a status (never aborts).
struct kernel {
  std::string name;
  backend where = backend::ref;
  bool composed = false;
  std::function<status(const op_args&, const exec_ctx&)> run;

  explicit operator bool() const { return static_cast<bool>(run); }
  status operator()(const op_args& a, const exec_ctx& c) const { return run(a, c); }
};

enum class lookup { any, native_only, composed_only };

class registry {
 public:
  /// The process-wide registry with every backend built into this binary.
  static const registry& global();

  void add(op o, backend b, std::string variant, supports_fn supports, run_fn run);
  void add(op o, backend b, std::string variant, supports_fn supports, checked_run_fn run);
  void add_composite(op o, std::string variant, composite_supports_fn supports,
                     composite_run_fn run);

  /// The first kernel for `b` whose supports() accepts `args`.
  std::optional<kernel> find(backend b, const op_args& args, lookup mode = lookup::any) const;
  bool supports(backend b, const op_args& args, lookup mode = lookup::any) const {
    return find(b, args, mode).has_value();
  }
  /// Backends with at least one registered kernel, ref first.
  std::vector<backend> backends() const;

 private:
  struct native_entry {
    op o;
    backend b;
    std::string variant;
    supports_fn supports;
    run_fn run; // one of the two
    checked_run_fn checked_run;
  };
  struct composite_entry {
    op o;
    std::string variant;
    composite_supports_fn supports;
    composite_run_fn run;
  };
  std::vector<native_entry> native_;
  std::vector<composite_entry> composite_;
};

/// Runs `args` with the kernel `b` resolves for them; an error when none supports them.
status run_op(const registry& r, backend b, const op_args& args, const exec_ctx& ctx);

void register_ref_kernels(registry& r);
void register_cpu_kernels(registry& r);
void register_composites(registry& r);
void register_cuda_kernels(registry& r); // no-op without CUDA or without a GPU

} // namespace troupe::kernels
