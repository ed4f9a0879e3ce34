// zamba2.cpp (arch/families): Zyphra's Zamba (the first: read_zamba_hf) and Zamba2
// (Zamba2ForCausalLM: 1.2B, 2.7B, 7B): Mamba-2 layers, some of them ("hybrid", layers_block_type)
// first running one of num_mem_blocks shared transformer blocks over the stream beside the token
// embeddings (the decoder's zamba layers, decoder_zamba.cpp; model_config::zamba). The shared
// blocks are stored once, under the first hybrid layer that uses each
// (model.layers.{l}.shared_transformer), with every use's LoRA adapters in their lists (the i-th
// hybrid layer's under index i); the hybrid layers' mixers under mamba_decoder (renamed at load to
// the plain layers' names). The mixers clamp their step below at time_step_min, as transformers'
// scan does. HF only (llama.cpp writes no GGUF of it).
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"

namespace troupe::arch {

namespace {

// What Zamba and Zamba2 read alike: the dims, heads 2 x hidden_size / num_attention_heads wide
// over [stream, embeddings] scored by (head_dim / 2) ^ -0.5, and which layers are hybrid
// (layers_block_type, else `hybrid(l)`; nullopt there: the list is required)
status read_zamba_common(hf_cfg& j, model_config& c, const char* model,
                         const std::function<std::optional<bool>(int64_t)>& hybrid) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5, false));
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  if ((2 * c.C) % c.H)
    return j.bad(fmt::format("{} heads do not divide the attention's width 2 x {}", c.H, c.C));
  c.D = 2 * c.C / c.H;                                      // (attention_head_dim)
  c.attn_scale = std::sqrt(2.0 / static_cast<double>(c.D)); // (head_dim / 2) ^ -0.5
  for (const char* k : {"attention_head_dim", "head_dim"}) {
    if (const json& v = j.raw(k); !v.is_null() && v != c.D)
      return j.unsupported(fmt::format("'{}' {} ({}'s heads are 2 x hidden_size / "
                                       "num_attention_heads = {} wide)",
                                       k, v.dump(), model, c.D));
    j.mark(k);
  }
  const int64_t L = c.n_layer;
  std::vector<uint8_t> linear(static_cast<size_t>(L), 1);
  if (const json& bt = j.raw("layers_block_type"); !bt.is_null()) {
    if (!bt.is_array() || static_cast<int64_t>(bt.size()) != L)
      return j.bad(fmt::format("'layers_block_type' must list {} layer types", L));
    for (size_t i = 0; i < bt.size(); ++i) {
      if (bt[i] == "hybrid")
        linear[i] = 0;
      else if (bt[i] != "mamba" && bt[i] != "linear_attention")
        return j.unsupported(fmt::format("layers_block_type[{}] = {}", i, bt[i].dump()));
    }
  } else {
    for (int64_t i = 0; i < L; ++i) {
      const auto h = hybrid(i);
      if (!h) return j.bad(fmt::format("no 'layers_block_type' for {}'s {} layers", model, L));
      linear[static_cast<size_t>(i)] = !*h;
    }
  }
  c.linear_layers = std::move(linear);
  return {};
}

} // namespace

