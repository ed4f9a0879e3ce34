// graph.cpp: values, nodes, validation and printing (graph.hpp).
#include "graph/graph.hpp"

#include <fmt/format.h>

namespace troupe::graph {

int64_t value::row_elems() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

vid graph::add_value(value v) {
  values.push_back(std::move(v));
  return static_cast<vid>(values.size() - 1);
}

size_t graph::add_node(node n) {
  nodes.push_back(std::move(n));
  return nodes.size() - 1;
}

vid graph::input(input_kind k) {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].kind == value_kind::input && values[i].input == k) return static_cast<vid>(i);
  value v;
  v.name = std::string(troupe::graph::to_string(k));
  v.kind = value_kind::input;
  v.input = k;
  v.layer = -1;
  switch (k) {
  case input_kind::tokens:
  case input_kind::tokens_local:
  case input_kind::positions:
  case input_kind::slots:
    v.type = dtype::i32;
    v.r = rows::tokens;
    break;
  case input_kind::seq_table:
    v.type = dtype::i32;
    v.r = rows::seqs;
    v.dims = {-1}; // 3 + blocks: known per step
    break;
  case input_kind::logit_rows:
    v.type = dtype::i32;
    v.r = rows::logits;
    break;
  case input_kind::hidden:
    v.type = dtype::f32;
    v.r = rows::tokens;
    break;
  case input_kind::state_table:
    v.type = dtype::i32;
    v.r = rows::seqs;
    v.dims = {4};
    break;
  }
  return add_value(std::move(v));
}

vid graph::storage(vid v) const {
  while (v != none && values[static_cast<size_t>(v)].alias != none)
    v = values[static_cast<size_t>(v)].alias;
  return v;
}

std::vector<std::vector<size_t>> graph::consumers() const {
  std::vector<std::vector<size_t>> out(values.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (vid v : nodes[i].in)
      if (v != none) out[static_cast<size_t>(v)].push_back(i);
  return out;
}

std::vector<int64_t> graph::producers() const {
  std::vector<int64_t> out(values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (vid v : nodes[i].out)
      if (v != none) out[static_cast<size_t>(v)] = static_cast<int64_t>(i);
  return out;
}

status graph::validate() const {
  std::vector<int> written(values.size(), 0);
  const auto n_values = static_cast<vid>(values.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const node& n = nodes[i];
    for (vid v : n.in)
      if (v != none && (v < 0 || v >= n_values))
        return make_error(errc::internal, "graph: node {} ({}) reads value {} of {}", i, n.name, v,
                          n_values);
    if (n.out.empty()) return make_error(errc::internal, "graph: node {} writes nothing", n.name);
    for (vid v : n.out) {
      if (v == none) continue;
      if (v < 0 || v >= n_values)
        return make_error(errc::internal, "graph: node {} writes value {}", n.name, v);
      const value& o = values[static_cast<size_t>(v)];
      if (o.kind == value_kind::weight || o.kind == value_kind::input)
        return make_error(errc::internal, "graph: node {} writes {} {}", n.name,
                          o.kind == value_kind::weight ? "weight" : "input", o.name);
      // a state (the KV cache) is written by every layer's store; an activation once
      if (o.kind == value_kind::activation && n.kind != node_kind::all_reduce &&
          ++written[static_cast<size_t>(v)] > 1)
        return make_error(errc::internal, "graph: value {} is written twice", o.name);
    }
  }
  return {};
}

std::string_view to_string(input_kind k) {
  switch (k) {
  case input_kind::tokens:
    return "tokens";
  case input_kind::tokens_local:
    return "tokens_local";
  case input_kind::positions:
    return "positions";
  case input_kind::slots:
    return "slots";
  case input_kind::seq_table:
    return "seq_table";
  case input_kind::logit_rows:
    return "logit_rows";
  case input_kind::hidden:
    return "hidden";
  case input_kind::state_table:
    return "state_table";
  }
  return "?";
}

std::string weight_identity(const value& v) {
  if (v.w.constant) return {};
  std::string key = v.w.name;
  for (const auto& p : v.w.parts) key.append(1, '+').append(p);
  for (auto [a, n] : v.w.segments) key += fmt::format("|{}:{}", a, n);
  key += fmt::format("|{}:{}|{}|{}", v.w.col0, v.w.cols, v.w.transposed ? "t" : "", v.w.add);
  if (v.w.row_step != 1 || v.w.row_phase != 0)
    key += fmt::format("|step {}+{}", v.w.row_step, v.w.row_phase);
  return key;
}

std::string describe(const value& v) {
  std::string d;
  switch (v.r) {
  case rows::fixed:
    break;
  case rows::tokens:
    d = "T";
    break;
  case rows::logits:
    d = "N";
    break;
  case rows::seqs:
    d = "S";
    break;
  }
  for (int64_t x : v.dims)
    d += (d.empty() ? "" : ", ") + (x < 0 ? std::string("?") : std::to_string(x));
  return fmt::format("{}[{}]", name(v.type), d);
}

namespace {

// What an attention computes beyond its inputs, where it differs from plain causal attention
// (explain shows it: a window, chunks or a temperature read from the config are visible there)
std::string attention_params(const kernels::op_params& p) {
  std::string s;
  auto add = [&s](const std::string& t) { s += (s.empty() ? "" : ", ") + t; };
  if (p.window > 0) add(fmt::format("window {}", p.window));
  if (p.chunk > 0) add(fmt::format("chunks of {}", p.chunk));
  if (p.temp_floor > 0)
    add(fmt::format("scores x 1 + {} ln(1 + floor((p + {}) / {}))", p.temp_scale, p.temp_offset,
                    p.temp_floor));
  if (p.softcap > 0) add(fmt::format("soft-cap {}", p.softcap));
  if (p.alibi_max_bias > 0) add(fmt::format("ALiBi {}", p.alibi_max_bias));
  return s.empty() ? s : " [" + s + "]";
}

} // namespace

std::string graph::to_string() const {
  std::string out;
  for (const node& n : nodes) {
    std::string outs, ins;
    for (vid v : n.out) // "name type[shape]" each (one shape: several outputs may differ)
      if (v != none)
        outs += (outs.empty() ? "" : ", ") + values[static_cast<size_t>(v)].name + " " +
                describe(values[static_cast<size_t>(v)]);
    for (vid v : n.in) {
      if (!ins.empty()) ins += ", ";
      if (v == none) {
        ins += "-";
        continue;
      }
      const value& x = values[static_cast<size_t>(v)];
      ins += x.empty ? x.name + " (absent)" : x.name + " " + describe(x);
    }
    std::string what;
    switch (n.kind) {
    case node_kind::op:
      what = std::string(kernels::to_string(n.op));
      if (n.op == kernels::op::sum_rows && n.p.row_absmax) what = "absmax_rows";
      break;
    case node_kind::view:
      what = "view";
      break;
    case node_kind::all_reduce:
      what = n.p.reduce_max ? "all_reduce_max" : "all_reduce";
      break;
    case node_kind::all_gather:
      what = "all_gather";
      break;
    }
    const bool attn = n.kind == node_kind::op &&
                      (n.op == kernels::op::attention || n.op == kernels::op::paged_attention);
    out += fmt::format("{} = {}({}){}{}\n", outs, what, ins, attn ? attention_params(n.p) : "",
                       n.note.empty() ? "" : "  # " + n.note);
  }
  return out;
}

} // namespace troupe::graph
