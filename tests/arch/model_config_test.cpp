// model_config_test.cpp: config.json keys that change the computation. Sliding windows are
// read per family the way transformers reads them (Mistral: every layer; Qwen2: only with
// use_sliding_window, from max_window_layers or layer_types; Llama: never), keys a family's
// transformers class ignores are ignored and listed, and what changes the math without an
// implementation (quantized checkpoints, MLP biases, unknown layer types) refuses the load
// with a message naming the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "arch/model_config.hpp"
#include "config_json.hpp"

using namespace troupe;
using json = nlohmann::json;

using test::base;
using test::parse;

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
  j["rope_scaling"] = {{"rope_type", "axial"}, {"factor", 2.0}}; // transformers has it
  c = parse(j);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("axial"), std::string::npos);
  // a rope_scaling that is not an object (or whose type is not a string) is refused, not
  // taken for none
  for (const json& bad : {json::array({1}), json("linear"), json({{"rope_type", 3}})}) {
    j = base("LlamaForCausalLM");
    j["rope_scaling"] = bad;
    c = parse(j);
    ASSERT_FALSE(c) << bad.dump();
    EXPECT_NE(c.error().message.find("rope"), std::string::npos) << c.error().message;
  }
  // dynamic NTK changes nothing below max_position_embeddings, past which Troupe never runs
  j = base("MistralForCausalLM");
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->rope.scaling, rope_scaling::none);
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

// Keys of the newer families that change the math and are not implemented: refused by name.
TEST(ModelConfig, FamiliesRefuseWhatTheyDoNotImplement) {
  auto refused = [](json j, const char* key) {
    auto c = parse(j);
    ASSERT_FALSE(c) << key;
    EXPECT_EQ(c.error().code, errc::unsupported) << c.error().to_string();
    EXPECT_NE(c.error().message.find(key), std::string::npos) << c.error().to_string();
  };
  json j = base("FalconForCausalLM");
  j["alibi"] = true;
  refused(j, "alibi");
  j = {{"architectures", {"MptForCausalLM"}},
       {"d_model", 64},
       {"n_heads", 4},
       {"n_layers", 2},
       {"vocab_size", 512},
       {"attn_config", {{"alibi_bias_max", 16}}}};
  refused(j, "alibi_bias_max");
  j["attn_config"] = {{"qk_ln", true}};
  refused(j, "qk_ln");
  j["attn_config"] = json::object();
  j["expansion_ratio"] = 2;
  refused(j, "expansion_ratio");
  j = base("Gemma2ForCausalLM");
  j["use_bidirectional_attention"] = true;
  refused(j, "use_bidirectional_attention");
  j = {{"architectures", {"GPT2LMHeadModel"}},
       {"n_embd", 64},
       {"n_head", 4},
       {"n_layer", 2},
       {"n_positions", 128},
       {"vocab_size", 512},
       {"add_cross_attention", true}};
  refused(j, "add_cross_attention");
}

// Family readers turn each config into the recipe transformers computes.
TEST(ModelConfig, FamilyRecipes) {
  json j = base("Gemma2ForCausalLM");
  j["head_dim"] = 16;
  j["query_pre_attn_scalar"] = 24;
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->norms, norm_place::sandwich);
  EXPECT_DOUBLE_EQ(c->attention_scale(), 1 / std::sqrt(24.0));
  EXPECT_DOUBLE_EQ(c->attn_softcap, 50.0); // Gemma2Config's defaults
  EXPECT_DOUBLE_EQ(c->final_softcap, 30.0);
  EXPECT_EQ(c->layer_window(0), 4096); // even layers slide
  EXPECT_EQ(c->layer_window(1), 0);
  j = base("Phi3ForCausalLM");
  j["original_max_position_embeddings"] = 64;
  j["rope_scaling"] = {{"type", "su"},
                       {"short_factor", std::vector<double>(8, 1.0)},
                       {"long_factor", std::vector<double>(8, 2.0)}};
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->rope.scaling, rope_scaling::longrope);
  EXPECT_TRUE(c->rope.use_long); // a 256 context outgrows the original 64
  EXPECT_NEAR(c->rope.attn_factor, std::sqrt(1 + std::log(4.0) / std::log(64.0)), 1e-12);
  j["rope_scaling"]["long_factor"] = std::vector<double>(7, 2.0);
  EXPECT_FALSE(parse(j));
  j = base("GPTNeoXForCausalLM");
  j["rotary_pct"] = 0.5;
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->rope.rot_dim, 8); // head dim 16
  EXPECT_EQ(c->residual, residual_kind::parallel_two_norms);
  EXPECT_TRUE(c->qkv_bias && c->mlp_bias);
}

