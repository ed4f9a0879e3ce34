// mistral_large4.cpp (arch/families): Mistral Large 4 (MistralLarge4ForConditionalGeneration, its
// language model): GLM-5's sparse latent attention (DeepSeek's MLA, absorbed, over the
// positions a lightning indexer picks; layers that reuse the last full indexer's selection)
// without a q bottleneck, with four additions the decoder's mla() implements: (1) the softmax
// scaling, every query of the attention and of the indexer times scale_h ln(p + 1) + bias_h per
// head (op pos_scale), the indexer's queries from a LayerNorm of the layer's input; (2) LeRoPE,
// YaRN's frequencies times exp(alpha) learned per frequency (rope_spec::learned, from the
// checkpoint's rotary_emb.alpha); (3) layers without RoPE (no_rope_layers 0), whose positional
// dims join a head's nope dims (kv_a makes the latent alone, kv_b the wider nope part); (4)
// layers that attend over an earlier layer's latent cache (kv_source_layers; of the same RoPE
// kind, as transformers requires). Mistral 4's routing (softmax, groups by their two best, always
// renormalised) and packed experts after the dense layers, and the logits soft-capped. HF only:
// llama.cpp has no form of it.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_mistral_large4_hf(hf_cfg& j, model_config& c) {
  c.names.output = "output.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  j.mark("pretraining_tp");
  j.mark("qk_head_dim");         // derived: qk_nope_head_dim + qk_rope_head_dim
  j.mark("num_key_value_heads"); // MLA: every head reads the one latent
  j.mark("head_dim");            // (transformers sets it to qk_rope_head_dim, the rotation's)
  TROUPE_TRY(read_mla_dims(j, c, {0, -1, -1, -1, -1}));
  if (c.q_lora != 0) // (MistralLarge4TextConfig has no q bottleneck)
    return j.unsupported(
        fmt::format("q_lora_rank {} (Mistral Large 4 has no q bottleneck)", c.q_lora));
  const int64_t rope = c.qk_rope;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  c.rope.rot_dim = static_cast<int>(rope);
  c.rope.layout = rope_layout::interleaved; // the attention's and the indexer's
  c.rope_learned = true;                    // (its alpha read by the builder: model_rope)
  c.config_tensors.push_back("lerope.alpha");
  mla_attention_scale(c);
  c.attn_pos_scale = c.dsa_q_from_input = true;
  TROUPE_TRY_ASSIGN(fcap, j.f("final_logit_softcapping", 30.0));
  if (fcap < 0) return j.bad(fmt::format("final_logit_softcapping {}", fcap));
  c.final_softcap = fcap;
  // the indexer: every layer's own or the last full one's (indexer_types)
  TROUPE_TRY_ASSIGN(topk, j.i("index_topk", 2048));
  TROUPE_TRY_ASSIGN(dim, j.i("index_head_dim", 128));
  TROUPE_TRY_ASSIGN(heads, j.i("index_n_heads", 32));
  if (topk <= 0 || topk > (1 << 24) || dim < rope || dim > 4096 || heads <= 0 || heads > 4096)
    return j.bad(fmt::format("index_topk {}, index_head_dim {}, index_n_heads {} (qk_rope_head_dim "
                             "{})",
                             topk, dim, heads, rope));
  c.dsa_topk = topk, c.dsa_dim = dim, c.dsa_heads = heads;
  c.dsa_rope_interleaved = true;
  TROUPE_TRY(read_indexer_types(j, c, {}));
  TROUPE_TRY(read_indexed_layers(j, c));
  // no_rope_layers: 1 where a layer rotates (SmolLM3's convention), else every fourth without
  const size_t L = static_cast<size_t>(c.n_layer);
  c.nope_layers.assign(L, 0);
  if (const json& nr = j.raw("no_rope_layers"); !nr.is_null()) {
    j.mark("no_rope_layer_interval");
    if (!nr.is_array() || nr.size() != L)
      return j.bad(fmt::format("'no_rope_layers' must list {} layers", L));
    for (size_t i = 0; i < L; ++i) {
      if (!nr[i].is_number_integer() || (nr[i] != 0 && nr[i] != 1))
        return j.bad("'no_rope_layers' must hold 0 or 1 per layer");
      c.nope_layers[i] = nr[i] == 0;
    }
  } else {
    TROUPE_TRY_ASSIGN(every, j.i("no_rope_layer_interval", 4));
    if (every <= 0) return j.bad(fmt::format("no_rope_layer_interval {}", every));
    for (size_t i = 0; i < L; ++i) c.nope_layers[i] = (i + 1) % static_cast<size_t>(every) == 0;
  }
  // kv_source_layers: the layer whose latent cache each attends over (an earlier one that owns
  // its cache, of the same RoPE kind)
  if (const json& ks = j.raw("kv_source_layers"); !ks.is_null()) {
    if (!ks.is_array() || ks.size() != L)
      return j.bad(fmt::format("'kv_source_layers' must list {} layers", L));
    c.kv_source.assign(L, 0);
    for (size_t i = 0; i < L; ++i) {
      if (!ks[i].is_number_integer()) return j.bad("'kv_source_layers' must hold layer indices");
      const int64_t s = ks[i].get<int64_t>();
      if (s < 0 || s > static_cast<int64_t>(i) ||
          c.nope_layers[static_cast<size_t>(s)] != c.nope_layers[i])
        return j.bad(fmt::format("layer {} cannot read the latent cache of layer {}", i, s));
      c.kv_source[i] = static_cast<int32_t>(s);
    }
  }
  // Mistral 4's routing (always renormalised), one shared expert, dense layers by
  // mlp_layer_types or first_k_dense_replace
  TROUPE_TRY_ASSIGN(first_dense, j.i("first_k_dense_replace", 1));
  TROUPE_TRY(read_v3_experts(j, c, 1.0, first_dense, 1, 0.0));
  if (j.has("norm_topk_prob") && !j.b("norm_topk_prob", true))
    return j.unsupported("norm_topk_prob false (Mistral Large 4 always renormalises)");
  c.router_sigmoid = c.router_bias = false, c.norm_topk = true;
  return {};
}

