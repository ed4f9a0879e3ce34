// op.hpp: the op vocabulary shared by every backend. An op call is an `op_args`: up to nine
// source views, one destination (plus `dst2` for top-k values) and scalar parameters. Shapes
// use the dimension legend (T tokens, C model dim, H heads, Hkv KV heads, D head dim, F FFN
// dim, V vocab, P tokens per KV block, NB blocks, N output features, K input features):
//   embedding        src0 table [V, C] (any dtype), src1 ids i32 [T]        -> dst f32 [T, C]
//   matmul           src0 x f32 [T, K], src1 W [N, K] (any dtype), src2 bias f32 [N] or none
//                                                                             -> dst f32 [T, N]
//                    x may be q8_0 (activations already quantized, see rmsnorm); src3 f32 [T, 1]
//                    or none: each row's step, x's values integer multiples of it (|x / step|
//                    <= 127: an input rounded per token to 8 bits, BitNet's), by which an int8
//                    kernel quantizes x exactly (t2_32 weights; else per row by its own max)
//   rmsnorm          src0 x [T, C], src1 w [C]                                -> dst [T, C]
//                    dst may be q8_0: the normalised rows quantized as the next matmul wants
//   layernorm        src0 x [T, C], src1 w [C], src2 b [C] or none            -> dst [T, C]
//   rope             src0 x [T, H, D], src1 pos i32 [T]                       -> dst [T, H, D]
//   silu gelu_erf gelu_tanh tanh rsqrt   src0 [..]                            -> dst [..]
//   swiglu           src0 gate [T, F], src1 up [T, F]                         -> dst [T, F]
//   softmax          src0 [T, N] (row-wise, after multiplying by p.scale)     -> dst [T, N]
//   add mul          src0 [T, C], src1 [T, C] | [1, C] | [T, 1] (broadcast)   -> dst [T, C]
//                    (generally [T or 1, C1], C1 dividing C: value j of a row meets the j-th
//                    group of C / C1 values, e.g. a gate per head over the heads' outputs)
//   scale            dst = src0 * p.scale + p.bias
//   clamp            dst = min(max(src0, -p.scale), p.scale)
//   relu sigmoid exp abs recip   src0 [..]                                  -> dst [..]
//   elementwise      dst = p.program(src0, .., src3) element by element (expr.hpp); each
//                    source [T, C] like dst, or [1, C] / [T, 1] broadcast
//   sum_rows         src0 [T, C]                                              -> dst [T, 1]
//                    (with p.row_absmax the largest |x| of each row instead of the sum)
//   attention        src0 q [T, H, D], src1 k [S, Hkv, D], src2 v [S, Hkv, D] -> dst [T, H, D]
//                    causal: query t (position p.pos0 + t) sees keys 0..p.pos0 + t
//                    (with p.window = W > 0 only the last W of them: p.pos0 + t - W + 1 ..)
//   paged_attention  src0 q [T, H, D], src1 k cache [NB, P, Hkv, D], src2 v cache (same),
//                    src3 seqs i32 [S, 3 + MB]: token begin, token count, pos0, block ids
//                                                                             -> dst [T, H, D]
//                    causal, and with p.window = W > 0 a query at position p sees keys
//                    max(0, p - W + 1)..p only (sliding-window attention, as HF's
//                    `sliding_window`); block ids of positions no query sees may be 0.
//                    With p.chunk = C > 0 a query at position p sees keys from p - p % C
//                    only (chunked attention, Llama 4; with a window too, the later start).
//                    With p.temp_floor = F > 0 the scores of a query at position p are also
//                    times 1 + p.temp_scale ln(1 + floor((p + p.temp_offset) / F)) (Llama 4's
//                    attention temperature tuning, offset 1, and Ministral 3's
//                    llama_4_scaling_beta, offset 0, which scale q by that).
//                    Both attentions: p.softcap > 0 caps scores (s = c tanh(s / c), after
//                    p.scale; Gemma 2); p.alibi_max_bias > 0 adds slope_h * (key position -
//                    query position), slopes as Bloom / MPT / llama.cpp derive them from the
//                    head count p.alibi_heads and the max bias, for global head p.head0 + h;
//                    a sinks source f32 [H] (attention: src3, paged_attention: src4; or none)
//                    adds one logit per head to every softmax's denominator and nothing to
//                    its sum of values (GPT-OSS's learned attention sinks). paged_attention's
//                    src5, i32 [T, K] (or none): the positions each query attends over (DeepSeek
//                    Sparse Attention's selection; -1 entries and positions past the query's
//                    are skipped), with p.scale, p.softcap and the sinks only. src6 (or none), a
//                    cache of compressed entries [NB, P, 1, D] as kv_compress writes it, with
//                    p.compress = m: a query at position p also attends over its sequence's entries
//                    w < (p + 1) / m, each both key and value, in the same softmax as the window of
//                    src1 / src2 (and the sinks); with src5 too, over the entries src5 picks of
//                    those (-1 and later ones skipped) instead of all (DeepSeek-V4's compressed
//                    and compressed sparse attention). With p.sel_per_kv, src5 is
//                    [T, Hkv K]: a selection per KV head, query head h reading its KV head's
//                    K (MiniMax M3's). src7 (or none), f32 [T, H, E]: a bias per query, head and
//                    distance, rel[t, h, p - s] added to the score of key s by the query at
//                    position p where p - s < E (Inkling's relative logits; not with src5 / src6)
//   dsa_select       src0 q f32 [T, Hi, Di], src1 index cache [NB, P, 1, Di], src2 seqs i32
//                    [S, 3 + MB], src3 w f32 [T, Hi] -> dst i32 [T, K]: for a query at position
//                    p, the K positions s <= p of its sequence with the largest
//                    sum_h w_h relu(p.scale q_h . k_s) (descending; ties: the earlier
//                    position first), -1 past the p + 1 there are (DeepSeek-V3.2's indexer);
//                    with p.compress = m the candidates are the compressed entries w < (p + 1) /
//                    m of src1 (a kv_compress cache; DeepSeek-V4's indexer); with p.expand too,
//                    each chosen entry w as its m positions w m .. w m + m - 1, then the positions
//                    of the query's incomplete window ((p + 1) - (p + 1) % m .. p), -1 past them:
//                    dst [T, K m + m - 1] for K = p.k entries (GLM-5.3's k-pools). With p.block
//                    = b > 0 (MiniMax M3's lightning indexer; src3 none), each head h chooses
//                    for itself: the p.k blocks of b positions (of 0 .. p) with the largest
//                    max_s p.scale q_h . k_s over their positions s <= p, the query's own block
//                    and the p.local_blocks - 1 before it first (ties: the earlier block),
//                    dst [T, Hi p.k b]: head h's chosen blocks' positions in order, -1 for
//                    those past p and in the slots of blocks not chosen
//   kv_compress      src0 source cache [NB, P, 1, 2 W] (each token's kv [W], then its gate
//                    logits [W], at its position's slot), src1 ape f32 [m, W], src2 norm weight f32
//                    [Dc] (or none: no norm), src3 seqs i32 [S, 3 + MB] -> dst cache [NB, P, 1, Dc]
//                    (a sequence's entry w at the slot of position w), m = p.compress: for every
//                    query position p of the step that closes a window ((p + 1) % m == 0), its
//                    entry w = (p + 1) / m - 1 = per channel sum_j softmax_j(gate_j + ape[j % m])
//                    kv_j over the window's m rows (W = Dc), or (W = 2 Dc, overlapping windows)
//                    over 2 m: the previous window's first halves (none for w = 0), this window's
//                    second halves; then RMS-normed (eps p.eps) times the weight and rotated at
//                    position w m (p.rope) (DeepSeek-V4's compressors)
//   kv_store         src0 k f32 [T, Hkv, D], src1 slots i32 [T] (block * P + offset)
//                                                          -> dst cache [NB, P, Hkv, D] rows
//   argmax           src0 [T, V] f32                                          -> dst i32 [T]
//   topk             src0 [T, V] f32 -> dst i32 [T, k], dst2 f32 [T, k] (descending; ties:
//                    lowest id first)
//   convert          src0 f32|f16|bf16 [n] -> dst f32|f16|bf16 [n]
//   quantize         src0 f32 [.., n] -> dst q8_0|q4_0;  dequantize: the reverse
// Fused ops (each is defined as the composition it replaces and saves a pass over memory):
//   add_rmsnorm      src0 x [T, C], src1 r [T, C], src2 w [C]
//                    -> dst2 [T, C] = x + r (may alias src0), dst [T, C] = rmsnorm(x + r) * w
//                    (dst f32 or q8_0, as for rmsnorm)
//   matmul_swiglu    src0 x f32 or q8_0 [T, K], src1 W_gate [F, K], src2 W_up [F, K] (same dtype)
//                                              -> dst f32 [T, F] = silu(x Wg^T) * (x Wu^T)
//   rope_kv_store    src0 k f32 [T, Hkv, D], src1 pos i32 [T], src2 slots i32 [T]
//                    -> dst cache [NB, P, Hkv, D]: rope(k) written to the slots (k unchanged);
//                    optionally (the attention's whole prologue, one angle table per token):
//                    src3 v f32 [T, Hkv, D] -> dst2 v cache: v written to the slots as it is;
//                    src4 q f32 [T, H, D] -> dst3 [T, H, D] = rope(q) (may alias src4)
//   matmul_qkv       src0 x f32 or q8_0 [T, K], src1 Wq [Nq, K], src2 Wk [Nk, K], src3 Wv
//                    [Nv, K] (one dtype) -> dst [T, Nq] = x Wq^T, dst2 [T, Nk] = x Wk^T,
//                    dst3 [T, Nv] = x Wv^T (f32): the three projections of one input in one
//                    pass (one dispatch, one activation quantization)
// Mixture of experts (E experts of FFN dim F, k chosen per token; routing is composed in the
// graph: router matmul, softmax or sigmoid, topk, normalisation):
//   moe              src0 x f32 [T, C], src1 ids i32 [T, k] (expert of each choice), src2
//                    weights f32 [T, k], src3 W_gate [E * F, C], src4 W_up [E * F, C], src5
//                    W_down [E * C, F] (experts stacked by rows, one dtype)
//                    -> dst f32 [T, C] = sum_j weights[t, j] * down_e(silu(gate_e x) * up_e x),
//                    e = ids[t, j]: only the chosen experts' weights are read; an id outside
//                    [0, E) is an error, not a read out of bounds. Optional biases src6
//                    b_gate [E * F], src7 b_up [E * F], src8 b_down [E * C] (f32) are added
//                    to each expert's products; with p.swiglu_limit > 0 the activation is
//                    GPT-OSS's clamped one: g = min(gate, L), u = clamp(up, -L, L),
//                    h = (u + 1) g sigmoid(p.swiglu_alpha g), or with p.moe_clamp h = silu(g) u
//                    of those (DeepSeek-V4's), with p.moe_clamp_after too h = min(silu(gate),
//                    L) u (Step 3.7's, clipped after the activation); with p.moe_relu2 the experts
//                    are ungated, h = relu(up x)^2 (Nemotron-H's; src3 is W_up again, unread);
//                    with p.moe_gelu h = gelu_tanh(g) u (Gemma 4's GeGLU experts). An optional
//                    src9 f32 [E_all] scales each choice's weight by its expert's (by the
//                    global id; Gemma 4's per_expert_scale); with p.moe_post_norm src9 is f32
//                    [E_all, C] instead: each chosen expert's output RMS-normed (eps p.eps)
//                    times its expert's row before it is weighted (Ergo's post-expert norm; the
//                    whole expert's output: a split by F refuses it). With p.zero_experts Z > 0 the
//                    ids [E_all, E_all + Z) are zero-computation experts, each adding its weight
//                    times x (LongCat-Flash's), unless p.zero_elsewhere (another shard of a
//                    summed split adds them).
//                    With expert parallelism
//                    the weights hold experts p.expert0 .. p.expert0 + E - 1 of p.n_expert:
//                    choices of other experts add nothing here (another shard adds them)
// Latent attention (DeepSeek's MLA) and its routing:
//   concat           src0 [T, .., A], src1 [T, .., B] (f32, the same leading dims)
//                                                              -> dst [T, .., A + B]
//   head_matmul      src0 x f32 [T, H, Kx], src1 W (any dtype), per head h:
//                    p.k == 0: W [H * N, K], dst[t, h, n] = sum_k W[h N + n, k] x[t, h, k]
//                    p.k == 1: W [H * K, N], dst[t, h, n] = sum_k W[h K + k, n] x[t, h, k]
//                    (K <= Kx: the first K values of each head's x)     -> dst f32 [T, H, N]
//   moe_router       src0 logits f32 [T, E], src1 bias f32 [E] or none
//                    -> dst ids i32 [T, p.k], dst2 weights f32 [T, p.k]: scores =
//                    softmax(logits) (p.router_sigmoid false) or sigmoid(logits); choice by
//                    scores + bias, among the p.topk_group of p.n_group expert groups with
//                    the best sum of their two best choice scores, or (p.group_max) their best
//                    (DeepSeek-V2), all when n_group <= 1;
//                    weights = the chosen scores (without bias), renormalised when
//                    p.router_norm (divided by their sum + p.router_eps), times p.scale
//                    (DeepSeek-V3's group-limited routing); with p.router_sqrt_softplus the
//                    scores are sqrt(softplus(logits)); with src2 token ids i32 [T] and src3 a
//                    table i32 [V, k] the choice is table[token] (DeepSeek-V4's hash routing;
//                    the weights as above, from the chosen scores); with
//                    p.router_bias_on_logits the choice is by logits + bias (the weights the
//                    chosen scores still); with
//                    p.router_sparsemixer (PhiMoE, p.k = 2) choice j is the best logit m not
//                    chosen yet, its weight the softmax at it over the logits l not chosen yet
//                    with (m - l) / max(|l|, m) <= 2 p.router_jitter (times p.scale)
//   pos_scale        src0 x f32 [T, H, D], src1 positions i32 [T], src2 scale f32 [H], src3
//                    bias f32 [H] -> dst f32 [T, H, D] = x[t, h, :] (scale[h] ln(pos[t] + 1) +
//                    bias[h]) (Mistral Large 4's softmax scaling of the queries, per head); or,
//                    src2 and src3 none, times (1 + (pos[t] + p.temp_offset) / p.temp_floor) ^
//                    p.temp_scale for every head (Beam's scalable softmax on its NoPE layers)
// Hyper-connections (DeepSeek-V4's mHC: N residual streams of C values per token):
//   hc_pre           src0 x f32 [T, N C], src1 fn f32 [M, N C], src2 base f32 [M], src3 scale
//                    f32 [3] (M = N (N + 2)) or [1] (M = N, the model's head; or src1..3 none:
//                    the streams' mean, GLM-5.3's head) -> dst f32 [T, C]
//                    = sum_n pre_n x_n and (M = N (N + 2)) dst2 f32 [T, N (N + 1)], each
//                    token's post [N] and comb [N, N]: z = (x fn^T) / rms(x) (eps p.eps), pre =
//                    sigmoid(s0 z[:N] + base[:N]) + p.bias, post = 2 sigmoid(s1 z[N:2N] +
//                    base[N:2N]), comb = softmax over each row of s2 z[2N:] + base[2N:], plus
//                    p.bias, its columns then normalised (x / (sum + p.bias)), then p.k - 1 times
//                    its rows and its columns (Sinkhorn-Knopp); or (M = 2 N, scale [2]: HY-V4's
//                    independent form) dst2 f32 [T, N], post = p.scale sigmoid(s1 z[N:] + base[N:])
//                    + p.bias, no comb
//   hc_post          src0 x f32 [T, N C], src1 y f32 [T, C], src2 mix f32 [T, N (N + 1)] (hc_pre's
//                    dst2) -> dst f32 [T, N C]: stream k = post_k y + sum_j comb[j, k] x_j; mix
//                    [T, N] (post alone): stream k = post_k y + x_k; mix [T, N N] (N > 1, Gemma
//                    3n's AltUp prediction): stream k = x_k + sum_j mix[k N + j] x_j (y gives C
//                    only, its values unread)
//   slice            src0 [T, A] f32 -> dst f32 [T, B]: columns p.col0 .. p.col0 + B - 1 of each
//                    row (B = p.cols; one of several streams, Gemma 3n's AltUp)
// Linear attention with a recurrent state per sequence (gated DeltaNet: Qwen3.5, Qwen3-Next).
// A state table i32 [S, 4] lists each sequence of the step: token begin, token count, the
// position of its first token, its state slot (a row of the state tensors); a sequence at
// position 0 starts from a zero state, any other continues the state its slot holds, and the
// state is left as it is after the sequence's last token:
//   causal_conv      src0 x f32 [T, Hc, Dc], src1 w [Hc * Dc, K] f32|f16|bf16 (taps, oldest
//                    first), src2 state f32 [NS, Hc, K - 1, Dc] (the last K - 1 inputs),
//                    src3 state table          -> dst f32 [T, Hc, Dc] = silu(sum_j w[c, j]
//                    x[t - K + 1 + j, c] + bias[c]), inputs before position 0 zero; src4 bias
//                    f32 [Hc * Dc] or none (Mamba's conv1d); with p.conv_plain the sum itself
//                    (LFM2's short convolution has no activation)
//   gated_delta      src0 q f32 [T, Hk, Dk], src1 k f32 [T, Hk, Dk], src2 v f32 [T, Hv, Dv],
//                    src3 a f32 [T, Hv], src4 b f32 [T, Hv], src5 A_log f32 [Hv], src6 dt_bias
//                    f32 [Hv], src7 state f32 [NS, Hv, Dk, Dv], src8 state table
//                    -> dst f32 [T, Hv, Dv]; value head h reads key head h / (Hv / Hk) (with
//                    p.delta_tiled: (p.head0 + h) % Hk); src5 is -exp(A_log) with p.delta_neg_a;
//                    per token q and k are L2-normalised (eps 1e-6), q scaled by 1 / sqrt(Dk), g =
//                    -exp(A_log) softplus(a + dt_bias) (or, p.delta_bound = L < 0, L sigmoid(exp(
//                    A_log) (a + dt_bias))), beta = sigmoid(b) (times p.delta_beta_scale where
//                    set), and S = exp(g) S; S += k
//                    (beta (v - S^T k))^T; out = S^T q. src3 may also be [T, Hv, Dk] with src6
//                    [Hv * Dk]: a decay per key channel, S's row d times exp(g_d) (Kimi's KDA)
//   ssm_scan         src0 x f32 [T, H, P], src1 dt f32 [T, H], src2 A_log f32 [H], src3 B f32
//                    [T, G, N], src4 C f32 [T, G, N], src5 D f32 [H], src6 dt_bias f32 [H], src7
//                    state f32 [NS, H, P, N], src8 state table -> dst f32 [T, H, P]: Mamba-2's
//                    selective state space, head h reading group h / (H / G) of B and C; per
//                    token d = softplus(dt + dt_bias), S = exp(d A) S + d x B^T, out = S C + D x
//                    with A = -exp(A_log) (src2 is A itself with p.delta_neg_a, GGUF's ssm_a);
//                    src2 may also be [H, N]: an A per state value (Mamba-1's, where each channel
//                    is a head of P = 1: d A is then a vector, exp(d A) taken elementwise); with
//                    p.scan_unit_dt d = 1 and no D term (src1, src5, src6 unread, may be empty;
//                    A [H] only): S = exp(A) S + x B^T, out = S C (MiniMax's lightning attention);
//                    with p.scan_dt_min > 0, d = max(d, p.scan_dt_min) (Zamba2's time_step_min)
//                    on a sequence's rows unless they are one token after earlier ones (a
//                    decode step: transformers' and mamba_ssm's recurrent step clamp nothing,
//                    their chunked scan over a prompt or a chunk does)
//   lru_scan         src0 a f32 [T, W] (each channel's decay), src1 u f32 [T, W], src2 state f32
//                    [NS, W] (any shape of W values per slot), src3 state table -> dst f32 [T, W]:
//                    per channel h = a h + u token by token (a diagonal linear recurrence; h = 0
//                    before a sequence's position 0); with p.lru_norm the input is sqrt(1 - a^2) u
//                    except at position 0, where it is u (Griffin's RG-LRU, RecurrentGemma)
//   mlstm_scan       src0 q f32 [T, H, Dk], src1 k f32 [T, H, Dk], src2 v f32 [T, H, Dv], src3 i
//                    f32 [T, H] (the input gate's preactivations), src4 f f32 [T, H] (the forget
//                    gate's), src5 state f32 [NS, H, Dk + 1, Dv + 1], src6 state table -> dst f32
//                    [T, H, Dv]: xLSTM's mLSTM cell in its stabilised recurrent form. Per head the
//                    state holds the matrix memory C [Dk, Dv] (rows 0 .. Dk - 1, columns 0 .. Dv
//                    - 1), the normaliser n [Dk] (column Dv) and the stabiliser m (row Dk, column
//                    0), all zero before a sequence's position 0. Per token, with lf =
//                    logsigmoid(f): m' = max(lf + m, i), C = e^(lf + m - m') C + e^(i - m') k v^T,
//                    n = e^(lf + m - m') n + e^(i - m') k, and out = (q' C) / (max(|q' . n|,
//                    e^-m') + p.eps), q' = q / sqrt(Dk)
// All float math accumulates in at least f32; the reference (kernels/ref) in f64.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/expected.hpp"
#include "core/rope.hpp"
#include "core/tensor.hpp"

