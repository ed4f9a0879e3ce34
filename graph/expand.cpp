// expand.cpp: element-wise programs as compositions of primitive ops (passes.hpp), for
// backends where the JIT cannot build them. Constants fold into `scale` (x * s + b); min and
// max of two tensors are (a + b +- |a - b|) / 2; division is a reciprocal and a product;
// step (x > 0) is exact through two scale-and-clamp stages.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "graph/passes.hpp"

namespace troupe::graph {
namespace {

using kernels::ew_instr;
using kernels::op;

struct operand {
  bool is_const = false;
  double c = 0;
  vid v = none;
};

class expander {
 public:
  expander(graph& g, const node& n, std::vector<node>& out)
      : g_(g)
      , n_(n)
      , out_(out) {}

  // False when an instruction has no composition (erf, an all-broadcast binary op).
  bool run() {
    const auto& code = n_.p.program->code;
    std::vector<operand> r(code.size());
    for (size_t k = 0; k < code.size(); ++k) {
      const ew_instr& i = code[k];
      const bool last = k + 1 == code.size();
      const vid into = last ? n_.out[0] : none;
      operand a = i.k == ew_instr::load || i.k == ew_instr::constant ? operand{} : r[i.a];
      operand b = r[i.b];
      operand& o = r[k];
      switch (i.k) {
      case ew_instr::load:
        o.v = n_.in[i.a];
        if (last) o.v = emit(op::scale, {o.v}, into, 1.0f, 0.0f);
        break;
      case ew_instr::constant:
        o = {true, i.c, none};
        if (last) return false; // a constant result: nothing to broadcast it over
        break;
      case ew_instr::add:
      case ew_instr::sub:
      case ew_instr::mul:
      case ew_instr::div:
      case ew_instr::min:
      case ew_instr::max: {
        if (a.is_const && b.is_const) {
          o = {true, fold(i.k, a.c, b.c), none};
          if (last) return false;
          break;
        }
        auto res = binary(i.k, a, b, into);
        if (!res) return false;
        o.v = *res;
        break;
      }
      default: {
        if (a.is_const) {
          if (last) return false;
          o = {true, fold_unary(i.k, a.c), none};
          break;
        }
        auto res = unary(i.k, a.v, into);
        if (!res) return false;
        o.v = *res;
        break;
      }
      }
    }
    return true;
  }

