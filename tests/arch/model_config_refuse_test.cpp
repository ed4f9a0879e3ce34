// model_config_refuse_test.cpp: the families added since December 2026, each from its fixture's
// config.json with one key changed to what Troupe does not compute (a model transformers does not
// run, or one Troupe does not implement): the load is refused, naming what it refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "arch/model_config.hpp"
#include "config_json.hpp"

using namespace troupe;
using json = nlohmann::json;
using test::parse;

// The families of December 2026 (sessions 33, 34), each from its fixture's config.json: a key that
// would make another model than the one Troupe builds (one transformers does not run, or one
// Troupe does not implement) refuses the load, naming what it refused.
TEST(ModelConfig, NewFamiliesRefuseWhatTheyDoNotCompute) {
  struct change {
    const char* fixture;
    const char* key;
    json value;
    const char* named; // what the error must name
  };
  const json partial = {
      {"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
  const std::vector<change> changes = {
      {"nanochat", "rope_parameters", partial, "partial_rotary_factor"},
      {"lara_mini", "rope_parameters", partial, "partial_rotary_factor"},
      {"minimax", "sliding_window", 16, "sliding_window"},
      {"minimax", "hidden_act", "gelu", "hidden_act"},
      {"minicpm5_moe", "use_gated_attention", false, "use_gated_attention"},
      {"minicpm5_moe", "attention_bias", true, "attention_bias"},
      {"axk1", "q_lora_rank", nullptr, "q_lora_rank"},
      {"apertus1p5", "tie_word_embeddings", true, "output_vocab_size"},
      {"apertus1p5", "output_vocab_size", 4096, "output_vocab_size"},
      {"olmo_hybrid", "hidden_act", "gelu", "hidden_act"},
      {"olmo_hybrid", "layer_types", json(std::vector<std::string>(4, "linear_attention")),
       "layer_types"},
      {"codegen", "rotary_dim", nullptr, "rotary_dim"},
      {"xglm", "add_cross_attention", true, "add_cross_attention"},
      {"cohere_compass_vl", "/text_config/rope_parameters/full_attention", partial,
       "partial_rotary_factor"},
      {"gpt_neo", "attention_types", json::parse(R"([[["global", "sparse"], 2]])"), "sparse"},
      {"gemma3n", "altup_active_idx", 1, "altup_active_idx"},
      {"gemma3n", "altup_num_inputs", 1, "altup_num_inputs"},
      {"gemma3n", "laurel_rank", 0, "laurel_rank"},
      {"gemma3n", "activation_sparsity_pattern", json(std::vector<double>(7, 1.0)),
       "activation_sparsity_pattern"},
      {"gemma3n", "activation_sparsity_pattern", 0.95, "activation_sparsity_pattern"},
      {"gemma3n", "activation_sparsity_pattern", json(std::vector<double>(5, 0.5)),
       "activation_sparsity_pattern"},
      {"gemma3n", "intermediate_size", json(std::vector<int>(4, 128)), "intermediate_size"},
      {"recurrent_gemma", "block_types", json::parse(R"(["recurrent", "mlp"])"), "block_types"},
      {"recurrent_gemma", "lru_width", 66, "lru_width"},
      {"mllama_vl", "/text_config/cross_attention_layers", json::parse("[0, 1, 2, 3]"),
       "cross_attention_layers"},
      {"mllama_vl", "/text_config/cross_attention_layers", "1", "cross_attention_layers"},
      {"aria", "mlp_bias", true, "mlp_bias"},
      {"laguna", "moe_apply_router_weight_on_input", true, "moe_apply_router_weight_on_input"},
      {"laguna", "gating", "per-group", "gating"},
      {"laguna", "num_attention_heads_per_layer", json::parse("[4, 8, 8]"),
       "num_attention_heads_per_layer"},
      {"laguna", "num_attention_heads_per_layer", json::parse("[4, 8, 8, 5]"),
       "num_attention_heads_per_layer"},
      {"laguna", "sliding_window", nullptr, "sliding_window"},
      {"laguna", "moe_router_logit_softcapping", -1.0, "moe_router_logit_softcapping"},
      {"bailing_hybrid", "expert_swiglu_limit_list", json::parse("[0, 1, 2]"),
       "expert_swiglu_limit_list"},
      {"bailing_hybrid", "share_expert_swiglu_limit_list", json::parse("[0, -1, 0, 0]"),
       "share_expert_swiglu_limit_list"},
      {"bailing_hybrid", "kda_lower_bound", 0.5, "kda_lower_bound"},
      {"bailing_hybrid", "attention_bias", true, "attention_bias"},
      {"bailing_hybrid", "hidden_act", "gelu", "hidden_act"},
      {"bailing_hybrid", "layer_types", json::parse(R"(["linear_attention", "sliding"])"),
       "layer_types"},
      {"longcat_flash", "zero_expert_type", "zero", "zero_expert_type"},
      {"longcat_flash", "mla_scale_kv_lora", false, "mla_scale_kv_lora"},
      {"longcat_flash", "attention_method", "GQA", "attention_method"},
      {"longcat_flash", "norm_topk_prob", true, "norm_topk_prob"},
      {"longcat_flash", "num_hidden_layers", 3, "num_hidden_layers"},
      {"longcat_flash", "q_lora_rank", 0, "q_lora_rank"},
      {"longcat_flash", "attention_bias", true, "attention_bias"},
      {"hrm_text", "attention_bias", true, "attention_bias"},
      {"hrm_text", "mlp_bias", true, "mlp_bias"},
      {"hrm_text", "num_layers_per_stack", 3, "num_layers_per_stack"},
      {"hrm_text", "H_cycles", 0, "H_cycles"},
      {"minimax_m3", "/text_config/index_n_heads", 1, "index_n_heads"},
      {"minimax_m3", "/text_config/rotary_dim", 4, "rotary_dim"},
      {"minimax_m3", "/text_config/swiglu_limit", 0.0, "swiglu_limit"},
      {"minimax_m3", "/text_config/attention_bias", true, "attention_bias"},
      {"minimax_m3", "/text_config/sliding_window", 8, "sliding_window"},
      {"minimax_m3", "/text_config/index_local_blocks", 3, "local"},
      {"axk2", "q_lora_rank", 0, "q_lora_rank"},
      {"axk2", "gated_norm_rank", -1, "gated_norm_rank"},
      {"step3p7", "/text_config/layer_types",
       json::parse(
           R"(["sliding_attention", "minimax_m3_sparse", "full_attention", "full_attention"])"),
       "layer_types"},
      {"step3p7", "/text_config/use_bidirectional_attention", true, "use_bidirectional_attention"},
      {"step3p7", "/text_config/swiglu_limits", json::parse("[0, -1, 0, 0]"), "swiglu_limits"},
      {"step3p7", "/text_config/per_layer_config",
       json::parse(R"({"1": {"num_attention_heads": 8}})"), "per_layer_config"},
      {"step3p7", "/text_config/num_sliding_attention_heads", 3, "num_sliding_attention_heads"},
      {"beam", "rope_parameters", json::parse(R"({"chunked_attention": {"rope_theta": 10.0}})"),
       "chunked_attention"},
      {"beam", "hidden_act", "gelu", "hidden_act"},
      {"beam", "final_logit_softcapping", -1.0, "final_logit_softcapping"},
      {"beam", "mlp_bias", true, "mlp_bias"},
      {"ergo", "global_attention_every_n_layers", 0, "global_attention_every_n_layers"},
      {"ergo", "global_attention_scale", -1.0, "global_attention_scale"},
      {"ergo", "rope_parameters",
       json::parse(R"({"sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
                       "full_attention": {"rope_type": "default", "rope_theta": 10.0}})"),
       "full_attention"},
      {"minimax_m3", "/text_config/layer_types",
       json::parse(R"(["minimax_m3_sparse", "sliding_attention", "full_attention"])"),
       "layer_types"},
      {"bitnet", "/quantization_config/use_rms_norm", true, "use_rms_norm"},
      {"bitnet", "/quantization_config/modules_to_not_convert",
       json::array({"lm_head", "model.layers.0.mlp"}), "modules_to_not_convert"},
      {"bitnet", "/quantization_config/modules_to_not_convert", json::array(),
       "modules_to_not_convert"},
      {"bitnet", "/quantization_config/linear_class", "bitlinear2", "linear_class"},
      {"bitnet", "/quantization_config/weight_bits", 2, "weight_bits"},
      {"bitnet_online", "/quantization_config/quant_method", "bitsandbytes", "quantization_config"},
      {"diffllama", "attention_dropout", 0.1, "attention_dropout"},
      {"diffllama", "num_key_value_heads", 1, "KV heads"},
      {"zamba2", "adapter_rank", 0, "adapter_rank"},
      {"inkling", "shared_expert_sink", false, "shared_expert_sink"},
      {"inkling", "layer_types", json::parse(R"(["hybrid_sliding", "hybrid", "linear", "hybrid"])"),
       "layer_types"},
      {"inkling", "unpadded_vocab_size", 600, "unpadded_vocab_size"},
      {"inkling", "conv_kernel_size", 1, "conv_kernel_size"},
      {"modernbert_decoder", "local_attention", nullptr, "local_attention"},
      {"modernbert_decoder", "classifier_activation", "tanh", "classifier_activation"},
      {"modernbert_decoder", "rope_parameters", json::parse(R"({"chunked_attention": {}})"),
       "rope_parameters"},
      {"phi4mm", "full_attn_mod", 2, "full_attn_mod"},
      {"phi4mm", "interpolate_factor", 2, "interpolate_factor"},
      {"phi4mm", "lm_head_bias", true, "lm_head_bias"},
      {"zamba", "mamba_proj_bias", true, "mamba_proj_bias"},
      {"zamba", "hidden_mamba_act", "gelu", "hidden_mamba_act"},
      {"zamba", "attention_hidden_size", 64, "attention_hidden_size"},
      {"zamba", "n_mamba_heads", 3, "heads"},
      {"minicpm", "sparse_config", json::object({{"dense_len", 8192}}), "sparse_config"},
      {"minicpm", "scale_emb", nullptr, "scale_emb"},
      {"minicpm", "dim_model_base", 0, "dim_model_base"},
      {"deci", "/block_configs/0/attention/window_length", 128, "window_length"},
      {"deci", "/block_configs/3/attention/num_sink_tokens", 4, "num_sink_tokens"},
      {"deci", "/block_configs/0/attention/unshifted_sink", true, "unshifted_sink"},
      {"deci", "/block_configs/0/ffn/sparsify", json::array({"gate"}), "sparsify"},
      {"deci", "/block_configs/1/ffn/moe", json::object({{"num_local_experts", 8}}), "moe"},
      {"deci", "/block_configs/2/mamba", json::object({{"state_dim", 16}}), "mamba"},
      {"deci", "/block_configs/0/attention/n_heads_in_group", 3, "n_heads_in_group"},
      {"deci", "/block_configs/0/ffn/ffn_mult", nullptr, "ffn_mult"},
      {"deci", "block_configs", json::array(), "block_configs"},
      {"deci", "position_embedding_type", "rope_llama4", "position_embedding_type"},
      {"deci", "head_dim", 32, "head_dim"},
      {"xlstm", "use_bias", true, "use_bias"},
      {"xlstm", "add_out_norm", false, "add_out_norm"},
      {"xlstm", "weight_mode", "split", "weight_mode"},
      {"xlstm", "qk_dim_factor", 0.25, "qk_dim_factor"},
      {"xlstm", "embedding_dim", 64, "embedding_dim"},
      {"doge", "is_moe", true, "is_moe"},
      {"doge", "keep_window_size", 0, "keep_window_size"},
      {"zaya", "cca_time1", 3, "cca_time1"},
      {"zaya", "num_experts_per_tok", 2, "num_experts_per_tok"},
      {"zaya", "attention_bias", true, "attention_bias"},
      {"zaya", "layer_types", json::parse(R"(["hybrid", "sliding_attention", "hybrid"])"),
       "layer_types"},
      {"zaya", "rope_parameters", json::parse(R"({"full_attention": {"rope_theta": 10000.0}})"),
       "full_attention"},
      {"zamba2", "rms_norm_eps", 1e-6, "rms_norm_eps"},
      {"zamba2", "num_key_value_heads", 2, "use_shared_attention_adapter"},
      {"zamba2", "layers_block_type",
       json::parse(R"(["linear_attention", "hybrid", "attention", "hybrid", "hybrid"])"),
       "layers_block_type"},
      {"zamba2", "attention_head_dim", 16, "attention_head_dim"},
      {"dory", "recurrent_kv_cache_mode", "first_loop", "recurrent_kv_cache_mode"},
      {"dory", "n_recurrent_loops", 0, "n_recurrent_loops"},
      {"dory", "n_input_layers", 4, "n_input_layers"},
      {"dory", "initializer_range", 0.0, "initializer_range"},
      {"dory", "layer_types",
       json::parse(R"(["sliding_attention", "mlp", "linear_attention", "mlp", "full_attention",
                       "mlp", "sliding_attention", "mlp"])"),
       "linear_attention"},
      {"dory", "rope_parameters",
       json::parse(R"({"chunked_attention": {"rope_type": "default", "rope_theta": 10.0}})"),
       "chunked_attention"}};
  for (const change& ch : changes) {
    json j =
        test::load_json(test::fixture_path(std::string("models/") + ch.fixture + "/config.json"));
    ASSERT_TRUE(parse(j)) << ch.fixture;
    if (ch.key[0] == '/') // (a nested key, as a JSON pointer)
      j[json::json_pointer(ch.key)] = ch.value;
    else
      j[ch.key] = ch.value;
    auto r = parse(j);
    ASSERT_FALSE(r) << ch.fixture << " " << ch.key;
    EXPECT_NE(r.error().to_string().find(ch.named), std::string::npos)
        << ch.fixture << ": " << r.error().to_string();
  }
}

