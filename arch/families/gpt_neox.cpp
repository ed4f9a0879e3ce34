// gpt_neox.cpp (arch/families): GPT-NeoX and Pythia (GPTNeoXForCausalLM) and StableLM
// (StableLmForCausalLM). GPT-NeoX: LayerNorms with biases, a fused per-head qkv ([H, 3, D]
// rows), partial rotary (rotary_pct, 0.25 by default), a GELU MLP with biases, and by default
// the parallel residual with two norms (x += attn(n1(x)) + mlp(n2(x))). StableLM: Llama with
// LayerNorms, partial rotary, optional q/k/v biases, an optional parallel residual and
// optional per-head q/k LayerNorms (qk_layernorm: a weight per head, no bias; the checkpoint
// stores one tensor per head, stacked into one at load). Persimmon (PersimmonForCausalLM,
// Adept's Persimmon-8B, Fuyu's language model): GPT-NeoX's per-head fused qkv and its sequential
// pre-LayerNorm block with biases everywhere, a LayerNorm over each q and k head (weight and bias
// shared by the heads, before RoPE) where qk_layernorm, RoPE on the first half of each head
// (partial_rotary_factor 0.5) and a relu^2 MLP; the lm_head without a bias.
#include "arch/families/decoder.hpp"

#include <cstring>

#include "core/convert.hpp"

namespace troupe::arch {

status read_neox_hf(hf_cfg& j, model_config& c) {
  c.names.output = c.family == "gpt_neox" ? "embed_out.weight" : "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "layer_norm_eps", 1e-5));
  c.D = c.C / c.H; // the attention's head size ignores head_dim
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.norm = norm_kind::layer;
  if (c.family == "gpt_neox") {
    c.Hkv = c.H;
    c.gated_ffn = false;
    c.mlp_bias = true;
    if (j.b("attention_bias", true)) c.qkv_bias = c.o_bias = true;
    if (j.b("use_parallel_residual", true)) c.residual = residual_kind::parallel_two_norms;
    TROUPE_TRY(read_activation(j.s("hidden_act", "gelu"), c, j.where()));
    // legacy keys (Pythia, NeoX-20B) give the defaults that rope_parameters overrides
    TROUPE_TRY_ASSIGN(base, j.f("rotary_emb_base", 10000.0));
    TROUPE_TRY_ASSIGN(pct, j.f("rotary_pct", 0.25));
    TROUPE_TRY(read_rope(j, c, base, pct));
    return {};
  }
  if (c.family == "persimmon") {
    c.Hkv = c.H;
    c.gated_ffn = false;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    if (j.b("qk_layernorm", true)) {
      c.qk_norm = qk_norm_kind::head;
      c.qk_norm_type = norm_kind::layer;
    }
    j.mark("hidden_dropout");
    TROUPE_TRY(read_activation(j.s("hidden_act", "relu2"), c, j.where()));
    return read_rope(j, c, 10000.0, 0.5);
  }
  c.qkv_bias = j.b("use_qkv_bias", false);
  if (j.b("qk_layernorm", false)) {
    c.qk_norm = qk_norm_kind::head_weights;
    c.qk_norm_type = norm_kind::layer;
  }
  if (j.b("use_parallel_residual", false)) c.residual = residual_kind::parallel;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 0.25));
  return {};
}

// GGUF: GPT-NeoX's per-head qkv is reordered to [q; k; v] blocks by the converter; the
// parallel residual is a key (gptneox.use_parallel_residual). StableLM's parallel residual is
// the absence of ffn_norm (as llama.cpp's loader infers it). GPT-NeoX's MLP is the exact GELU
// of its config's default (llama.cpp runs the tanh approximation).
status read_neox_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer;
  c.rope.layout = rope_layout::neox;
  if (c.family == "gpt_neox") {
    c.gated_ffn = false;
    c.act = act_kind::gelu_erf;
    TROUPE_TRY_ASSIGN(par, g.g.get_bool(g.key("use_parallel_residual")));
    if (par) c.residual = residual_kind::parallel_two_norms;
    return {};
  }
  g.key("use_parallel_residual");                 // llama.cpp ignores it too: the tensors say
  if (g.has_tensor("blk.0.attn_q_norm.weight")) { // stacked per head: [D, H]
    c.qk_norm = qk_norm_kind::head_weights;
    c.qk_norm_type = norm_kind::layer;
  }
  if (!g.has_tensor("blk.0.ffn_norm.weight")) c.residual = residual_kind::parallel;
  return {};
}

