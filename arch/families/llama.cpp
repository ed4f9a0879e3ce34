// llama.cpp (arch/families): the Llama family and the architectures that are Llama with other
// defaults: Llama 2 / 3 (rope scaling), Mistral (sliding window), Qwen2 (q/k/v biases,
// per-layer windows). Pre-norm decoder: x += attn(rmsnorm(x)); x += ffn(rmsnorm(x)); SwiGLU
// (or another activation, gated or not); tied or separate lm_head.
#include "arch/families/decoder.hpp"

#include <algorithm>

namespace troupe::arch {

using namespace graph;

namespace {

weight_names hf_names() {
  weight_names n;
  n.tok_embd = "model.embed_tokens.weight";
  n.output_norm = "model.norm.weight";
  n.output = "lm_head.weight";
  n.attn_norm = "model.layers.{}.input_layernorm.weight";
  n.wq = "model.layers.{}.self_attn.q_proj.weight";
  n.wk = "model.layers.{}.self_attn.k_proj.weight";
  n.wv = "model.layers.{}.self_attn.v_proj.weight";
  n.wo = "model.layers.{}.self_attn.o_proj.weight";
  n.bq = "model.layers.{}.self_attn.q_proj.bias";
  n.bk = "model.layers.{}.self_attn.k_proj.bias";
  n.bv = "model.layers.{}.self_attn.v_proj.bias";
  n.bo = "model.layers.{}.self_attn.o_proj.bias";
  n.ffn_norm = "model.layers.{}.post_attention_layernorm.weight";
  n.w_gate = "model.layers.{}.mlp.gate_proj.weight";
  n.w_up = "model.layers.{}.mlp.up_proj.weight";
  n.w_down = "model.layers.{}.mlp.down_proj.weight";
  return n;
}

weight_names gguf_names() {
  weight_names n;
  n.tok_embd = "token_embd.weight";
  n.output_norm = "output_norm.weight";
  n.output = "output.weight";
  n.attn_norm = "blk.{}.attn_norm.weight";
  n.wq = "blk.{}.attn_q.weight";
  n.wk = "blk.{}.attn_k.weight";
  n.wv = "blk.{}.attn_v.weight";
  n.wo = "blk.{}.attn_output.weight";
  n.bq = "blk.{}.attn_q.bias";
  n.bk = "blk.{}.attn_k.bias";
  n.bv = "blk.{}.attn_v.bias";
  n.bo = "blk.{}.attn_output.bias";
  n.ffn_norm = "blk.{}.ffn_norm.weight";
  n.w_gate = "blk.{}.ffn_gate.weight";
  n.w_up = "blk.{}.ffn_up.weight";
  n.w_down = "blk.{}.ffn_down.weight";
  return n;
}

// The common Llama-shaped dimensions of config.json.
status read_dims(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size"));
  TROUPE_TRY_ASSIGN(F, j.req("intermediate_size"));
  TROUPE_TRY_ASSIGN(L, j.req("num_hidden_layers"));
  TROUPE_TRY_ASSIGN(H, j.req("num_attention_heads"));
  TROUPE_TRY_ASSIGN(Hkv, j.i("num_key_value_heads", H));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 2048));
  TROUPE_TRY_ASSIGN(D, j.i("head_dim", C / H));
  TROUPE_TRY_ASSIGN(eps, j.f("rms_norm_eps", 1e-6));
  c.C = C, c.F = F, c.n_layer = L, c.H = H, c.Hkv = Hkv, c.V = V, c.ctx = ctx, c.D = D;
  c.norm_eps = eps;
  return {};
}

} // namespace