// ModernBERT's decoder as the Ettin configs on the hub write it (before transformers 5): the RoPE
// bases as global_rope_theta / local_rope_theta, the layers' kinds from global_attn_every_n_layers,
// the window from local_attention whatever sliding_window says
TEST(ModelConfig, ModernBertDecoderOlderKeys) {
  json j = test::load_json(test::fixture_path("models/modernbert_decoder/config.json"));
  for (const char* k : {"rope_parameters", "layer_types"}) j.erase(k);
  j["global_rope_theta"] = 160000.0;
  j["local_rope_theta"] = 5000.0;
  j["num_hidden_layers"] = 7;
  j["global_attn_every_n_layers"] = 3;
  j["local_attention"] = 64;
  j["sliding_window"] = 999;
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_DOUBLE_EQ(c->rope.theta, 160000.0);
  ASSERT_TRUE(c->has_rope_local);
  EXPECT_DOUBLE_EQ(c->rope_local.theta, 5000.0);
  EXPECT_EQ(c->sliding_window, 32);
  for (int64_t l = 0; l < 7; ++l) EXPECT_EQ(c->layer_window(l), l % 3 ? 32 : 0) << l;
}

// Doge: past keep_window_size keys transformers keeps only the best-scored ones (another model
// than the one Troupe computes): the context stops at keep_window_size.
TEST(ModelConfig, DogeContextStopsAtTheDynamicMasksWindow) {
  json j = test::load_json(test::fixture_path("models/doge/config.json"));
  j["max_position_embeddings"] = 4096;
  j["keep_window_size"] = 100;
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->ctx, 100);
  j["keep_window_size"] = 8192; // (a window past the positions: the positions)
  auto d = parse(j);
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_EQ(d->ctx, 4096);
}
