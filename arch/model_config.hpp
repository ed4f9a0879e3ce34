// model_config.hpp: a model described as data. `model_config` holds the dimensions and the
// layer recipe (norm kind, activation, which projections carry biases, rope layout and
// scaling, tied embeddings ...) read from a Hugging Face config.json or from GGUF metadata by
// the family's reader (arch/families/); the family's builder turns it into a graph that the
// executor (exec/) runs, so a new architecture is a family file, not a new forward pass. Dimension
// legend: C model dim, F FFN dim, H heads, Hkv KV heads, D head dim, V vocab. Tests:
// tests/arch/model_config_test.cpp
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "core/rope.hpp"

namespace troupe {

class gguf_file;

enum class norm_kind : uint8_t { rms, layer };
enum class act_kind : uint8_t { silu, gelu_tanh, gelu_erf };
/// How a layer's two sublayers meet the residual stream.
enum class residual_kind : uint8_t {
  sequential,        // x += attn(n1(x)); x += ffn(n2(x))
  parallel,          // h = n1(x); x += attn(h) + ffn(h)          (Phi-2, Cohere, Falcon-7B)
  parallel_two_norms // x += attn(n1(x)) + ffn(n2(x))             (GPT-NeoX, Falcon-40B)
};
/// Where a layer's norms sit around each sublayer.
enum class norm_place : uint8_t {
  pre,      // on the sublayer's input (Llama)
  sandwich, // on the input and on the output, before the residual add (Gemma 2 / 3)
  post,     // on the output only (OLMo 2)
};
/// q / k normalisation.
enum class qk_norm_kind : uint8_t {
  none,
  head,         // over head_dim, one weight [D] shared by the heads (Qwen3, Gemma 3)
  head_weights, // over head_dim, a weight per head [H, D] (StableLM, Cohere)
  head_plain,   // RMS over head_dim, no weight (Llama 4's L2 norm)
  full,         // over the whole projection [H * D] (OLMo 2; a TP shard needs the others' sums)
};

/// Checkpoint tensor names the loader needs before the graph exists (the family's builder
/// names the rest); in patterns "{}" stands for the layer index.
struct weight_names {
  std::string output; // the lm_head of an HF checkpoint: absent means tied embeddings

