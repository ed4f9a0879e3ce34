// expr.cpp: parsing, hashing, evaluating and printing element-wise programs (expr.hpp).
#include "kernels/expr.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <exception>

#include <fmt/format.h>

namespace troupe::kernels {
namespace {

struct fn_entry {
  const char* name;
  ew_instr::kind k;
  int args;
};
constexpr fn_entry functions[] = {
    {"silu", ew_instr::silu, 1},   {"sigmoid", ew_instr::sigmoid, 1},
    {"tanh", ew_instr::tanh, 1},   {"exp", ew_instr::exp, 1},
    {"abs", ew_instr::abs, 1},     {"relu", ew_instr::relu, 1},
    {"gelu", ew_instr::gelu, 1},   {"gelu_tanh", ew_instr::gelu_tanh, 1},
    {"erf", ew_instr::erf, 1},     {"rsqrt", ew_instr::rsqrt, 1},
    {"sqrt", ew_instr::sqrt, 1},   {"min", ew_instr::min, 2},
    {"max", ew_instr::max, 2},     {"step", ew_instr::step, 1},
    {"expm1", ew_instr::expm1, 1}, {"softplus", ew_instr::softplus, 1},
    {"round", ew_instr::round, 1},
};

class parser {
 public:
  parser(std::string_view s, const std::vector<std::string>& vars, ew_program& p)
      : s_(s)
      , vars_(vars)
      , p_(p) {}

  expected<int> parse() {
    TROUPE_TRY_ASSIGN(r, expr());
    skip();
    if (at_ < s_.size()) return fail("unexpected '" + std::string(1, s_[at_]) + "'");
    return r;
  }

 private:
  error fail(const std::string& what) const {
    return make_error(errc::invalid_argument, "expression '{}': {} at column {}", s_, what,
                      at_ + 1);
  }
  void skip() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }
  bool eat(char c) {
    skip();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  int emit(ew_instr i) {
    p_.code.push_back(i);
    return static_cast<int>(p_.code.size()) - 1;
  }
  expected<int> expr() {
    TROUPE_TRY_ASSIGN(l, term());
    int left = l;
    for (;;) {
      if (eat('+')) {
        TROUPE_TRY_ASSIGN(r, term());
        left = bin(ew_instr::add, left, r);
      } else if (eat('-')) {
        TROUPE_TRY_ASSIGN(r, term());
        left = bin(ew_instr::sub, left, r);
      } else {
        return left;
      }
    }
  }
  expected<int> term() {
    TROUPE_TRY_ASSIGN(l, unary());
    int left = l;
    for (;;) {
      if (eat('*')) {
        TROUPE_TRY_ASSIGN(r, unary());
        left = bin(ew_instr::mul, left, r);
      } else if (eat('/')) {
        TROUPE_TRY_ASSIGN(r, unary());
        left = bin(ew_instr::div, left, r);
      } else {
        return left;
      }
    }
  }
  expected<int> unary() {
    if (eat('-')) {
      TROUPE_TRY_ASSIGN(x, unary());
      ew_instr i;
      i.k = ew_instr::neg;
      i.a = static_cast<uint8_t>(x);
      return emit(i);
    }
    return power();
  }
  expected<int> power() {
    TROUPE_TRY_ASSIGN(base, primary());
    if (!eat('^')) return base;
    skip();
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(std::string(s_.substr(at_)), &used);
    } catch (const std::exception&) {
      return fail("'^' needs a small positive integer power");
    }
    if (n < 1 || n > 8) return fail("'^' needs a power between 1 and 8");
    at_ += used;
    int r = base;
    for (int k = 1; k < n; ++k) r = bin(ew_instr::mul, r, base);
    return r;
  }
  expected<int> primary() {
    skip();
    if (at_ >= s_.size()) return fail("unexpected end");
    const char c = s_[at_];
    if (eat('(')) {
      TROUPE_TRY_ASSIGN(x, expr());
      if (!eat(')')) return fail("missing ')'");
      return x;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(std::string(s_.substr(at_)), &used);
      } catch (const std::exception&) {
        return fail("a bad number");
      }
      at_ += used;
      ew_instr i;
      i.k = ew_instr::constant;
      i.c = static_cast<float>(v);
      return emit(i);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t b = at_;
      while (at_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[at_])) || s_[at_] == '_'))
        ++at_;
      const std::string name(s_.substr(b, at_ - b));
      for (size_t v = 0; v < vars_.size(); ++v)
        if (vars_[v] == name) {
          ew_instr i;
          i.k = ew_instr::load;
          i.a = static_cast<uint8_t>(v);
          p_.sources = std::max(p_.sources, static_cast<int>(v) + 1);
          return emit(i);
        }
      for (const auto& f : functions)
        if (name == f.name) {
          if (!eat('(')) return fail("'" + name + "' needs '('");
          TROUPE_TRY_ASSIGN(a, expr());
          int b2 = 0;
          if (f.args == 2) {
            if (!eat(',')) return fail("'" + name + "' takes two arguments");
            TROUPE_TRY_ASSIGN(y, expr());
            b2 = y;
          }
          if (!eat(')')) return fail("missing ')' after the arguments of '" + name + "'");
          ew_instr i;
          i.k = f.k;
          i.a = static_cast<uint8_t>(a);
          i.b = static_cast<uint8_t>(b2);
          return emit(i);
        }
      std::string known;
      for (const auto& v : vars_) known += (known.empty() ? "" : ", ") + v;
      return fail("unknown name '" + name + "' (variables: " + known + ")");
    }
    return fail("unexpected '" + std::string(1, c) + "'");
  }
  int bin(ew_instr::kind k, int a, int b) {
    ew_instr i;
    i.k = k;
    i.a = static_cast<uint8_t>(a);
    i.b = static_cast<uint8_t>(b);
    return emit(i);
  }

  std::string_view s_;
  const std::vector<std::string>& vars_;
  ew_program& p_;
  size_t at_ = 0;
};

