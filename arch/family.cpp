// family.cpp: the family table (families.hpp) and build_graph (family.hpp).
#include "arch/family.hpp"

#include "arch/families/families.hpp"

namespace troupe::arch {

const std::vector<family_entry>& families() {
  static const std::vector<family_entry> table = {
      {"llama", {"LlamaForCausalLM"}, {"llama"}, read_llama_hf, read_llama_gguf, build_llama},
      // Mistral Small 3.x, Magistral, Ministral 3 (its text model ministral3: Mistral with the
      // attention temperature of rope_parameters' llama_4_scaling_beta): Mistral3ForConditional-
      // Generation around a Mistral
      {"mistral",
       {"MistralForCausalLM", "Mistral3ForConditionalGeneration", "Ministral3ForCausalLM"},
       {"mistral", "mistral3"},
       read_llama_hf,
       read_llama_gguf,
       build_llama,
       prepare_language_model},
      // the Qwen VL models' language models, run on text (M-RoPE over text is plain RoPE)
      {"qwen2",
       {"Qwen2ForCausalLM", "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration"},
       {"qwen2", "qwen2vl"},
       read_llama_hf,
       read_llama_gguf,
       build_llama,
       prepare_language_model},
      {"qwen3",
       {"Qwen3ForCausalLM", "Qwen3VLForConditionalGeneration"},
       {"qwen3", "qwen3vl"},
       read_llama_hf,
       read_llama_gguf,
       build_llama,
       prepare_language_model},
      {"qwen3_5",
       {"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration"},
       {"qwen35"},
       read_qwen35_hf,
       read_qwen35_gguf,
       build_qwen35,
       prepare_qwen35_hf},
      {"qwen3_5_moe",
       {"Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"},
       {"qwen35moe"},
       read_qwen35_hf,
       read_qwen35_gguf,
       build_qwen35,
       prepare_qwen35_hf},
      {"qwen3_next",
       {"Qwen3NextForCausalLM"},
       {"qwen3next"},
       read_qwen35_hf,
       read_qwen35_gguf,
       build_qwen35},
      {"mixtral", {"MixtralForCausalLM"}, {}, read_llama_hf, read_llama_gguf, build_llama},
      {"ernie4_5_moe",
       {"Ernie4_5_MoeForCausalLM"},
       {"ernie4_5-moe"},
       read_llama_hf,
       read_llama_gguf,
       build_llama,
       prepare_ernie45_moe_hf},
      {"dots1", {"Dots1ForCausalLM"}, {"dots1"}, read_dots1_hf, read_dots1_gguf, build_dots1},
      {"olmoe", {"OlmoeForCausalLM"}, {"olmoe"}, read_olmoe_hf, read_olmoe_gguf, build_olmoe},
      {"minimax_m2",
       {"MiniMaxM2ForCausalLM"},
       {"minimax-m2"},
       read_minimax_m2_hf,
       read_minimax_m2_gguf,
       build_minimax_m2,
       prepare_deepseek_hf},
      {"llama4",
       {"Llama4ForCausalLM", "Llama4ForConditionalGeneration"},
       {"llama4"},
       read_llama4_hf,
       read_llama4_gguf,
       build_llama4,
       prepare_llama4_hf},
      {"apertus",
       {"ApertusForCausalLM"},
       {"apertus"},
       read_apertus_hf,
       read_apertus_gguf,
       build_apertus},
      {"smollm3", {"SmolLM3ForCausalLM"}, {"smollm3"}, read_llama_hf, read_llama_gguf, build_llama},
      {"hunyuan_dense",
       {"HunYuanDenseV1ForCausalLM"},
       {"hunyuan-dense"},
       read_hunyuan_hf,
       read_hunyuan_gguf,
       build_hunyuan},
      {"hunyuan_moe",
       {"HunYuanMoEV1ForCausalLM"},
       {"hunyuan-moe"},
       read_hunyuan_hf,
       read_hunyuan_gguf,
       build_hunyuan},
      // (LFM2-VL's language model, run on text)
      {"lfm2",
       {"Lfm2ForCausalLM", "Lfm2VlForConditionalGeneration"},
       {"lfm2"},
       read_lfm2_hf,
       read_lfm2_gguf,
       build_lfm2,
       prepare_language_model},
      {"lfm2_moe", {"Lfm2MoeForCausalLM"}, {"lfm2moe"}, read_lfm2_hf, read_lfm2_gguf, build_lfm2},
      {"lfm3", {"Lfm3ForCausalLM"}, {}, read_lfm3_hf, nullptr, build_lfm2},
      // Mamba-1: state-spaces' Mamba, Falcon-Mamba (its dt, B and C normed)
      {"mamba", {"MambaForCausalLM"}, {"mamba"}, read_mamba1_hf, read_mamba1_gguf, build_mamba2},
      {"falcon_mamba", {"FalconMambaForCausalLM"}, {}, read_mamba1_hf, nullptr, build_mamba2},
      {"jamba",
       {"JambaForCausalLM"},
       {"jamba"},
       read_jamba_hf,
       read_jamba_gguf,
       build_jamba,
       nullptr,
       R"({"num_key_value_heads": 8, "max_position_embeddings": 262144, "num_experts": 16,
           "num_experts_per_tok": 2})"},
      // Mamba-Codestral: Mamba-2 blocks alone
      {"mamba2",
       {"Mamba2ForCausalLM"},
       {"mamba2"},
       read_mamba2_hf,
       read_mamba2_gguf,
       build_mamba2,
       nullptr,
       R"({"num_heads": 128, "head_dim": 64, "state_size": 128, "n_groups": 8, "conv_kernel": 4,
           "expand": 2, "use_conv_bias": true, "use_bias": false})"},
      // Arcee AFM: Llama with an ungated MLP, down(relu2(up(x)))
      {"arcee", {"ArceeForCausalLM"}, {"arcee"}, read_llama_hf, read_llama_gguf, build_llama},
      {"seed_oss",
       {"SeedOssForCausalLM"},
       {"seed_oss"},
       read_llama_hf,
       read_llama_gguf,
       build_llama},
      {"qwen2_moe",
       {"Qwen2MoeForCausalLM"},
       {"qwen2moe"},
       read_llama_hf,
       read_llama_gguf,
       build_llama},
      // and Qwen3-VL-MoE's language model (its experts packed as the model multiplies them)
      {"qwen3_moe",
       {"Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration"},
       {"qwen3moe", "qwen3vlmoe"},
       read_llama_hf,
       read_llama_gguf,
       build_llama,
       prepare_qwen3_moe_hf},
      {"deepseek_v2",
       {"DeepseekV2ForCausalLM"},
       {},
       read_deepseek_hf,
       nullptr,
       build_deepseek,
       prepare_deepseek_hf},
      {"deepseek_v3",
       {"DeepseekV3ForCausalLM"},
       {"deepseek2"},
       read_deepseek_hf,
       read_deepseek_gguf,
       build_deepseek,
       prepare_deepseek_hf},
      // DeepSeek-V3.2: V3 with DeepSeek Sparse Attention (its lightning indexer) on every layer
      {"deepseek_v32",
       {"DeepseekV32ForCausalLM"},
       {"deepseek32"},
       read_deepseek_hf,
       read_deepseek_gguf,
       build_deepseek,
       prepare_deepseek_hf},
      // GLM-5: V3.2's sparse attention (its indexer's RoPE on adjacent pairs), layers that reuse
      // the last full indexer's selection (indexer_types), GLM's experts
      {"glm_moe_dsa",
       {"GlmMoeDsaForCausalLM"},
       {"glm-dsa"},
       read_deepseek_hf,
       read_deepseek_gguf,
       build_deepseek,
       prepare_deepseek_hf},
      // Mistral Small 4: DeepSeek-V2's latent attention with Ministral 3's attention temperature,
      // softmax routing over groups by their two best, the experts packed per layer; as
      // published, Mistral3ForConditionalGeneration around a mistral4 text model (a wrapper
      // whose text_config names its model type is looked up as "wrapper/model_type" first)
      {"mistral4",
       {"Mistral4ForCausalLM", "Mistral3ForConditionalGeneration/mistral4"},
       {"mistral4"},
       read_deepseek_hf,
       read_deepseek_gguf,
       build_deepseek,
       prepare_mistral4_hf,
       R"({"n_group": 1, "topk_group": 1, "num_experts_per_tok": 4, "first_k_dense_replace": 0,
           "norm_topk_prob": true, "routed_scaling_factor": 1.0, "n_shared_experts": 1,
           "kv_lora_rank": 256, "q_lora_rank": 1024, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 64, "v_head_dim": 128, "rope_interleave": true,
           "max_position_embeddings": 1048576, "rms_norm_eps": 1e-6, "hidden_act": "silu"})"},
      // Mistral Large 4: GLM-5's sparse latent attention without a q bottleneck, queries scaled
      // by position, LeRoPE, layers without RoPE and layers reading an earlier one's latent
      // cache; Mistral 4's routing
      {"mistral_large4",
       {"MistralLarge4ForConditionalGeneration"},
       {},
       read_mistral_large4_hf,
       nullptr,
       build_mistral_large4,
       nullptr,
       R"({"n_shared_experts": 1, "n_routed_experts": 128, "routed_scaling_factor": 1.0,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 64,
           "n_group": 1, "topk_group": 1, "num_experts_per_tok": 4, "rms_norm_eps": 1e-5,
           "max_position_embeddings": 1048576, "index_topk": 2048, "index_head_dim": 128,
           "index_n_heads": 32, "first_k_dense_replace": 1, "final_logit_softcapping": 30.0,
           "hidden_act": "silu"})"},
      // EXAONE 3.0 / 3.5: Llama under its remote code's names (as published, and as transformers
      // saves it: LlamaForCausalLM of model_type exaone)
      {"exaone",
       {"ExaoneForCausalLM", "LlamaForCausalLM/exaone"},
       {},
       read_llama_hf,
       nullptr,
       build_llama,
       nullptr,
       R"({"rms_norm_eps": 1e-5, "rope_theta": 500000.0})",
       R"({"num_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps",
           "activation_function": "hidden_act"})"},
      {"starcoder2",
       {"Starcoder2ForCausalLM"},
       {"starcoder2"},
       read_starcoder2_hf,
       read_starcoder2_gguf,
       build_starcoder2,
       nullptr,
       R"({"hidden_act": "gelu_pytorch_tanh", "norm_epsilon": 1e-5, "use_bias": true,
           "tie_word_embeddings": true})"},
      {"nemotron",
       {"NemotronForCausalLM"},
       {"nemotron"},
       read_nemotron_hf,
       read_nemotron_gguf,
       build_nemotron,
       nullptr,
       R"({"hidden_act": "relu2", "norm_eps": 1e-5})"},
      {"jais2",
       {"Jais2ForCausalLM"},
       {"jais2"},
       read_nemotron_hf,
       read_nemotron_gguf,
       build_nemotron,
       nullptr,
       R"({"hidden_act": "relu2", "layer_norm_eps": 1e-5})"},
      // MiniCPM3: DeepSeek-V2's latent attention (RoPE on halves) under muP's scalings
      {"minicpm3",
       {"MiniCPM3ForCausalLM"},
       {"minicpm3"},
       read_minicpm3_hf,
       read_minicpm3_gguf,
       build_minicpm3,
       nullptr,
       R"({"kv_lora_rank": 256, "q_lora_rank": 768, "qk_nope_head_dim": 64,
           "qk_rope_head_dim": 32, "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 256,
           "rms_norm_eps": 1e-5, "hidden_act": "silu"})"},
      // Arcee AFMoE (Trinity): gated values, RoPE on the sliding layers only, sandwich norms,
      // sigmoid experts with a correction bias and shared experts
      {"afmoe",
       {"AfmoeForCausalLM"},
       {"afmoe"},
       read_afmoe_hf,
       read_afmoe_gguf,
       build_afmoe,
       nullptr,
       R"({"num_dense_layers": 1, "num_experts": 64, "num_experts_per_tok": 6,
           "num_shared_experts": 2, "route_scale": 1.0, "moe_intermediate_size": 1408,
           "global_attn_every_n_layers": 4, "sliding_window": 1024, "head_dim": 128,
           "rms_norm_eps": 1e-5, "hidden_act": "silu"})"},
      // DeepSeek-V4: hyper-connections, shared-KV attention over a window and compressed
      // entries (an indexer picking among them on the sparse layers), hash and sqrt-softplus
      // routing
      {"deepseek_v4",
       {"DeepseekV4ForCausalLM"},
       {},
       read_deepseek_v4_hf,
       nullptr,
       build_deepseek_v4,
       prepare_deepseek_v4_hf},
      // GLM-5.3-Flash: KDA layers and latent attention without positions over a pooled indexer's
      // picks, V3's experts, V4's hyper-connections
      {"glm5_next",
       {"Glm5NextForConditionalGeneration"},
       {},
       read_glm5_next_hf,
       nullptr,
       build_glm5_next,
       prepare_language_model},
      // Tencent HY-V4: GLM-5's sparse latent attention with sinks and gated values, independent
      // hyper-connections, V3's experts
      {"hy_v4", {"HYV4ForCausalLM"}, {}, read_hy_v4_hf, nullptr, build_hy_v4},
      // MiMo-V2-Flash: sliding layers with sinks between full ones, values narrower than keys
      // (widened at load), V3's routing
      {"mimo_v2_flash",
       {"MiMoV2FlashForCausalLM"},
       {},
       read_mimo_v2_hf,
       nullptr,
       build_mimo_v2,
       prepare_mimo_v2_hf},
      // Kimi-Linear: KDA layers between latent attention without positions, V3's experts
      {"kimi_linear",
       {"KimiLinearForCausalLM"},
       {"kimi-linear"},
       read_kimi_linear_hf,
       read_kimi_linear_gguf,
       build_kimi_linear},
      // GLM-4.7-Flash: DeepSeek-V3's latent attention and experts, dense layers by mlp_layer_types
      // (llama.cpp writes it as deepseek2)
      {"glm4_moe_lite",
       {"Glm4MoeLiteForCausalLM"},
       {},
       read_deepseek_hf,
       nullptr,
       build_deepseek,
       prepare_deepseek_hf},
      {"glm4", {"Glm4ForCausalLM"}, {"glm4"}, read_glm4_hf, read_glm4_gguf, build_glm4},
      {"glm4_moe",
       {"Glm4MoeForCausalLM"},
       {"glm4moe"},
       read_glm4_moe_hf,
       read_glm4_moe_gguf,
       build_glm4_moe},
      // Solar Open: Llama's attention over GLM-4.5's experts
      {"solar_open", {"SolarOpenForCausalLM"}, {}, read_solar_open_hf, nullptr, build_glm4_moe},
      {"ernie4_5",
       {"Ernie4_5ForCausalLM"},
       {"ernie4_5"},
       read_llama_hf,
       read_llama_gguf,
       build_llama},
      {"gpt_oss",
       {"GptOssForCausalLM"},
       {"gpt-oss"},
       read_gpt_oss_hf,
       read_gpt_oss_gguf,
       build_gpt_oss,
       prepare_gpt_oss_hf},
      {"gemma", {"GemmaForCausalLM"}, {"gemma"}, read_gemma_hf, read_gemma_gguf, build_gemma},
      {"gemma2", {"Gemma2ForCausalLM"}, {"gemma2"}, read_gemma_hf, read_gemma_gguf, build_gemma},
      // Gemma 3 4B / 12B / 27B are published as Gemma3ForConditionalGeneration with a sparse
      // text_config: Gemma3TextConfig's defaults fill it
      {"gemma3",
       {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"},
       {"gemma3"},
       read_gemma_hf,
       read_gemma_gguf,
       build_gemma,
       prepare_language_model,
       R"({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
           "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
           "head_dim": 256, "max_position_embeddings": 131072})"},
      // Gemma 4 is published as Gemma4ForConditionalGeneration; Gemma4TextConfig's defaults
      // fill what its text_config leaves out
      {"gemma4",
       {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"},
       {"gemma4"},
       read_gemma4_hf,
       read_gemma4_gguf,
       build_gemma4,
       prepare_language_model,
       R"({"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216,
           "num_hidden_layers": 30, "num_attention_heads": 8, "num_key_value_heads": 4,
           "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 512,
           "hidden_size_per_layer_input": 256})"},
      {"olmo", {"OlmoForCausalLM"}, {"olmo"}, read_olmo_hf, read_olmo_gguf, build_olmo},
      {"olmo2", {"Olmo2ForCausalLM"}, {"olmo2"}, read_olmo_hf, read_olmo_gguf, build_olmo},
      {"olmo3", {"Olmo3ForCausalLM"}, {}, read_olmo_hf, nullptr, build_olmo},
      {"exaone4", {"Exaone4ForCausalLM"}, {"exaone4"}, read_olmo_hf, read_olmo_gguf, build_olmo},
      {"exaone_moe",
       {"ExaoneMoeForCausalLM"},
       {"exaone-moe"},
       read_exaone_moe_hf,
       read_exaone_moe_gguf,
       build_exaone_moe},
      {"granite",
       {"GraniteForCausalLM"},
       {"granite"},
       read_granite_hf,
       read_granite_gguf,
       build_granite},
      {"granitemoe",
       {"GraniteMoeForCausalLM"},
       {"granitemoe"},
       read_granite_hf,
       read_granite_gguf,
       build_granite},
      {"bamba",
       {"BambaForCausalLM"},
       {},
       read_bamba_hf,
       nullptr,
       build_bamba,
       nullptr,
       R"({"mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_head": "auto",
           "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": true, "mamba_proj_bias": false,
           "num_key_value_heads": 8, "max_position_embeddings": 262144})"},
      // (num_hidden_layers: transformers counts the layer kinds, whatever it says)
      {"nemotron_h",
       {"NemotronHForCausalLM"},
       {"nemotron_h", "nemotron_h_moe"},
       read_nemotron_h_hf,
       read_nemotron_h_gguf,
       build_nemotron_h,
       nullptr,
       R"({"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 21504, "max_position_embeddings": 4096, "vocab_size": 131072,
           "hidden_size": 4096, "ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64,
           "n_groups": 8, "conv_kernel": 4, "expand": 2, "use_conv_bias": true,
           "mamba_proj_bias": false, "chunk_size": 128, "num_hidden_layers": 1,
           "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 7688,
           "moe_shared_expert_intermediate_size": 7688, "n_shared_experts": 1})"},
      {"falcon_h1",
       {"FalconH1ForCausalLM"},
       {"falcon-h1"},
       read_falcon_h1_hf,
       read_falcon_h1_gguf,
       build_falcon_h1,
       nullptr,
       R"({"mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1,
           "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": true,
           "mamba_proj_bias": false, "mamba_norm_before_gate": true, "mamba_rms_norm": false,
           "num_key_value_heads": 8, "max_position_embeddings": 8192})"},
      // GraniteMoeHybridConfig's defaults for the Mamba mixer and the experts
      {"granitemoehybrid",
       {"GraniteMoeHybridForCausalLM"},
       {"granitehybrid"},
       read_granite_hf,
       read_granite_gguf,
       build_granite,
       nullptr,
       R"({"mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_head": "auto",
           "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": true, "mamba_proj_bias": false,
           "num_local_experts": 8, "num_experts_per_tok": 2, "shared_intermediate_size": 1024})"},
      {"phi2", {"PhiForCausalLM"}, {"phi2"}, read_phi_hf, read_phi_gguf, build_phi},
      {"phi3", {"Phi3ForCausalLM"}, {"phi3"}, read_phi_hf, read_phi_gguf, build_phi},
      {"gpt2", {"GPT2LMHeadModel"}, {"gpt2"}, read_gpt2_hf, read_gpt2_gguf, build_gpt2},
      {"gpt_neox", {"GPTNeoXForCausalLM"}, {"gptneox"}, read_neox_hf, read_neox_gguf, build_neox},
      {"stablelm",
       {"StableLmForCausalLM"},
       {"stablelm"},
       read_neox_hf,
       read_neox_gguf,
       build_neox,
       prepare_neox_hf},
      {"cohere",
       {"CohereForCausalLM"},
       {"command-r"},
       read_cohere_hf,
       read_cohere_gguf,
       build_cohere},
      {"cohere2",
       {"Cohere2ForCausalLM"},
       {"cohere2"},
       read_cohere_hf,
       read_cohere_gguf,
       build_cohere},
      {"falcon", {"FalconForCausalLM"}, {"falcon"}, read_falcon_hf, read_falcon_gguf, build_falcon},
      {"bloom", {"BloomForCausalLM"}, {"bloom"}, read_bloom_hf, read_bloom_gguf, build_bloom},
      {"mpt", {"MptForCausalLM"}, {"mpt"}, read_bloom_hf, read_bloom_gguf, build_bloom},
  };
  return table;
}

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
