// model_config_release_test.cpp: config.json as the 2025-26 models' releases write it (their
// remote code's or their own key names: Kimi-Linear, DeepSeek-V4, MiMo-V2-Flash; DBRX's nested
// keys) read as transformers reads it, and what would say more than transformers computes refused
// by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "arch/model_config.hpp"
#include "config_json.hpp"

using namespace troupe;
using json = nlohmann::json;
using test::base;
using test::parse;

// Kimi-Linear's config.json as published (its remote code's names): linear_attn_config with
// 1-based layer lists, num_experts / moe_renormalize / num_expert_group; or transformers 5's.
TEST(ModelConfig, KimiLinearReadsThePublishedForm) {
  json j = base("KimiLinearForCausalLM");
  j.update({{"kv_lora_rank", 32},
            {"qk_nope_head_dim", 16},
            {"qk_rope_head_dim", 8},
            {"v_head_dim", 16},
            {"moe_intermediate_size", 32},
            {"num_experts", 8},
            {"num_experts_per_token", 2},
            {"moe_renormalize", false},
            {"num_expert_group", 1},
            {"first_k_dense_replace", 2},
            {"linear_attn_config",
             {{"head_dim", 16},
              {"num_heads", 4},
              {"short_conv_kernel_size", 4},
              {"kda_layers", {1, 2, 3}},
              {"full_attn_layers", {4}}}}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->kda);
  EXPECT_EQ(c->linear_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(c->lin_v_heads, 4);
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_FALSE(c->norm_topk);
  EXPECT_EQ(c->moe_layers, (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_FALSE(c->rope_enabled);                     // latent attention without positions
  j["linear_attn_config"]["full_attn_layers"] = {3}; // layer 3 named twice, layer 4 never
  EXPECT_FALSE(parse(j));
}

// DeepSeek-V4's config.json as published: compress_ratios (past the trunk: the MTP layer's),
// num_hash_layers, qk_rope_head_dim, rope_theta / compress_rope_theta / rope_scaling (YaRN on the
// compressed layers only, its attention factor 1). What it does not implement is refused by name.
TEST(ModelConfig, DeepseekV4ReadsThePublishedForm) {
  json j = base("DeepseekV4ForCausalLM");
  j.update({{"num_key_value_heads", 1},
            {"head_dim", 32},
            {"q_lora_rank", 32},
            {"qk_rope_head_dim", 8},
            {"o_groups", 2},
            {"o_lora_rank", 16},
            {"hc_mult", 4},
            {"hc_sinkhorn_iters", 20},
            {"hc_eps", 1e-6},
            {"sliding_window", 8},
            {"compress_ratios", {0, 4, 128, 4, 0}},
            {"num_hash_layers", 2},
            {"index_n_heads", 16},
            {"index_head_dim", 16},
            {"index_topk", 3},
            {"n_routed_experts", 8},
            {"num_experts_per_tok", 2},
            {"n_shared_experts", 1},
            {"moe_intermediate_size", 32},
            {"scoring_func", "sqrtsoftplus"},
            {"topk_method", "noaux_tc"},
            {"swiglu_limit", 10.0},
            {"rope_theta", 10000},
            {"compress_rope_theta", 160000},
            {"rope_scaling",
             {{"type", "yarn"},
              {"factor", 16},
              {"original_max_position_embeddings", 65536},
              {"beta_fast", 32},
              {"beta_slow", 1}}}});
  j.erase("intermediate_size");
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->hc_mult, 4);
  EXPECT_EQ(c->compress, (std::vector<int32_t>{0, 4, 128, 4}));
  EXPECT_EQ(c->hash_layers, (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(c->rope.rot_dim, 8);
  EXPECT_EQ(c->rope.rot_offset, 24); // each head's last 8
  EXPECT_EQ(c->rope.scaling, rope_scaling::none);
  EXPECT_EQ(c->rope_compress.scaling, rope_scaling::yarn);
  EXPECT_DOUBLE_EQ(c->rope_compress.theta, 160000);
  EXPECT_DOUBLE_EQ(c->rope_compress.attn_factor, 1.0);
  EXPECT_TRUE(c->router_sqrt_softplus);
  EXPECT_TRUE(c->swiglu_clamp);
  EXPECT_EQ(c->kv_horizon(), 0); // entries live in the sequence's first blocks
  EXPECT_EQ(c->residual_width(), 4 * 64);
  // per token: the window's row; a compressed layer's kv and gate rows and its entries; a
  // sparse layer's (overlapping, twice as wide) and its indexer's
  EXPECT_EQ(c->kv_values_per_token(1, 0), 32);
  EXPECT_EQ(c->kv_values_per_token(1, 2), 32 + 2 * 32 + 32);
  EXPECT_EQ(c->kv_values_per_token(1, 1), 32 + 4 * 32 + 32 + 4 * 16 + 16);
  // transformers 5's form: a layer's kind by name, its rate from compress_rates (any)
  json t = j;
  t.erase("compress_ratios");
  t["layer_types"] = {"sliding_attention", "compressed_sparse_attention",
                      "heavily_compressed_attention", "compressed_sparse_attention"};
  t["compress_rates"] = {{"compressed_sparse_attention", 8}, {"heavily_compressed_attention", 16}};
  auto ct = parse(t);
  ASSERT_TRUE(ct) << ct.error().to_string();
  EXPECT_EQ(ct->compress, (std::vector<int32_t>{0, 8, 16, 8}));
  EXPECT_EQ(ct->compress_sparse, (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(ct->kv_values_per_token(1, 1), 32 + 4 * 32 + 32 + 4 * 16 + 16);
  for (auto [key, value] : std::vector<std::pair<const char*, json>>{
           {"compress_ratios", {0, 16, 128, 4}},
           {"scoring_func", "softmax"},
           {"n_shared_experts", 2},
           {"num_key_value_heads", 2},
           {"quantization_config", {{"quant_method", "fp8"}, {"fmt", "e4m3"}}}}) {
    json bad = j;
    bad[key] = value;
    auto r = parse(bad);
    ASSERT_FALSE(r) << key;
    EXPECT_NE(
        r.error().message.find(key == std::string("quantization_config") ? "quantization" : key),
        std::string::npos)
        << r.error().message;
  }
}

// MiMo-V2-Flash: the release's keys read as transformers reads them (sliding_window_size + 1; the
// sliding layers' KV heads twice the full layers'), and where they would mean another model
// than transformers computes, refused by name.
TEST(ModelConfig, MimoV2FlashReadsTheReleaseKeysAsTransformers) {
  json j = base("MiMoV2FlashForCausalLM");
  j.update({{"num_key_value_heads", 1},
            {"head_dim", 24},
            {"v_head_dim", 16},
            {"moe_intermediate_size", 32},
            {"n_routed_experts", 8},
            {"num_experts_per_tok", 2},
            {"sliding_window_size", 8},
            {"hybrid_layer_pattern", {0, 1, 1, 1}},
            {"swa_num_key_value_heads", 2}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->sliding_window, 9);
  EXPECT_EQ(c->windowed, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(c->layer_kv_heads(0), 1);
  EXPECT_EQ(c->layer_kv_heads(1), 2);
  EXPECT_EQ(c->rope.rot_dim, 8); // a third of 24
  EXPECT_DOUBLE_EQ(c->rope.theta, 5e6);
  EXPECT_DOUBLE_EQ(c->rope_local.theta, 1e4);
  EXPECT_EQ(c->F_shared, 0);
  EXPECT_FALSE(c->swiglu_clamp);
  for (auto [key, value] :
       std::vector<std::pair<const char*, json>>{{"hybrid_layer_pattern", {0, 1, 1, 0}},
                                                 {"swa_num_key_value_heads", 4},
                                                 {"add_full_attention_sink_bias", true},
                                                 {"swa_rope_theta", 20000}}) {
    json bad = j;
    bad[key] = value;
    auto r = parse(bad);
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().message;
  }
}

// Mistral Small 4 as published: Mistral3ForConditionalGeneration whose text_config is a mistral4
// model is Mistral 4 (not the wrapper's usual Mistral); Mistral4Config's defaults fill what the
// file leaves out (softmax routing without a correction bias, one shared expert, scale 1), and
// the temperature comes from the rope dict. A rotation that is not qk_rope_head_dim refuses.
TEST(ModelConfig, Mistral4UnderTheMistral3Wrapper) {
  json text = base("Mistral4ForCausalLM");
  text.erase("architectures");
  text.update({{"model_type", "mistral4"},
               {"q_lora_rank", 32},
               {"kv_lora_rank", 32},
               {"qk_nope_head_dim", 16},
               {"qk_rope_head_dim", 8},
               {"v_head_dim", 16},
               {"head_dim", 24},
               {"n_routed_experts", 8},
               {"moe_intermediate_size", 32},
               {"rope_parameters",
                {{"rope_type", "yarn"},
                 {"rope_theta", 1e4},
                 {"factor", 128.0},
                 {"original_max_position_embeddings", 8192},
                 {"mscale", 1.0},
                 {"mscale_all_dim", 1.0},
                 {"llama_4_scaling_beta", 0.1},
                 {"partial_rotary_factor", 8.0 / 24.0}}}});
  json j = {{"architectures", {"Mistral3ForConditionalGeneration"}},
            {"model_type", "mistral3"},
            {"text_config", text}};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "mistral4");
  EXPECT_FALSE(c->router_sigmoid);
  EXPECT_FALSE(c->router_bias);
  EXPECT_TRUE(c->norm_topk);
  EXPECT_EQ(c->n_expert_used, 4);  // num_experts_per_tok's default
  EXPECT_EQ(c->F_shared, 32);      // one shared expert
  EXPECT_EQ(c->expert_scale, 1.0); // routed_scaling_factor's default
  EXPECT_EQ(c->attn_temp_floor, 8192);
  EXPECT_DOUBLE_EQ(c->attn_temp_scale, 0.1);
  EXPECT_EQ(c->rope.rot_dim, 8);
  EXPECT_EQ(c->moe_layers, (std::vector<uint8_t>{1, 1, 1, 1})); // first_k_dense_replace 0
  // the wrapper around its usual text model stays Mistral
  json plain = j;
  plain["text_config"] = {{"model_type", "mistral"},  {"hidden_size", 64},
                          {"intermediate_size", 128}, {"num_hidden_layers", 2},
                          {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                          {"vocab_size", 512}};
  auto p = parse(plain);
  ASSERT_TRUE(p) << p.error().to_string();
  EXPECT_EQ(p->family, "mistral");
  // a partial rotation over other dims than qk_rope_head_dim, or a head_dim that disagrees
  json bad = j;
  bad["text_config"]["rope_parameters"]["partial_rotary_factor"] = 0.5;
  auto b = parse(bad);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().to_string().find("partial_rotary_factor"), std::string::npos);
  bad = j;
  bad["text_config"]["head_dim"] = 32;
  EXPECT_FALSE(parse(bad));
}

// Mistral Large 4 as published: the wrapper's text_config with its layers without RoPE,
// layers reading an earlier one's latent cache and indexer types; a layer reading the cache of
// a layer of the other RoPE kind, a q bottleneck and routing without renormalisation refuse.
TEST(ModelConfig, MistralLarge4ReadsThePublishedForm) {
  json text = base("MistralLarge4ForConditionalGeneration");
  text.erase("architectures");
  text.update({{"model_type", "mistral_large4_text"},
               {"kv_lora_rank", 32},
               {"qk_nope_head_dim", 16},
               {"qk_rope_head_dim", 8},
               {"v_head_dim", 16},
               {"n_routed_experts", 8},
               {"moe_intermediate_size", 32},
               {"index_topk", 8},
               {"index_head_dim", 16},
               {"index_n_heads", 4},
               {"indexer_types", {"full", "full", "shared", "full"}},
               {"kv_source_layers", {0, 0, 2, 3}}});
  json j = {{"architectures", {"MistralLarge4ForConditionalGeneration"}},
            {"model_type", "mistral_large4"},
            {"text_config", text}};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "mistral_large4");
  EXPECT_EQ(c->nope_layers, (std::vector<uint8_t>{0, 0, 0, 1})); // every fourth, by default
  EXPECT_EQ(c->layer_kv_source(1), 0);
  EXPECT_EQ(c->dsa_source, (std::vector<int32_t>{0, 1, 1, 3}));
  EXPECT_TRUE(c->attn_pos_scale && c->dsa_q_from_input && c->rope_learned);
  EXPECT_EQ(c->final_softcap, 30.0);
  EXPECT_FALSE(c->router_sigmoid);
  EXPECT_TRUE(c->norm_topk);
  EXPECT_EQ(c->moe_layers, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(c->kv_values_per_token(1, 3), 32 + 16); // without RoPE: the latent and the index key
  EXPECT_EQ(c->kv_values_per_token(1, 1), 16);      // layer 0's latent: its own index keys only
  EXPECT_EQ(c->kv_values_per_token(1, 2), 32 + 8);  // its latent, layer 1's selection
  json bad = j;
  bad["text_config"]["kv_source_layers"] = {0, 1, 2, 2}; // a NoPE layer on a RoPE layer's cache
  EXPECT_FALSE(parse(bad));
  bad = j;
  bad["text_config"]["q_lora_rank"] = 16;
  EXPECT_FALSE(parse(bad));
  bad = j;
  bad["text_config"]["norm_topk_prob"] = false;
  EXPECT_FALSE(parse(bad));
}

// StarCoder2 as published: one window over every layer where it is shorter than the context
// (starcoder2-3b: 4096 of 16384), none where it covers it.
TEST(ModelConfig, Starcoder2WindowWhereShorterThanTheContext) {
  json j = base("Starcoder2ForCausalLM");
  j.update({{"sliding_window", 64}, {"max_position_embeddings", 256}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->sliding_window, 64);
  EXPECT_FALSE(c->gated_ffn);
  EXPECT_EQ(c->norm, norm_kind::layer);
  j["sliding_window"] = 256;
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->sliding_window, 0);
}

// EXAONE 3 as published (ExaoneForCausalLM, its remote code's key names) and as transformers
// saves it (LlamaForCausalLM of model_type exaone, the keys' own names): the same model, read by
// the exaone family (EXAONE's tensor names); a LlamaForCausalLM of another type stays Llama.
TEST(ModelConfig, ExaoneUnderEitherName) {
  json pub = base("ExaoneForCausalLM");
  pub.erase("num_hidden_layers");
  pub.update({{"num_layers", 3}, {"layer_norm_epsilon", 1e-6}, {"activation_function", "silu"}});
  auto a = parse(pub);
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_EQ(a->family, "exaone");
  EXPECT_EQ(a->n_layer, 3);
  EXPECT_DOUBLE_EQ(a->norm_eps, 1e-6);
  EXPECT_TRUE(a->ignored_keys.empty());
  json saved = base("LlamaForCausalLM");
  saved["model_type"] = "exaone";
  auto b = parse(saved);
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_EQ(b->family, "exaone");
  saved["model_type"] = "llama";
  auto c = parse(saved);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "llama");
}

// DBRX as published (dbrx-instruct's config.json: its keys under d_model / n_heads ..., the
// attention's and FFN's nested in attn_config / ffn_config, RoPE's base there too, as DBRX's code
// reads it). What the family does not compute is refused by name, and a RoPE base that
// transformers 5's rope_parameters would contradict is refused rather than guessed.
TEST(ModelConfig, DbrxReadsThePublishedForm) {
  auto c = config_from_hf_dir(test::fixture_path("configs/dbrx-instruct"));
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "dbrx");
  EXPECT_EQ(c->C, 6144);
  EXPECT_EQ(c->n_layer, 40);
  EXPECT_EQ(c->H, 48);
  EXPECT_EQ(c->Hkv, 8);
  EXPECT_EQ(c->ctx, 32768);
  EXPECT_DOUBLE_EQ(c->rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c->clip_qkv, 8.0);
  EXPECT_EQ(c->n_expert, 16);
  EXPECT_EQ(c->n_expert_used, 4);
  EXPECT_EQ(c->F_expert, 10752);
  EXPECT_TRUE(c->norm_topk); // moe_normalize_expert_weights: the class's 1
  EXPECT_EQ(c->norm, norm_kind::layer);
  EXPECT_TRUE(c->ignored_keys.empty());

  const json pub = test::load_json(test::fixture_path("configs/dbrx-instruct/config.json"));
  json j = pub;
  j["ffn_config"]["moe_normalize_expert_weights"] = nullptr; // the chosen weights as they are
  auto d = parse(j);
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_FALSE(d->norm_topk);
  auto refused = [&](const json& k, const std::string& what) {
    auto r = parse(k);
    ASSERT_FALSE(r) << what;
    EXPECT_NE(r.error().to_string().find(what), std::string::npos) << r.error().to_string();
  };
  j = pub, j["ffn_config"]["moe_normalize_expert_weights"] = 2.0;
  refused(j, "moe_normalize_expert_weights");
  j = pub, j["attn_config"]["qk_ln"] = true; // (a key of DBRX's training code)
  refused(j, "attn_config.qk_ln");
  j = pub, j["ffn_config"]["ffn_act_fn"] = {{"name", "gelu"}, {"approximate", "none"}};
  refused(j, "ffn_act_fn");
  j = pub, j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  refused(j, "rope_theta");
  j["rope_parameters"]["rope_theta"] = 500000.0; // transformers 5's form, agreeing
  EXPECT_TRUE(parse(j));
}

// PhiMoE under its published architecture name (PhiMoEForCausalLM; transformers saves Phimoe...),
// the legacy rope_scaling of Phi-3.5-MoE: LongRoPE whose cos and sin are scaled by long_mscale
// for a context past the original one (short_mscale within it), in place of the attention
// factor. Those keys refuse any other family, and the sparsemixer's two choices any other k.
TEST(ModelConfig, PhimoeReadsThePublishedForm) {
  json j = base("PhiMoEForCausalLM");
  std::vector<double> f(8, 1.0);
  j.update({{"num_local_experts", 16},
            {"num_experts_per_tok", 2},
            {"attention_bias", true},
            {"lm_head_bias", true},
            {"max_position_embeddings", 131072},
            {"original_max_position_embeddings", 4096},
            {"sliding_window", 131072},
            {"rope_theta", 10000.0},
            {"rope_scaling",
             {{"type", "longrope"},
              {"short_factor", f},
              {"long_factor", f},
              {"short_mscale", 1.1},
              {"long_mscale", 1.243163121016122},
              {"original_max_position_embeddings", 4096}}}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "phimoe");
  EXPECT_TRUE(c->router_sparsemixer);
  EXPECT_DOUBLE_EQ(c->router_jitter, 0.01); // the class's default
  EXPECT_TRUE(c->lm_head_bias);
  EXPECT_EQ(c->sliding_window, 0); // as long as the context: none
  EXPECT_TRUE(c->rope.use_long);
  EXPECT_DOUBLE_EQ(c->rope.attn_factor, 1.243163121016122);
  json short_ctx = j;
  short_ctx["max_position_embeddings"] = 4096;
  c = parse(short_ctx);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_FALSE(c->rope.use_long);
  EXPECT_DOUBLE_EQ(c->rope.attn_factor, 1.1);
  json k = j;
  k["rope_scaling"].erase("short_mscale");
  EXPECT_FALSE(parse(k)); // transformers reads both
  k = j, k["num_experts_per_tok"] = 4;
  EXPECT_FALSE(parse(k));
  k = j, k["architectures"] = {"Phi3ForCausalLM"};
  auto r = parse(k);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().to_string().find("short_mscale"), std::string::npos) << r.error().to_string();
}

// Configs that transformers runs as Llama, picked by their model type whatever remote-code class
// the checkpoint names (InternLM3ForCausalLM as published, LlamaForCausalLM as transformers saves
// it, or any other): InternLM3 (qkv_bias / bias read as attention_bias / mlp_bias, refused where
// they differ, as its config class does) and IQuestCoder (clip_qkv and windows refused).
TEST(ModelConfig, LlamaRunModelTypes) {
  json j = base("InternLM3ForCausalLM");
  j.update({{"model_type", "internlm3"}, {"qkv_bias", true}, {"bias", true}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "internlm3");
  EXPECT_TRUE(c->qkv_bias && c->o_bias && c->mlp_bias);
  EXPECT_TRUE(c->ignored_keys.empty());
  j["bias"] = false;
  EXPECT_FALSE(parse(j));
  json k = base("IQuestCoderForCausalLM");
  k["model_type"] = "iquestcoder";
  c = parse(k);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "iquestcoder");
  EXPECT_DOUBLE_EQ(c->norm_eps, 1e-5); // the class's default (Llama's is 1e-6)
  k["clip_qkv"] = 8.0;
  EXPECT_FALSE(parse(k));
  json u = base("SomeRemoteForCausalLM");
  u["model_type"] = "llama"; // (no family runs any class of model_type llama)
  EXPECT_FALSE(parse(u));
}

// InternLM2 as published: its config class's bias (true by default) is the attention's (wqkv and
// wo), read as attention_bias.
TEST(ModelConfig, InternLM2Bias) {
  json j = base("InternLM2ForCausalLM");
  j["model_type"] = "internlm2";
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "internlm2");
  EXPECT_TRUE(c->qkv_bias && c->o_bias);
  EXPECT_FALSE(c->mlp_bias);
  j["bias"] = false;
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_FALSE(c->qkv_bias || c->o_bias);
}

// GPT-BigCode: multi_query (the default) gives one KV head, else one per head; transformers 5's
// num_key_value_heads must agree.
TEST(ModelConfig, GptBigcodeMultiQuery) {
  json j = {{"architectures", {"GPTBigCodeForCausalLM"}},
            {"n_embd", 64},
            {"n_layer", 2},
            {"n_head", 4},
            {"n_positions", 256},
            {"vocab_size", 512}};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "gpt_bigcode");
  EXPECT_EQ(c->Hkv, 1);
  EXPECT_EQ(c->act, act_kind::gelu_tanh);
  j["multi_query"] = false;
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->Hkv, 4);
  j["num_key_value_heads"] = 1;
  EXPECT_FALSE(parse(j));
}

// Param2 as published (Param2MoEForCausalLM): Sarvam's names and keys for GLM-4.5's model, its
// config class's defaults (tied embeddings, RoPE over the whole head, q / k norms).
TEST(ModelConfig, Param2ReadsThePublishedForm) {
  json j = base("Param2MoEForCausalLM");
  j.update({{"model_type", "param2moe"},
            {"moe_intermediate_size", 32},
            {"num_experts", 8},
            {"num_shared_experts", 2},
            {"num_experts_per_tok", 2},
            {"first_k_dense_replace", 1},
            {"use_qkv_bias", true}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "param2moe");
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_EQ(c->F_shared, 64);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_EQ(c->D, 64);            // the class's head_dim, whatever hidden / heads is
  EXPECT_EQ(c->rope.rot_dim, 64); // the whole head
  EXPECT_DOUBLE_EQ(c->rope.theta, 500000.0);
  EXPECT_EQ(c->qk_norm, qk_norm_kind::head);
  EXPECT_DOUBLE_EQ(c->expert_scale, 2.5);
}

// Granite SWA's RoPE base per layer: one base for the full layers and one for the sliding ones
// (0: no RoPE on that layer); more bases than that refuse.
TEST(ModelConfig, GraniteSwaRopePerLayer) {
  json j = base("GraniteSWAForCausalLM");
  j.update({{"sliding_window", 8},
            {"layer_types",
             {"full_attention", "sliding_attention", "sliding_attention", "full_attention"}},
            {"layer_rope_theta", {1e6, 1e4, 1e4, 0}}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->attn_sinks);
  EXPECT_DOUBLE_EQ(c->rope.theta, 1e6);
  ASSERT_TRUE(c->has_rope_local);
  EXPECT_DOUBLE_EQ(c->rope_local.theta, 1e4);
  EXPECT_EQ(c->nope_layers, (std::vector<uint8_t>{0, 0, 0, 1}));
  j["layer_rope_theta"] = {1e6, 1e4, 1e4, 5e5}; // two bases among the full layers
  auto r = parse(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().to_string().find("layer_rope_theta"), std::string::npos);
}

// Cohere2-MoE's routing and shared experts: a softmax over the top-k logits (renormalised) or their
// sigmoids (renormalised with norm_topk_prob), shared experts summed or averaged in; anything else
// refuses by name.
TEST(ModelConfig, Cohere2MoeRoutingAndSharing) {
  json j = base("Cohere2MoeForCausalLM");
  j.update({{"num_experts", 8},
            {"num_experts_per_tok", 2},
            {"num_shared_experts", 1},
            {"sliding_window", 8},
            {"expert_selection_fn", "sigmoid"},
            {"norm_topk_prob", false},
            {"shared_expert_combination_strategy", "sum"}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->router_sigmoid);
  EXPECT_FALSE(c->norm_topk);
  EXPECT_DOUBLE_EQ(c->shared_scale, 1.0);
  j["shared_expert_combination_strategy"] = "average";
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_DOUBLE_EQ(c->shared_scale, 0.5);
  EXPECT_DOUBLE_EQ(c->expert_scale, 0.5);
  for (auto [key, value] : {std::pair<const char*, const char*>{"expert_selection_fn", "sparsemax"},
                            {"shared_expert_combination_strategy", "max"}}) {
    json k = j;
    k[key] = value;
    auto r = parse(k);
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().to_string().find(key), std::string::npos) << r.error().to_string();
  }
}

// OPT: the pre-norm form (opt-125m, 1.3b ... 66b) is read; OPT-350m's norms after each sublayer and
// its projections in and out of the model width refuse by name.
TEST(ModelConfig, OptRefusesThePostNormForm) {
  json j = base("OPTForCausalLM");
  j.update({{"ffn_dim", 128}, {"word_embed_proj_dim", 64}, {"do_layer_norm_before", true}});
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->learned_positions);
  EXPECT_EQ(c->act_expr, "relu(x)");
  for (auto [key, value] :
       {std::pair<const char*, json>{"do_layer_norm_before", false}, {"word_embed_proj_dim", 32}}) {
    json k = j;
    k[key] = value;
    auto r = parse(k);
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().to_string().find(key), std::string::npos) << r.error().to_string();
  }
}

// Gemma 3n: intermediate_size may list a width per layer (MatFormer's sliced models); the
// Gaussian top-k's quantile per layer is torch's icdf of the sparsity (none at 0), and without
// activation_sparsity_pattern only a model of more than 10 layers has it (on its first 10).
TEST(ModelConfig, Gemma3nWidthsPerLayerAndSparsityQuantiles) {
  json j = test::load_json(test::fixture_path("models/gemma3n/config.json"));
  j["intermediate_size"] = {128, 96, 128, 64, 128, 128, 128};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->F, 128);
  EXPECT_EQ(c->layer_ffn(1), 96);
  EXPECT_EQ(c->layer_ffn(3), 64);
  EXPECT_NEAR(c->act_sparsity_z.at(0), 1.6448536, 1e-6); // icdf(0.95)
  EXPECT_NEAR(c->act_sparsity_z.at(1), 0.2533471, 1e-6); // icdf(0.6)
  EXPECT_TRUE(c->layer_sparse(1));
  EXPECT_FALSE(c->layer_sparse(2));
  j.erase("activation_sparsity_pattern");
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  for (int64_t l = 0; l < 7; ++l) EXPECT_FALSE(c->layer_sparse(l)) << l;
  j["num_hidden_layers"] = 12;
  j["intermediate_size"] = 128;
  j.erase("layer_types");
  c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  for (int64_t l = 0; l < 12; ++l) EXPECT_EQ(c->layer_sparse(l), l < 10) << l;
}

// HRM-Text: its 12 layers are 12 runs of 4 layers' weights. The parameters count each stack's
// once; a token's compute counts every run (as if each run had weights of its own).
TEST(ModelConfig, WeightSharedLayersStoreOnceComputeEveryRun) {
  auto c = parse(test::load_json(test::fixture_path("models/hrm_text/config.json")));
  ASSERT_TRUE(c) << c.error().to_string();
  ASSERT_EQ(c->n_layer, 12);
  EXPECT_EQ(c->layer_weights(0), 0);
  EXPECT_EQ(c->layer_weights(4), 4);  // round 0's H pass: the H stack's first run
  EXPECT_EQ(c->layer_weights(7), 1);  // round 1's second L pass, layer 1
  EXPECT_EQ(c->layer_weights(11), 5); // round 1's H pass, layer 1
  model_config own = *c;
  own.weight_layer.clear();
  // (what the checkpoint holds is MemoryPlan.FixtureParameterCounts' check)
  EXPECT_GT(own.parameters(), c->parameters());
  EXPECT_DOUBLE_EQ(c->prefill_flops_per_token(16), own.prefill_flops_per_token(16));
}

// Step 3.7 as its hub config writes it (lists padded with the multi-token-prediction layer, the
// sliding layers' heads in attention_other_setting, the experts' layers in moe_layers_enum,
// rope_theta and partial_rotary_factors per layer) reads as the model transformers' own config
// (the fixture's) describes.
TEST(ModelConfig, Step3p7HubFormReadsAsTransformersForm) {
  json j = test::load_json(test::fixture_path("models/step3p7/config.json"));
  auto want = parse(j);
  ASSERT_TRUE(want) << want.error().to_string();
  json& t = j["text_config"];
  for (const char* k : {"num_sliding_attention_heads", "per_layer_config", "mlp_layer_types",
                        "rope_parameters", "mtp_layer_types", "mtp_mlp_layer_types"})
    t.erase(k);
  t["num_nextn_predict_layers"] = 1;
  t["layer_types"].push_back("full_attention");
  t["swiglu_limits"].push_back(0.3);
  t["swiglu_limits_shared"].push_back(0.3);
  t["attention_other_setting"] = {{"num_attention_heads", 8}, {"attention_type", "sliding"}};
  t["moe_layers_enum"] = "1,2,3,4";
  t["rope_theta"] = {1e5, 1e4, 1e5, 1e4, 1e4};
  t["partial_rotary_factors"] = {1.0, 0.5, 1.0, 0.5, 0.5};
  auto got = parse(j);
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->n_layer, 4);
  EXPECT_EQ(got->heads_by_layer, want->heads_by_layer);
  EXPECT_EQ(got->heads_by_layer, (std::vector<int64_t>{8, 4, 8, 4}));
  EXPECT_EQ(got->moe_layers, want->moe_layers);
  EXPECT_EQ(got->swiglu_limits, want->swiglu_limits);
  EXPECT_EQ(got->swiglu_limits_shared, want->swiglu_limits_shared);
  EXPECT_EQ(got->windowed, want->windowed);
  EXPECT_EQ(got->rope.theta, want->rope.theta);
  EXPECT_EQ(got->rope.rot_dim, want->rope.rot_dim);
  EXPECT_EQ(got->rope_local.theta, want->rope_local.theta);
  EXPECT_EQ(got->rope_local.rot_dim, want->rope_local.rot_dim);
  EXPECT_NE(got->rope.rot_dim, got->rope_local.rot_dim);
}