status read_zamba2_hf(hf_cfg& j, model_config& c) {
  // the layers: Mamba-2 alone, or a shared block first (Zamba2Config's default pattern lists 54)
  TROUPE_TRY(read_zamba_common(j, c, "Zamba2", [&c](int64_t l) -> std::optional<bool> {
    if (c.n_layer != 54) return std::nullopt;
    for (int64_t i : {6, 12, 18, 24, 30, 36, 42, 47, 51})
      if (l == i) return true;
    return false;
  }));
  const int64_t L = c.n_layer;
  // the mixers (the gated norm's epsilon is 1e-5 whatever rms_norm_eps says)
  if (c.norm_eps != 1e-5)
    return j.unsupported(
        fmt::format("'rms_norm_eps' {} (the mixers' gated norms keep 1e-5)", c.norm_eps));
  const mamba_keys k{"n_mamba_heads", "mamba_headdim",   "mamba_d_state",
                     "mamba_ngroups", "mamba_d_conv",    "mamba_expand",
                     "use_conv_bias", "add_bias_linear", "chunk_size"};
  TROUPE_TRY_ASSIGN(dt_min, j.f("time_step_min", 0.001));
  TROUPE_TRY(read_mamba_mixer(j, c, k));
  if (!(dt_min >= 0)) return j.bad(fmt::format("time_step_min {}", dt_min));
  c.ssm_dt_min = dt_min;
  // the shared blocks
  TROUPE_TRY_ASSIGN(blocks, j.i("num_mem_blocks", 1));
  TROUPE_TRY_ASSIGN(rank, j.i("adapter_rank", 128));
  if (blocks < 1 || rank < 1)
    return j.bad(fmt::format("num_mem_blocks {}, adapter_rank {}", blocks, rank));
  c.zamba = true, c.zamba_blocks = blocks, c.zamba_rank = rank;
  c.zamba_attn_adapters = j.b("use_shared_attention_adapter", false);
  if (c.zamba_attn_adapters && c.Hkv != c.H)
    return j.unsupported("use_shared_attention_adapter with fewer KV heads than heads (the "
                         "adapters' outputs are 2 x hidden_size wide)");
  c.mlp_bias = j.b("add_bias_linear", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "gelu"), c, j.where()));
  // (use_long_context: transformers' config sets a context of 16384 and nothing else, whatever
  // its warning says of the RoPE base)
  if (j.b("use_long_context", false)) c.ctx = 16384;
  c.nope_layers.assign(static_cast<size_t>(L), j.b("use_mem_rope", false) ? 0 : 1);
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  for (const char* key :
       {"attention_dropout", "use_mem_eff_path", "num_logits_to_keep", "kv_channels",
        "num_query_groups", "attention_hidden_size", "hybrid_layer_ids", "time_step_max",
        "time_step_floor", "use_mamba_kernels"})
    j.mark(key);
  return {};
}

// Zamba (ZambaForCausalLM: Zamba-7B-v1): Zamba2's layout with one shared block (no adapters, no
// RoPE, gate_proj and up_proj apart) over Mamba-1 mixers whose x_proj and dt_proj are per head
// of n_mamba_heads (decoder::mamba_heads); attention_hidden_size is 2 x hidden_size.
status read_zamba_hf(hf_cfg& j, model_config& c) {
  // the layers: "hybrid" ones run the shared block first (layers_block_type, or every
  // attn_layer_period-th from attn_layer_offset)
  TROUPE_TRY_ASSIGN(period, j.i("attn_layer_period", 6));
  TROUPE_TRY_ASSIGN(offset, j.i("attn_layer_offset", 4));
  if (period <= 0) return j.bad(fmt::format("'attn_layer_period' {}", period));
  TROUPE_TRY(read_zamba_common(
      j, c, "Zamba", [=](int64_t l) -> std::optional<bool> { return l % period == offset; }));
  const int64_t L = c.n_layer;
  if (const json& v = j.raw("attention_hidden_size"); !v.is_null() && v != 2 * c.C)
    return j.unsupported(fmt::format("'attention_hidden_size' {} (2 x hidden_size: the stream "
                                     "beside the embeddings)",
                                     v.dump()));
  // the mixer: Mamba-1 in n_mamba_heads heads
  if (j.s("hidden_mamba_act", "silu") != "silu")
    return j.unsupported(fmt::format("'hidden_mamba_act' {}", j.raw("hidden_mamba_act").dump()));
  if (j.b("mamba_proj_bias", false))
    return j.unsupported("'mamba_proj_bias' true (biases on the mixers' in_proj and out_proj)");
  TROUPE_TRY_ASSIGN(N, j.i("mamba_d_state", 16));
  TROUPE_TRY_ASSIGN(expand, j.i("mamba_expand", 2));
  TROUPE_TRY_ASSIGN(K, j.i("mamba_d_conv", 4));
  TROUPE_TRY_ASSIGN(heads, j.i("n_mamba_heads", 2));
  int64_t rank = (c.C + 15) / 16; // "auto"
  if (const json& r = j.raw("mamba_dt_rank"); !r.is_null() && r != "auto")
    TROUPE_TRY_SET(rank, j.req("mamba_dt_rank"));
  const int64_t Di = expand * c.C;
  if (N <= 0 || expand <= 0 || K < 1 || rank <= 0 || heads <= 0 || Di % heads)
    return j.bad(fmt::format("Mamba mixer: state {}, expand {}, {} taps, dt rank {}, {} heads of "
                             "the {} channels",
                             N, expand, K, rank, heads, Di));
  c.mamba = true;
  c.ssm_dt_rank = rank;
  c.lin_v_heads = Di, c.lin_v_dim = 1, c.lin_k_heads = heads, c.lin_k_dim = N;
  c.lin_conv = K;
  c.ssm_conv_bias = j.b("mamba_conv_bias", true);
  c.ssm_norm = model_config::ssm_norm_kind::none;
  // the shared block
  c.zamba = true, c.zamba_blocks = 1, c.zamba_rank = 0;
  TROUPE_TRY(read_activation(j.s("hidden_act", "gelu"), c, j.where()));
  c.rope_enabled = false;
  c.nope_layers.assign(static_cast<size_t>(L), 1);
  for (const char* key :
       {"attention_dropout", "num_logits_to_keep", "use_mamba_kernels", "use_associative_scan",
        "time_step_min", "time_step_max", "time_step_floor"})
    j.mark(key);
  return {};
}