// Mixtures of experts: the expert keys are read; a config missing one, asking for more experts
// per token than there are, or for an absurd number of experts (a hostile file), is refused by
// name before anything is built.
TEST(ModelConfig, ExpertKeys) {
  json q = base("Qwen3MoeForCausalLM");
  q["num_experts"] = 8;
  q["num_experts_per_tok"] = 2;
  q["moe_intermediate_size"] = 32;
  q["norm_topk_prob"] = true;
  q["decoder_sparse_step"] = 2;
  auto c = parse(q);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_TRUE(c->norm_topk);
  EXPECT_FALSE(c->layer_moe(0));
  EXPECT_TRUE(c->layer_moe(1));
  EXPECT_LT(c->active_parameters(), c->parameters());
  json missing = q;
  missing.erase("moe_intermediate_size");
  auto m = parse(missing);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("moe_intermediate_size"), std::string::npos)
      << m.error().message;
  json many = q;
  many["num_experts_per_tok"] = 9;
  EXPECT_FALSE(parse(many));
  json huge = q;
  huge["num_experts"] = 1 << 30;
  auto h = parse(huge);
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message.find("experts"), std::string::npos) << h.error().message;
}

// GPT-OSS as published: MXFP4 experts are accepted (the family repacks them), YaRN's truncate
// is read, and the same quantization_config on another family is refused.
TEST(ModelConfig, GptOssReadsMxfp4TruncateAndItsWindows) {
  json j = base("GptOssForCausalLM");
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["sliding_window"] = 16;
  j["rope_parameters"] = {{"rope_type", "yarn"},
                          {"rope_theta", 150000.0},
                          {"factor", 32.0},
                          {"beta_fast", 32.0},
                          {"beta_slow", 1.0},
                          {"truncate", false},
                          {"original_max_position_embeddings", 64}};
  j["quantization_config"] = {{"quant_method", "mxfp4"}};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->rope.yarn_truncate);
  EXPECT_EQ(c->swiglu_limit, 7.0);
  EXPECT_TRUE(c->attn_sinks && c->expert_bias && c->router_linear_bias);
  EXPECT_EQ(c->layer_window(0), 16); // the even layers slide (transformers' default layer_types)
  EXPECT_EQ(c->layer_window(1), 0);
  j["rope_parameters"]["truncate"] = "no";
  EXPECT_FALSE(parse(j));
  json l = base("LlamaForCausalLM");
  l["quantization_config"] = {{"quant_method", "mxfp4"}};
  c = parse(l);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("mxfp4"), std::string::npos);
}

// DeepSeek-V3 as published: fp8 e4m3 in 128 x 128 blocks is accepted (repacked at load);
// another block size, or fp8 on a family that does not repack it, is refused.
TEST(ModelConfig, DeepseekFp8BlocksAreReadOthersRefused) {
  json j = base("DeepseekV3ForCausalLM");
  j["kv_lora_rank"] = 32, j["qk_nope_head_dim"] = 16, j["qk_rope_head_dim"] = 8;
  j["v_head_dim"] = 16, j["n_routed_experts"] = 8, j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["quantization_config"] = {{"quant_method", "fp8"},
                              {"fmt", "e4m3"},
                              {"activation_scheme", "dynamic"},
                              {"weight_block_size", {128, 128}}};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->fp8_blocks);
  j["quantization_config"]["weight_block_size"] = {1, 128};
  c = parse(j);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("128 x 128"), std::string::npos) << c.error().message;
  json l = base("LlamaForCausalLM");
  l["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  EXPECT_FALSE(parse(l));
}

