// family.cpp: lookups in the family table (arch/families/table.cpp, table_more.cpp) and
// build_graph (family.hpp).
#include "arch/family.hpp"

#include "arch/families/families.hpp"

namespace troupe::arch {

const family_entry* find_family(std::string_view name) {
  for (const auto& e : families())
    if (name == e.name) return &e;
  return nullptr;
}

const family_entry* find_family_hf(std::string_view arch) {
  for (const auto& e : families())
    for (const char* a : e.hf_archs)
      if (arch == a) return &e;
  return nullptr;
}

const family_entry* find_family_gguf(std::string_view arch) {
  for (const auto& e : families())
    for (const char* a : e.gguf_archs)
      if (arch == a && e.read_gguf) return &e;
  return nullptr;
}

std::string known_architectures(bool gguf) {
  std::string s;
  for (const auto& e : families())
    for (const char* a : gguf ? e.gguf_archs : e.hf_archs)
      if (std::string_view(a).find('/') ==
          std::string_view::npos) // ("wrapper/model_type": the wrapper is listed)
        s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

status prepare_tensors(const model_config& c, tensor_index& t) {
  const family_entry* e = find_family(c.family);
  return e && e->prepare_hf ? e->prepare_hf(c, t) : status{};
}

expected<graph::graph> build_graph(const model_source& m) {
  const family_entry* e = find_family(m.config.family);
  if (!e)
    return make_error(errc::unsupported, "{}: no graph builder for the '{}' family", m.path,
                      m.config.family);
  graph::graph g;
  TROUPE_TRY(e->build(m, g));
  TROUPE_TRY(g.validate());
  return g;
}

std::vector<std::string> family_names() {
  std::vector<std::string> out;
  for (const auto& e : families()) out.emplace_back(e.name);
  return out;
}

} // namespace troupe::arch
