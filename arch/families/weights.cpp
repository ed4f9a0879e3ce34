// weights.cpp: weight lookup for the families (weights.hpp).
#include "arch/families/weights.hpp"

#include <fmt/format.h>

namespace troupe::arch {

expected<graph::vid> weights::get(const std::string& name, int layer, std::vector<int64_t> want,
                                  graph::cut split, graph::axis along, int64_t unit, bool optional,
                                  graph::weight_ref ref) {
  ref.name = name;
  const tensor_info* t = m_.tensors->find(name);
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
  // 1-D weights may be stored as [n], [1, n] or [H, D] (per-head norm weights)
  if (dims.size() == 2 && want.size() == 1 && dims[0] * dims[1] == want[0]) dims = {want[0]};
  if (ref.transposed && dims.size() == 2) std::swap(dims[0], dims[1]);
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

graph::vid weights::constant(const std::string& name, int layer, std::vector<int64_t> dims,
                             float value, graph::cut split, graph::axis along, int64_t unit) {
  graph::weight_ref ref;
  ref.constant = true;
  ref.fill = value;
  return graph::add_weight(g_, name, ref, dtype::f32, std::move(dims), layer, split, along, unit);
}

} // namespace troupe::arch