status read_llama_hf(hf_cfg& j, model_config& c) {
  c.names = hf_names();
  c.qkv_bias = c.family == "qwen2";
  TROUPE_TRY(read_dims(j, c));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (c.family == "llama") {
    j.mark("pretraining_tp"); // a way of splitting the same matmuls: the same math
    if (j.b("attention_bias", false)) {
      c.qkv_bias = true;
      c.o_bias = true;
    }
    c.mlp_bias = j.b("mlp_bias", false);
  } else if (c.family == "mistral") {
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    c.sliding_window = sw >= c.ctx ? 0 : sw; // a window as long as the context is no window
  } else if (c.family == "qwen2") {
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    TROUPE_TRY_ASSIGN(mwl, j.i("max_window_layers", 28));
    const bool use = j.b("use_sliding_window", false);
    std::vector<uint8_t> windowed(static_cast<size_t>(c.n_layer), 0);
    if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
      if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer)
        return j.bad(fmt::format("'layer_types' must list {} layer types", c.n_layer));
      for (size_t i = 0; i < lt.size(); ++i) {
        if (lt[i] == "sliding_attention")
          windowed[i] = 1;
        else if (lt[i] != "full_attention")
          return j.unsupported(
              fmt::format("layer_types[{}] = {} is not supported", i, lt[i].dump()));
      }
    } else {
      for (int64_t i = mwl; i < c.n_layer; ++i) windowed[static_cast<size_t>(i)] = 1;
    }
    // transformers: sliding_window = sliding_window if use_sliding_window else None
    if (use && sw > 0 && sw < c.ctx &&
        std::find(windowed.begin(), windowed.end(), 1) != windowed.end()) {
      c.sliding_window = sw;
      c.windowed = std::move(windowed);
    }
  }
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  return {};
}

status read_llama_gguf(const gguf_cfg& g, model_config& c) {
  c.names = gguf_names();
  c.qkv_bias = c.family == "qwen2";
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  TROUPE_TRY_ASSIGN(F, g.req("feed_forward_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  TROUPE_TRY_ASSIGN(H, g.req("attention.head_count"));
  c.C = C, c.F = F, c.n_layer = L, c.H = H;
  c.Hkv = g.i("attention.head_count_kv", H);
  c.D = g.i("attention.key_length", H > 0 ? C / H : 0);
  c.norm_eps = g.f("attention.layer_norm_rms_epsilon", 1e-5);
  TROUPE_TRY(read_gguf_common(g, c, c.names.tok_embd));
  if (const int64_t sw = g.i("attention.sliding_window", 0); sw > 0 && sw < c.ctx)
    c.sliding_window = sw; // every layer (llama.cpp's n_swa for these families)
  // llama.cpp's converters undo HF's q/k permutation for llama; qwen2 stays rotate_half
  c.rope.layout =
      c.family == "llama" || c.family == "mistral" ? rope_layout::interleaved : rope_layout::neox;
  c.tie_embeddings = !g.g.tensors.contains(c.names.output);
  c.qkv_bias = c.qkv_bias || g.g.tensors.contains(weight_names::layer(c.names.bq, 0));
  return {};
}

status build_llama(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  const weight_names& w = c.names;
  decoder_names n;
  n.tok_embd = w.tok_embd;
  n.out_norm = w.output_norm;
  n.lm_head = c.tie_embeddings ? "" : w.output;
  n.attn_norm = w.attn_norm;
  n.ffn_norm = w.ffn_norm;
  n.wq = w.wq, n.wk = w.wk, n.wv = w.wv, n.wo = w.wo;
  if (c.qkv_bias) n.bq = w.bq, n.bk = w.bk, n.bv = w.bv;
  if (c.o_bias) n.bo = w.bo;
  n.w_gate = c.gated_ffn ? w.w_gate : "";
  n.w_up = w.w_up;
  n.w_down = w.w_down;
  if (c.mlp_bias) {
    auto bias = [](std::string s) { return s.replace(s.size() - 6, 6, "bias"); };
    if (c.gated_ffn) n.b_gate = bias(w.w_gate);
    n.b_up = bias(w.w_up);
    n.b_down = bias(w.w_down);
  }
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
