// family.cpp: the family table (family.hpp).
#include "arch/family.hpp"

#include "arch/families/families.hpp"

namespace troupe::arch {
namespace {

struct entry {
  const char* name;
  status (*build)(const model_source&, graph::graph&);
};
constexpr entry table[] = {
    {"llama", build_llama},
    {"mistral", build_llama},
    {"qwen2", build_llama},
};

} // namespace

expected<graph::graph> build_graph(const model_source& m) {
  for (const auto& e : table)
    if (m.config.family == e.name) {
      graph::graph g;
      TROUPE_TRY(e.build(m, g));
      TROUPE_TRY(g.validate());
      return g;
    }
  return make_error(errc::unsupported, "{}: no graph builder for the '{}' family", m.path,
                    m.config.family);
}

std::vector<std::string> family_names() {
  std::vector<std::string> out;
  for (const auto& e : table) out.emplace_back(e.name);
  return out;
}

} // namespace troupe::arch
