// weights.cpp: weight lookup for the families, and the helpers of their load-time repacks
// (weights.hpp).
#include "arch/families/weights.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "arch/families/config_io.hpp"

namespace troupe::arch {

expected<graph::vid> weights::get(const std::string& name, int layer, std::vector<int64_t> want,
                                  graph::cut split, graph::axis along, int64_t unit, bool optional,
                                  graph::weight_ref ref) {
  ref.name = name;
  const tensor_info* t = m_.tensors->find(name);
  if (!t && m_.shapes_only && !optional) { // sized from the config: as it implies
    const dtype type = ref.transposed ? dtype::f32 : assumed_type(want, along);
    return graph::add_weight(g_, name, std::move(ref), type, std::move(want), layer, split, along,
                             unit);
  }
  if (!t) {
    if (!optional) {
      const std::string where =
          m_.tensors->files().empty() ? m_.path : m_.tensors->files().front()->path();
      return make_error(errc::not_found, "{}: missing tensor '{}'", where, name);
    }
    graph::vid v = graph::add_weight(g_, name, ref, dtype::f32, want, layer, split, along, unit);
    g_[v].empty = true;
    return v;
  }
  if (!t->supported)
    return make_error(errc::unsupported, "{}: tensor '{}' has type {}, which Troupe cannot load",
                      t->file->path(), name, t->raw_type);
  std::vector<int64_t> dims(t->dims.dims.begin(), t->dims.dims.begin() + t->dims.rank);
  // 1-D weights may be stored in any shape of n values: [n], [1, n], [H, D] (per-head norm
  // weights), [1, 1, n, 1] (Kimi-Linear's A_log), [H, D, N] (Zamba's A_log per mamba head)
  if (dims.size() >= 2 && want.size() == 1 &&
      std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>()) == want[0])
    dims = {want[0]};
  // a stack of matrices [G, R, K] as one [G * R, K] (GGUF's per-head k_b / v_b; or rows of it
  // taken by segments: each expert's gate or up rows of a packed gate_up [E, 2F, K])
  if (dims.size() == 3 && want.size() == 2 && dims[2] == want[1] &&
      (dims[0] * dims[1] == want[0] || !ref.segments.empty()))
    dims = {dims[0] * dims[1], dims[2]};
  // a depthwise convolution [channels, 1, taps] as [channels, taps] (gated DeltaNet's conv1d;
  // kimi-linear's GGUF writes it [1, channels, 1, taps])
  if (dims.size() == 4 && dims[0] == 1 && dims[2] == 1 && want.size() == 2)
    dims = {dims[1], dims[3]};
  if (dims.size() == 3 && dims[1] == 1 && want.size() == 2 && dims[2] == want[1])
    dims = {dims[0], dims[2]};
  // and a one-row matrix as [n] (GGUF's shared-expert gate)
  if (dims.size() == 1 && want.size() == 2 && want[0] == 1 && want[1] == dims[0]) dims = want;
  if (ref.transposed && dims.size() == 2) std::swap(dims[0], dims[1]);
  if (ref.row_step != 1 || ref.row_phase != 0) { // a strided view: its rows are the logical ones
    if (ref.row_step < 1 || ref.row_phase < 0 || ref.row_phase >= dims[0])
      return make_error(errc::internal, "tensor '{}': rows every {} from {}", name, ref.row_step,
                        ref.row_phase);
    dims[0] = (dims[0] - ref.row_phase + ref.row_step - 1) / ref.row_step;
  }
  if (!ref.segments.empty()) {
    int64_t n = 0;
    for (auto [first, count] : ref.segments) {
      if (first < 0 || count < 0 || first + count > dims[0])
        return make_error(errc::shape_mismatch, "{}: rows [{}, {}) of tensor '{}' with {} rows",
                          t->file->path(), first, first + count, name, dims[0]);
      n += count;
    }
    dims[0] = n;
  }
  if (ref.cols >= 0) { // columns [col0, col0 + cols) of a matrix (a per-layer slice of a table)
    if (dims.size() != 2 || ref.col0 < 0 || ref.col0 + ref.cols > dims[1])
      return make_error(errc::shape_mismatch, "{}: columns [{}, {}) of tensor '{}'",
                        t->file->path(), ref.col0, ref.col0 + ref.cols, name);
    dims[1] = ref.cols;
  }
  if (!want.empty() && dims != want) {
    std::string have, need;
    for (int64_t d : dims) have += (have.empty() ? "" : ", ") + std::to_string(d);
    for (int64_t d : want) need += (need.empty() ? "" : ", ") + std::to_string(d);
    return make_error(errc::shape_mismatch,
                      "{}: tensor '{}' has shape [{}], the config implies [{}]", t->file->path(),
                      name, have, need);
  }
  // 1-D weights and transposed ones are converted to f32 when loaded
  const dtype type = dims.size() == 1 || ref.transposed ? dtype::f32 : t->type;
  if (dims.size() == 1 && is_quantized(t->type))
    return make_error(errc::unsupported,
                      "{}: tensor '{}' is quantized; norms and biases must be f32/f16/bf16",
                      t->file->path(), name);
  return graph::add_weight(g_, name, std::move(ref), type, std::move(dims), layer, split, along,
                           unit);
}

