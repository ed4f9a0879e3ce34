// model_config_test.cpp: config.json keys that change the computation. Sliding windows are
// read per family the way transformers reads them (Mistral: every layer; Qwen2: only with
// use_sliding_window, from max_window_layers or layer_types; Llama: never), keys a family's
// transformers class ignores are ignored and listed, and what changes the math without an
// implementation (quantized checkpoints, MLP biases, unknown layer types) refuses the load
// with a message naming the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "arch/model_config.hpp"

using namespace troupe;
using json = nlohmann::json;

namespace {

json base(const char* arch) {
  return {{"architectures", {arch}},  {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 4},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"vocab_size", 512},        {"max_position_embeddings", 256}};
}

expected<model_config> parse(const json& j) {
  return config_from_hf_json(j.dump(), "", "test/config.json");
}

} // namespace

TEST(ModelConfig, MistralWindowCoversEveryLayer) {
  json j = base("MistralForCausalLM");
  j["sliding_window"] = 8;
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c->layer_window(l), 8);
  EXPECT_EQ(c->kv_horizon(), 8);
  j["sliding_window"] = nullptr;
  c = parse(j);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->layer_window(0), 0);
  EXPECT_EQ(c->kv_horizon(), 0);
  j["sliding_window"] = 4096; // longer than the context: no window at all
  c = parse(j);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kv_horizon(), 0);
}

TEST(ModelConfig, Qwen2WindowNeedsUseSlidingWindow) {
  json j = base("Qwen2ForCausalLM");
  j["sliding_window"] = 16;
  j["max_window_layers"] = 2;
  auto c = parse(j); // use_sliding_window defaults to false: transformers drops the window
  ASSERT_TRUE(c);
  EXPECT_EQ(c->layer_window(3), 0);
  j["use_sliding_window"] = true;
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->layer_window(0), 0);
  EXPECT_EQ(c->layer_window(1), 0);
  EXPECT_EQ(c->layer_window(2), 16);
  EXPECT_EQ(c->layer_window(3), 16);
  EXPECT_EQ(c->kv_horizon(), 0); // layers 0 and 1 see everything: no block may be freed
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  c = parse(j);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->layer_window(0), 16);
  EXPECT_EQ(c->layer_window(1), 0);
  EXPECT_EQ(c->layer_window(2), 16);
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention", "full_attention"};
  c = parse(j);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("layer_types[1]"), std::string::npos) << c.error().message;
  j["layer_types"] = {"full_attention"};
  EXPECT_FALSE(parse(j));
}

TEST(ModelConfig, LlamaIgnoresWindowKeysAsTransformersDoes) {
  json j = base("LlamaForCausalLM");
  j["sliding_window"] = 8;
  j["some_future_key"] = 3;
  auto c = parse(j);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kv_horizon(), 0);
  EXPECT_EQ(c->ignored_keys, (std::vector<std::string>{"sliding_window", "some_future_key"}));
}

TEST(ModelConfig, RefusesWhatChangesTheMath) {
  json j = base("LlamaForCausalLM");
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  auto c = parse(j);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, errc::unsupported);
  EXPECT_NE(c.error().message.find("quantization_config"), std::string::npos);
  EXPECT_NE(c.error().message.find("gptq"), std::string::npos);
  j = base("LlamaForCausalLM");
  j["hidden_act"] = "mish"; // an activation transformers has and Troupe does not
  c = parse(j);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("hidden_act 'mish'"), std::string::npos);
  j = base("LlamaForCausalLM");
  j["mlp_bias"] = true; // implemented: biases on gate, up and down
  c = parse(j);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->mlp_bias);
  j = base("MistralForCausalLM");
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  c = parse(j);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("dynamic"), std::string::npos);
  // attention_bias is a Llama key: Mistral's transformers class has no biases and ignores it
  j = base("MistralForCausalLM");
  j["attention_bias"] = true;
  c = parse(j);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->qkv_bias);
  j = base("LlamaForCausalLM");
  j["attention_bias"] = true;
  c = parse(j);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->qkv_bias && c->o_bias);
}