// transformers 5 nests rope settings by layer type (OLMo 3 writes one per type): one setting
// for every type is the rope; settings that differ are refused where the family has no rope per
// layer type (Gemma 3 has), never read as one of them; SmolLM3's no_rope_layers are layers
// without RoPE.
TEST(ModelConfig, RopeNestedByLayerTypeIsOneRopeOrRefused) {
  json j = base("Olmo3ForCausalLM");
  j["num_hidden_layers"] = 2;
  j["sliding_window"] = 8;
  j["layer_types"] = {"sliding_attention", "full_attention"};
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 5e5}}},
                          {"full_attention", {{"rope_type", "default"}, {"rope_theta", 5e5}}}};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->rope.theta, 5e5);
  EXPECT_EQ(c->layer_window(0), 8);
  EXPECT_EQ(c->layer_window(1), 0);
  j["rope_parameters"]["sliding_attention"]["rope_theta"] = 1e4;
  c = parse(j);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("rope_parameters"), std::string::npos) << c.error().message;
  json s = base("SmolLM3ForCausalLM");
  s["num_hidden_layers"] = 2;
  s["no_rope_layers"] = {1, 0};
  c = parse(s);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->layer_rope(0));
  EXPECT_FALSE(c->layer_rope(1));
  s["no_rope_layers"] = {1, 2};
  EXPECT_FALSE(parse(s));
}

