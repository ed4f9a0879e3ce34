// dbrx.cpp (arch/families): DBRX (DbrxForCausalLM, Databricks' 132B MoE). Every layer a
// LayerNorm without bias, one fused Wqkv clamped to [-clip_qkv, clip_qkv], GQA with RoPE on
// halves, then a LayerNorm and 16 SwiGLU experts of which the router's softmax picks 4, their
// weights divided by their p-norm (p = moe_normalize_expert_weights: 1, the sum, as published).
// The config nests its attention and FFN keys (attn_config, ffn_config), read here with their
// class's defaults; the experts are three matrices [E F, C] per layer (w1 = gate, v1 = up, and
// w2 stored as the model multiplies it, [F, C] per expert: transposed at load). GGUF: llama.cpp's
// dbrx (its converter writes the clamp, eps 1e-5, and transposes w2).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {
constexpr const char* blocks = "transformer.blocks.{}.";

// a nested config (attn_config / ffn_config) after the caller read its keys: what every
// PretrainedConfig carries is bookkeeping, any other key refuses the load by name
status check_sub_config(hf_cfg& sub, model_config& c, const char* name) {
  TROUPE_TRY(read_common(sub, c));
  if (const auto rest = sub.unread(); !rest.empty())
    return sub.unsupported(fmt::format("'{}.{}' is not supported", name, rest.front()));
  return {};
}
} // namespace

status read_dbrx_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size")); // (d_model, n_heads ... by the class's attribute_map)
  TROUPE_TRY_ASSIGN(L, j.req("num_hidden_layers"));
  if (L > max_layers) return j.bad(fmt::format("'n_layers' {} (at most {})", L, max_layers));
  TROUPE_TRY_ASSIGN(H, j.req("num_attention_heads"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 2048));
  if (C % H) return j.bad(fmt::format("d_model {} is not a multiple of n_heads {}", C, H));
  c.C = C, c.n_layer = L, c.H = H, c.V = V, c.ctx = ctx, c.D = C / H;
  c.norm = norm_kind::layer, c.norm_bias = false; // (nn.LayerNorm(d_model, bias=False): eps 1e-5)
  c.norm_eps = 1e-5;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  for (const char* k : {"emb_pdrop", "output_router_logits", "router_aux_loss_coef"}) j.mark(k);

  // attention: kv_n_heads, clip_qkv, and RoPE's base (rope_theta, as published; transformers 5
  // writes rope_parameters at the top, which must then agree)
  hf_cfg a(j.raw("attn_config"), j.where() + " attn_config");
  TROUPE_TRY_ASSIGN(kv, a.i("kv_n_heads", 1));
  TROUPE_TRY_ASSIGN(top_kv, j.i("num_key_value_heads", kv));
  if (kv <= 0 || H % kv || top_kv != kv)
    return j.bad(fmt::format("attn_config.kv_n_heads {} (num_key_value_heads {}) for {} heads", kv,
                             top_kv, H));
  c.Hkv = kv;
  TROUPE_TRY_ASSIGN(clip, a.f("clip_qkv", 0.0));
  if (clip < 0) return j.bad("'attn_config.clip_qkv' must not be negative");
  c.clip_qkv = clip;
  TROUPE_TRY_ASSIGN(theta, a.f("rope_theta", 10000.0));
  const bool nested_theta = a.has("rope_theta");
  a.mark("attn_pdrop");
  TROUPE_TRY(check_sub_config(a, c, "attn_config"));
  TROUPE_TRY(read_rope(j, c, theta, 1.0));
  if (nested_theta && c.rope.theta != theta)
    return j.bad(fmt::format("attn_config.rope_theta {} and rope_parameters' rope_theta {} differ",
                             theta, c.rope.theta));
  c.rope.layout = rope_layout::neox;

  // experts: every layer's FFN
  hf_cfg f(j.raw("ffn_config"), j.where() + " ffn_config");
  TROUPE_TRY_ASSIGN(F, f.i("ffn_hidden_size", 3584));
  TROUPE_TRY_ASSIGN(E, f.i("moe_num_experts", 4));
  TROUPE_TRY_ASSIGN(k, f.i("moe_top_k", 1));
  if (F <= 0 || E <= 0 || k <= 0 || k > E)
    return j.bad(fmt::format("ffn_config: ffn_hidden_size {}, {} experts, top {}", F, E, k));
  TROUPE_TRY_ASSIGN(fh, f.i("hidden_size", C));
  if (fh != C) return j.bad(fmt::format("ffn_config.hidden_size {} is not d_model {}", fh, C));
  c.F = c.F_expert = F;
  c.n_expert = E, c.n_expert_used = k;
  // the weights of the chosen experts over their p-norm: p 1 (their sum) or none at all
  const json& p = f.raw("moe_normalize_expert_weights");
  if (!f.present("moe_normalize_expert_weights") || (p.is_number() && p.get<double>() == 1.0))
    c.norm_topk = true;
  else if (p.is_null())
    c.norm_topk = false;
  else
    return j.unsupported(fmt::format(
        "ffn_config.moe_normalize_expert_weights {} (only 1, the sum, or null)", p.dump()));
  const json& act = f.raw("ffn_act_fn");
  std::string act_name = "silu";
  if (!act.is_null()) {
    if (!act.is_object() || act.size() != 1 || !act.contains("name") || !act["name"].is_string())
      return j.unsupported(fmt::format("ffn_config.ffn_act_fn {}", act.dump()));
    act_name = act["name"].get<std::string>();
  }
  TROUPE_TRY(read_activation(act_name, c, j.where()));
  // (the router's jitter and the balancing loss act in training only)
  for (const char* key : {"moe_jitter_eps", "moe_loss_weight"}) f.mark(key);
  return check_sub_config(f, c, "ffn_config");
}