expected<graph::vid> weights::stacked(const std::vector<std::string>& parts,
                                      const std::string& label, int layer, int64_t groups,
                                      std::vector<int64_t> each, graph::cut split,
                                      graph::axis along) {
  if (parts.empty() || each.size() != 2 ||
      (parts.size() != 1 && static_cast<int64_t>(parts.size()) != groups))
    return make_error(errc::internal, "{}: {} tensors for {} stacked matrices", m_.path,
                      parts.size(), groups);
  auto shape_of = [](const tensor_info* t) {
    std::string s;
    for (int i = 0; i < t->dims.rank; ++i) s += (i ? ", " : "") + std::to_string(t->dims.dims[i]);
    return s;
  };
  dtype type = dtype::f32;
  bool parts_checked = false;
  if (m_.shapes_only && !m_.tensors->find(parts.front())) { // sized from the config
    type = m_.config.mxfp4_experts ? dtype::mxfp4 : assumed_type(each, along);
    parts_checked = true;
  }
  for (const auto& name : parts) {
    if (parts_checked) break;
    const tensor_info* t = m_.tensors->find(name);
    if (!t) {
      const std::string where =
          m_.tensors->files().empty() ? m_.path : m_.tensors->files().front()->path();
      return make_error(errc::not_found, "{}: missing tensor '{}'", where, name);
    }
    if (!t->supported)
      return make_error(errc::unsupported, "{}: tensor '{}' has type {}, which Troupe cannot load",
                        t->file->path(), name, t->raw_type);
    const bool merged = parts.size() == 1;
    const bool ok =
        merged ? (t->dims.rank == 3 && t->dims.dims[0] == groups && t->dims.dims[1] == each[0] &&
                  t->dims.dims[2] == each[1]) ||
                     // (or the same rows as one matrix [groups * rows, K]: DBRX's experts)
                     (t->dims.rank == 2 && t->dims.dims[0] == groups * each[0] &&
                      t->dims.dims[1] == each[1])
               : t->dims.rank == 2 && t->dims.dims[0] == each[0] && t->dims.dims[1] == each[1];
    if (!ok)
      return make_error(errc::shape_mismatch,
                        "{}: tensor '{}' has shape [{}], the config implies [{}{}, {}]",
                        t->file->path(), name, shape_of(t),
                        merged ? std::to_string(groups) + ", " : "", each[0], each[1]);
    if (&name != &parts.front() && t->type != type)
      return make_error(
          errc::unsupported, "{}: tensor '{}' is {}, '{}' {}: stacked experts need one dtype",
          t->file->path(), name, troupe::name(t->type), parts.front(), troupe::name(type));
    type = t->type;
  }
  graph::weight_ref ref;
  ref.name = parts.front();
  if (parts.size() > 1) ref.parts = parts;
  const graph::vid v = graph::add_weight(g_, label, std::move(ref), type,
                                         {groups * each[0], each[1]}, layer, split, along, 1);
  g_[v].groups = groups;
  return v;
}

dtype weights::assumed_type(const std::vector<int64_t>& dims, graph::axis along) const {
  const model_config& c = m_.config;
  if (dims.size() != 2) return dtype::f32; // norms and biases: loaded as f32
  // DeepSeek's FP8 checkpoints: every linear layer's matrix in E4M3 tiles, but the embedding,
  // the lm_head and the router (a row per expert), which stay in the published dtype
  const bool router = c.n_expert > 0 && dims[0] == c.n_expert;
  if (c.fp8_blocks && along != graph::axis::vocab && !router && dims[1] % 128 == 0)
    return dtype::f8_b128;
  // BitNet: the layers' ternary matrices, as prepare_bitnet_hf stores them
  if (c.act_quant && along != graph::axis::vocab && dims[1] % 32 == 0) return dtype::t2_32;
  return m_.assumed;
}

graph::vid weights::constant(const std::string& name, int layer, std::vector<int64_t> dims,
                             float value, graph::cut split, graph::axis along, int64_t unit) {
  graph::weight_ref ref;
  ref.constant = true;
  ref.fill = value;
  return graph::add_weight(g_, name, ref, dtype::f32, std::move(dims), layer, split, along, unit);
}

status add_derived_tensor(tensor_index& t, const std::string& name, dtype type, shape dims,
                          std::string raw_type, std::vector<uint8_t> bytes,
                          const std::string& description, bool replace) {
  auto file = mapped_file::from_memory(std::move(bytes), description);
  tensor_info info;
  info.name = name;
  info.type = type;
  info.raw_type = std::move(raw_type);
  info.dims = dims;
  info.data = file->data();
  info.nbytes = file->size();
  info.file = file.get();
  t.add_file(std::move(file));
  if (!replace) return t.add(std::move(info));
  t.replace(std::move(info));
  return {};
}