double gelu_tanh_d(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

} // namespace

expected<ew_program> parse_expression(std::string_view text, const std::vector<std::string>& vars) {
  ew_program p;
  p.text = std::string(text);
  parser ps(text, vars, p);
  TROUPE_TRY_ASSIGN(last, ps.parse());
  if (p.code.size() > 250)
    return make_error(errc::invalid_argument, "expression '{}' is too long", text);
  if (last != static_cast<int>(p.code.size()) - 1) { // a bare variable or constant: copy it
    ew_instr i;
    i.k = ew_instr::add;
    i.a = static_cast<uint8_t>(last);
    ew_instr z;
    z.k = ew_instr::constant;
    p.code.push_back(z);
    i.b = static_cast<uint8_t>(p.code.size() - 1);
    p.code.push_back(i);
  }
  return p;
}

uint64_t ew_program::hash() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* d, size_t n) {
    const auto* b = static_cast<const unsigned char*>(d);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& i : code) {
    mix(&i.k, 1);
    mix(&i.a, 1);
    mix(&i.b, 1);
    mix(&i.c, sizeof i.c);
  }
  mix(&sources, sizeof sources);
  return h;
}

double ew_program::eval(const double* src) const {
  double r[256] = {};
  for (size_t n = 0; n < code.size(); ++n) {
    const ew_instr& i = code[n];
    const double a = r[i.a], b = r[i.b]; // unused for loads and constants
    double v = 0;
    switch (i.k) {
    case ew_instr::load:
      v = src[i.a];
      break;
    case ew_instr::constant:
      v = i.c;
      break;
    case ew_instr::add:
      v = a + b;
      break;
    case ew_instr::sub:
      v = a - b;
      break;
    case ew_instr::mul:
      v = a * b;
      break;
    case ew_instr::div:
      v = a / b;
      break;
    case ew_instr::min:
      v = std::min(a, b);
      break;
    case ew_instr::max:
      v = std::max(a, b);
      break;
    case ew_instr::neg:
      v = -a;
      break;
    case ew_instr::silu:
      v = a / (1.0 + std::exp(-a));
      break;
    case ew_instr::sigmoid:
      v = 1.0 / (1.0 + std::exp(-a));
      break;
    case ew_instr::tanh:
      v = std::tanh(a);
      break;
    case ew_instr::exp:
      v = std::exp(a);
      break;
    case ew_instr::abs:
      v = std::fabs(a);
      break;
    case ew_instr::relu:
      v = a > 0 ? a : 0;
      break;
    case ew_instr::gelu:
      v = 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
      break;
    case ew_instr::gelu_tanh:
      v = gelu_tanh_d(a);
      break;
    case ew_instr::erf:
      v = std::erf(a);
      break;
    case ew_instr::rsqrt:
      v = 1.0 / std::sqrt(a);
      break;
    case ew_instr::sqrt:
      v = std::sqrt(a);
      break;
    case ew_instr::step:
      v = a > 0 ? 1 : 0;
      break;
    case ew_instr::expm1:
      v = std::expm1(a);
      break;
    case ew_instr::softplus:
      v = a > 20 ? a : std::log1p(std::exp(a));
      break;
    case ew_instr::round:
      v = std::nearbyint(a); // (the default rounding mode: halves to even)
      break;
    }
    r[n] = v;
  }
  return code.empty() ? 0 : r[code.size() - 1];
}