// LFM2: Lfm2MLP's FFN width from intermediate_size (or block_ff_dim), the layers layer_types or
// full_attn_idxs make convolutions, and the published config's echoes of what transformers
// reads elsewhere (block_dim, conv_dim, num_heads ...), which refuse where they disagree.
TEST(ModelConfig, Lfm2WidthsLayersAndEchoes) {
  json j = base("Lfm2ForCausalLM");
  j["intermediate_size"] = 200;
  j["block_ffn_dim_multiplier"] = 1.3;
  j["block_multiple_of"] = 32;
  j["layer_types"] = {"conv", "full_attention", "conv", "conv"};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->F, 192); // int(2 * 200 / 3) = 133, int(1.3 * 133) = 172, up to 32
  EXPECT_EQ(c->linear_layers, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_TRUE(c->short_conv);
  EXPECT_EQ(c->lin_conv, 3);
  EXPECT_TRUE(c->tie_embeddings);
  j["block_ff_dim"] = 300;                 // stands for intermediate_size, as Lfm2Config reads it
  j["block_ffn_dim_multiplier"] = nullptr; // no multiplier: no rounding either
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_EQ(c->F, 200);
  j["block_auto_adjust_ff_dim"] = false;
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_EQ(c->F, 300);
  j.erase("layer_types");
  j["full_attn_idxs"] = {1, 3};
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_EQ(c->linear_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  j["tie_embedding"] = false;
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_FALSE(c->tie_embeddings);
  for (auto [key, value] : {std::pair<const char*, json>{"conv_bias", true},
                            {"block_dim", 128},
                            {"conv_dim", 32},
                            {"num_heads", 8},
                            {"use_pos_enc", false},
                            {"block_use_swiglu", false},
                            {"theta", 5.0}}) {
    json k = j;
    k[key] = value;
    auto r = parse(k);
    ASSERT_FALSE(r) << key;
    EXPECT_EQ(r.error().code, errc::unsupported) << r.error().to_string();
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().to_string();
  }
  j["block_dim"] = 64, j["num_heads"] = 4, j["theta"] = 1e6; // as read (1e6: the default base)
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
}

// LFM3's defaults where the config is silent (Lfm3Config's): head_dim 128, layers full every
// fourth from 2 and sliding every fourth from 4 (window 256), the rest convolutions of 7 taps;
// the full layers' RoPE proportional (1e6, half of each head's pairs turning), the sliding
// layers' plain (1e4). sliding_window null leaves the sliding layers unwindowed.
TEST(ModelConfig, Lfm3Defaults) {
  json j = base("Lfm3ForCausalLM");
  j["num_hidden_layers"] = 6;
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->D, 128);
  EXPECT_EQ(c->linear_layers, (std::vector<uint8_t>{1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(c->lin_conv, 7);
  EXPECT_EQ(c->layer_window(4), 256);
  EXPECT_EQ(c->layer_window(2), 0);
  EXPECT_EQ(c->rope.rot_dim, 128);
  EXPECT_EQ(c->rope.turning, 32);
  EXPECT_EQ(c->rope.theta, 1e6);
  EXPECT_EQ(c->rope_local.turning, 0);
  EXPECT_EQ(c->rope_local.theta, 1e4);
  EXPECT_TRUE(c->attn_head_gate);
  EXPECT_EQ(c->norms, norm_place::sandwich);
  j["sliding_window"] = nullptr;
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_EQ(c->layer_window(4), 0);
  j["conv_bias"] = true;
  EXPECT_FALSE(parse(j));
}

// Granite 4.0 without Mamba layers loads; its Mamba 2 layers (either spelling, or the config
// class's default of all Mamba) and its experts refuse by name.
TEST(ModelConfig, Granite4ReadsItsLayersMambaAndExperts) {
  json j = base("GraniteMoeHybridForCausalLM");
  j["layer_types"] = {"attention", "full_attention", "attention", "attention"};
  j["num_local_experts"] = 0;
  j["shared_intermediate_size"] = 96;
  j["position_embedding_type"] = "rope";
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->F, 96);
  EXPECT_TRUE(c->rope_enabled);
  EXPECT_FALSE(c->mamba);
  j.erase("position_embedding_type"); // transformers' default None: no RoPE
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_FALSE(c->rope_enabled);
  // Mamba layers under either name, the mixer's keys with transformers' defaults (d_head "auto":
  // expand x C over the heads)
  for (const char* mamba : {"mamba", "linear_attention"}) {
    json k = j;
    k["layer_types"][1] = mamba;
    k["mamba_n_heads"] = 8;
    k["mamba_d_state"] = 16;
    auto r = parse(k);
    ASSERT_TRUE(r) << mamba << ": " << r.error().to_string();
    EXPECT_TRUE(r->mamba && r->layer_linear(1) && !r->layer_linear(0));
    EXPECT_EQ(r->lin_v_heads, 8);
    EXPECT_EQ(r->lin_v_dim, 2 * 64 / 8);
    EXPECT_EQ(r->lin_k_heads, 1);
    EXPECT_EQ(r->lin_k_dim, 16);
    EXPECT_EQ(r->lin_conv, 4);
    EXPECT_TRUE(r->ssm_conv_bias);
    EXPECT_FALSE(r->ssm_proj_bias);
  }
  json k = j;
  k.erase("layer_types"); // the config class's default: every layer Mamba
  k["mamba_n_heads"] = 8;
  ASSERT_TRUE((c = parse(k))) << c.error().to_string();
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(c->layer_linear(l));
  // what the mixer cannot be: heads that do not fill the inner width, groups that do not divide
  // the heads, a dt limit that clamps
  for (auto [key, value] : {std::pair<const char*, json>{"mamba_d_head", 12},
                            {"mamba_n_groups", 3},
                            {"time_step_limit", json::array({0.0, 0.5})}}) {
    json b = k;
    b[key] = value;
    auto r = parse(b);
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().to_string();
  }
  k = j;
  k["num_local_experts"] = 8; // GraniteMoE's experts, the shared MLP their shared expert
  k["num_experts_per_tok"] = 2;
  ASSERT_TRUE((c = parse(k))) << c.error().to_string();
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_EQ(c->F_expert, 128);
  EXPECT_EQ(c->F_shared, 96);
  EXPECT_TRUE(c->norm_topk);
}

// Mamba2ForCausalLM (Mamba-Codestral): blocks of the mixer alone; config.json as Python writes
// it, with a bare Infinity in time_step_limit (transformers 5 writes {"__float__": "Infinity"})
TEST(ModelConfig, Mamba2ReadsTheMixerAlone) {
  const std::string text = R"({"architectures": ["Mamba2ForCausalLM"], "hidden_size": 64,
    "num_hidden_layers": 3, "vocab_size": 512, "num_heads": 8, "head_dim": 16, "expand": 2,
    "state_size": 32, "n_groups": 2, "conv_kernel": 4, "time_step_limit": [0.0, Infinity],
    "time_step_min": 0.001, "residual_in_fp32": true, "rms_norm": true, "chunk_size": 256,
    "note": "Infinity in a string stays a string"})";
  auto c = config_from_hf_json(text, "", "test/config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "mamba2");
  EXPECT_TRUE(c->mamba);
  for (int l = 0; l < 3; ++l) EXPECT_TRUE(c->layer_linear(l) && !c->layer_has_ffn(l));
  EXPECT_EQ(c->lin_v_heads * c->lin_v_dim, 128);
  EXPECT_EQ(c->lin_k_heads, 2);
  EXPECT_EQ(c->lin_k_dim, 32);
  EXPECT_FALSE(c->rope_enabled);
  // state per sequence: 3 layers of 3 taps over x, B and C and a [8, 16, 32] memory
  EXPECT_EQ(c->state_values_per_seq(0, 3), 3 * (3 * (128 + 2 * 2 * 32) + 8 * 16 * 32));
  // at TP 2 the heads and groups split
  EXPECT_EQ(c->state_values_per_seq(0, 3, 2), 3 * (3 * (128 + 2 * 2 * 32) + 8 * 16 * 32) / 2);
  std::string finite = text; // transformers 5's form of the same
  finite.replace(finite.find("Infinity]"), 8, R"({"__float__": "Infinity"})");
  json j = json::parse(finite);
  ASSERT_TRUE(parse(j));
  j["head_dim"] = 10;
  EXPECT_FALSE(parse(j));
  j["head_dim"] = 16;
  j["rms_norm"] = false; // a model without the gated norm: not what transformers computes
  auto r = parse(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("rms_norm"), std::string::npos);
  j["rms_norm"] = true;
  j["hidden_act"] = "gelu";
  EXPECT_FALSE(parse(j));
}

// Nemotron-H: the layers as hybrid_override_pattern names them (one mixer a block), the mixer's
// keys under either name; its experts, and older keys that disagree with what transformers reads,
// refuse
TEST(ModelConfig, NemotronHReadsItsPattern) {
  json j = base("NemotronHForCausalLM");
  j.erase("num_hidden_layers"); // counted from the pattern
  j["hybrid_override_pattern"] = "M-*-M";
  j["head_dim"] = 16;
  j["mamba_num_heads"] = 8;
  j["mamba_head_dim"] = 20; // the inner width is the heads' (expand is not read)
  j["mamba_n_groups"] = 2;
  j["ssm_state_size"] = 16;
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->n_layer, 5);
  EXPECT_TRUE(c->layer_linear(0) && c->layer_linear(4) && !c->layer_linear(2));
  EXPECT_TRUE(c->layer_has_kv(2) && !c->layer_has_kv(1) && !c->layer_has_kv(0));
  EXPECT_TRUE(!c->layer_has_mixer(1) && c->layer_has_ffn(1) && !c->layer_has_ffn(2));
  EXPECT_EQ(c->lin_v_heads * c->lin_v_dim, 160);
  EXPECT_EQ(c->lin_k_heads, 2);
  EXPECT_FALSE(c->rope_enabled);
  EXPECT_FALSE(c->gated_ffn);
  {
    json e = j; // Nemotron 3's experts: a block of its own, ungated relu^2 experts
    e["hybrid_override_pattern"] = "M-*E";
    auto r = parse(e);
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_TRUE(r->layer_moe(3) && !r->layer_moe(1) && !r->layer_has_mixer(3));
    EXPECT_TRUE(r->expert_relu2 && r->router_sigmoid && r->router_bias);
    EXPECT_EQ(r->F_shared, 7688); // NemotronHConfig's default
  }
  for (auto [key, value] : {std::pair<const char*, json>{"moe_latent_size", 1024},
                            {"attention_head_dim", 32},
                            {"rms_norm_eps", 1e-6},
                            {"mamba_dt_limit", json::array({0.0, 1.0})}}) {
    json b = j;
    b[key] = value;
    if (std::string(key) == "moe_latent_size") b["hybrid_override_pattern"] = "M-*E";
    auto r = parse(b);
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().to_string();
  }
}