status rename_tensor(tensor_index& t, const std::string& from, std::string to) {
  const tensor_info* w = t.find(from);
  if (!w) return make_error(errc::not_found, "no tensor '{}' to read as '{}'", from, to);
  tensor_info info = *w;
  info.name = std::move(to);
  TROUPE_TRY(t.add(info));
  t.mark_consumed(from);
  return {};
}

std::optional<layer_tensor> layer_of_name(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string_view tail = name.substr(prefix.size());
  const size_t dot = tail.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto l = parse_index(tail.substr(0, dot));
  if (!l) return std::nullopt;
  return layer_tensor{*l, std::string(tail.substr(dot + 1))};
}

status prepare_language_model(const model_config&, tensor_index& t) {
  const std::string outer = "language_model.", inner = "model.language_model.";
  for (const std::string& name : t.names()) {
    std::string to;
    if (name.starts_with(outer))
      to = name.substr(outer.size());
    else if (name.starts_with(inner))
      to = "model." + name.substr(inner.size());
    else
      continue;
    TROUPE_TRY(rename_tensor(t, name, std::move(to)));
  }
  return {};
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

status add_repacked_tensor(tensor_index& t, const std::string& name, dtype type, shape dims,
                           std::vector<uint8_t> bytes, const mapped_file* from) {
  return add_derived_tensor(t, name, type, dims, std::string(troupe::name(type)), std::move(bytes),
                            (from ? from->path() : "") + " (repacked " + name + ")");
}

status repack_packed_experts(tensor_index& t, const std::string& prefix, int64_t E, int64_t C,
                             int64_t F) {
  TROUPE_TRY_ASSIGN(gu, take_tensor(t, prefix + "gate_up_proj", {E, C, 2 * F}));
  for (const auto& [name, first] : {std::pair<const char*, int64_t>{"gate", 0}, {"up", F}}) {
    TROUPE_TRY_ASSIGN(bytes, transpose_experts(*gu, E, C, 2 * F, first, 1, F));
    TROUPE_TRY(add_repacked_tensor(t, prefix + name, gu->type, shape{E, F, C}, std::move(bytes),
                                   gu->file));
  }
  TROUPE_TRY_ASSIGN(dn, take_tensor(t, prefix + "down_proj", {E, F, C}));
  TROUPE_TRY_ASSIGN(bytes, transpose_experts(*dn, E, F, C, 0, 1, C));
  return add_repacked_tensor(t, prefix + "down", dn->type, shape{E, C, F}, std::move(bytes),
                             dn->file);
}

expected<const tensor_info*> take_tensor(tensor_index& t, const std::string& name,
                                         std::vector<int64_t> dims) {
  const tensor_info* p = t.find(name);
  if (!p) return make_error(errc::not_found, "missing tensor '{}'", name);
  t.mark_consumed(name);
  bool ok = p->dims.rank == static_cast<int>(dims.size());
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = p->dims.dims[i] == dims[i];
  if (!ok) {
    std::string want;
    for (int64_t d : dims) want += (want.empty() ? "" : ", ") + std::to_string(d);
    return make_error(errc::shape_mismatch, "{}: tensor '{}' must be [{}] (is {})",
                      p->file ? p->file->path() : name, name, want, p->dims.to_string());
  }
  return p;
}

expected<std::vector<uint8_t>> transpose_experts(const tensor_info& w, int64_t E, int64_t K,
                                                 int64_t M, int64_t first, int64_t stride,
                                                 int64_t rows) {
  if (!w.supported || (w.type != dtype::f32 && w.type != dtype::f16 && w.type != dtype::bf16))
    return make_error(errc::unsupported, "{}: float experts must be f32, f16 or bf16 (are {})",
                      w.name, w.raw_type);
  if (first + (rows - 1) * stride >= M)
    return make_error(errc::internal, "{}: columns past {}", w.name, M);
  const auto eb = static_cast<int64_t>(row_bytes(w.type, 1));
  std::vector<uint8_t> out(static_cast<size_t>(E * rows * K * eb));
  constexpr int64_t tile = 32;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r0 = 0; r0 < rows; r0 += tile)
      for (int64_t k0 = 0; k0 < K; k0 += tile)
        for (int64_t r = r0; r < std::min(rows, r0 + tile); ++r) {
          const int64_t m = first + r * stride;
          uint8_t* o = out.data() + ((e * rows + r) * K) * eb;
          for (int64_t k = k0; k < std::min(K, k0 + tile); ++k)
            std::memcpy(o + k * eb, w.data + ((e * K + k) * M + m) * eb, static_cast<size_t>(eb));
        }
  return out;
}

} // namespace troupe::arch