// llama.cpp's dbrx: attention.clamp_kqv, LayerNorm eps, experts renormalised (as published)
status read_dbrx_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.norm = norm_kind::layer, c.norm_bias = false;
  c.rope.layout = rope_layout::neox;
  TROUPE_TRY(read_expert_counts(g, c));
  if (c.n_expert <= 0) return g.unsupported("dbrx without experts");
  c.F_expert = c.F;
  c.norm_topk = true;
  const double clip = g.f("attention.clamp_kqv", 0.0);
  if (clip < 0) return g.unsupported("attention.clamp_kqv must not be negative");
  c.clip_qkv = clip;
  return {};
}

// HF's w2 holds each expert's down projection as the model multiplies it ([F, C]): as the moe
// op's rows, [E, C, F]
status prepare_dbrx_hf(const model_config& c, tensor_index& t) {
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("transformer.blocks.{}.ffn.experts.mlp.", l);
    TROUPE_TRY_ASSIGN(w2, take_tensor(t, p + "w2", {c.n_expert * c.F_expert, c.C}));
    TROUPE_TRY_ASSIGN(bytes, transpose_experts(*w2, c.n_expert, c.F_expert, c.C, 0, 1, c.C));
    TROUPE_TRY(add_repacked_tensor(t, p + "down", w2->type, shape{c.n_expert, c.C, c.F_expert},
                                   std::move(bytes), w2->file));
  }
  return {};
}

status build_dbrx(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    n.wq.clear(), n.wk.clear(), n.wv.clear();
    n.wqkv = "blk.{}.attn_qkv.weight";
    n.ffn_norm = "blk.{}.attn_output_norm.weight";
    expert_names(m, n, false);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  const std::string b = blocks;
  decoder_names n;
  n.tok_embd = "transformer.wte.weight";
  n.attn_norm = b + "norm_attn_norm.norm_1.weight";
  n.wqkv = b + "norm_attn_norm.attn.Wqkv.weight";
  n.wo = b + "norm_attn_norm.attn.out_proj.weight";
  n.ffn_norm = b + "norm_attn_norm.norm_2.weight";
  n.moe_router = b + "ffn.router.layer.weight";
  n.moe_gate = b + "ffn.experts.mlp.w1"; // [E F, C]: the experts' rows stacked
  n.moe_up = b + "ffn.experts.mlp.v1";
  n.moe_down = b + "ffn.experts.mlp.down"; // (prepare_dbrx_hf's)
  n.out_norm = "transformer.norm_f.weight";
  n.lm_head = c.tie_embeddings ? "" : "lm_head.weight";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
