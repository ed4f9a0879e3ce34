// spec.cpp: reading and registering architecture spec files (spec.hpp).
#include "arch/spec.hpp"

#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kernels/expr.hpp"

namespace troupe {
namespace {

std::mutex mu;
std::vector<arch_spec>& specs() {
  static std::vector<arch_spec> s;
  return s;
}

} // namespace

expected<arch_spec> parse_arch_spec(const std::string& text, const std::string& where) {
  using json = nlohmann::json;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::invalid_argument, "{}: not a JSON object", where);
  static const std::set<std::string> known = {"architectures", "family", "activations", "comment"};
  for (auto& [k, v] : j.items())
    if (!known.count(k))
      return make_error(errc::invalid_argument,
                        "{}: unknown key '{}' (known: architectures, "
                        "family, activations, comment)",
                        where, k);
  arch_spec s;
  s.path = where;
  auto a = j.find("architectures");
  if (a == j.end() || !a->is_array() || a->empty())
    return make_error(errc::invalid_argument, "{}: 'architectures' must list HF class names",
                      where);
  for (const auto& x : *a) {
    if (!x.is_string())
      return make_error(errc::invalid_argument, "{}: 'architectures' must hold strings", where);
    s.architectures.push_back(x.get<std::string>());
  }
  auto f = j.find("family");
  if (f == j.end() || !f->is_string())
    return make_error(errc::invalid_argument, "{}: 'family' must name a layer template", where);
  s.family = f->get<std::string>();
  if (s.family != "llama" && s.family != "mistral" && s.family != "qwen2")
    return make_error(errc::unsupported,
                      "{}: family '{}' cannot be a spec's template (llama, mistral, qwen2 can)",
                      where, s.family);
  if (auto acts = j.find("activations"); acts != j.end()) {
    if (!acts->is_object())
      return make_error(errc::invalid_argument, "{}: 'activations' must map names to expressions",
                        where);
    for (auto& [name, e] : acts->items()) {
      if (!e.is_string())
        return make_error(errc::invalid_argument, "{}: activation '{}' must be a string", where,
                          name);
      const std::string text = e.get<std::string>();
      const bool gating =
          text.find('g') != std::string::npos || text.find('u') != std::string::npos;
      auto p = kernels::parse_expression(text, {"x"});
      if (!p) {
        auto q = kernels::parse_expression(text, {"g", "u"});
        if (!q || !gating)
          return make_error(errc::invalid_argument, "{}: activation '{}': {}", where, name,
                            p.error().message);
      }
      s.activations[name] = text;
    }
  }
  return s;
}

expected<arch_spec> load_arch_spec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::not_found, "cannot read the spec file {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_arch_spec(ss.str(), path);
}

void register_arch_spec(arch_spec s) {
  std::lock_guard<std::mutex> lk(mu);
  specs().insert(specs().begin(), std::move(s)); // the newest answers first
}

void clear_arch_specs() {
  std::lock_guard<std::mutex> lk(mu);
  specs().clear();
}

const arch_spec* find_arch_spec(const std::string& architecture) {
  std::lock_guard<std::mutex> lk(mu);
  for (const auto& s : specs())
    for (const auto& a : s.architectures)
      if (a == architecture) return &s;
  return nullptr;
}

} // namespace troupe