// A hostile Mamba config: widths that would make a sequence's state overflow a count, or a
// mixer that cannot be cut into its heads, is refused before anything is sized from it
TEST(ModelConfig, MambaDimensionsOutOfRangeRefuse) {
  json j = base("Mamba2ForCausalLM");
  j["num_heads"] = 8;
  j["head_dim"] = 16;
  j["state_size"] = 16;
  j["n_groups"] = 2;
  ASSERT_TRUE(parse(j)) << parse(j).error().to_string();
  for (auto [key, value] : {std::pair<const char*, json>{"state_size", 1 << 20},
                            {"num_heads", 65536},
                            {"n_groups", 3},
                            {"n_groups", 0},
                            {"conv_kernel", 1000},
                            {"head_dim", -16}}) {
    json b = j;
    b[key] = value;
    if (std::string(key) == "num_heads") b["head_dim"] = 1 << 20; // 65536 x 2^20 inner width
    auto r = parse(b);
    EXPECT_FALSE(r) << key << " " << value.dump();
  }
  json m = base("MambaForCausalLM");
  m["time_step_rank"] = 1 << 20;
  EXPECT_FALSE(parse(m));
  m["time_step_rank"] = 0;
  EXPECT_FALSE(parse(m));
}

// Gemma 4 from a sparse text config: 5 sliding to 1 full by default (the last layer full), the
// full layers' geometry from global_head_dim / num_global_key_value_heads (the heads only with
// attention_k_eq_v, as transformers reads them) or from transformers 5's per_layer_config;
// per-layer embeddings by default; shared KV from the last earlier layer of each type.
TEST(ModelConfig, Gemma4ReadsItsLayers) {
  json j = base("Gemma4ForCausalLM");
  j["num_hidden_layers"] = 8;
  j["head_dim"] = 16;
  j["global_head_dim"] = 32;
  j["num_global_key_value_heads"] = 1;
  j["num_kv_shared_layers"] = 2;
  j["use_double_wide_mlp"] = true;
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->windowed, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 1, 0}));
  EXPECT_EQ(c->layer_head_dim(5), 32);
  EXPECT_EQ(c->layer_head_dim(4), 16);
  EXPECT_EQ(c->layer_kv_heads(5), 2); // without attention_k_eq_v the global heads are not read
  EXPECT_EQ(c->rope.rot_dim, 32);
  EXPECT_EQ(c->rope.turning, 4); // a quarter of the full layers' pairs
  EXPECT_EQ(c->rope_local.rot_dim, 16);
  EXPECT_EQ(c->ple_dim, 256); // Gemma4TextConfig's default
  EXPECT_EQ(c->kv_source, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 4, 5}));
  EXPECT_EQ(c->layer_ffn(7), 2 * c->F);
  EXPECT_EQ(c->layer_ffn(5), c->F);
  j["attention_k_eq_v"] = true;
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_EQ(c->layer_kv_heads(5), 1);
  EXPECT_TRUE(c->kv_shared_kv);
  j.erase("global_head_dim");
  j.erase("num_global_key_value_heads");
  j["per_layer_config"] = {{"5", {{"head_dim", 64}, {"num_key_value_heads", 1}}},
                           {"7", {{"head_dim", 64}, {"num_key_value_heads", 1}}}};
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_EQ(c->layer_head_dim(7), 64);
  j["per_layer_config"]["2"] = {{"head_dim", 64}}; // a sliding layer of its own shape
  EXPECT_FALSE(parse(j));
  j.erase("per_layer_config");
  j["use_bidirectional_attention"] = "all";
  EXPECT_FALSE(parse(j));
  j["use_bidirectional_attention"] = "vision";
  j["num_kv_shared_layers"] = 7; // layer 1 would share a full layer before it: there is none
  EXPECT_FALSE(parse(j));
}

