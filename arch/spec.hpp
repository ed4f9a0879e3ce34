// spec.hpp: architecture spec files (`--arch-spec FILE.json`): a family defined as data, from
// ops that exist, without rebuilding Troupe. A spec names the Hugging Face architecture
// classes it applies to, the built-in layer template it follows ("llama", "mistral",
// "qwen2"), and activations written as expressions (kernels/expr.hpp):
//   {"architectures": ["SquaredReluLlamaForCausalLM", "LlamaForCausalLM"],
//    "family": "llama",
//    "activations": {"relu2": "relu(x)^2", "my_glu": "silu(g) * u + 0.1 * g"}}
// An expression over x is the activation (of the gate in a gated FFN, of up otherwise); one
// over g and u is the whole gating. config.json's `hidden_act` names which one applies. Specs
// are registered process-wide before models are opened; a registered spec answers for its
// architectures before the built-in table. Tests: tests/arch/model_config_test.cpp,
// tests/exec/forward_test.cpp (a spec-only model against transformers)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace troupe {

struct arch_spec {
  std::string path;
  std::vector<std::string> architectures;
  std::string family;
  std::map<std::string, std::string> activations; // hidden_act -> expression
};

/// Reads and checks a spec file (every expression must parse).
expected<arch_spec> load_arch_spec(const std::string& path);
/// From JSON text (`where` names it in errors).
expected<arch_spec> parse_arch_spec(const std::string& json_text, const std::string& where);
/// Makes `s` answer for its architectures in every later open_model().
void register_arch_spec(arch_spec s);
void clear_arch_specs();
/// The registered spec for an HF architecture class, or null.
const arch_spec* find_arch_spec(const std::string& architecture);

} // namespace troupe
