// glm5_next.cpp (arch/families): GLM-5.3-Flash (Glm5NextForConditionalGeneration; its language
// model). Three kinds of block Troupe already had, put together with DeepSeek-V4's residual:
// Kimi Delta Attention layers (the decoder's kda(), the decay bounded below: its "safe gate"),
// latent attention without any positional part (MLA, no rotary dims) over the positions its
// lightning indexer picks - by pools of index_kpool tokens (each pool's key a softmax-gated mix of
// its tokens' keys, as DeepSeek-V4's compressors make them, without norm or rotation), every
// picked pool's tokens and the query's incomplete pool -, GLM-5's shared selections, DeepSeek-V3's
// experts and dense layers with SwiGLU clamped at swiglu_limit, and hyper-connections over hc_mult
// streams (the head takes their mean). config.json as transformers 5 writes it (text_config,
// layer_types, mlp_layer_types, indexer_types, linear_* or linear_attn_config); tensors under
// model.language_model. (the vision tower's stay unread).
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_glm5_next_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5, false)); // (head_dim: the rotary dims, 0)
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  for (const char* k : {"qk_head_dim", "num_key_value_heads", "head_dim", "router_aux_loss_coef",
                        "output_router_logits"})
    j.mark(k); // (derived, unused by MLA, or training only)
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (c.act != act_kind::silu) return j.unsupported("hidden_act other than silu");
  // latent attention without positions, over the indexer's picks
  TROUPE_TRY(read_mla_dims(j, c, {-1, 512, 256, 0, 256}));
  if (c.qk_rope != 0)
    return j.unsupported(fmt::format("qk_rope_head_dim {} (GLM-5.3's MLA has none)", c.qk_rope));
  c.rope_enabled = false;
  for (const char* k : {"rope_theta", "rope_parameters", "rope_scaling"}) j.mark(k);
  mla_attention_scale(c);
  TROUPE_TRY_ASSIGN(topk, j.i("index_topk", 2048));
  TROUPE_TRY_ASSIGN(idim, j.i("index_head_dim", 128));
  TROUPE_TRY_ASSIGN(iheads, j.i("index_n_heads", 32));
  TROUPE_TRY_ASSIGN(pool, j.i("index_kpool", 16));
  if (pool <= 0 || topk <= 0 || topk % pool || topk > (1 << 24) || idim <= 0 || idim > 4096 ||
      iheads <= 0 || iheads > 4096)
    return j.bad(fmt::format("index_topk {}, index_kpool {}, index_head_dim {}, index_n_heads {}",
                             topk, pool, idim, iheads));
  if (!j.b("index_kpool_always_select_tail", true))
    return j.unsupported("index_kpool_always_select_tail false");
  c.dsa_topk = topk, c.dsa_dim = idim, c.dsa_heads = iheads, c.dsa_pool = pool;
  // the KDA layers (transformers 5's keys, or the remote code's linear_attn_config)
  TROUPE_TRY(read_kda_dims(j, c, 64));
  const json& lac = j.raw("linear_attn_config");
  double bound = -5.0; // Glm5NextTextConfig's default (the "safe gate")
  if (lac.is_object() && lac.contains("gate_lower_bound")) {
    j.mark("linear_lower_bound");
    const json& b = lac["gate_lower_bound"];
    if (b.is_null()) {
      if (lac.contains("safe_gate") && lac["safe_gate"] == false)
        return j.unsupported("linear_attn_config without a safe gate (the unbounded decay)");
    } else if (!b.is_number()) {
      return j.bad("linear_attn_config.gate_lower_bound must be a number");
    } else {
      bound = b.get<double>();
    }
  } else if (j.present("linear_lower_bound")) {
    const json& b = j.raw("linear_lower_bound");
    if (b.is_null()) return j.unsupported("linear_lower_bound null (the unbounded decay)");
    TROUPE_TRY_ASSIGN(v, j.f("linear_lower_bound", -5.0));
    bound = v;
  }
  if (!(bound < 0))
    return j.unsupported(fmt::format("linear_lower_bound {} (a negative bound is)", bound));
  c.kda_bound = bound;
  const int64_t L = c.n_layer;
  c.linear_layers.assign(static_cast<size_t>(L), 0);
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != L)
      return j.bad(fmt::format("'layer_types' must list {} layers", L));
    for (int64_t l = 0; l < L; ++l) {
      const json& t = lt[static_cast<size_t>(l)];
      if (t == "linear_attention")
        c.linear_layers[static_cast<size_t>(l)] = 1;
      else if (t != "indexed_attention" && t != "full_attention")
        return j.unsupported(fmt::format("layer_types[{}] {}", l, t.dump()));
    }
  } else { // Glm5NextTextConfig: attention on every fourth layer from layer 3
    for (int64_t l = 0; l < L; ++l) c.linear_layers[static_cast<size_t>(l)] = l % 4 != 3;
  }
  std::vector<uint8_t> attends(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l)
    attends[static_cast<size_t>(l)] = !c.linear_layers[static_cast<size_t>(l)];
  TROUPE_TRY(read_indexer_types(j, c, attends));
  // DeepSeek-V3's experts after dense layers, SwiGLU clamped in both
  TROUPE_TRY(read_v3_experts(j, c, 2.5, 3));
  // the residual streams
  TROUPE_TRY(read_hyper_connections(j, c));
  c.hc_head_mean = true;
  return {};
}

status build_glm5_next(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_mla_layout();
  const std::string L = "model.layers.{}.", a = L + "self_attn.";
  kda_names(n, a);
  n.dsa_wq = a + "indexer.wq_b.weight", n.dsa_wk = a + "indexer.wk.weight";
  n.dsa_k_norm = a + "indexer.k_norm.weight", n.dsa_k_norm_b = a + "indexer.k_norm.bias";
  n.dsa_w = a + "indexer.weights_proj.weight";
  n.dsa_pool_gate = a + "indexer.index_kpool_compress_gate";
  n.dsa_pool_ape = a + "indexer.index_kpool_compress_ape";
  n.hc_attn_fn = L + "hc_attn_fn", n.hc_attn_base = L + "hc_attn_base";
  n.hc_attn_scale = L + "hc_attn_scale";
  n.hc_ffn_fn = L + "hc_ffn_fn", n.hc_ffn_base = L + "hc_ffn_base",
  n.hc_ffn_scale = L + "hc_ffn_scale";
  routed_expert_names(m, n);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