// DeepSeek-V3.2 / GLM-5: the indexer's sizes; GLM-5's layers that reuse the last full indexer's
// selection from indexer_types, a pattern, or GlmMoeDsaConfig's freq / offset rule.
TEST(ModelConfig, SparseAttentionIndexers) {
  json j = base("DeepseekV32ForCausalLM");
  j.update({{"q_lora_rank", 32},
            {"kv_lora_rank", 32},
            {"qk_nope_head_dim", 16},
            {"qk_rope_head_dim", 8},
            {"v_head_dim", 16},
            {"n_routed_experts", 8},
            {"num_experts_per_tok", 2},
            {"moe_intermediate_size", 32},
            {"index_topk", 64},
            {"index_head_dim", 16}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->dsa_topk, 64);
  EXPECT_EQ(c->dsa_heads, 64); // DeepseekV32Config's default
  EXPECT_FALSE(c->dsa_rope_interleaved);
  EXPECT_TRUE(c->dsa_source.empty());
  EXPECT_EQ(c->kv_values_per_token(1, 0), 32 + 8 + 16); // the latent and the index key
  j["index_head_dim"] = 4;                              // shorter than the rotated part
  EXPECT_FALSE(parse(j));
  j["index_head_dim"] = 16;
  j["architectures"] = {"GlmMoeDsaForCausalLM"};
  j["index_topk_freq"] = 2; // full where max(l - 2 + 1, 0) % 2 == 0: layers 0, 1, 3
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_TRUE(c->dsa_rope_interleaved);
  EXPECT_EQ(c->dsa_heads, 32);
  EXPECT_EQ(c->dsa_source, (std::vector<int32_t>{0, 1, 1, 3}));
  EXPECT_EQ(c->kv_values_per_token(1, 2), 32 + 8); // no indexer there
  j["index_topk_pattern"] = "FSFS";
  ASSERT_TRUE((c = parse(j))) << c.error().to_string();
  EXPECT_EQ(c->dsa_source, (std::vector<int32_t>{0, 0, 2, 2}));
  j["indexer_types"] = {"shared", "full", "full", "full"}; // nothing to reuse on layer 0
  EXPECT_FALSE(parse(j));
}
