// families.hpp (arch/families, internal): the table of architecture families. Each family
// (one file in arch/families/) reads its configuration from config.json (read_hf) and from
// GGUF metadata (read_gguf) into model_config, and builds the whole model's graph (build).
// table.cpp holds the table; model_config.cpp dispatches on it.
#pragma once

#include <array>
#include <vector>

#include "arch/families/config_io.hpp"
#include "arch/families/weights.hpp"

namespace troupe::arch {

struct family_entry {
  const char* name;                    // model_config::family
  std::vector<const char*> hf_archs;   // config.json "architectures"
  std::vector<const char*> gguf_archs; // general.architecture
  status (*read_hf)(hf_cfg& j, model_config& c);
  status (*read_gguf)(const gguf_cfg& g, model_config& c); // null: no GGUF form
  status (*build)(const model_source& m, graph::graph& g);
  // optional: derived tensors added to an HF checkpoint's index before the graph is built
  // (StableLM's per-head q/k norms stacked into one tensor)
  status (*prepare_hf)(const model_config& c, tensor_index& t) = nullptr;
  // optional: transformers' defaults (the config class's) for keys a published config.json
  // leaves out, as a JSON object; a key the config lacks takes its value from here
  const char* hf_defaults = nullptr;
  // optional: the config class's attribute_map (a JSON object, older name -> name read): a key
  // under its older name is read as the other where that one is absent
  const char* hf_aliases = nullptr;
};

const std::vector<family_entry>& families();
/// The table's entries from Hy3 on (table_more.cpp), which families() appends to table.cpp's.
std::vector<family_entry> more_families();
const family_entry* find_family(std::string_view name);
const family_entry* find_family_hf(std::string_view arch);
const family_entry* find_family_gguf(std::string_view arch);
/// "LlamaForCausalLM, MistralForCausalLM, ..." (or the GGUF names).
std::string known_architectures(bool gguf);

// the families
status read_llama_hf(hf_cfg& j, model_config& c);
status read_llama_gguf(const gguf_cfg& g, model_config& c);
status build_llama(const model_source& m, graph::graph& g);
status prepare_ernie45_moe_hf(const model_config& c, tensor_index& t);
/// Qwen3-VL-MoE as published: the language model's tensors (prepare_language_model), its
/// experts packed per layer as the model multiplies them (gate_up_proj [E, C, 2F], down_proj
/// [E, F, C]) transposed into mlp.experts.gate / up [E, F, C] and down [E, C, F].
status prepare_qwen3_moe_hf(const model_config& c, tensor_index& t);
status read_dots1_hf(hf_cfg& j, model_config& c);
status read_dots1_gguf(const gguf_cfg& g, model_config& c);
status build_dots1(const model_source& m, graph::graph& g);
status read_olmoe_hf(hf_cfg& j, model_config& c);
status read_olmoe_gguf(const gguf_cfg& g, model_config& c);
status build_olmoe(const model_source& m, graph::graph& g);
status read_minimax_m2_hf(hf_cfg& j, model_config& c);
status read_minimax_m2_gguf(const gguf_cfg& g, model_config& c);
status build_minimax_m2(const model_source& m, graph::graph& g);
status read_exaone_moe_hf(hf_cfg& j, model_config& c);
status build_exaone_moe(const model_source& m, graph::graph& g);
status read_hunyuan_hf(hf_cfg& j, model_config& c);
status read_hunyuan_gguf(const gguf_cfg& g, model_config& c);
status build_hunyuan(const model_source& m, graph::graph& g);
status read_lfm2_hf(hf_cfg& j, model_config& c);
status read_lfm2_gguf(const gguf_cfg& g, model_config& c);
status build_lfm2(const model_source& m, graph::graph& g);
status read_lfm3_hf(hf_cfg& j, model_config& c);
status read_llama4_hf(hf_cfg& j, model_config& c);
status read_llama4_gguf(const gguf_cfg& g, model_config& c);
status build_llama4(const model_source& m, graph::graph& g);
status prepare_llama4_hf(const model_config& c, tensor_index& t);
status read_apertus_hf(hf_cfg& j, model_config& c);
status prepare_apertus_hf(const model_config& c, tensor_index& t);
status read_apertus_gguf(const gguf_cfg& g, model_config& c);
status build_apertus(const model_source& m, graph::graph& g);
status read_indexer_types(hf_cfg& j, model_config& c, const std::vector<uint8_t>& layers);
/// layer_types where every layer is "indexed_attention" (the only kind such a family has).
status read_indexed_layers(hf_cfg& j, const model_config& c);
/// hc_mult and hc_eps, and hc_sinkhorn_iters (or, hc_independent set, hc_magnitude).
status read_hyper_connections(hf_cfg& j, model_config& c);
/// Latent attention's q_lora_rank, kv_lora_rank, qk_nope / qk_rope / v_head_dim (each its
/// fallback when absent; a negative one: required), one KV head of the latent and rope part.
status read_mla_dims(hf_cfg& j, model_config& c, const std::array<int64_t, 5>& fallback);
/// Its softmax scale: 1 / sqrt(qk_nope + qk_rope), times YaRN's mscale(factor, mscale_all_dim)^2.
void mla_attention_scale(model_config& c);
/// DeepSeek-V3's experts as transformers 5's newer configs name them (sigmoid scores with the
/// correction bias, groups, shared experts, the routed ones' SwiGLU clamped at swiglu_limit),
/// the dense layers by mlp_layer_types or the first `first_dense`.
status read_v3_experts(hf_cfg& j, model_config& c, double scale_default, int64_t first_dense,
                       int64_t shared_default = 1, double limit_default = 10.0);
status read_mimo_v2_hf(hf_cfg& j, model_config& c);
status read_solar_open_hf(hf_cfg& j, model_config& c);
status prepare_mimo_v2_hf(const model_config& c, tensor_index& t);
status build_mimo_v2(const model_source& m, graph::graph& g);
/// Kimi Delta Attention's heads, head dim and convolution (linear_attn_config or linear_* keys).
status read_kda_dims(hf_cfg& j, model_config& c, int64_t heads_default);
status read_deepseek_v4_hf(hf_cfg& j, model_config& c);
status read_glm5_next_hf(hf_cfg& j, model_config& c);
status read_hy_v4_hf(hf_cfg& j, model_config& c);
status build_hy_v4(const model_source& m, graph::graph& g);
status build_glm5_next(const model_source& m, graph::graph& g);
status prepare_deepseek_v4_hf(const model_config& c, tensor_index& t);
status build_deepseek_v4(const model_source& m, graph::graph& g);
status read_kimi_linear_hf(hf_cfg& j, model_config& c);
status build_kimi_linear(const model_source& m, graph::graph& g);
status read_gemma4_hf(hf_cfg& j, model_config& c);
/// Gemma 4's (and 3n's) num_kv_shared_layers: the last that many layers attend over the KV cache
/// of the last earlier layer of their type (c.kv_source, by the windows already read); the count.
expected<int64_t> read_kv_shared_layers(hf_cfg& j, model_config& c);
/// The same for `shared` layers from any source: -1, or the first sharing layer without one.
int64_t share_kv_layers(model_config& c, int64_t shared);
/// A GGUF key written once or per layer (llama.cpp's converters' arrays): each layer's count.
expected<std::vector<int64_t>> gguf_per_layer(const gguf_cfg& g, const char* k, int64_t L);
status read_gemma3n_gguf(const gguf_cfg& g, model_config& c);
status read_gemma4_gguf(const gguf_cfg& g, model_config& c);
status build_gemma4(const model_source& m, graph::graph& g);
status read_gemma_hf(hf_cfg& j, model_config& c);
/// Gemma 3's RoPE (and Gemma 3n's): full and sliding layers' bases, nested by layer type in
/// rope_parameters or as rope_theta, rope_local_base_freq and rope_scaling (the full layers').
status read_gemma3_rope(hf_cfg& j, model_config& c);
status read_gemma3n_hf(hf_cfg& j, model_config& c);
status read_recurrent_gemma_hf(hf_cfg& j, model_config& c);
status read_mllama_hf(hf_cfg& j, model_config& c);
status read_aria_hf(hf_cfg& j, model_config& c);
status read_biogpt_hf(hf_cfg& j, model_config& c);
status prepare_biogpt_hf(const model_config& c, tensor_index& t);
status prepare_aria_hf(const model_config& c, tensor_index& t);
status read_deci_hf(hf_cfg& j, model_config& c);
status read_deci_gguf(const gguf_cfg& g, model_config& c);
status build_deci(const model_source& m, graph::graph& g);
/// Emu3 as published: the language model's tensors under text_model., read without it.
status prepare_emu3_hf(const model_config& c, tensor_index& t);
status build_aria(const model_source& m, graph::graph& g);
status prepare_mllama_hf(const model_config& c, tensor_index& t);
status build_mllama(const model_source& m, graph::graph& g);
status prepare_recurrent_gemma_hf(const model_config& c, tensor_index& t);
status build_recurrent_gemma(const model_source& m, graph::graph& g);
status build_gemma3n(const model_source& m, graph::graph& g);
status read_gemma_gguf(const gguf_cfg& g, model_config& c);
status build_gemma(const model_source& m, graph::graph& g);
status read_olmo_hf(hf_cfg& j, model_config& c);
status read_olmo_gguf(const gguf_cfg& g, model_config& c);
status build_olmo(const model_source& m, graph::graph& g);
status read_granite_hf(hf_cfg& j, model_config& c);
status read_granite_gguf(const gguf_cfg& g, model_config& c);
status build_granite(const model_source& m, graph::graph& g);
status read_phi_hf(hf_cfg& j, model_config& c);
status read_phi_gguf(const gguf_cfg& g, model_config& c);
status build_phi(const model_source& m, graph::graph& g);
status read_gpt2_hf(hf_cfg& j, model_config& c);
status read_gpt2_gguf(const gguf_cfg& g, model_config& c);
status build_gpt2(const model_source& m, graph::graph& g);
status read_neox_hf(hf_cfg& j, model_config& c);
status read_neox_gguf(const gguf_cfg& g, model_config& c);
status build_neox(const model_source& m, graph::graph& g);
status prepare_neox_hf(const model_config& c, tensor_index& t);
status read_cohere_hf(hf_cfg& j, model_config& c);
status read_cohere_gguf(const gguf_cfg& g, model_config& c);
status build_cohere(const model_source& m, graph::graph& g);
status read_falcon_hf(hf_cfg& j, model_config& c);
status read_falcon_gguf(const gguf_cfg& g, model_config& c);
status build_falcon(const model_source& m, graph::graph& g);
/// The expert keys of Mixtral / Qwen2-MoE / Qwen3-MoE configs (moe.cpp); read_llama_hf and
/// read_llama_gguf call these.
status read_experts_hf(hf_cfg& j, model_config& c);
/// The expert count (under `key`, or its other name `alias`) and experts per token, and the
/// training-only router keys; GGUF: expert_count / expert_used_count (none: n_expert 0).
status read_expert_counts(hf_cfg& j, model_config& c, const char* key, const char* alias);
status read_expert_counts(const gguf_cfg& g, model_config& c);
status read_experts_gguf(const gguf_cfg& g, model_config& c);
/// The expert tensors' names of the checkpoint's format (HF per expert, GGUF merged).
struct decoder_names;
void expert_names(const model_source& m, decoder_names& n, bool shared = true);
/// Qwen3.5, Qwen3.5-MoE, Qwen3-Next (qwen35.cpp).
status read_glm4_gguf(const gguf_cfg& g, model_config& c);
status read_qwen35_hf(hf_cfg& j, model_config& c);
status read_qwen35_gguf(const gguf_cfg& g, model_config& c);
status build_qwen35(const model_source& m, graph::graph& g);
status prepare_qwen35_hf(const model_config& c, tensor_index& t);
/// Lara Mini as published: each DeltaNet layer's in_proj [q | k | v | z | b | a] split into
/// in_proj_qkv, in_proj_z, in_proj_b and in_proj_a (qwen35.cpp).
status prepare_lara_mini_hf(const model_config& c, tensor_index& t);
status read_deepseek_hf(hf_cfg& j, model_config& c);
status read_deepseek_gguf(const gguf_cfg& g, model_config& c);
status build_deepseek(const model_source& m, graph::graph& g);
status prepare_deepseek_hf(const model_config& c, tensor_index& t);
/// Mistral Large 4 (mistral_large4.cpp).
status read_mistral_large4_hf(hf_cfg& j, model_config& c);
status read_kimi_linear_gguf(const gguf_cfg& g, model_config& c);
status read_exaone_moe_gguf(const gguf_cfg& g, model_config& c);
/// GPT-Neo (gpt_neo.cpp).
status read_gpt_neo_hf(hf_cfg& j, model_config& c);
status build_gpt_neo(const model_source& m, graph::graph& g);
/// OLMo hybrid (olmo_hybrid.cpp).
status read_olmo_hybrid_hf(hf_cfg& j, model_config& c);
status prepare_olmo_hybrid_hf(const model_config& c, tensor_index& t);
status build_olmo_hybrid(const model_source& m, graph::graph& g);
/// MiniMax-Text-01 / M1 (minimax01.cpp).
status read_minimax_hf(hf_cfg& j, model_config& c);
status prepare_minimax_hf(const model_config& c, tensor_index& t);
status build_minimax(const model_source& m, graph::graph& g);
/// XGLM (xglm.cpp).
status read_xglm_hf(hf_cfg& j, model_config& c);
status prepare_xglm_hf(const model_config& c, tensor_index& t);
status build_xglm(const model_source& m, graph::graph& g);
/// NanoChat (nanochat.cpp).
status read_nanochat_hf(hf_cfg& j, model_config& c);
status build_nanochat(const model_source& m, graph::graph& g);
/// StarCoder2 (starcoder2.cpp).
status read_starcoder2_hf(hf_cfg& j, model_config& c);
status read_starcoder2_gguf(const gguf_cfg& g, model_config& c);
status build_starcoder2(const model_source& m, graph::graph& g);
/// Nemotron-4 / Minitron (nemotron.cpp).
status read_nemotron_hf(hf_cfg& j, model_config& c);
status read_nemotron_gguf(const gguf_cfg& g, model_config& c);
status build_nemotron(const model_source& m, graph::graph& g);
/// MiniCPM3 (minicpm.cpp).
status read_minicpm3_hf(hf_cfg& j, model_config& c);
status read_minicpm3_gguf(const gguf_cfg& g, model_config& c);
status read_minicpm_hf(hf_cfg& j, model_config& c);
status read_minicpm_gguf(const gguf_cfg& g, model_config& c);
status build_minicpm3(const model_source& m, graph::graph& g);
/// OPT (gpt2.cpp; built by build_gpt2).
status read_opt_hf(hf_cfg& j, model_config& c);
status prepare_opt_hf(const model_config& c, tensor_index& t);
/// GPT-J (gpt2.cpp; built by build_gpt2).
status read_gptj_hf(hf_cfg& j, model_config& c);
/// Cohere2-MoE (cohere.cpp; built by build_cohere).
status read_cohere2_moe_hf(hf_cfg& j, model_config& c);
/// Flint (moe.cpp).
status read_flint_hf(hf_cfg& j, model_config& c);
status build_flint(const model_source& m, graph::graph& g);
/// Kolibri (moe.cpp).
status read_kolibri_hf(hf_cfg& j, model_config& c);
status build_kolibri(const model_source& m, graph::graph& g);
/// Mellum (moe.cpp).
status read_mellum_hf(hf_cfg& j, model_config& c);
status build_mellum(const model_source& m, graph::graph& g);
/// Ergo (ergo.cpp).
status read_ergo_hf(hf_cfg& j, model_config& c);
status prepare_ergo_hf(const model_config& c, tensor_index& t);
status build_ergo(const model_source& m, graph::graph& g);
/// DiffLlama (diffllama.cpp).
status read_diffllama_hf(hf_cfg& j, model_config& c);
status build_diffllama(const model_source& m, graph::graph& g);
/// ModernBERT's decoder (modernbert.cpp).
status read_modernbert_decoder_hf(hf_cfg& j, model_config& c);
status build_modernbert_decoder(const model_source& m, graph::graph& g);
/// Zamba (zamba2.cpp, beside Zamba2).
status read_zamba_hf(hf_cfg& j, model_config& c);
/// xLSTM (xlstm.cpp).
status read_xlstm_hf(hf_cfg& j, model_config& c);
status build_xlstm(const model_source& m, graph::graph& g);
/// Doge (doge.cpp).
status read_doge_hf(hf_cfg& j, model_config& c);
status prepare_doge_hf(const model_config& c, tensor_index& t);
status build_doge(const model_source& m, graph::graph& g);
/// ZAYA1 (zaya.cpp).
status read_zaya_hf(hf_cfg& j, model_config& c);
status prepare_zaya_hf(const model_config& c, tensor_index& t);
status build_zaya(const model_source& m, graph::graph& g);
/// Inkling (inkling.cpp).
status read_inkling_hf(hf_cfg& j, model_config& c);
status prepare_inkling_hf(const model_config& c, tensor_index& t);
status build_inkling(const model_source& m, graph::graph& g);
/// Zamba2 (zamba2.cpp).
status read_zamba2_hf(hf_cfg& j, model_config& c);
status prepare_zamba2_hf(const model_config& c, tensor_index& t);
status build_zamba2(const model_source& m, graph::graph& g);
/// Dory (dory.cpp).
status read_dory_hf(hf_cfg& j, model_config& c);
status prepare_dory_hf(const model_config& c, tensor_index& t);
status build_dory(const model_source& m, graph::graph& g);
/// BitNet b1.58 (bitnet.cpp).
status read_bitnet_hf(hf_cfg& j, model_config& c);
status prepare_bitnet_hf(const model_config& c, tensor_index& t);
status build_bitnet(const model_source& m, graph::graph& g);
/// Beam (beam.cpp).
status read_beam_hf(hf_cfg& j, model_config& c);
status build_beam(const model_source& m, graph::graph& g);
/// StepFun's Step 3.7 Flash's language model (step3p7.cpp).
status read_step3p7_hf(hf_cfg& j, model_config& c);
status build_step3p7(const model_source& m, graph::graph& g);
/// MiniMax M3's text model (minimax.cpp).
status read_minimax_m3_hf(hf_cfg& j, model_config& c);
status build_minimax_m3(const model_source& m, graph::graph& g);
/// Sapient's HRM-Text (hrm_text.cpp).
status read_hrm_text_hf(hf_cfg& j, model_config& c);
status prepare_hrm_text_hf(const model_config& c, tensor_index& t);
status build_hrm_text(const model_source& m, graph::graph& g);
/// Meituan's LongCat-Flash (longcat_flash.cpp).
status read_longcat_flash_hf(hf_cfg& j, model_config& c);
status prepare_longcat_flash_hf(const model_config& c, tensor_index& t);
status build_longcat_flash(const model_source& m, graph::graph& g);
/// inclusionAI's Ling 3 (bailing_hybrid.cpp).
status read_bailing_hybrid_hf(hf_cfg& j, model_config& c);
status build_bailing_hybrid(const model_source& m, graph::graph& g);
/// Poolside's Laguna (laguna.cpp).
status read_laguna_hf(hf_cfg& j, model_config& c);
status read_laguna_gguf(const gguf_cfg& g, model_config& c);
status build_laguna(const model_source& m, graph::graph& g);
/// Tencent Hy3 (hy_v3.cpp).
status read_hy_v3_hf(hf_cfg& j, model_config& c);
status build_hy_v3(const model_source& m, graph::graph& g);
/// Youtu-LLM (minicpm.cpp: latent attention over a dense MLP, built as MiniCPM3 from HF).
status read_youtu_hf(hf_cfg& j, model_config& c);
/// PhiMoE (phimoe.cpp).
status read_phimoe_hf(hf_cfg& j, model_config& c);
status read_phimoe_gguf(const gguf_cfg& g, model_config& c);
status build_phimoe(const model_source& m, graph::graph& g);
/// DBRX (dbrx.cpp).
status read_dbrx_hf(hf_cfg& j, model_config& c);
status read_dbrx_gguf(const gguf_cfg& g, model_config& c);
status prepare_dbrx_hf(const model_config& c, tensor_index& t);
status build_dbrx(const model_source& m, graph::graph& g);
/// Arcee AFMoE (afmoe.cpp).
status read_afmoe_hf(hf_cfg& j, model_config& c);
status read_afmoe_gguf(const gguf_cfg& g, model_config& c);
status build_afmoe(const model_source& m, graph::graph& g);
status build_mistral_large4(const model_source& m, graph::graph& g);
/// Mistral 4: the language model's tensors under a Mistral 3 wrapper, then prepare_deepseek_hf.
status prepare_mistral4_hf(const model_config& c, tensor_index& t);
/// DeepSeek's routed experts from an HF config (V2's router for deepseek_v2, V3's for the
/// others: DeepSeek-V3, GLM-4.5), and their tensor names: HF's (mlp.gate with its
/// e_score_correction_bias, mlp.experts.{e}, mlp.shared_experts) or llama.cpp's merged ones
/// (exp_probs_b for the bias); the shared experts are never gated.
status read_routed_experts_hf(hf_cfg& j, model_config& c);
void routed_expert_names(const model_source& m, decoder_names& n);
/// The HF Llama layout with DeepSeek's latent attention (self_attn.q_proj or q_a / q_b, its norm,
/// kv_a_proj_with_mqa and its norm, kv_b_proj; under `attn`, self_attn. by default) in place of
/// q, k, v.
decoder_names hf_mla_layout(const std::string& attn = "model.layers.{}.self_attn.");
/// HF's names of the shared experts under `prefix` (prefix + "shared_experts.gate_proj.weight"
/// ...).
void hf_shared_expert_names(decoder_names& n, const std::string& prefix);
/// HF's names of the routed experts one by one under `prefix` (prefix +
/// "experts.{e}.gate_proj.weight", up_proj, down_proj).
void hf_expert_names(decoder_names& n, const std::string& prefix);
/// llama.cpp's names of the latent attention's tensors (kv_b split into k_b and v_b).
void gguf_mla_names(decoder_names& n);
/// The same experts from llama.cpp's keys (deepseek2, glm4moe: expert_count /
/// expert_feed_forward_length / expert_shared_count, the gating function, the exp_probs_b
/// correction bias, groups, leading dense blocks) over the first c.n_layer blocks.
status read_routed_experts_gguf(const gguf_cfg& g, model_config& c);
status read_glm4_moe_hf(hf_cfg& j, model_config& c);
status read_glm4_moe_gguf(const gguf_cfg& g, model_config& c);
status read_glm4_hf(hf_cfg& j, model_config& c);
status build_glm4(const model_source& m, graph::graph& g);
status build_glm4_moe(const model_source& m, graph::graph& g);
status read_gpt_oss_hf(hf_cfg& j, model_config& c);
status read_gpt_oss_gguf(const gguf_cfg& g, model_config& c);
status prepare_gpt_oss_hf(const model_config& c, tensor_index& t);
status build_gpt_oss(const model_source& m, graph::graph& g);
/// Mamba-2's mixer (mamba.cpp): the config keys each family names it by, read into
/// model_config's mamba fields (heads, head_dim "auto" or absent: the inner width expand x C
/// over the heads; expand null: the inner width is heads x head_dim (Nemotron-H);
/// time_step_limit other than transformers' (0, inf) refuses).
struct mamba_keys {
  const char *heads, *head_dim, *state, *groups, *conv, *expand, *conv_bias, *proj_bias, *chunk;
  const char* dt_limit = "time_step_limit";
  const char* inner =
      nullptr; // the inner width's own key (Falcon-H1's mamba_d_ssm; null: expand x C)
};
status read_mamba_mixer(hf_cfg& j, model_config& c, const mamba_keys& k);
/// llama.cpp's ssm.* keys (inner_size, time_step_rank = heads, state_size, group_count,
/// conv_kernel); the biases are tensors the file has or lacks.
status read_mamba_gguf_mixer(const gguf_cfg& g, model_config& c);
/// The mixer's tensor names: HF's under `hf_prefix` ("backbone.layers.{}.mixer."), or GGUF's
/// ssm_* (Mamba-1's x_proj / dt_proj / dt, B, C norms too where the config has a dt rank).
void mamba_names(const model_source& m, decoder_names& n, const std::string& hf_prefix);
/// HF names of the hybrids whose layers are model.layers.{}.mamba / self_attn, then a
/// feed_forward under pre_ff_layernorm, the final norm final_layernorm (Bamba, Falcon-H1, Jamba).
decoder_names feed_forward_layout(const model_source& m);
status read_mamba2_hf(hf_cfg& j, model_config& c);
status read_mamba2_gguf(const gguf_cfg& g, model_config& c);
status build_mamba2(const model_source& m, graph::graph& g);
status read_mamba1_hf(hf_cfg& j, model_config& c);
status read_mamba1_gguf(const gguf_cfg& g, model_config& c);
status read_jamba_hf(hf_cfg& j, model_config& c);
status read_jamba_gguf(const gguf_cfg& g, model_config& c);
status build_jamba(const model_source& m, graph::graph& g);
status read_bamba_hf(hf_cfg& j, model_config& c);
status read_nemotron_h_hf(hf_cfg& j, model_config& c);
status read_nemotron_h_gguf(const gguf_cfg& g, model_config& c);
status build_nemotron_h(const model_source& m, graph::graph& g);
status build_bamba(const model_source& m, graph::graph& g);
status read_falcon_h1_hf(hf_cfg& j, model_config& c);
status read_falcon_h1_gguf(const gguf_cfg& g, model_config& c);
status build_falcon_h1(const model_source& m, graph::graph& g);
status read_bloom_hf(hf_cfg& j, model_config& c);
status read_bloom_gguf(const gguf_cfg& g, model_config& c);
status build_bloom(const model_source& m, graph::graph& g);

} // namespace troupe::arch
