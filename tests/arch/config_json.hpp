// config_json.hpp: a small config.json for the model_config tests (a family's architecture over
// a Llama-sized base that each test amends) and its reading as Troupe reads a checkpoint's.
#pragma once

#include <nlohmann/json.hpp>

#include "arch/model_config.hpp"

namespace troupe::test {

inline nlohmann::json base(const char* arch) {
  return {{"architectures", {arch}},  {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 4},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"vocab_size", 512},        {"max_position_embeddings", 256}};
}

inline expected<model_config> parse(const nlohmann::json& j) {
  return config_from_hf_json(j.dump(), "", "test/config.json");
}

} // namespace troupe::test