 private:
  static double fold(ew_instr::kind k, double a, double b) {
    switch (k) {
    case ew_instr::add:
      return a + b;
    case ew_instr::sub:
      return a - b;
    case ew_instr::mul:
      return a * b;
    case ew_instr::div:
      return a / b;
    case ew_instr::min:
      return std::min(a, b);
    default:
      return std::max(a, b);
    }
  }
  static double fold_unary(ew_instr::kind k, double a) {
    kernels::ew_program p;
    p.code = {{ew_instr::load, 0, 0, 0}, {k, 0, 0, 0}};
    p.sources = 1;
    return p.eval(&a);
  }
  bool broadcast(vid v) const {
    const value& x = g_[v];
    return x.r == rows::fixed || (x.r != rows::fixed && x.dims.size() == 1 && x.dims[0] == 1);
  }
  vid emit(op o, std::vector<vid> in, vid into, float s = 1, float bias = 0) {
    if (into == none) {
      value v;
      v.name = fmt::format("{}.{}", g_[n_.out[0]].name, ++count_);
      v.layer = n_.layer;
      into = g_.add_value(std::move(v));
    }
    node m;
    m.kind = node_kind::op;
    m.op = o;
    m.in = std::move(in);
    m.out = {into};
    m.p.scale = s;
    m.p.bias = bias;
    m.layer = n_.layer;
    m.name = g_[into].name;
    m.note = "composed from " + n_.p.program->text;
    out_.push_back(std::move(m));
    return into;
  }
  std::optional<vid> unary(ew_instr::kind k, vid a, vid into) {
    switch (k) {
    case ew_instr::neg:
      return emit(op::scale, {a}, into, -1.0f);
    case ew_instr::silu:
      return emit(op::silu, {a}, into);
    case ew_instr::sigmoid:
      return emit(op::sigmoid, {a}, into);
    case ew_instr::tanh:
      return emit(op::tanh, {a}, into);
    case ew_instr::exp:
      return emit(op::exp, {a}, into);
    case ew_instr::abs:
      return emit(op::abs, {a}, into);
    case ew_instr::relu:
      return emit(op::relu, {a}, into);
    case ew_instr::gelu:
      return emit(op::gelu_erf, {a}, into);
    case ew_instr::gelu_tanh:
      return emit(op::gelu_tanh, {a}, into);
    case ew_instr::rsqrt:
      return emit(op::rsqrt, {a}, into);
    case ew_instr::sqrt:
      return emit(op::recip, {emit(op::rsqrt, {a}, none)}, into);
    case ew_instr::expm1: // loses the digits near 0 that expm1 keeps (a few 1e-8 absolute)
      return emit(op::scale, {emit(op::exp, {a}, none)}, into, 1.0f, -1.0f);
    case ew_instr::step: {
      // exactly 1 for every positive float, 0 otherwise, from continuous ops: relu, then
      // x 2^126 brings every normal float to >= 1 and a clamp to 1; the subnormals (>= 2^-149)
      // land at >= 2^-23, which x 2^23 and a second clamp bring to 1 as well
      const vid r = emit(op::relu, {a}, none);
      const vid c1 = emit(op::clamp, {emit(op::scale, {r}, none, 0x1p126f)}, none, 1.0f);
      return emit(op::clamp, {emit(op::scale, {c1}, none, 0x1p23f)}, into, 1.0f);
    }
    default:
      return std::nullopt; // erf, round
    }
  }
  std::optional<vid> binary(ew_instr::kind k, operand a, operand b, vid into) {
    if (a.is_const || b.is_const) { // one constant: a scale
      const bool ca = a.is_const;
      const double c = ca ? a.c : b.c;
      const vid t = ca ? b.v : a.v;
      const float fc = static_cast<float>(c);
      switch (k) {
      case ew_instr::add:
        return emit(op::scale, {t}, into, 1.0f, fc);
      case ew_instr::sub:
        return ca ? emit(op::scale, {t}, into, -1.0f, fc) : emit(op::scale, {t}, into, 1.0f, -fc);
      case ew_instr::mul:
        return emit(op::scale, {t}, into, fc);
      case ew_instr::div:
        return ca ? emit(op::scale, {emit(op::recip, {t}, none)}, into, fc)
                  : emit(op::scale, {t}, into, static_cast<float>(1.0 / c));
      case ew_instr::max:
      case ew_instr::min: {
        if (c == 0 && k == ew_instr::max) return emit(op::relu, {t}, into);
        // (t + c +- |t - c|) / 2
        const vid e = emit(op::abs, {emit(op::scale, {t}, none, 1.0f, -fc)}, none);
        const vid se = k == ew_instr::max ? e : emit(op::scale, {e}, none, -1.0f);
        return emit(op::scale, {emit(op::add, {t, se}, none)}, into, 0.5f, fc / 2);
      }
      default:
        return std::nullopt;
      }
    }
    // two tensors: the first operand of add / mul must be the full one
    auto full_first = [&](vid& x, vid& y) {
      if (broadcast(x) && !broadcast(y)) std::swap(x, y);
      return !broadcast(x);
    };
    vid x = a.v, y = b.v;
    switch (k) {
    case ew_instr::add:
      if (!full_first(x, y)) return std::nullopt;
      return emit(op::add, {x, y}, into);
    case ew_instr::mul:
      if (!full_first(x, y)) return std::nullopt;
      return emit(op::mul, {x, y}, into);
    case ew_instr::sub: {
      const vid ny = emit(op::scale, {y}, none, -1.0f);
      vid p = x, q = ny;
      if (!full_first(p, q)) return std::nullopt;
      return emit(op::add, {p, q}, into);
    }
    case ew_instr::div: {
      const vid ry = emit(op::recip, {y}, none);
      vid p = x, q = ry;
      if (!full_first(p, q)) return std::nullopt;
      return emit(op::mul, {p, q}, into);
    }
    case ew_instr::max:
    case ew_instr::min: {
      vid p = x, q = y;
      if (!full_first(p, q)) return std::nullopt;
      const vid d = emit(op::add, {p, emit(op::scale, {q}, none, -1.0f)}, none);
      const vid e = emit(op::abs, {d}, none);
      const vid s = emit(op::add, {p, q}, none);
      const vid se = k == ew_instr::max ? e : emit(op::scale, {e}, none, -1.0f);
      return emit(op::scale, {emit(op::add, {s, se}, none)}, into, 0.5f);
    }
    default:
      return std::nullopt;
    }
  }

  graph& g_;
  const node& n_;
  std::vector<node>& out_;
  int count_ = 0;
};

} // namespace

int expand_elementwise(graph& g, const std::function<bool(const kernels::ew_program&)>& compiled) {
  int expanded = 0;
  std::vector<node> out;
  out.reserve(g.nodes.size());
  for (node& n : g.nodes) {
    if (n.kind != node_kind::op || n.op != op::elementwise || !n.p.program ||
        (compiled && compiled(*n.p.program))) {
      out.push_back(std::move(n));
      continue;
    }
    std::vector<node> seq;
    expander e(g, n, seq);
    if (!e.run()) { // no composition: the node stays (the reference kernel runs it)
      n.note = "not composable: runs on the reference kernel";
      out.push_back(std::move(n));
      continue;
    }
    for (auto& m : seq) out.push_back(std::move(m));
    ++expanded;
  }
  g.nodes = std::move(out);
  return expanded;
}

} // namespace troupe::graph