std::vector<int64_t> zamba_block_owners(const model_config& c,
                                        const std::function<bool(int64_t)>& own_copy) {
  std::vector<int64_t> owners(static_cast<size_t>(c.n_layer), -1), first; // (each block's)
  int64_t use = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (c.layer_linear(l)) continue;
    const auto blk = static_cast<size_t>(use++ % c.zamba_blocks);
    if (first.size() <= blk) first.push_back(l);
    // (transformers ties a block's uses only with tie_word_embeddings: without it, a layer runs
    // its own copy where the checkpoint has one)
    owners[static_cast<size_t>(l)] = !c.tie_embeddings && own_copy(l) ? l : first[blk];
  }
  return owners;
}

status prepare_zamba2_hf(const model_config& c, tensor_index& t) {
  // a hybrid layer's mixer and its norm under the plain layers' names
  const std::string from = ".mamba_decoder.";
  for (const std::string& name : t.names())
    if (const auto at = name.find(from);
        name.starts_with("model.layers.") && at != std::string::npos)
      TROUPE_TRY(rename_tensor(t, name, name.substr(0, at + 1) + name.substr(at + from.size())));
  // the adapters no use reads: a block's module holds a list entry for each of its uses, and a
  // copy of it that runs for one use (no tie_word_embeddings: transformers ties nothing) reads
  // only that use's
  std::set<std::string> used; // "model.layers.{owner}.shared_transformer.{list}.{use}."
  const auto owners = zamba_block_owners(c, [&t](int64_t l) {
    return t.find(fmt::format("model.layers.{}.shared_transformer.self_attn.q_proj.weight", l)) !=
           nullptr;
  });
  int64_t use = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (owners[static_cast<size_t>(l)] < 0) continue;
    for (const char* list :
         {"self_attn.linear_q_adapter_list", "self_attn.linear_k_adapter_list",
          "self_attn.linear_v_adapter_list", "feed_forward.gate_up_proj_adapter_list"})
      used.insert(fmt::format("model.layers.{}.shared_transformer.{}.{}.",
                              owners[static_cast<size_t>(l)], list, use));
    ++use;
  }
  for (const std::string& name : t.names()) {
    const auto at = name.find("_adapter_list.");
    if (at == std::string::npos || !name.starts_with("model.layers.")) continue;
    const auto dot = name.find('.', at + 14); // (after the use's index)
    if (dot != std::string::npos && !used.count(name.substr(0, dot + 1))) t.mark_consumed(name);
  }
  return {};
}

status build_zamba2(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  n.tok_embd = "model.embed_tokens.weight";
  n.out_norm = "model.final_layernorm.weight";
  if (!c.tie_embeddings) n.lm_head = "lm_head.weight";
  n.attn_norm = "model.layers.{}.input_layernorm.weight";
  const std::string mx = "model.layers.{}.mamba.";
  mamba_names(m, n, mx);
  n.zamba_block = "model.layers.{}.shared_transformer.";
  n.zamba_linear = "model.layers.{}.linear.weight";
  if (c.family == "zamba") { // (its own names: the per-head maps as parameters, the block's)
    n.ssm_x = mx + "x_proj_weight", n.ssm_dt_w = mx + "dt_proj_weight";
    n.lin_dt_bias = mx + "dt_proj_bias";
    n.zamba_block = "model.layers.{}.shared_transf.";
    n.zamba_mlp_split = true;
  }
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