  static std::string layer(const std::string& pattern, int index);
};

struct model_config {
  std::string arch;   // as the checkpoint names it: "LlamaForCausalLM", "llama"
  std::string family; // the recipe: "llama", "mistral", "qwen2"
  int64_t n_layer = 0, C = 0, F = 0, H = 0, Hkv = 0, D = 0, V = 0;
  int64_t ctx = 0; // maximum positions
  double norm_eps = 1e-5;
  norm_kind norm = norm_kind::rms;
  act_kind act = act_kind::silu;
  std::string act_expr;  // the activation as an expression (an --arch-spec file): over x, or
                         // over g and u (the whole gating); overrides `act`
  bool gated_ffn = true; // down(act(gate(x)) * up(x))
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  bool lm_head_bias = false; // (where the config says whether the head has one: PhiMoE)
  // LayerNorms (norm_kind::layer, and q / k LayerNorms per head dim) carry a bias, as PyTorch's
  // nn.LayerNorm does unless told otherwise (Cohere's, DBRX's and ModernBERT's by norm_bias do
  // not). The builders read a bias where the checkpoint has one; this says what parameters()
  // counts for a model known by its config alone.
  bool norm_bias = true;
  int64_t logit_rows = 0;   // logits past this many are never produced (Inkling's
                            // unpadded_vocab_size: a bias of -1e30 on them; 0: all)
  int64_t output_vocab = 0; // the lm_head's rows where fewer than V (Apertus 1.5's pruned head:
                            // ids from it on are never sampled, their logits -1e30); 0: V
  bool tie_embeddings = false;
  int64_t sliding_window = 0;    // keys a windowed layer's query sees (itself included); 0: none
  std::vector<uint8_t> windowed; // per layer: 1 when it attends over `sliding_window` only;
                                 // empty: every layer does when sliding_window > 0
  int64_t attn_chunk = 0;        // chunked attention: a query at position p on a chunked layer
                                 // sees keys p - p % attn_chunk .. p only (Llama 4); 0: none
  std::vector<uint8_t> chunked;  // per layer: 1 when it attends within chunks (empty: none)
  int64_t attn_temp_floor = 0;   // attention temperature: a query at position p times
  double attn_temp_scale = 0;    // 1 + attn_temp_scale ln(1 + floor((p + attn_temp_offset) /
  int64_t attn_temp_offset = 0;  // attn_temp_floor)) (Llama 4: offset 1 on the NoPE layers;
  std::vector<uint8_t> tempered; // Ministral 3: 0, every layer); per layer: 1 where it applies
                                 // (empty: every layer); floor 0: off
  double attn_scale = 0;         // 1/sqrt(D) when 0
  rope_spec rope;
  // the layer recipe beyond Llama's (arch/families/decoder.cpp reads these)
  residual_kind residual = residual_kind::sequential;
  norm_place norms = norm_place::pre;
  bool norm_weight = true; // false: non-parametric norms (OLMo)
  double norm_add = 0;     // added to every norm weight as loaded (Gemma: x * (1 + w))
  qk_norm_kind qk_norm = qk_norm_kind::none;
  norm_kind qk_norm_type = norm_kind::rms;
  bool qk_norm_rope_layers = false; // the q/k norm only on layers that rotate (Llama 4)
  bool qk_norm_after_rope = false;  // a `head` q/k norm (weights [D]) after RoPE (Hunyuan):
                                    // with weights it does not commute with the rotation
  bool rope_sin_flipped = false;    // RoPE by the negated angle (NanoChat's rotate_half,
                                    // cat(x2, -x1)): q / k rows load with each head's halves
                                    // swapped, the usual rotation then gives the same scores
  double embed_scale = 0; // the embedding rows times this (0: none; Gemma sqrt(C), Granite)
  bool embed_scale_rounded = false; // the scale is first rounded to the embeddings' dtype (Gemma)
  double residual_scale = 1;        // sublayer outputs times this before the residual add (Granite)
  double logit_scale = 1;           // logits times this (Cohere; Granite 1 / logits_scaling)
  double attn_softcap = 0;          // scores = c tanh(s / c) (Gemma 2)
  double final_softcap = 0;         // logits = c tanh(l / c) (Gemma 2 / 3)
  double clip_qkv = 0;              // q, k, v clamped to [-c, c] (OLMo, MPT)
  double alibi_max_bias = 0;        // ALiBi instead of RoPE (Bloom, MPT)
  bool rope_enabled = true;
  // tensors whose values the config reader took (GGUF's rope factor tables), or that a release
  // stores and its model never uses (Gemma 3n's KV-sharing layers' k / v): read by no graph value
  std::vector<std::string> config_tensors;
  std::vector<uint8_t> nope_layers; // per layer: 1 when it has no rotary embedding at all
                                    // (SmolLM3's no_rope_layers); empty: every layer has it
  bool has_rope_local = false;      // windowed layers use rope_local (Gemma 3)
  rope_spec rope_local;
  bool learned_positions = false;   // a position embedding table added to the tokens' (GPT-2)
  int64_t position_rows = 0;        // its rows, where a served context (with_context) is shorter
                                    // than the model's (0: ctx)
  int64_t position_zero_row = -1;   // XGLM: the derived sinusoidal table's row of the pad token
                                    // (table row p + 2 for position p) is zeros; -1: none
  bool embed_norm = false;          // a norm on the embeddings (Bloom)
  bool attn_scale_by_layer = false; // scores also divided by layer + 1 (GPT-2 option)
  // mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): a MoE layer's FFN is a router over
  // n_expert SwiGLU experts of width F_expert, n_expert_used chosen per token (softmax, top-k,
  // renormalised when norm_topk, times expert_scale), plus a shared expert of width F_shared
  // (0: none) whose output is gated by sigmoid(x w) when shared_gate
  int64_t n_expert = 0, n_expert_used = 0, F_expert = 0, F_shared = 0;
  bool norm_topk = false;
  bool expert_input_scaled = false; // the router's weight scales the chosen expert's input, not
                                    // its output (Llama 4; one expert per token)
  bool shared_gate = false;
  // MiniMax (Text-01, M1): each sublayer's residual is its normed input, both terms scaled:
  // x = n1(h); h = alpha x + beta attn(x); x = n2(h); h = alpha' x + beta' ffn(x); the pair of a
  // full attention layer, of a linear one, of the FFN
  bool normed_residual = false;
  double full_alpha = 1, full_beta = 1, lin_alpha = 1, lin_beta = 1, ffn_alpha = 1, ffn_beta = 1;
  // the linear layers are MiniMax's lightning attention: q, k, v = silu of one projection ([q | k |
  // v] per head), per head S = exp(-s_h) S + k^T v and out = q S (H heads of D: lin_k/v_heads = H,
  // lin_k/v_dim = D, lin_conv = 1), RMS-normed over every head, times sigmoid(output_gate x)
  bool lightning = false;
  // OLMo hybrid: the linear layers' norms before their sublayers (Llama's) while the attention
  // layers keep `norms` (post, OLMo 2's); the DeltaNet's gated norm's eps (0: norm_eps); its
  // beta times this (2: negative eigenvalues allowed; 0: 1)
  bool linear_pre_norm = false;
  double lin_norm_eps = 0;
  double delta_beta_scale = 0;
  bool post_moe_norm = false; // on MoE layers, a norm on the experts' output (shared expert
                              // included) before the residual add (A.X K1's post_mlp_layernorm)
  bool expert_relu2 = false; // ungated experts (and shared expert): down(relu(up x)^2) (Nemotron-H)
  double expert_scale = 1;
  double shared_scale = 1; // the shared expert's output times this (Cohere2-MoE's "average": 0.5)
  std::vector<uint8_t> moe_layers; // per layer: 1 when its FFN is the experts; empty: every
                                   // layer is when n_expert > 0
  // DeepSeek-V3 routing: sigmoid scores, a correction bias for the choice, group-limited top-k
  bool router_sigmoid = false, router_bias = false;
  int64_t n_group = 0, topk_group = 0;
  bool group_max = false;    // groups scored by their best expert (DeepSeek-V2), else best two
  double router_eps = 1e-20; // added to the chosen scores' sum when they are renormalised (the
                             // sigmoid routers'; LFM2-MoE's 1e-6)
  // PhiMoE's sparsemixer (top 2): each choice, the best logit left, weighted by the softmax over
  // the logits within router_jitter of it (relative), the first choice left out of the second's
  bool router_sparsemixer = false;
  double router_jitter = 0;
  bool router_bias_logits = false; // the choice by logits + the correction bias (Kolibri)
  // PhiMoE's LongRoPE: cos and sin times short_mscale or long_mscale (as the factor set chosen),
  // in place of the attention factor (0: not given)
  double rope_short_mscale = 0, rope_long_mscale = 0;
  // GPT-OSS: biases on the router's logits and on every expert's gate, up and down products;
  // the clamped SwiGLU (swiglu_limit > 0: g = min(gate, limit), u = clamp(up, +-limit),
  // (u + 1) g sigmoid(swiglu_alpha g)); a learned sink logit per head in every attention
  bool router_linear_bias = false, expert_bias = false;
  double swiglu_alpha = 0, swiglu_limit = 0;
  bool attn_sinks = false;
  bool mxfp4_experts = false; // HF GPT-OSS as published: the experts in MXFP4 (repacked at load)
  bool fp8_blocks = false;    // HF weights in E4M3 with 128 x 128 scale tiles (DeepSeek-V3 as
                              // published): repacked at load into f8_b128 rows
  // BitNet b1.58 (quantization_config "bitnet"): the layers' linear maps are ternary, their
  // inputs rounded per token to 8 bits (act_quant: x -> clamp(round(x s), -128, 127) / s, s = 127
  // / max |x|; lm_head stays plain). The weights are unpacked at load from 2 bits (four rows a
  // byte), each matrix times its weight_scale (bitnet_scale_divides: divided by it, transformers'
  // BitLinear; else times it, AutoBitLinear), or (bitnet_online) rounded from master weights
  // at load as AutoBitLinear's online mode does every step (W -> round(W s).clamp(-1, 1) / s, s
  // = 1 / mean |W|). sub_norms: RMS norms on the attention's output before o_proj and on the
  // FFN's gated product before down_proj (BitNet's subln)
  bool act_quant = false, bitnet_scale_divides = false, bitnet_online = false;
  bool sub_norms = false;
  // DiffLlama's differential attention: two attentions of the same q and k over the two halves of
  // the value heads (each repeated over all KV heads), heads h and h + H / 2 paired: (o_h - lambda
  // o_{h + H / 2}) RMS-normed over their 2 D values times 1 - lambda_init, lambda = exp(q1 . k1)
  // - exp(q2 . k2) + lambda_init (four learned [D] vectors a layer), lambda_init = 0.8 - 0.6
  // exp(-0.3 l)
  bool diff_attn = false;
  // latent attention (DeepSeek's MLA; kv_lora > 0): q through a rank-q_lora bottleneck (0: a
  // plain projection), keys and values from one latent of kv_lora values per token plus qk_rope
  // positional values, cached as they are (D = kv_lora + qk_rope, Hkv = 1); heads of qk_nope +
  // qk_rope query / key dims and v_head value dims
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  // DeepSeek Sparse Attention (DeepSeek-V3.2; dsa_topk > 0): each query attends over the
  // dsa_topk keys its lightning indexer scores highest: dsa_heads heads of dsa_dim from the q
  // bottleneck, one key of dsa_dim per token (LayerNorm-ed, cached beside the latent), head
  // weights from the layer's input; the first qk_rope dims of both rotated, pairs split in halves
  // (dsa_rope_interleaved: adjacent, GLM-5's)
  int64_t dsa_topk = 0, dsa_heads = 0, dsa_dim = 0;
  bool dsa_rope_interleaved = false;
  // per layer: the layer whose selection it attends over (itself: it runs its indexer; GLM-5's
  // "shared" layers reuse the last full one's); empty: every layer runs its own
  std::vector<int32_t> dsa_source;
  // gated DeltaNet (Qwen3.5, Qwen3-Next): the layers marked in linear_layers mix tokens by a
  // short causal convolution (lin_conv taps) over q, k and v, then the gated delta rule over a
  // recurrent memory per sequence (lin_v_heads of lin_k_dim x lin_v_dim, lin_k_heads key heads),
  // instead of attention; they keep no KV cache
  std::vector<uint8_t> linear_layers;
  int64_t lin_k_heads = 0, lin_v_heads = 0, lin_k_dim = 0, lin_v_dim = 0, lin_conv = 0;
  bool attn_output_gate = false; // q_proj also gives a gate per head: out *= sigmoid(gate)
  // GGUF's form (llama.cpp's converter): value heads in tiled order over the key heads (head h
  // reads key head h % lin_k_heads; TP then keeps every key head on every rank), and the
  // decay's A stored as -exp(A_log)
  bool lin_tiled = false, lin_neg_a = false;
  // LFM2's gated short convolution in place of the DeltaNet on the layers linear_layers marks:
  // in_proj gives B, C and x (C channels each), a depthwise causal convolution of lin_conv taps
  // (no activation) runs over B * x and C gates its output, out_proj; its channels are counted
  // as lin_v_heads groups of lin_v_dim (the unit TP cuts), and it keeps the last lin_conv - 1
  // inputs of a sequence as its state
  bool short_conv = false;
  // Griffin's recurrent block (RecurrentGemma) on the linear layers: gelu(W_y h) times the RG-LRU
  // of a depthwise convolution of W_x h, over lin_v_heads heads of lin_v_dim channels (the
  // gates block-diagonal by head); its state the convolution's last inputs and one value per
  // channel (lin_k_dim 1)
  bool rg_lru = false;
  // xLSTM's mLSTM on the linear layers: q and k (lin_k_heads = lin_v_heads heads of lin_k_dim), v
  // (lin_v_dim per head), an output gate over v's width, an input and a forget gate preactivation
  // per head (each soft-capped at mlstm_gate_cap: c tanh(x / c)), the mLSTM cell (its state per
  // head the memory [lin_k_dim, lin_v_dim], the normaliser and the stabiliser; mlstm_eps added
  // to the denominator), a LayerNorm per head (weight, no bias) times sigmoid(output gate),
  // out_proj; no convolution (lin_conv 1)
  bool mlstm = false;
  // ModernBERT's decoder: its first layer has no norm before the attention (the embeddings' norm
  // stands in), and the logits' input goes through a prediction head first: a dense [C, C] map
  // (its bias where the checkpoint has one), head_act, a norm of c.norm's kind
  bool first_attn_unnormed = false;
  bool head_transform = false;
  bool head_dense_bias = false; // (its dense map's bias: ModernBERT's classifier_bias)
  act_kind head_act = act_kind::gelu_erf;
  bool mlstm_fused = false; // (its weights as weight_mode "fused" stores them: a layout)
  double mlstm_gate_cap = 0, mlstm_eps = 1e-6;
  // Mamba-2's mixer in place of the DeltaNet on the layers linear_layers marks (Mamba2, Granite
  // 4.0-H, Bamba): in_proj gives z and x (lin_v_heads heads of lin_v_dim), B and C (lin_k_heads
  // groups of lin_k_dim state values) and dt per head; a causal conv1d of lin_conv taps (with
  // its bias where ssm_conv_bias) and SiLU over x, B and C; the selective scan over a state per
  // sequence [heads, lin_v_dim, lin_k_dim] with A (-exp(A_log); lin_neg_a: stored so), D and
  // dt_bias per head; an RMS norm over each group's heads of y silu(z); out_proj (in_proj and
  // out_proj with biases where ssm_proj_bias)
  bool mamba = false, ssm_conv_bias = false, ssm_proj_bias = false, ssm_out_bias = false;
  // Kimi Delta Attention in place of the DeltaNet (Kimi-Linear): q, k, v projections each with
  // its short convolution, a decay per head and key channel (f_b(f_a x) + dt_bias, through
  // -exp(A_log) softplus), beta from b_proj, the output RMS-normed per head times
  // sigmoid(g_b(g_a x)); lin_k_heads = lin_v_heads, lin_k_dim = lin_v_dim
  bool kda = false;
  // the mixer's norm: over each group of y silu(z) (Mamba2's), of y before the gate (Falcon-H1's
  // norm_before_gate), or none (y silu(z) as it is)
  enum class ssm_norm_kind : uint8_t { after_gate, before_gate, none };
  ssm_norm_kind ssm_norm = ssm_norm_kind::after_gate;
  // Falcon-H1: attention and the Mamba-2 mixer side by side on every layer's normed input, each
  // with its multipliers (in and out), then the FFN; in_proj's five parts (z, x, B, C, dt) each
  // times its own multiplier (the published mup vector), the FFN's gate and output times theirs
  bool ssm_parallel = false;
  // Mamba-1 (ssm_dt_rank > 0: Mamba, Falcon-Mamba, Jamba): in_proj gives x and z (lin_v_heads
  // channels, each a head of lin_v_dim 1); the conv1d over x alone; x_proj of the convolved x
  // gives dt (ssm_dt_rank values), B and C (lin_k_dim each, one group), each RMS-normed where
  // ssm_bcdt_norm says (Falcon-Mamba: without weights; Jamba: with them), dt_proj widens dt to the
  // channels (its bias is dt_bias); an A per channel and state value; y silu(z); out_proj
  int64_t ssm_dt_rank = 0;
  enum class ssm_bcdt_kind : uint8_t { none, plain, weighted };
  ssm_bcdt_kind ssm_bcdt_norm = ssm_bcdt_kind::none;
  double ssm_bcdt_eps = 1e-6;
  double ssm_in_scale = 1, ssm_out_scale = 1, attn_in_scale = 1, attn_out_scale = 1;
  double ssm_mup[5] = {1, 1, 1, 1, 1};
  double ssm_dt_min = 0; // Mamba-2's step clamped below (Zamba2's time_step_min; 0: none)
  double ffn_down_scale = 1;
  // per layer: 0 a mixer (attention or its stand-in) and an FFN, 1 the mixer only (Mamba2's
  // blocks, Nemotron-H's Mamba and attention blocks), 2 the FFN only (Nemotron-H's MLP blocks),
  // each then with one norm, 3 neither (DeciLM's layer of two no-ops); empty: every layer has both
  std::vector<uint8_t> layer_blocks;
  // DeciLM (Nemotron-NAS, `nas_blocks`): each layer's attention and FFN, each under its own
  // pre-norm (input_layernorm, post_attention_layernorm), present, absent (layer_blocks) or a
  // linear [C, C] map in its place (linear_blocks: bit 1 the attention's, bit 2 the FFN's); its
  // KV heads by layer (kv_heads_by_layer: empty, Hkv on every layer; Hkv is their largest)
  bool nas_blocks = false;
  std::vector<uint8_t> linear_blocks;
  std::vector<int64_t> kv_heads_by_layer;
  bool attn_head_gate = false; // a sigmoid gate per head on the attention's output (LFM3's g_proj)
  // Gemma 4: the full-attention layers (those without a window) have their own geometry, head
  // dim D_full and Hkv_full KV heads (0: D, Hkv); on them with kv_shared_kv the values are the
  // keys' projection (before the k norm and RoPE); v_norm: every layer's values RMS-normed per
  // head without a weight; layer_scalar: each layer's output times a scalar of the checkpoint
  int64_t D_full = 0, Hkv_full = 0;
  bool kv_shared_kv = false, v_norm = false, layer_scalar = false;
  // Gemma 4's MoE layers: the experts beside the dense MLP (F), each with its norms (the MLP's
  // output norm, the experts' input and output norms), their sum through the FFN's output
  // norm; GeGLU experts; the router reads the layer's input RMS-normed times a scale vector and
  // 1/sqrt(C), and each chosen weight is times its expert's scale
  bool moe_beside_mlp = false;
  // Gemma 4 E2B / E4B: per-layer embeddings (ple_dim > 0): each layer l adds W_up (act(W_gate x)
  // * p_l), normed, where p_l = (rms(W_proj e)_l + table_l[token] sqrt(ple_dim)) / sqrt(2) from
  // the token's scaled embedding e (W_proj [L ple_dim, C] times 1/sqrt(C), a slice per layer) and
  // a table [ple_vocab, L ple_dim]; kv_source: per layer, the layer whose KV cache it attends
  // over (itself, or an earlier layer's: the last layers share the KV of the last layer of their
  // type before them, and keep none); ffn_wide_shared: those sharing layers' FFN is 2F wide
  int64_t ple_dim = 0, ple_vocab = 0;
  std::vector<int32_t> kv_source;
  bool ffn_wide_shared = false;
  // Gemma 3n: AltUp (altup > 0): altup streams of C per token. A layer runs on stream 0 as the
  // streams predict it (each stream plus a per-token mix of all, from a router over stream 0),
  // then corrects every stream by its own share of the layer's innovation (a router over the
  // layer's output); the corrected stream 0 (times a weight where altup_correct_scale) gates the
  // per-layer input, added to the other streams. The embedding is projected into the other
  // streams (their RMS matched to it) and the head averages them back the same way. Laurel
  // (laurel_rank > 0): a low-rank residual beside the attention, (x + attn + laurel) / sqrt(2).
  // act_sparsity_z[l] finite: the FFN gate's values below mean + z std over its row are cut
  // (Gaussian top-k; z the normal quantile of the target sparsity, as transformers and GGUF's
  // activation_sparsity_scale give it). ffn_widths: per layer F (empty: F on every layer).
  int64_t altup = 0, laurel_rank = 0;
  bool altup_correct_scale = false;
  std::vector<double> act_sparsity_z;
  std::vector<int64_t> ffn_widths;
  // Laguna: per layer its query heads (empty: H on every layer; each a multiple of Hkv, H the
  // largest), the attention's output gate by softplus instead of sigmoid (per head:
  // attn_head_gate, per value: attn_value_gate), and the router's logits soft-capped
  // (c tanh(l / c) before the scores; 0: off)
  std::vector<int64_t> heads_by_layer;
  bool attn_gate_softplus = false;
  double router_softcap = 0;
  // DeepSeek-V4 (hc_mult > 0): hc_mult residual streams per token, mixed in and out of each
  // sublayer by manifold-constrained hyper-connections (hc_iters Sinkhorn-Knopp steps, hc_eps);
  // shared-KV multi-query attention (one head of D, keys and values alike, the last qk_rope dims
  // rotated) with sinks over a window of sliding_window, plus per layer compress[l] tokens per
  // compressed entry (0: the window only; 4: overlapping windows and the indexer's dsa_topk
  // picks, dsa_heads x dsa_dim; other: every entry); the compressed layers rotate with
  // rope_compress; the output turned back, then o_groups groups of heads each projected to
  // o_rank before the output projection; hash_layers route by a table of token ids, the others
  // by sqrt(softplus) scores; experts' SwiGLU clamped at swiglu_limit (swiglu_clamp)
  int64_t hc_mult = 0, hc_iters = 0;
  double hc_eps = 0;
  bool hc_head_mean = false; // the head collapses the streams by their mean (GLM-5.3)
  // HY-V4's independent hyper-connections: `pre` and `post` only (post times hc_magnitude), each
  // stream keeping its own residual (no mixing matrix)
  bool hc_independent = false;
  double hc_magnitude = 2;
  bool swiglu_clamp_experts_only = false; // the clamp on the routed experts only (HY-V4)
  // HY-V4's latent attention: a sigmoid gate on every value (a [H v_head, C] projection); its
  // indexer rotates the last qk_rope dims of its heads, its keys' LayerNorm at dsa_norm_eps
  bool attn_value_gate = false, dsa_rope_last = false; // (AFMoE's attention gates its values too)
  // MiMo-V2-Flash: sinks on the windowed layers only; its values' scale (folded into v_proj at
  // load, which also widens the v_head values to the keys' head dim)
  bool sinks_windowed_only = false;
  double v_scale = 1;
  double dsa_norm_eps = 1e-6;
  // GLM-5.3: its indexer scores pools of dsa_pool tokens (each a softmax-gated mix of its
  // tokens' keys) and picks dsa_topk / dsa_pool of them plus the query's incomplete pool; its
  // KDA layers' decay is bounded (kda_bound < 0: bound sigmoid(exp(A_log) x), not -exp(A_log)
  // softplus(x))
  int64_t dsa_pool = 0;
  double kda_bound = 0;
  // Ling 3: KDA's decay input and output gate each one full-rank projection (f_proj, g_proj
  // [H D, C]) instead of two low-rank ones; per layer the experts' SwiGLU limit, routed and
  // shared apart (empty: swiglu_limit on every layer; 0: none), clipped after the SiLU
  // (swiglu_after_act: min(silu(g), L) clamp(u, -L, L), Step 3.7's order)
  bool kda_full_gates = false, swiglu_after_act = false;
  std::vector<double> swiglu_limits, swiglu_limits_shared;
  bool dense_clip_shared = false; // Step 3.7: the dense MLPs clip at swiglu_limits_shared too
  // Beam: the residual's k-th add (k = 2 (l + 1) after the attention, + 1 after the FFN) is x
  // sqrt((k - 1) / k) + y / sqrt(k); on the layers without RoPE each query times (1 + (p + 1) /
  // nope_q_base) ^ nope_q_power (its scalable softmax; 0: off)
  bool depth_scaled_residual = false;
  double nope_q_base = 0, nope_q_power = 0;
  bool attn_gate_bias = false; // Beam: a bias per head on the value gate
  // Ergo: each residual add mixes by learned vectors (x keep + y branch; the family derives them
  // from its gate's weights at load); the scores of the layers without RoPE times nope_scale_mult
  // (global_attention_scale); each expert's output RMS-normed by its own weights (expert_post_norm:
  // whole experts only, so TP spreads them by EP) and the shared expert's output normed
  bool residual_gates = false, expert_post_norm = false;
  double nope_scale_mult = 1;
  // Mistral Large 4: every query of the latent attention and of its indexer times scale_h ln(p +
  // 1) + bias_h (per head, learned: the softmax scaling); the indexer's queries from a LayerNorm
  // of the layer's input (no q bottleneck); LeRoPE (rope_learned: the checkpoint's alpha per
  // frequency, inv_freq times exp(alpha)); and on nope_layers the positional dims of a latent
  // head join its nope dims (kv_a makes the latent alone)
  bool attn_pos_scale = false, dsa_q_from_input = false, rope_learned = false;
  std::vector<int32_t> compress;
  std::vector<uint8_t> compress_sparse; // per layer: 1 where its entries overlap and are picked
  rope_spec rope_compress;
  int64_t o_groups = 0, o_rank = 0;
  std::vector<uint8_t> hash_layers;
  bool router_sqrt_softplus = false, swiglu_clamp = false;
  // LongCat-Flash: each published layer is two of these (even and odd); the even one's experts
  // (its post-attention norm's output through them) are carried beside the stream and added at
  // the end of the odd one (shortcut_moe: the layers' FFNs are dense, the stream 2 C wide);
  // zero_experts identity experts follow the router's real ones; the MLA's latent is scaled by
  // latent_scale before it is cached (its LoRA scaling; the q's is in attn_scale)
  bool shortcut_moe = false;
  int64_t zero_experts = 0;
  double latent_scale = 1;
  // weight_layer: per layer, the layer whose weights it reads (itself, or an earlier one: a
  // weight-shared block run again; the tensors named by that layer's index; empty: its own).
  // HRM-Text (cycle_layers > 0): a low and a high stream; its two weight-shared stacks of
  // cycle_layers layers run in rounds of cycles_low passes of the L stack (over low + high, into
  // low) then one of the H stack (over high + low, into high), each pass closed by a weightless
  // RMS norm; the head reads the high stream
  std::vector<int32_t> weight_layer;
  int64_t cycle_layers = 0, cycles_low = 0;
  // Dory (nGPT, ngpt): every hidden state on the unit sphere (weightless L2 norms: x / sqrt(sum
  // x^2 + 1e-6)); a layer normalises its stream, and each sublayer's normed output moves it by
  // |lambda ngpt_alpha / ngpt_init| per channel towards it (an interpolation, not an add); q / k
  // L2-normed per head, q times (sqk sqrt(D) / init)^2 per channel after RoPE, the output gated
  // by sigmoid(gate_proj x (s_gate C^(1/4) / init)^2) and L2-normed over its H D values before
  // o_proj; gate and up times suv sqrt(C) per channel, the product L2-normed over F before
  // down_proj; the logits times logit_scale / init per token id. A recurrent section of
  // loop_layers layers from loop_begin runs `loops` times (each run its own layers here, reading
  // the first run's weights: weight_layer), each run starting from L2(stream) + L2(the section's
  // input), carried beside the stream ([T, 2 C]).
  bool ngpt = false;
  double ngpt_init = 0.02, ngpt_alpha = 0.05;
  int64_t loop_begin = 0, loop_layers = 0, loops = 0;
  // Zamba2 (zamba): every layer a pre-norm Mamba-2 mixer with its residual; the layers not linear
  // ("hybrid") first run one of zamba_blocks shared transformer blocks (the k-th hybrid layer
  // block k % zamba_blocks) over [stream, the embeddings] (2 C: an RMS norm, attention of H
  // heads of D = 2 C / H scored by sqrt(2 / D), o_proj to C, an RMS norm, a gated MLP from one
  // gate_up), each use with LoRA adapters of rank zamba_rank of its own on gate_up (and on q, k
  // and v where zamba_attn_adapters), whose output a per-layer linear map adds to the mixer's
  // input; the embeddings carried beside the stream ([T, 2 C])
  // Zamba (the first) as zamba, with one shared block, no adapters, no RoPE, gate_proj and up_proj
  // apart, and its mixer Mamba-1 (ssm_dt_rank > 0) over lin_v_heads channels whose x_proj and
  // dt_proj are per head of lin_k_heads mamba heads (B and C a group per head)
  bool zamba = false, zamba_attn_adapters = false;
  int64_t zamba_blocks = 0, zamba_rank = 0;
  // Inkling (inkling): short convolutions (causal, depthwise, sconv taps, no bias, each x +
  // conv(x), a state per sequence) on each layer's k and v (before their norms) and on the
  // attention's and the FFN's outputs (before the residual adds); no RoPE: each head's scores get
  // a bias per distance < the layer's extent (rel_extent; the sliding layers' window) mixed from
  // rel_dim relative states per head (r_proj) through the layer's profiles [rel_dim, extent]; on
  // the full layers q and those biases times 1 + log_scale_alpha ln(max((p + 1) /
  // log_scale_floor, 1)) (floor 0: off); dense MLPs times a learned scalar; the router's sigmoid
  // scores of the chosen experts and of sink_shared shared experts (the router's last rows, each
  // an MLP of F_expert) normalised together, times expert_scale and a learned scalar
  bool inkling = false;
  int64_t sconv = 0, rel_dim = 0, rel_extent = 0, log_scale_floor = 0, sink_shared = 0;
  double log_scale_alpha = 0;
  // ZAYA1 (zaya): compressed convolutional attention (q and k each through a causal depthwise
  // convolution of two taps then a per-head one of two, plus residuals: q's (q + its KV head's k)
  // / 2, k's the mean of those over its query heads; the values half this token's projection,
  // half the previous token's), q and k L2-normed to sqrt(D), k times a scale per KV head; an
  // affine scaling on the embedding and on both terms of every residual add; an MLP router over
  // router_dim values whose input carries the previous layer's router state (the stream carries
  // it: [T, C + router_dim]) and whose null_experts skip experts (after the real ones) add nothing
  bool zaya = false;
  int64_t router_dim = 0, null_experts = 0;
  // Doge (doge): dynamic mask attention, each key's score raised by exp(A softplus(dt_proj(its
  // position's values))) per KV head (carried as an extra value of each key, the query's a 1: heads
  // of D + 8 in the cache); the residual times a learned vector before each add
  bool doge = false;
  static constexpr int64_t doge_extra = 8; // values a Doge head gains (its key's mask score, zeros)
  int64_t layer_rel_extent(int64_t layer) const {
    return layer_window(layer) > 0 ? layer_window(layer) : rel_extent;
  }
  // layers reading an earlier layer's KV cache (kv_source) write their keys and values into it
  // too, before attending (Dory's last_loop: every run of a recurrent layer one cache, the last
  // run's entries the ones kept)
  bool kv_source_writes = false;
  // MiniMax M3: on sparse_layers a lightning indexer (one head of sparse_dim per KV head: q and k
  // projections, their norms, the model's RoPE; its keys cached) picks for each KV head the
  // sparse_topk blocks of sparse_block positions (the query's own and the sparse_local - 1
  // before it first) its query heads attend over; dense MLPs and shared experts clamp as the
  // experts do (GPT-OSS's SwiGLU without interleaving: swiglu_dense)
  std::vector<uint8_t> sparse_layers;
  // A.X K2: the pre-attention norm (every layer) and the pre-experts norm (MoE layers) times
  // sigmoid(W_up silu(W_down y)) of their own output y (rank gated_norm_rank); its latent
  // attention's q_b reads the q latent normed and raw side by side and also makes a sigmoid gate
  // per value (mla_q_gate)
  int64_t gated_norm_rank = 0;
  bool mla_q_gate = false;
  int64_t sparse_dim = 0, sparse_block = 0, sparse_topk = 0, sparse_local = 0;
  bool swiglu_dense = false;
  bool layer_sparse_attn(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(sparse_layers.size()) &&
           sparse_layers[static_cast<size_t>(layer)];
  }
  /// Values per token a pipeline stage passes on: C, or hc_mult (altup) streams of C, or the
  /// stream and LongCat's carried experts' output (or HRM-Text's second stream, Dory's loops'
  /// input).
  int64_t residual_width() const {
    return hc_mult > 0                                                    ? hc_mult * C
           : altup > 0                                                    ? altup * C
           : shortcut_moe || cycle_layers > 0 || loop_layers > 0 || zamba ? 2 * C
           : zaya                                                         ? C + router_dim
                                                                          : C;
  }
  /// Whether a sequence's output depends on where its input is cut into steps, as the published
  /// implementation computes it: Dory's last_loop (a chunk's earlier runs read the earlier
  /// chunks' entries as the last run wrote them), Zamba2's step clamp (on a prompt or chunk, not
  /// on a decode step). The serving host then cuts every sequence alike whatever the load.
  bool input_cut_matters() const { return kv_source_writes || ssm_dt_min > 0; }
  /// Whether `layer`'s compressed entries overlap and its indexer picks among them (V4's CSA).
  bool layer_compress_sparse(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(compress_sparse.size()) &&
           compress_sparse[static_cast<size_t>(layer)];
  }
  /// Tokens per compressed entry of `layer` (0: none).
  int64_t layer_compress(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(compress.size())
               ? compress[static_cast<size_t>(layer)]
               : 0;
  }
  int64_t bos_id = -1;
  std::vector<int64_t> eos_ids;
  weight_names names;
  /// Keys of config.json that this architecture does not read (transformers ignores them
  /// too); the loader lists them once at info level.
  std::vector<std::string> ignored_keys;
  /// What a family's reader wants said once at load (a limit it sets, and why).
  std::vector<std::string> load_notes;

