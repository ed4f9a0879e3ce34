// expr.hpp: element-wise expressions as data, for activations nobody wrote a kernel for
// (a spec file's "relu(x)*relu(x)", a new gating "silu(g) * u") and for chains of
// element-wise ops a pass fuses. An ew_program is straight-line code over registers:
// loads of up to four f32 sources (each the shape of the result, or a [1, C] row or [T, 1]
// column broadcast), constants, and unary / binary operations; the last register is the
// result. The reference backend interprets it in f64 (the specification); the CPU backend
// runs it compiled by the JIT (kernels/jit.hpp) or, where no compiler is present, as a
// composition of primitive ops (graph/passes: expand_elementwise). parse_expression reads
// the text form: numbers, variables, + - * / ^ (a small integer power), unary minus,
// parentheses, and silu sigmoid tanh exp expm1 softplus abs relu step gelu gelu_tanh erf rsqrt
// sqrt min max round (step(x): 1 where x > 0, else 0; round: halves to even, as torch.round).
// Tests: tests/kernels/expr_test.cpp, the op harness (op `elementwise`)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace troupe::kernels {

struct ew_instr {
  enum kind : uint8_t {
    load,     // register = source `a`
    constant, // register = c
    add,
    sub,
    mul,
    div,
    min,
    max,
    neg,
    silu,
    sigmoid,
    tanh,
    exp,
    abs,
    relu,
    gelu,      // exact (erf)
    gelu_tanh, // the tanh approximation
    erf,
    rsqrt,
    sqrt,
    step,     // 1 where a > 0, else 0 (a NaN gives 0): torch.where(x > 0, ...) as a product
    expm1,    // exp(a) - 1, exact near 0
    softplus, // log(1 + exp(a)), a itself past 20 (torch's threshold)
    round,    // the nearest integer, halves to the even one (torch.round)
  };
  kind k = constant;
  uint8_t a = 0, b = 0; // operand registers (load: the source index)
  float c = 0;          // constant
};

struct ew_program {
  std::vector<ew_instr> code; // the result is the last register
  int sources = 0;            // loads read src0 .. src(sources - 1)
  std::string text;           // as written, for logs and explain
  void* compiled = nullptr;   // the JIT's entry point, once prepared (jit.hpp)

  /// A stable hash of the code (the JIT's cache key).
  uint64_t hash() const;
  /// The value for one element, in f64: src[i] is source i's element.
  double eval(const double* src) const;
  /// Straight-line C++ over floats, one statement per register (for the JIT).
  std::string to_cpp(const std::string& src_prefix, const std::string& out) const;
};

/// Parses `text` over the named variables (source i is vars[i]).
expected<ew_program> parse_expression(std::string_view text, const std::vector<std::string>& vars);

std::string_view to_string(ew_instr::kind k);

} // namespace troupe::kernels
