// decoder.hpp (arch/families, internal): the decoder-only transformer most families are, as
// one builder driven by model_config's recipe fields (residual layout, norm placement and
// kind, q/k norms, multipliers, soft-caps, ALiBi, learned positions ...) and a family's tensor
// names. A family file reads its config, names its tensors (HF and GGUF), and calls
// build_decoder; what no option covers it builds itself from graph/builder.hpp. Fused
// tensors (qkv, gate_up) are sliced at load: zero-copy row views where the rows are
// contiguous, gathered where a layout interleaves heads.
#pragma once

#include <functional>
#include <vector>

#include "arch/families/families.hpp"

namespace troupe::arch {

/// How a fused q/k/v tensor orders its rows.
enum class qkv_layout : uint8_t {
  blocks,   // [q (H*D); k (Hkv*D); v (Hkv*D)] (Phi-3, MPT, GPT-2, Falcon multi-query)
  per_head, // [H, 3, D]: q, k, v of head 0, then of head 1 ... (GPT-NeoX, Bloom)
  grouped,  // [Hkv, G + 2, D]: a KV group's G query heads, then its k and v (Falcon 40B)
  mp4_qvk,  // [4, 3, H D / 4]: four model-parallel slices, each its q, v, k rows (CodeGen)
};

/// Tensor names of one checkpoint format; "{}" is the layer index; empty: absent.
struct decoder_names {
  std::string tok_embd, pos_embd, embd_norm, embd_norm_b;
  std::string out_norm, out_norm_b, lm_head, lm_head_b; // lm_head empty: tied
  // per layer
  std::string attn_norm, attn_norm_b, ffn_norm, ffn_norm_b; // pre-norms (or post-only norms)
  std::string post_attn_norm, post_ffn_norm;                // sandwich: after each sublayer
  std::string wq, wk, wv, bq, bk, bv;                       // separate projections
  std::string wqkv, bqkv;                                   // or one fused tensor
  qkv_layout layout = qkv_layout::blocks;
  std::string wo, bo;
  std::string q_norm, k_norm, q_norm_b, k_norm_b;
  std::string w_gate, w_up, w_down, b_gate, b_up, b_down;
  std::string w_gate_up; // fused: gate rows, then up rows
  std::string b_gate_up; // and its bias, gate's then up's (ModernBERT's Wi)
  // mixture of experts: the router [E, C]; the experts' gate, up, down with "{e}" for the
  // expert (HF's per-expert tensors), or without it (GGUF's merged [E, F, C] tensors); the
  // shared expert and its gate [1, C]
  std::string moe_router, moe_gate, moe_up, moe_down;
  std::string moe_gate_up; // or gate and up packed [E, 2F, C]: each expert's gate rows, then up
  std::string shexp_gate, shexp_up, shexp_down, shexp_gate_inp;
  std::string shexp_gate_up; // or the shared expert's gate and up rows in one tensor (Granite 4.0)
  // the fused gate / up tensors (w_gate_up, moe_gate_up, shexp_gate_up) alternate gate and up
  // rows instead of holding all gate rows first (Inkling's published w13)
  bool gate_up_interleaved = false;
  std::string moe_router_bias; // DeepSeek-V3's e_score_correction_bias
  // GPT-OSS: the router's bias [E], the experts' biases as merged [E, F] / [E, C] tensors
  std::string moe_router_b, moe_gate_b, moe_up_b, moe_down_b;
  std::string attn_sinks;   // a sink logit per head [H]
  std::string layer_scalar; // [1]: the layer's output times it (model_config::layer_scalar)
  // model_config::moe_beside_mlp (Gemma 4): the MLP's output norm, the experts' input and output
  // norms, the router's input scale [C] and each expert's scale [E]
  std::string post_ffn_norm_1, ffn_norm_2, post_ffn_norm_2, moe_router_scale, moe_expert_scale;
  // per-layer embeddings (model_config::ple_dim): the table [ple_vocab, L P], the model's
  // projection [L P, C] and its norm [P]; per layer the gate [P, C], the projection [C, P] and
  // the norm after it [C]
  std::string ple_table, ple_proj, ple_proj_norm, ple_gate, ple_up, ple_norm;
  // Gemma 3n's AltUp (model_config::altup, N streams): the embedding's projections into streams
  // 1.. and the head's back from them ([C, C] each, "{}" the stream less one); per layer the
  // router's norm [C] and weight [N, C], the prediction [N N, N] and correction [N, N]
  // coefficients, the corrected stream's scale [C]; Laurel's left [r, C] and right [C, r]
  // projections and the norm after them [C]
  std::string altup_proj, altup_unembd, altup_router_norm, altup_router, altup_predict,
      altup_correct, altup_scale;
  std::string laurel_l, laurel_r, laurel_norm;
  // a gate per head [H, C]: each head's output times sigmoid(x g_h) (LFM3's g_proj)
  std::string attn_head_gate;
  // latent attention: q_proj or q_a (+ its norm) and q_b; kv_a_proj_with_mqa, its norm, kv_b
  std::string mla_q, mla_q_a, mla_q_a_norm, mla_q_b, mla_kv_a, mla_kv_a_norm, mla_kv_b;
  std::string mla_k_b, mla_v_b; // or kv_b already split (GGUF): k_b [H, kv_lora, nope], v_b
  // DeepSeek Sparse Attention's indexer: wq_b [Hi Di, q_lora], wk [Di, C], its LayerNorm (weight,
  // bias), the head weights [Hi, C]
  std::string dsa_wq, dsa_wk, dsa_k_norm, dsa_k_norm_b, dsa_w;
  // gated DeltaNet layers (model_config::linear_layers): in_proj_qkv (q, k, v rows), z, a, b,
  // the depthwise conv1d [q; k; v channels, 1, taps], dt_bias, A_log, the gated norm, out_proj
  std::string lin_qkv, lin_z, lin_a, lin_b, lin_conv, lin_dt_bias, lin_A_log, lin_norm, lin_out;
  // or (Qwen3-Next) q, k, v, z per key head group [Dk; Dk; r Dv; r Dv] and b, a [r; r] (r value
  // heads per key head) in two fused tensors
  std::string lin_qkvz, lin_ba;
  // or (OLMo hybrid) q, k, v in three tensors; and the linear layers' own pre-norms where
  // model_config::linear_pre_norm (the attention layers' post norms are attn_norm / ffn_norm)
  std::string lin_q, lin_k, lin_v, lin_attn_norm, lin_ffn_norm;
  // or (model_config::short_conv, LFM2) in_proj [B; C; x rows, C each]; its taps lin_conv and
  // out_proj lin_out
  std::string lin_bcx;
  // or (model_config::rg_lru, Griffin) linear_x / linear_y [W, C] with biases, the RG-LRU's input
  // and recurrence gates [H, W / H, W / H] with biases [H, W / H], its decay's log per unit gate
  // [W] (-8 softplus(recurrent_param), derived at load); the conv's taps lin_conv and bias
  // ssm_conv_b, linear_out lin_out and bias ssm_out_b
  std::string lru_x, lru_x_b, lru_y, lru_y_b, lru_gate_i, lru_gate_i_b, lru_gate_a, lru_gate_a_b,
      lru_log_a;
  // or (model_config::mlstm, xLSTM) q, k, v as lin_q, lin_k, lin_v, the output gate lin_z, the
  // input and forget gates [H, C] and their biases [H], the per-head norm's weight lin_norm,
  // out_proj lin_out; mlstm_fused: lin_q names one tensor of [q; k; v; output gate] rows and
  // mlstm_i (its bias mlstm_i_b) one of [input; forget] rows
  std::string mlstm_i, mlstm_i_b, mlstm_f, mlstm_f_b;
  // the prediction head before the logits (model_config::head_transform): dense, its bias, norm
  std::string head_dense, head_dense_b, head_norm, head_norm_b;
  // DeciLM's linear maps in place of a layer's attention or FFN (model_config::linear_blocks)
  std::string attn_linear, ffn_linear;
  bool mlstm_fused = false;
  // or (model_config::mamba) in_proj [z; x; B; C; dt rows] and its bias, the conv1d's bias, D
  // per head, out_proj's bias (the taps, dt_bias, A_log, the gated norm and out_proj as above)
  std::string ssm_in, ssm_in_b, ssm_conv_b, ssm_D, ssm_out_b;
  // Mamba-1 (model_config::ssm_dt_rank > 0): in_proj [x; z], x_proj [dt; B; C rows], dt_proj's
  // weight (its bias lin_dt_bias), and Jamba's norms of dt, B and C
  std::string ssm_x, ssm_dt_w, ssm_dt_norm, ssm_b_norm, ssm_c_norm;
  // Kimi Delta Attention (model_config::kda): q, k, v and their convolutions' taps, the decay's
  // low-rank pair f_a / f_b and the output gate's g_a / g_b (dt_bias, A_log, b, the norm and
  // out_proj as lin_dt_bias, lin_A_log, lin_b, lin_norm, lin_out)
  std::string kda_q, kda_k, kda_v, kda_conv_q, kda_conv_k, kda_conv_v, kda_f_a, kda_f_b, kda_g_a,
      kda_g_b;
  std::string kda_f, kda_g; // or each one full-rank [H D, C] (model_config::kda_full_gates)
  // DeepSeek-V4 (model_config::hc_mult): the hyper-connections' fn [M, N C], base [M] and scale
  // before the attention and before the FFN, and the head's; the attention's q (mla_q_a, its
  // norm, mla_q_b), its shared key-value projection and norm, the grouped output's wo_a [G R,
  // H D / G] and wo_b [C, G R]; a compressed layer's compressor (kv and gate projections [W, C],
  // ape [m, W], the entries' norm) and its indexer's (with dsa_wq, dsa_w); the hash routers'
  // table [V, k] of each token's experts
  std::string hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn, hc_ffn_base, hc_ffn_scale,
      hc_head_fn, hc_head_base, hc_head_scale;
  std::string v4_wkv, v4_kv_norm, wo_a, wo_b;
  std::string cmp_wkv, cmp_wgate, cmp_ape, cmp_norm, idx_wkv, idx_wgate, idx_ape, idx_norm;
  std::string moe_hash;
  // GLM-5.3's pooled indexer: the pools' gate projection [Di, C] and their ape [pool, Di]
  std::string dsa_pool_gate, dsa_pool_ape;
  std::string mla_gate;       // HY-V4: the values' gate [H v_head, C]
  std::string cycle_init;     // HRM-Text: the low stream's initial value [C]
  std::string attn_gate_bias; // Beam: the value gate's bias per head [H]
  // BitNet's subln: RMS norms over the attention's output [H D] and the FFN's product [F]
  std::string attn_sub_norm, ffn_sub_norm;
  // DiffLlama: its differential attention's lambda vectors [D]
  std::string lambda_q1, lambda_k1, lambda_q2, lambda_k2;
  // Dory (model_config::ngpt): per layer q's scale and the output gate's [H D], gate's and up's
  // [F], the two interpolation rates [C]; the logits' scale [V]
  std::string ngpt_sqk, ngpt_s_gate, ngpt_suv_gate, ngpt_suv_up, ngpt_lambda_1, ngpt_lambda_2,
      ngpt_logit_scale;
  // Zamba2 (model_config::zamba): a shared block's prefix ("{}" the first hybrid layer that uses
  // it; under it input_layernorm [2 C], self_attn.{q,k,v,o}_proj, pre_ff_layernorm,
  // feed_forward.gate_up_proj / down_proj and the adapter lists), the hybrid layers' linear [C, C]
  std::string zamba_block, zamba_linear;
  bool zamba_mlp_split = false; // (Zamba's blocks: gate_proj and up_proj, not one gate_up_proj)
  // Inkling (model_config::inkling): per layer r_proj [H d_rel, C], the biases' profiles [d_rel,
  // extent], the four convolutions' taps ([channels, 1, K]: k, v, the attention's and the FFN's
  // outputs), a dense MLP's scalar [1], the router's scalar [1] (its rows: the routed experts',
  // then the shared ones'; shexp_* the shared experts [S, F, C] / [S, C, F])
  std::string inkling_r, inkling_rel, inkling_k_conv, inkling_v_conv, inkling_attn_conv,
      inkling_mlp_conv, inkling_mlp_scale, inkling_router_scale;
  // ZAYA1 (model_config::zaya): the values' halves (this token's, the previous token's) [Hkv D /
  // 2, C]; the q / k convolutions, q's channels then k's: the depthwise taps for this token and
  // for the previous one [Ch, 3] (derived at load), its bias [Ch], the per-head taps [Ch, D] of
  // the previous token and of this one (derived), their bias [Ch]; the keys' scale [Hkv]; the
  // mean of q_proj's rows over each KV head's query heads [Hkv D, C] (derived: k's residual);
  // the values' taps [Hkv D, 2] (derived, one for all layers); the embedding's scale and bias
  // [C]; a residual scaling's prefix
  // ("{}" the layer, "{s}" attention / mlp; under it hidden_states_scale / _bias, residual_scale /
  // _bias); the router's down_proj [R, C] (bias), its carried state's scale [R], its MLP's norm
  // [R], fc1 and fc2 [R, R] (biases); moe_router its out_proj [E + 1, R], moe_router_bias the
  // balancing biases [E + 1]
  // Doge (model_config::doge): per layer A [Hkv], dt_proj [Hkv, Hkv D] (and its bias), the
  // residual vectors before the attention's add and the MLP's [C]; once, derived at load: the
  // queries' extra values [H 8] (a 1 first), the keys' map from the mask's values [Hkv 8, Hkv],
  // each head's first D values of D + 8 [D, D + 8]
  std::string doge_a, doge_dt, doge_dt_b, doge_res_attn, doge_res_ffn, doge_q_extra, doge_k_map,
      doge_select;
  std::string zaya_v_now, zaya_v_prev, zaya_dw_now, zaya_dw_prev, zaya_dw_b, zaya_pw_prev,
      zaya_pw_now, zaya_pw_b, zaya_k_scale, zaya_v_taps, zaya_q_mean, zaya_in_scale, zaya_in_bias,
      zaya_res, zaya_router_down, zaya_router_down_b, zaya_router_carry, zaya_router_norm,
      zaya_router_fc1, zaya_router_fc1_b, zaya_router_fc2, zaya_router_fc2_b;
  // Ergo: the residual adds' branch factors [C] (after the attention and after the FFN), the
  // experts' output norms [E, C], the shared expert's [C]
  std::string attn_res_branch, ffn_res_branch, moe_post_norm, shexp_norm;
  // MiniMax M3's block indexer (model_config::sparse_layers): q [Hkv Di, C], k [Di, C], their
  // norms [Di]
  std::string sparse_q, sparse_k, sparse_q_norm, sparse_k_norm;
  // A.X K2's gated norms (model_config::gated_norm_rank): the input norm's gate W_down [r, C] and
  // W_up [C, r]; on MoE layers the post-attention norm's weight and gate
  std::string attn_norm_gate_down, attn_norm_gate_up, ffn_norm_gated, ffn_norm_gate_down,
      ffn_norm_gate_up;
  // Mistral Large 4: the queries' scale and bias per head [H] (and the indexer's [Hi]), the
  // indexer's input LayerNorm (weight, bias [C]), LeRoPE's alpha [qk_rope / 2]
  std::string q_pos_scale, q_pos_bias, dsa_pos_scale, dsa_pos_bias, dsa_q_norm, dsa_q_norm_b;
  std::string rope_alpha;
  // per layer: the FFN's activation as an expression over x (expr.hpp), where a family's
  // activation carries learned constants of each layer (Apertus's xIELU); empty: the config's
  std::vector<std::string> layer_act;
  bool transposed = false;      // matrices stored [in, out] (GPT-2's Conv1D)
  bool optional_biases = false; // true: a named bias the checkpoint lacks means no bias
                                // (false: it must be there; name no bias for none)
};

/// The names of HF checkpoints in the Llama layout (model.embed_tokens, model.layers.{}.
/// self_attn.q_proj ..., input_layernorm, post_attention_layernorm, mlp.gate_proj ...,
/// model.norm, lm_head), with the biases the config says are there.
decoder_names hf_llama_layout(bool qkv_bias, bool o_bias, bool mlp_bias);

/// llama.cpp's names (token_embd, blk.{}.attn_q ..., output_norm, output), every bias and
/// norm bias optional, as the converters write them for most architectures; a family renames
/// what its converter names otherwise (post norms ...). q, k and v come from the fused
/// attn_qkv ([q; k; v] blocks, as every converter writes it) where the file has one.
decoder_names gguf_layout(const model_source& m);

/// Gemma 2 .. 4's and 3n's HF names: the Llama layout with the sandwich norms (post_attention_,
/// pre_feedforward_, post_feedforward_layernorm; gemma4.cpp).
decoder_names gemma_sandwich_hf(const model_config& c);
/// Gemma 4's and 3n's per-layer embeddings' tensors (model_config::ple_dim), HF's names or
/// llama.cpp's.
void gemma_ple_names(decoder_names& n, bool hf);

/// Kimi Delta Attention's tensor names under `a` (a layer's "...self_attn."; kimi.cpp).
void kda_names(decoder_names& n, const std::string& a);

status build_decoder(const model_source& m, const decoder_names& n, graph::graph& g);

/// Zamba2 (zamba2.cpp): per layer, the layer under whose name the shared block it runs is stored
/// (-1: a Mamba layer alone): each block's first user, or (no tie_word_embeddings, as
/// transformers ties) the layer itself where `own_copy` says it stores one.
std::vector<int64_t> zamba_block_owners(const model_config& c,
                                        const std::function<bool(int64_t)>& own_copy);

/// v rounded to `t` and back (f32, f16, bf16; other types leave it as it is): HF computes with
/// scales held in the weights' dtype.
double round_to(dtype t, double v);

} // namespace troupe::arch