  double attention_scale() const;
  /// The sliding window of layer `layer` (global index), 0 for full attention.
  int64_t layer_window(int64_t layer) const;
  /// The attention chunk of layer `layer`, 0 when it is not chunked.
  int64_t layer_chunk(int64_t layer) const;
  /// Whether the attention temperature applies on `layer`.
  bool layer_tempered(int64_t layer) const;
  /// Latent attention: the positional dims of `layer`'s heads, qk_rope, or 0 on one of
  /// nope_layers (Mistral Large 4's: those dims join the nope ones, kv_a makes the latent alone).
  int64_t layer_qk_rope(int64_t layer) const;
  /// Whether `layer` rotates q and k (rope_enabled, and not one of nope_layers).
  bool layer_rope(int64_t layer) const;
  /// Values one token stores in the KV cache per layer: 2 Hkv D, or the latent's kv_lora +
  /// qk_rope (latent attention). `tp`: a shard's share (KV heads split, latents replicated).
  /// With `layer`: that layer's (Gemma 4's full-attention layers have their own geometry).
  int64_t kv_values_per_token(int tp = 1, int64_t layer = -1) const;
  /// The head dim and KV heads of `layer` (D and Hkv, or D_full / Hkv_full on a full-attention
  /// layer of a model that gives those).
  int64_t layer_head_dim(int64_t layer) const;
  int64_t layer_kv_heads(int64_t layer) const;
  /// The query heads of `layer` (H, or its heads_by_layer entry).
  int64_t layer_heads(int64_t layer) const;
  /// Whether `layer` has the second attention geometry (D_full / Hkv_full).
  bool layer_full_geometry(int64_t layer) const;
  /// Whether layer `layer` is a linear attention (gated DeltaNet) layer.
  bool layer_linear(int64_t layer) const;
  /// Whether layer `layer` has an FFN after its mixer, and whether it has a mixer (layer_blocks).
  bool layer_has_ffn(int64_t layer) const;
  bool layer_has_mixer(int64_t layer) const;
  /// Whether `layer`'s attention, or its FFN, is a linear [C, C] map (linear_blocks).
  bool layer_linear_attn(int64_t layer) const;
  bool layer_linear_ffn(int64_t layer) const;
  /// Whether layer `layer` keeps a KV cache (attention: a mixer that is not linear, nor a linear
  /// map, and not one attending over an earlier layer's cache).
  bool layer_has_kv(int64_t layer) const {
    return layer_has_mixer(layer) && !layer_linear(layer) && !layer_linear_attn(layer) &&
           layer_kv_source(layer) == layer;
  }
  /// The layer whose KV cache `layer` attends over (itself unless kv_source says otherwise).
  int64_t layer_kv_source(int64_t layer) const;
  /// The layer whose weights `layer` reads (weight_layer; itself by default).
  int64_t layer_weights(int64_t layer) const;
  /// The earliest layer whose work (besides the residual stream) `layer` reads: an earlier
  /// layer's KV cache (kv_source) or sparse-attention selection (dsa_source), else itself. A
  /// pipeline stage may start at layer b only if no layer from b on reads one before b.
  int64_t layer_reads_from(int64_t layer) const;
  /// Whether `layer`'s FFN gate runs the Gaussian top-k (act_sparsity_z).
  bool layer_sparse(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(act_sparsity_z.size()) &&
           std::isfinite(act_sparsity_z[static_cast<size_t>(layer)]);
  }
  /// The FFN width of `layer` (F, its ffn_widths entry, or 2F on a KV-sharing layer with
  /// ffn_wide_shared).
  int64_t layer_ffn(int64_t layer) const;
  /// Whether some layer keeps a recurrent state per sequence (linear attention, Mamba).
  bool has_recurrent_state() const;
  /// f32 values of recurrent state one sequence holds on a shard of `tp` ranks, over layers
  /// [begin, end) (0 without linear attention layers).
  int64_t state_values_per_seq(int64_t begin, int64_t end, int tp = 1) const;
  /// Whether layer `layer`'s FFN is a mixture of experts.
  bool layer_moe(int64_t layer) const;
  /// How far back any query may look on every layer: the window when all layers slide (KV
  /// blocks wholly before it can be freed), 0 when some layer sees everything.
  int64_t kv_horizon() const;
  /// Parameter count (embedding included once when tied).
  int64_t parameters() const;
  /// The parameters one token uses: as parameters(), with n_expert_used experts per MoE
  /// layer instead of all of them (the router counted whole).
  int64_t active_parameters() const;
  /// FLOPs per prompt token of a prefill of P tokens: every layer's matmuls for each token,
  /// causal attention over the prompt, the lm_head for the last token only.
  double prefill_flops_per_token(int64_t P) const;
  /// Checks the dimensions for consistency; errors name the field.
  status validate() const;
};

/// Reads config.json (and generation_config.json beside it when present) of an HF directory.
expected<model_config> config_from_hf_dir(const std::string& dir);
/// Same, from JSON text (config, and generation config or empty).
expected<model_config> config_from_hf_json(const std::string& config_json,
                                           const std::string& generation_json,
                                           const std::string& where);
/// Reads the model description from GGUF metadata (general.architecture and its keys).
expected<model_config> config_from_gguf(const gguf_file& g);

} // namespace troupe