// model.layers.L.self_attn.{q,k}_layernorm.norms.H.weight ([D] each) -> one [heads, D] f32
// tensor model.layers.L.self_attn.{q,k}_layernorm.weight, owned by the index
status prepare_neox_hf(const model_config& c, tensor_index& t) {
  if (c.family != "stablelm" || c.qk_norm != qk_norm_kind::head_weights) return {};
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (const auto& [what, heads] : {std::pair{"q", c.H}, std::pair{"k", c.Hkv}}) {
      const std::string base = fmt::format("model.layers.{}.self_attn.{}_layernorm.", l, what);
      std::vector<uint8_t> bytes(static_cast<size_t>(heads * c.D) * sizeof(float));
      auto* out = reinterpret_cast<float*>(bytes.data());
      const mapped_file* from = nullptr;
      for (int64_t h = 0; h < heads; ++h) {
        const std::string name = fmt::format("{}norms.{}.weight", base, h);
        const tensor_info* p = t.find(name);
        if (!p) return make_error(errc::not_found, "qk_layernorm: no tensor {}", name);
        t.mark_consumed(name);
        if (p->dims.rank != 1 || p->dims[0] != c.D || !p->supported ||
            (p->type != dtype::f32 && p->type != dtype::f16 && p->type != dtype::bf16))
          return make_error(errc::shape_mismatch, "{}: {} must be {} f32 / f16 / bf16 values",
                            p->file ? p->file->path() : name, name, c.D);
        to_f32(p->type, p->data, out + h * c.D, c.D);
        from = p->file;
      }
      TROUPE_TRY(add_derived_tensor(t, base + "weight", dtype::f32, shape{heads, c.D}, "F32",
                                    std::move(bytes),
                                    (from ? from->path() : "") + " (stacked " + base + ")"));
    }
  return {};
}

status build_neox(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format != "hf") {
    n = gguf_layout(m);
    if (c.residual == residual_kind::parallel) n.ffn_norm.clear(), n.ffn_norm_b.clear();
  } else if (c.family == "persimmon") {
    const std::string l = "model.layers.{}.", a = l + "self_attn.";
    n.tok_embd = "model.embed_tokens.weight";
    n.attn_norm = l + "input_layernorm.weight", n.attn_norm_b = l + "input_layernorm.bias";
    n.ffn_norm = l + "post_attention_layernorm.weight";
    n.ffn_norm_b = l + "post_attention_layernorm.bias";
    n.wqkv = a + "query_key_value.weight", n.bqkv = a + "query_key_value.bias";
    n.layout = qkv_layout::per_head;
    n.wo = a + "dense.weight", n.bo = a + "dense.bias";
    n.q_norm = a + "q_layernorm.weight", n.q_norm_b = a + "q_layernorm.bias";
    n.k_norm = a + "k_layernorm.weight", n.k_norm_b = a + "k_layernorm.bias";
    n.w_up = l + "mlp.dense_h_to_4h.weight", n.b_up = l + "mlp.dense_h_to_4h.bias";
    n.w_down = l + "mlp.dense_4h_to_h.weight", n.b_down = l + "mlp.dense_4h_to_h.bias";
    n.out_norm = "model.final_layernorm.weight", n.out_norm_b = "model.final_layernorm.bias";
    n.lm_head = "lm_head.weight";
  } else if (c.family == "gpt_neox") {
    const std::string l = "gpt_neox.layers.{}.";
    n.tok_embd = "gpt_neox.embed_in.weight";
    n.attn_norm = l + "input_layernorm.weight", n.attn_norm_b = l + "input_layernorm.bias";
    n.ffn_norm = l + "post_attention_layernorm.weight";
    n.ffn_norm_b = l + "post_attention_layernorm.bias";
    n.wqkv = l + "attention.query_key_value.weight";
    if (c.qkv_bias) n.bqkv = l + "attention.query_key_value.bias";
    n.layout = qkv_layout::per_head;
    n.wo = l + "attention.dense.weight";
    if (c.o_bias) n.bo = l + "attention.dense.bias";
    n.w_up = l + "mlp.dense_h_to_4h.weight", n.b_up = l + "mlp.dense_h_to_4h.bias";
    n.w_down = l + "mlp.dense_4h_to_h.weight", n.b_down = l + "mlp.dense_4h_to_h.bias";
    n.out_norm = "gpt_neox.final_layer_norm.weight";
    n.out_norm_b = "gpt_neox.final_layer_norm.bias";
    n.lm_head = "embed_out.weight";
  } else {
    n = hf_llama_layout(c.qkv_bias, false, false);
    n.attn_norm_b = "model.layers.{}.input_layernorm.bias";
    if (c.residual == residual_kind::parallel) {
      n.ffn_norm.clear(); // no post_attention_layernorm in the parallel block
    } else {
      n.ffn_norm_b = "model.layers.{}.post_attention_layernorm.bias";
    }
    n.out_norm_b = "model.norm.bias";
    n.q_norm = "model.layers.{}.self_attn.q_layernorm.weight";
    n.k_norm = "model.layers.{}.self_attn.k_layernorm.weight";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