// the checkpoint as published (and as transformers saves it): Mistral's own names, which
// transformers renames at load (tok_embeddings, layers.N.attention.wq / wkv_a_with_mqa / wkv_b /
// wo, ssmax_scaling.s / .b, feed_forward and experts' w1 / w2 / w3, lerope.alpha, output)
status build_mistral_large4(const model_source& m, graph::graph& g) {
  decoder_names n;
  const std::string l = "layers.{}.", a = l + "attention.", x = a + "indexer.";
  n.tok_embd = "tok_embeddings.weight", n.out_norm = "norm.weight", n.lm_head = "output.weight";
  if (m.config.tie_embeddings) n.lm_head.clear();
  n.attn_norm = l + "attention_norm.weight", n.ffn_norm = l + "ffn_norm.weight";
  n.mla_q = a + "wq.weight", n.mla_kv_a = a + "wkv_a_with_mqa.weight";
  n.mla_kv_a_norm = a + "kv_a_norm.weight", n.mla_kv_b = a + "wkv_b.weight";
  n.wo = a + "wo.weight";
  n.q_pos_scale = a + "ssmax_scaling.s", n.q_pos_bias = a + "ssmax_scaling.b";
  n.dsa_wq = x + "wq_b.weight", n.dsa_wk = x + "wk.weight";
  n.dsa_k_norm = x + "k_norm.weight", n.dsa_k_norm_b = x + "k_norm.bias";
  n.dsa_w = x + "weights_proj.weight";
  n.dsa_q_norm = x + "q_input_norm.weight", n.dsa_q_norm_b = x + "q_input_norm.bias";
  n.dsa_pos_scale = x + "ssmax_scaling.s", n.dsa_pos_bias = x + "ssmax_scaling.b";
  n.rope_alpha = "lerope.alpha";
  n.w_gate = l + "feed_forward.w1.weight", n.w_up = l + "feed_forward.w3.weight";
  n.w_down = l + "feed_forward.w2.weight";
  n.moe_router = l + "gate.weight";
  n.moe_gate = l + "experts.{e}.w1.weight", n.moe_up = l + "experts.{e}.w3.weight";
  n.moe_down = l + "experts.{e}.w2.weight";
  n.shexp_gate = l + "shared_experts.w1.weight", n.shexp_up = l + "shared_experts.w3.weight";
  n.shexp_down = l + "shared_experts.w2.weight";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