namespace troupe {
class thread_pool;
} // namespace troupe

namespace troupe::kernels {
struct ew_program;
} // namespace troupe::kernels

namespace troupe::kernels {

enum class op : uint8_t {
  embedding,
  matmul,
  rmsnorm,
  layernorm,
  rope,
  silu,
  gelu_erf,
  gelu_tanh,
  tanh,
  rsqrt,
  swiglu,
  softmax,
  add,
  mul,
  scale,
  sum_rows,
  attention,
  paged_attention,
  kv_store,
  argmax,
  topk,
  convert,
  quantize,
  dequantize,
  add_rmsnorm,
  matmul_swiglu,
  rope_kv_store,
  clamp,
  relu,
  sigmoid,
  exp,
  abs,
  recip,
  elementwise,
  matmul_qkv,
  moe,
  concat,
  head_matmul,
  moe_router,
  causal_conv,
  gated_delta,
  ssm_scan,
  dsa_select,
  kv_compress,
  hc_pre,
  hc_post,
  pos_scale,
  slice,
  lru_scan,
  mlstm_scan,
};
inline constexpr int op_count = 50;

std::string_view to_string(op o);
/// ALiBi slope of global head h of n (Press et al.; as Bloom, MPT and llama.cpp compute it):
/// with m the largest power of two <= n, heads below m get (2^(-max_bias/m))^(h+1), the rest
/// (2^(-max_bias/(2m)))^(2(h-m)+1).
double alibi_slope(int64_t h, int64_t n, double max_bias);
/// Whether a moe call's optional biases (src6..8) are absent or f32 of their shapes.
struct op_args;
bool moe_biases_ok(const op_args& a);
/// Parses an op name ("matmul"); false when unknown.
bool parse_op(std::string_view name, op& out);

enum class backend : uint8_t { ref, cpu, cuda };
inline constexpr int backend_count = 3;
std::string_view to_string(backend b);

struct op_params {
  float eps = 1e-5f;      // rmsnorm, layernorm
  float scale = 1.0f;     // softmax, attention, scale
  float bias = 0.0f;      // scale
  int k = 0;              // topk
  int64_t pos0 = 0;       // attention: position of the first query
  int64_t window = 0;     // attention, paged_attention: keys a query sees (itself included); 0: all
  int64_t chunk = 0;      // attention, paged_attention: keys from the query's chunk only; 0: off
  int64_t temp_floor = 0; // attention, paged_attention: temperature tuning's floor_scale (0: off)
  float temp_scale = 0;   // and its attn_scale
  int64_t temp_offset = 0;  // and the offset added to the position
  float softcap = 0;        // attention: score soft-capping (0: off)
  float alibi_max_bias = 0; // attention: ALiBi (0: off)
  int alibi_heads = 0;      // attention with ALiBi: the model's head count (slopes depend on it)
  int head0 = 0;            // attention with ALiBi: global index of this shard's first head
  const struct ew_program* program = nullptr; // elementwise (owned by the graph or the caller)
  int block_size = 0;                         // paged_attention, kv_store: P
  rope_spec rope;                             // rope, rope_kv_store
  int expert0 = 0;  // moe: the first expert the stacked weights hold (expert parallelism)
  int n_expert = 0; // moe: the model's experts (0: as many as the weights hold)
  bool router_sigmoid = false;     // moe_router: sigmoid scores (else softmax)
  bool router_norm = false;        // moe_router: chosen weights renormalised
  int n_group = 0, topk_group = 0; // moe_router: group-limited choice (0: off)
  bool group_max = false;          // moe_router: a group scores its best (else its two best)
  float router_eps = 1e-20f;       // moe_router: renormalised by the chosen scores' sum + eps
  float swiglu_alpha = 0, swiglu_limit = 0; // moe: GPT-OSS's clamped SwiGLU when limit > 0
  bool moe_relu2 = false;     // moe: ungated experts, down(relu(up x)^2) (src3 = src4, unread)
  bool moe_gelu = false;      // moe: GeGLU experts, down(gelu_tanh(gate x) up x)
  bool moe_post_norm = false; // moe: each expert's output RMS-normed (p.eps) times src9's row
  bool moe_clamp = false; // moe with swiglu_limit: silu(min(g, L)) clamp(u, -L, L) (DeepSeek-V4)
  bool moe_clamp_after = false; // and min(silu(g), L) clamp(u, -L, L) instead (Step 3.7, Ling 3)
  // paged_attention: src5 holds a selection per KV head, [T, Hkv K] (query head h reads its KV
  // head's); dsa_select by blocks: each of its heads selects for one KV head (MiniMax M3)
  bool sel_per_kv = false;
  int block = 0, local_blocks = 0; // dsa_select: whole blocks of `block` positions (MiniMax M3)
  int zero_experts = 0;            // moe: ids [all, all + this) are identity experts (LongCat)
  bool zero_elsewhere = false;     // moe: another shard of the sum adds the identity experts' part
  bool router_sqrt_softplus = false;  // moe_router: scores sqrt(softplus(logits)) (DeepSeek-V4)
  bool router_sparsemixer = false;    // moe_router: PhiMoE's sparsemixer (p.k = 2)
  bool router_bias_on_logits = false; // moe_router: the choice by logits + bias (Kolibri)
  float router_jitter = 0;            // and its relative threshold (router_jitter_noise)
  // paged_attention with compressed entries (src6), dsa_select over them, kv_compress: the
  // tokens per entry (0: none)
  int64_t compress = 0;
  // gated_delta: value head h reads key head (head0 + h) % Hk (GGUF's tiled head order), else
  // h / (Hv / Hk); src5 (ssm_scan: src2) holds -exp(A_log) (GGUF's ssm_a), else A_log
  bool delta_tiled = false, delta_neg_a = false;
  bool conv_plain = false;   // causal_conv: the taps' sum without the SiLU
  bool scan_unit_dt = false; // ssm_scan: d = 1, no D term (dt, D, dt_bias unread)
  float scan_dt_min = 0;     // ssm_scan: d = max(d, scan_dt_min) when > 0 (Zamba2's time_step_min),
                             // except a sequence's single step over its state (see the table)
  // gated_delta: < 0, the decay's log is bound * sigmoid(exp(A_log) (a + dt_bias)) (GLM-5.3's safe
  // gate, bounded below) instead of -exp(A_log) softplus(a + dt_bias); 0: off
  float delta_bound = 0;
  // gated_delta: beta = delta_beta_scale sigmoid(b) (OLMo hybrid's 2, allowing the memory's
  // negative eigenvalues); 0: 1
  float delta_beta_scale = 0;
  // dsa_select over compressed entries (p.compress = m): each chosen entry written as its m
  // positions, then the positions of the query's incomplete window (GLM-5.3's k-pools)
  bool expand = false;
  int64_t col0 = 0, cols = 0; // slice: the columns taken
  bool lru_norm = false;      // lru_scan: the input times sqrt(1 - a^2) past position 0
  // embedding: an id outside [0, V) reads row 0 instead of zeros (Gemma 3n's per-layer table,
  // narrower than the vocabulary; never with a vocabulary-parallel table)
  bool ids_row0 = false;
  bool row_absmax = false; // sum_rows: each row's largest magnitude instead of its sum
  // (a graph's all_reduce node, not an op: the largest value over the ranks instead of the sum;
  // the ranks' per-token absolute maxima of a split row, BitNet's activation quantization)
  bool reduce_max = false;
};

struct op_args {
  op kind = op::add;
  std::array<tensor_view, 10> src{}; // moe reads ten
  tensor_view dst;
  tensor_view dst2;
  tensor_view dst3; // matmul_qkv's v
  op_params p;
};

/// Temporary memory a composite takes from its caller (the executor's planned scratch);
/// alloc returns null when the arena is exhausted.
class scratch_arena {
 public:
  virtual ~scratch_arena() = default;
  virtual void* alloc(size_t bytes) = 0;
};

/// Scratch as bump allocation over a buffer the caller owns (host or device memory), each
/// allocation starting on `align` bytes; reset or rewind between uses.
class bump_arena final : public scratch_arena {
 public:
  explicit bump_arena(size_t align)
      : align_(align) {}
  void reset(void* base, size_t size) {
    base_ = static_cast<uint8_t*>(base);
    size_ = size;
    used_ = 0;
  }
  void rewind() { used_ = 0; }
  void* alloc(size_t bytes) override {
    const size_t at = (used_ + align_ - 1) / align_ * align_;
    if (at + bytes > size_) return nullptr;
    used_ = at + bytes;
    return base_ + at;
  }

 private:
  size_t align_;
  uint8_t* base_ = nullptr;
  size_t size_ = 0, used_ = 0;
};

/// What a kernel may use besides its arguments: the shard's thread pool (may be null), for
/// device backends the stream, and scratch for composites (may be null: they allocate).
/// Kernels never allocate on the hot path when scratch is given.
struct exec_ctx {
  thread_pool* pool = nullptr;
  void* stream = nullptr; // cudaStream_t for the CUDA backend
  scratch_arena* scratch = nullptr;
};

/// Row i of a state table (causal_conv, gated_delta, ssm_scan): a sequence's tokens, first
/// position, slot.
struct state_row {
  int64_t begin, count, pos0, slot;
};
inline state_row state_row_at(const tensor_view& table, int64_t i) {
  const int32_t* r = table.row<int32_t>(i);
  return {r[0], r[1], r[2], r[3]};
}

/// Checks the shapes and dtypes of `args` against the table above.
status check_args(const op_args& args);

} // namespace troupe::kernels