std::string ew_program::to_cpp(const std::string& src, const std::string& out) const {
  std::string s;
  for (size_t n = 0; n < code.size(); ++n) {
    const ew_instr& i = code[n];
    const std::string a = fmt::format("r{}", i.a), b = fmt::format("r{}", i.b);
    std::string v;
    switch (i.k) {
    case ew_instr::load:
      v = fmt::format("{}{}", src, i.a);
      break;
    case ew_instr::constant:
      v = fmt::format("{:.9e}f", i.c); // always a valid float literal ("2f" is not)
      break;
    case ew_instr::add:
      v = a + " + " + b;
      break;
    case ew_instr::sub:
      v = a + " - " + b;
      break;
    case ew_instr::mul:
      v = a + " * " + b;
      break;
    case ew_instr::div:
      v = a + " / " + b;
      break;
    case ew_instr::min:
      v = fmt::format("{0} < {1} ? {0} : {1}", a, b);
      break;
    case ew_instr::max:
      v = fmt::format("{0} > {1} ? {0} : {1}", a, b);
      break;
    case ew_instr::neg:
      v = "-" + a;
      break;
    case ew_instr::silu:
      v = fmt::format("{0} / (1.0f + std::exp(-{0}))", a);
      break;
    case ew_instr::sigmoid:
      v = fmt::format("1.0f / (1.0f + std::exp(-{}))", a);
      break;
    case ew_instr::tanh:
      v = fmt::format("std::tanh({})", a);
      break;
    case ew_instr::exp:
      v = fmt::format("std::exp({})", a);
      break;
    case ew_instr::abs:
      v = fmt::format("std::fabs({})", a);
      break;
    case ew_instr::relu:
      v = fmt::format("{0} > 0.0f ? {0} : 0.0f", a);
      break;
    case ew_instr::gelu:
      v = fmt::format("0.5f * {0} * (1.0f + std::erf({0} * 0.70710678118654752f))", a);
      break;
    case ew_instr::gelu_tanh:
      v = fmt::format("0.5f * {0} * (1.0f + std::tanh(0.7978845608028654f * ({0} + "
                      "0.044715f * {0} * {0} * {0})))",
                      a);
      break;
    case ew_instr::erf:
      v = fmt::format("std::erf({})", a);
      break;
    case ew_instr::rsqrt:
      v = fmt::format("1.0f / std::sqrt({})", a);
      break;
    case ew_instr::sqrt:
      v = fmt::format("std::sqrt({})", a);
      break;
    case ew_instr::step:
      v = fmt::format("{} > 0.0f ? 1.0f : 0.0f", a);
      break;
    case ew_instr::expm1:
      v = fmt::format("std::expm1({})", a);
      break;
    case ew_instr::softplus:
      v = fmt::format("{0} > 20.0f ? {0} : std::log1p(std::exp({0}))", a);
      break;
    case ew_instr::round:
      v = fmt::format("std::rint({})", a); // (as nearbyint; inlined as one instruction)
      break;
    }
    s += fmt::format("const float r{} = {};\n", n, v);
  }
  s += fmt::format("{} = r{};\n", out, code.size() - 1);
  return s;
}

std::string_view to_string(ew_instr::kind k) {
  constexpr const char* names[] = {"load",  "constant", "add",  "sub",   "mul",       "div",
                                   "min",   "max",      "neg",  "silu",  "sigmoid",   "tanh",
                                   "exp",   "abs",      "relu", "gelu",  "gelu_tanh", "erf",
                                   "rsqrt", "sqrt",     "step", "expm1", "softplus",  "round"};
  return names[static_cast<size_t>(k)];
}

} // namespace troupe::kernels
