// deepseek.cpp (arch/families): DeepSeek-V3 (and Kimi K2 and Moonlight, which publish the same
// DeepseekV3ForCausalLM) and DeepSeek-V2 (V2, V2-Lite, V2.5: softmax scores, top-k by
// topk_method greedy or group_limited_greedy, no renormalisation): latent attention (MLA: an
// optional q bottleneck, one latent of kv_lora values plus qk_rope shared positional values per
// token, which is what the KV cache holds; the decoder's mla() builds it absorbed), and mixtures of
// experts with sigmoid scores, a correction bias for the choice, group-limited top-k (n_group,
// topk_group), norm_topk_prob, routed_scaling_factor and shared experts, after
// first_k_dense_replace dense layers. GGUF: llama.cpp's deepseek2 (kv_b split into attn_k_b /
// attn_v_b), YaRN with its yarn_log_multiplier (0.1 mscale_all_dim). dots.llm1 is Qwen3's
// attention over these experts (HF and llama.cpp's dots1). GLM-4.7-Flash (Glm4MoeLiteForCausalLM)
// is DeepSeek-V3 whose dense layers mlp_layer_types names (default: the first), its
// multi-token-prediction layer past the trunk unread. Mistral Small 4 (mistral4) is V2's
// attention with an attention temperature and softmax routing over groups by their two best,
// its experts packed per layer (HF gate_up_proj, GGUF ffn_gate_up_exps).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "arch/families/decoder.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

status read_deepseek_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  j.mark("pretraining_tp");
  j.mark("num_nextn_predict_layers"); // multi-token prediction heads: not used to generate
  j.mark("qk_head_dim");              // derived: qk_nope_head_dim + qk_rope_head_dim
  if (c.family == "sarvam_mla") j.mark("q_head_dim"); // (Sarvam's releases: the same)
  j.mark("num_key_value_heads");                      // MLA: every head reads the one latent
  TROUPE_TRY(read_mla_dims(j, c, {0, -1, -1, -1, -1}));
  if ((c.family == "axk1" || c.family == "axk2") && c.q_lora <= 0) // (their attention always has
    return j.unsupported("q_lora_rank null or 0 (A.X's attention always has the q bottleneck)");
  if (c.family == "axk2") { // the gated norms; q_b also makes a gate per value
    TROUPE_TRY_ASSIGN(rank, j.i("gated_norm_rank", 16));
    if (rank <= 0 || rank > 65536) return j.bad(fmt::format("gated_norm_rank {}", rank));
    c.gated_norm_rank = rank;
    c.mla_q_gate = true;
  }
  const int64_t rope = c.qk_rope;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (c.family == "mistral4") {
    // Mistral4Config: head_dim is qk_nope + qk_rope, of which partial_rotary_factor turns qk_rope
    const int64_t latent_row = c.D;
    c.D = c.qk_nope + rope;
    TROUPE_TRY(read_rope(j, c, 10000.0, static_cast<double>(rope) / static_cast<double>(c.D)));
    if (c.rope.rot_dim != rope)
      return j.unsupported(fmt::format("partial_rotary_factor turning {} of {} dims (qk_rope_head_"
                                       "dim {})",
                                       c.rope.rot_dim, c.D, rope));
    TROUPE_TRY_ASSIGN(hd, j.i("head_dim", c.D));
    if (hd != c.D)
      return j.bad(
          fmt::format("head_dim {} is not qk_nope_head_dim + qk_rope_head_dim ({})", hd, c.D));
    c.D = latent_row;
  } else {
    TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  }
  c.rope.rot_dim = static_cast<int>(rope);
  // V3: interleaved pairs unless rope_interleave is false; V2 rotates pairs (complex) always
  c.rope.layout = c.family == "deepseek_v2" || j.b("rope_interleave", true)
                      ? rope_layout::interleaved
                      : rope_layout::neox;
  mla_attention_scale(c);
  const bool glm5 = c.family == "glm_moe_dsa";
  if (c.family == "deepseek_v32" || glm5 || c.family == "axk2") { // DSA on every layer
    TROUPE_TRY_ASSIGN(topk, j.i("index_topk", 2048));
    TROUPE_TRY_ASSIGN(dim, j.i("index_head_dim", 128));
    TROUPE_TRY_ASSIGN(heads, j.i("index_n_heads", glm5 ? 32 : 64));
    if (topk <= 0 || topk > (1 << 24) || dim < rope || dim > 4096 || heads <= 0 || heads > 4096 ||
        c.q_lora <= 0)
      return j.bad(
          fmt::format("index_topk {}, index_head_dim {}, index_n_heads {} (with q_lora_rank "
                      "{} and qk_rope_head_dim {})",
                      topk, dim, heads, c.q_lora, rope));
    c.dsa_topk = topk, c.dsa_dim = dim, c.dsa_heads = heads;
    c.rope.layout = rope_layout::interleaved; // the MLA's (V3.2's indexer's is in halves)
    c.dsa_rope_interleaved = glm5;
    if (glm5) TROUPE_TRY(read_indexer_types(j, c, {}));
    j.mark("rope_interleave");
    TROUPE_TRY(read_indexed_layers(j, c));
    j.mark("head_dim"); // (transformers sets it to qk_rope_head_dim)
  }
  return read_routed_experts_hf(j, c);
}

status read_indexed_layers(hf_cfg& j, const model_config& c) {
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer)
      return j.bad(fmt::format("'layer_types' must list {} layers", c.n_layer));
    for (const auto& t : lt)
      if (t != "indexed_attention")
        return j.unsupported(fmt::format("layer_types {} (indexed_attention is)", t.dump()));
  }
  return {};
}

status read_hyper_connections(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(hc, j.i("hc_mult", 4));
  TROUPE_TRY_ASSIGN(hc_eps, j.f("hc_eps", 1e-6));
  if (hc <= 0 || hc > 64) return j.bad(fmt::format("hc_mult {}", hc));
  c.hc_mult = hc, c.hc_eps = hc_eps;
  if (c.hc_independent) {
    TROUPE_TRY_ASSIGN(mag, j.f("hc_magnitude", 2.0));
    c.hc_magnitude = mag;
  } else {
    TROUPE_TRY_ASSIGN(iters, j.i("hc_sinkhorn_iters", 20));
    if (iters > 1000) return j.bad(fmt::format("hc_sinkhorn_iters {}", iters));
    c.hc_iters = iters;
  }
  return {};
}

status read_mla_dims(hf_cfg& j, model_config& c, const std::array<int64_t, 5>& fallback) {
  const char* keys[5] = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                         "v_head_dim"};
  int64_t v[5];
  for (int i = 0; i < 5; ++i) {
    auto r = fallback[static_cast<size_t>(i)] < 0 ? j.req(keys[i])
                                                  : j.i(keys[i], fallback[static_cast<size_t>(i)]);
    if (!r) return r.error();
    v[i] = *r;
  }
  c.q_lora = v[0], c.kv_lora = v[1], c.qk_nope = v[2], c.qk_rope = v[3], c.v_head = v[4];
  c.Hkv = 1;
  c.D = c.kv_lora + c.qk_rope; // the cached row: latent and positional part
  return {};
}

void mla_attention_scale(model_config& c) {
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.qk_nope + c.qk_rope));
  // YaRN with mscale_all_dim also scales the softmax by mscale(factor, mscale_all_dim)^2
  // (transformers' yarn_apply_mscale; the rotation's own attention factor is the rope's)
  if (c.rope.scaling == rope_scaling::yarn && c.rope.mscale_all_dim != 0 && c.rope.factor > 1) {
    const double m = 0.1 * c.rope.mscale_all_dim * std::log(c.rope.factor) + 1.0;
    c.attn_scale *= m * m;
  }
}

status read_v3_experts(hf_cfg& j, model_config& c, double scale_default, int64_t first_dense,
                       int64_t shared_default, double limit_default) {
  TROUPE_TRY(read_expert_counts(j, c, "n_routed_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  TROUPE_TRY_ASSIGN(shared, j.i("n_shared_experts", shared_default));
  c.F_expert = fe, c.F_shared = shared * fe;
  TROUPE_TRY_ASSIGN(ng, j.i("n_group", 1));
  TROUPE_TRY_ASSIGN(tg, j.i("topk_group", 1));
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", scale_default));
  c.n_group = ng, c.topk_group = tg, c.expert_scale = scale;
  c.norm_topk = j.b("norm_topk_prob", true);
  c.router_sigmoid = c.router_bias = true;
  j.mark("scoring_func"), j.mark("topk_method"); // (transformers' router: sigmoid, the bias)
  TROUPE_TRY_ASSIGN(limit, j.f("swiglu_limit", limit_default));
  c.swiglu_limit = limit, c.swiglu_clamp = limit > 0;
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
  if (!listed)
    for (int64_t l = std::min(first_dense, c.n_layer); l < c.n_layer; ++l)
      c.moe_layers[static_cast<size_t>(l)] = 1;
  return {};
}

// GLM-5's indexer_types: "full" layers run the indexer, "shared" reuse the last full one's
// selection (or index_topk_pattern "FSSF...", or GlmMoeDsaConfig's index_topk_freq /
// index_skip_topk_offset schedule); over `layers` (those with attention: the others skipped)
status read_indexer_types(hf_cfg& j, model_config& c, const std::vector<uint8_t>& layers) {
  std::vector<std::string> types;
  const json& it = j.raw("indexer_types");
  const json& pattern = j.raw("index_topk_pattern");
  TROUPE_TRY_ASSIGN(freq, j.i("index_topk_freq", 1));
  TROUPE_TRY_ASSIGN(offset, j.i("index_skip_topk_offset", 2));
  if (!it.is_null()) {
    if (!it.is_array()) return j.bad("'indexer_types' must be a list");
    for (const auto& t : it) types.push_back(t.is_string() ? t.get<std::string>() : "?");
  } else if (pattern.is_string()) { // "FSSF...": full / shared
    for (char ch : pattern.get<std::string>())
      types.push_back(ch == 'F' ? "full" : ch == 'S' ? "shared" : "?");
  } else if (pattern.is_array()) {
    for (const auto& t : pattern) types.push_back(t.is_string() ? t.get<std::string>() : "?");
  } else { // GlmMoeDsaConfig: full where max(l - offset + 1, 0) % freq == 0
    const int64_t f = std::max<int64_t>(freq, 1);
    for (int64_t l = 0; l < c.n_layer; ++l)
      types.push_back(std::max<int64_t>(l - offset + 1, 0) % f == 0 ? "full" : "shared");
  }
  if (static_cast<int64_t>(types.size()) != c.n_layer)
    return j.bad(fmt::format("indexer types for {} of {} layers", types.size(), c.n_layer));
  int32_t last = -1;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string& t = types[static_cast<size_t>(l)];
    const bool attends = layers.empty() || layers[static_cast<size_t>(l)];
    if (!attends) {
      c.dsa_source.push_back(static_cast<int32_t>(l)); // (no attention: nothing read)
      continue;
    }
    if (t == "full") {
      last = static_cast<int32_t>(l);
    } else if (t != "shared" || last < 0) {
      return j.unsupported(fmt::format("indexer type '{}' on layer {}", t, l));
    }
    c.dsa_source.push_back(last);
  }
  return {};
}

// dots.llm1 (Dots1ForCausalLM): Qwen3's attention (q / k RMSNorm per head) with DeepSeek-V3's
// experts; windows where layer_types names them (transformers' default: none below
// max_window_layers)
status read_dots1_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_qk_normed_attention(j, c, 1e-6));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
  TROUPE_TRY_ASSIGN(mwl, j.i("max_window_layers", 62));
  TROUPE_TRY(read_layer_types(j, c, sw < c.ctx ? sw : 0, [mwl](int64_t l) { return l >= mwl; }));
  return read_routed_experts_hf(j, c);
}

// llama.cpp's dots1: the same from its keys (q / k as published, NEOX RoPE)
status read_dots1_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope.layout = rope_layout::neox;
  c.qk_norm = qk_norm_kind::head;
  return read_routed_experts_gguf(g, c);
}

status build_dots1(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n =
      m.format == "hf" ? hf_llama_layout(c.qkv_bias, c.o_bias, false) : gguf_layout(m);
  routed_expert_names(m, n);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

// DeepSeek's mixture of experts (V2 and V3 routers; V3's is GLM-4.5's too): n_routed_experts of
// moe_intermediate_size, n_shared_experts, routed_scaling_factor, groups, first_k_dense_replace
// dense layers.
status read_routed_experts_hf(hf_cfg& j, model_config& c) {
  const bool exaone = c.family == "exaone_moe"; // ExaoneMoeConfig's names for the same keys
  if (exaone)
    TROUPE_TRY(read_expert_counts(j, c, "num_experts", "n_routed_experts"));
  else
    TROUPE_TRY(read_expert_counts(j, c, "n_routed_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  c.F_expert = fe;
  TROUPE_TRY_ASSIGN(shared,
                    j.i(exaone ? "num_shared_experts" : "n_shared_experts", exaone ? 1 : 0));
  c.F_shared = shared * fe;
  // absent: the config class's default (DeepseekV3Config and ExaoneMoeConfig 2.5,
  // Glm4MoeLiteConfig 1.8, the others 1)
  const double scale_default = c.family == "deepseek_v3" || c.family == "deepseek_v32" ||
                                       c.family == "glm_moe_dsa" || c.family == "sarvam_mla" ||
                                       exaone
                                   ? 2.5
                               : c.family == "glm4_moe_lite" ? 1.8
                                                             : 1.0;
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", scale_default));
  c.expert_scale = scale;
  TROUPE_TRY_ASSIGN(ng, j.i("n_group", 1));
  TROUPE_TRY_ASSIGN(tg, j.i("topk_group", 1));
  c.n_group = ng, c.topk_group = tg;
  j.mark("scoring_func");
  if (c.family == "mistral4") {
    // Mistral4TopkRouter: softmax scores, no correction bias, groups by their two best,
    // renormalised when norm_topk_prob (+ 1e-20), times routed_scaling_factor
    c.norm_topk = j.b("norm_topk_prob", true);
  } else if (c.family != "deepseek_v2") {
    // transformers' DeepseekV3TopkRouter (and Glm4MoeTopkRouter): sigmoid scores, the
    // correction bias, groups by their two best, whatever scoring_func / topk_method say
    c.norm_topk = j.b("norm_topk_prob", true);
    c.router_sigmoid = true;
    c.router_bias = true;
    j.mark("topk_method");
  } else { // DeepseekV2TopkRouter: softmax, no renormalisation (norm_topk_prob unread)
    j.mark("norm_topk_prob");
    if (j.b("mlp_bias", false)) return j.unsupported("mlp_bias true");
    const std::string method = j.s("topk_method", "greedy");
    if (method == "greedy") {
      c.n_group = 0, c.topk_group = 0;
    } else if (method == "group_limited_greedy") {
      c.group_max = true;
    } else {
      return j.unsupported(
          fmt::format("topk_method '{}' (greedy, group_limited_greedy are)", method));
    }
    j.mark("rope_interleave");
  }
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  // Glm4MoeLiteConfig and ExaoneMoeConfig: mlp_layer_types, else the first dense (GLM-4.7-Flash)
  // or first_k_dense_replace of them (K-EXAONE)
  const bool v32 = c.family == "deepseek_v32" || c.family == "glm_moe_dsa";
  // (MiniCPM5-MoE: the list, else first_k_dense_replace, 1 by default)
  const bool listed_first = exaone || v32 || c.family == "minicpm5_moe";
  if (c.family == "glm4_moe_lite" || listed_first) {
    TROUPE_TRY_ASSIGN(
        listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
    if (listed) {
      if (listed_first) j.mark("first_k_dense_replace"); // the list wins
      return {};
    }
    TROUPE_TRY_ASSIGN(dense, listed_first ? j.i("first_k_dense_replace", v32 ? 3 : 1) : int64_t{1});
    for (int64_t l = dense; l < c.n_layer; ++l) c.moe_layers[static_cast<size_t>(l)] = 1;
    return {};
  }
  if (c.family == "axk1" || c.family == "axk2") {
    // A.X K1 and K2: mlp_layer_types, else sparse from first_k_dense_replace (1) on where the
    // layer index is a multiple of moe_layer_freq (1); K1: a norm on the experts' output
    c.post_moe_norm = c.family == "axk1";
    TROUPE_TRY_ASSIGN(
        listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
    if (listed) {
      j.mark("first_k_dense_replace"), j.mark("moe_layer_freq");
      return {};
    }
    TROUPE_TRY_ASSIGN(dense, j.i("first_k_dense_replace", 1));
    TROUPE_TRY_ASSIGN(freq, j.i("moe_layer_freq", 1));
    if (freq <= 0) return j.bad("'moe_layer_freq' must be positive");
    for (int64_t l = dense; l < c.n_layer; ++l)
      c.moe_layers[static_cast<size_t>(l)] = l % freq == 0 ? 1 : 0;
    return {};
  }
  TROUPE_TRY_ASSIGN(dense, j.i("first_k_dense_replace", 0));
  for (int64_t l = dense; l < c.n_layer; ++l) c.moe_layers[static_cast<size_t>(l)] = 1;
  return {};
}

// llama.cpp's deepseek2 (V2, V3 and their kin): MLA as multi-query with one KV head of
// kv_lora + qk_rope (attention.key_length) whose values are the latent (value_length);
// key_length_mla / value_length_mla are the heads' own dims; routing as llama.cpp runs it:
// expert_gating_func (softmax unless said), the correction bias where exp_probs_b is there,
// groups scored by their two best, expert_weights_norm / _scale. YaRN-scaled files
// (rope.scaling.yarn_log_multiplier) are refused by name (read_gguf_common).
status read_deepseek_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  TROUPE_TRY_ASSIGN(F, g.req("feed_forward_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  TROUPE_TRY_ASSIGN(H, g.req("attention.head_count"));
  c.C = C, c.F = F, c.n_layer = L, c.H = H;
  if (g.i("attention.head_count_kv", 1) != 1)
    return g.unsupported("attention.head_count_kv other than 1 (MLA is one latent KV head)");
  c.Hkv = 1;
  c.norm_eps = g.f("attention.layer_norm_rms_epsilon", 1e-6);
  TROUPE_TRY_ASSIGN(kvl, g.req("attention.kv_lora_rank"));
  TROUPE_TRY_ASSIGN(kl, g.req("attention.key_length"));
  TROUPE_TRY_ASSIGN(kmla, g.req("attention.key_length_mla"));
  TROUPE_TRY_ASSIGN(vmla, g.req("attention.value_length_mla"));
  c.D = kl;
  if (g.i("attention.value_length", kvl) != kvl)
    return make_error(errc::corrupt_file, "{}: attention.value_length must be kv_lora_rank",
                      g.path());
  c.q_lora = g.i("attention.q_lora_rank", 0);
  c.kv_lora = kvl;
  c.v_head = vmla;
  TROUPE_TRY(read_gguf_common(g, c));
  c.qk_rope = c.rope.rot_dim;
  c.qk_nope = kmla - c.qk_rope;
  if (c.qk_nope <= 0 || kl != kvl + c.qk_rope)
    return make_error(errc::corrupt_file,
                      "{}: key_length {} is not kv_lora_rank {} + rope {}, or key_length_mla {} "
                      "leaves no nope part",
                      g.path(), kl, kvl, c.qk_rope, kmla);
  c.rope.layout = rope_layout::interleaved;
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(kmla));
  if (c.rope.scaling == rope_scaling::yarn) {
    // llama.cpp's converter writes 0.1 * mscale_all_dim as yarn_log_multiplier, and llama.cpp
    // takes mscale equal to it (as every published DeepSeek config has them): the rotation's
    // factor mscale(s, m) / mscale(s, m) is 1 and the softmax scale gains mscale(s, m)^2, as
    // transformers computes it. Without the key llama.cpp scales both; refused as ambiguous.
    if (!g.has("rope.scaling.yarn_log_multiplier"))
      return g.unsupported("YaRN without rope.scaling.yarn_log_multiplier in a deepseek2 file");
    const double m = g.f("rope.scaling.yarn_log_multiplier", 0.0) / 0.1;
    if (!(m > 0)) return g.unsupported("a deepseek2 yarn_log_multiplier that is not positive");
    c.rope.mscale = c.rope.mscale_all_dim = m;
    if (c.rope.factor > 1) {
      const double s = 0.1 * m * std::log(c.rope.factor) + 1.0;
      c.attn_scale *= s * s;
    }
  } else if (c.rope.scaling != rope_scaling::none) {
    return g.unsupported("rope scaling other than YaRN with latent attention in GGUF");
  }
  c.tie_embeddings = !g.has_tensor("output.weight");
  (void)g.i("vocab_size", 0); // the vocabulary's size, checked against the tokens elsewhere
  // the attention temperature (llama.cpp's deepseek2 loader, which mistral4 shares): queries at
  // position p times 1 + scale ln(1 + floor(p / temperature_length)). llama.cpp's converter
  // writes neither key for Mistral 4 (its file then runs without, as llama.cpp runs it)
  if (const double beta = g.f("attention.temperature_scale", 0.0); beta != 0) {
    const int64_t length = g.i("attention.temperature_length", 0);
    if (length <= 0)
      return g.unsupported("attention.temperature_scale without attention.temperature_length");
    c.attn_temp_scale = beta, c.attn_temp_floor = length, c.attn_temp_offset = 0;
  }
  if (g.arch == "glm-dsa" || g.arch == "deepseek32") { // the sparse attention's indexer
    c.dsa_topk = g.i("attention.indexer.top_k", 0);
    c.dsa_heads = g.i("attention.indexer.head_count", 0);
    c.dsa_dim = g.i("attention.indexer.key_length", 0);
    c.dsa_rope_interleaved = g.arch == "glm-dsa"; // (V3.2's rotates halves)
    if (c.dsa_topk <= 0 || c.dsa_heads <= 0 || c.dsa_dim < c.qk_rope || c.dsa_dim > 4096 ||
        c.q_lora <= 0)
      return g.unsupported(fmt::format(
          "attention.indexer.top_k {} / head_count {} / key_length {} (with qk_rope {}, q_lora {})",
          c.dsa_topk, c.dsa_heads, c.dsa_dim, c.qk_rope, c.q_lora));
    // layers that reuse another's selection: a key whose form no converter Troupe knows writes
    if (g.has("attention.indexer.types"))
      return g.unsupported("attention.indexer.types (layers sharing an indexer's selection)");
    if (g.i("nextn_predict_layers", 0) > 0) TROUPE_TRY(drop_gguf_nextn(g, c));
  }
  return read_routed_experts_gguf(g, c);
}

status read_routed_experts_gguf(const gguf_cfg& g, model_config& c) {
  const int64_t L = c.n_layer;
  TROUPE_TRY(read_expert_counts(g, c));
  if (c.n_expert <= 0) return g.unsupported(g.arch + " without experts");
  TROUPE_TRY_ASSIGN(fe, g.req("expert_feed_forward_length"));
  c.F_expert = fe;
  c.F_shared = g.i("expert_shared_count", 0) * fe;
  // llama.cpp's default: softmax (sigmoid for glm-dsa, whose converter writes no key)
  const int64_t gating =
      g.i("expert_gating_func",
          g.arch == "glm-dsa" || g.arch == "exaone-moe" || g.arch == "afmoe" ? 2 : 1);
  if (gating != 1 && gating != 2)
    return g.unsupported("expert_gating_func other than softmax / sigmoid");
  c.router_sigmoid = gating == 2;
  c.router_bias = g.has_tensor("blk." + std::to_string(L - 1) + ".exp_probs_b.bias");
  if (g.has("expert_weights_norm")) { // a bool in llama.cpp's files
    TROUPE_TRY_ASSIGN(norm, g.g.get_bool(g.key("expert_weights_norm")));
    c.norm_topk = norm;
  }
  const double scale = g.f("expert_weights_scale", 0);
  c.expert_scale = scale == 0 ? 1 : scale;
  c.n_group = g.i("expert_group_count", 0);
  c.topk_group = g.i("expert_group_used_count", 0);
  const int64_t dense = g.i("leading_dense_block_count", 0);
  c.moe_layers.assign(static_cast<size_t>(L), 0);
  for (int64_t l = std::max<int64_t>(dense, 0); l < L; ++l)
    c.moe_layers[static_cast<size_t>(l)] = 1;
  return {};
}

// FP8 as DeepSeek publishes it: W [N, K] in E4M3 and weight_scale_inv [ceil(N / 128),
// ceil(K / 128)] (one f32 scale per 128 x 128 tile, W = e4m3 x scale), repacked into f8_b128
// rows (each 128 values of a row led by its tile's scale) under the weight's own name.
status prepare_deepseek_hf(const model_config& c, tensor_index& t) {
  // A.X K1 as released stores post_mlp_layernorm on its dense layers too, which transformers
  // drops (its MoE block holds the norm): read as dropped
  if (c.post_moe_norm)
    for (int64_t l = 0; l < c.n_layer; ++l)
      if (const std::string n = fmt::format("model.layers.{}.post_mlp_layernorm.weight", l);
          !c.layer_moe(l) && t.find(n))
        t.mark_consumed(n);
  if (!c.fp8_blocks) return {};
  for (const std::string& sname : t.names()) {
    const std::string suffix = "_scale_inv";
    if (sname.size() <= suffix.size() || !sname.ends_with(suffix)) continue;
    const std::string wname = sname.substr(0, sname.size() - suffix.size());
    const tensor_info* w = t.find(wname);
    const tensor_info* s = t.find(sname);
    const std::string where = s->file ? s->file->path() : sname;
    if (!w)
      return make_error(errc::not_found, "{}: '{}' scales no tensor '{}'", where, sname, wname);
    if (w->raw_type != "F8_E4M3" || w->dims.rank != 2)
      return make_error(errc::unsupported, "{}: '{}' must be a 2-D F8_E4M3 matrix (is {} {})",
                        where, wname, w->raw_type, w->dims.to_string());
    const int64_t N = w->dims[0], K = w->dims[1], nr = (N + 127) / 128, kb = K / 128;
    if (K % 128)
      return make_error(errc::unsupported, "{}: '{}' has {} inputs, not whole 128-value blocks",
                        where, wname, K);
    if (!s->supported || is_quantized(s->type) || s->dims.rank != 2 || s->dims[0] != nr ||
        s->dims[1] != kb)
      return make_error(errc::shape_mismatch, "{}: '{}' must be float [{}, {}] (is {} {})", where,
                        sname, nr, kb, s->raw_type, s->dims.to_string());
    if (w->nbytes != static_cast<uint64_t>(N * K))
      return make_error(errc::corrupt_file, "{}: '{}' holds {} bytes for [{}, {}]", where, wname,
                        w->nbytes, N, K);
    std::vector<float> scale(static_cast<size_t>(nr * kb));
    to_f32(s->type, s->data, scale.data(), nr * kb);
    std::vector<uint8_t> bytes(static_cast<size_t>(N * kb * 132));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < kb; ++b) {
        uint8_t* o = bytes.data() + (n * kb + b) * 132;
        std::memcpy(o, &scale[static_cast<size_t>((n / 128) * kb + b)], 4);
        std::memcpy(o + 4, w->data + n * K + b * 128, 128);
      }
    t.mark_consumed(sname); // its scales are in the repacked rows
    TROUPE_TRY(add_derived_tensor(t, wname, dtype::f8_b128, w->dims, "F8_E4M3", std::move(bytes),
                                  where + " (repacked " + wname + ")", true));
  }
  return {};
}

status prepare_mistral4_hf(const model_config& c, tensor_index& t) {
  TROUPE_TRY(prepare_language_model(c, t));
  return prepare_deepseek_hf(c, t);
}

status build_deepseek(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    const std::string b = "blk.{}.";
    n.wq.clear(), n.wk.clear(), n.wv.clear(), n.bq.clear(), n.bk.clear(), n.bv.clear();
    gguf_mla_names(n);
    if (c.dsa_topk > 0) {
      n.dsa_wq = b + "indexer.attn_q_b.weight", n.dsa_wk = b + "indexer.attn_k.weight";
      n.dsa_k_norm = b + "indexer.k_norm.weight", n.dsa_k_norm_b = b + "indexer.k_norm.bias";
      n.dsa_w = b + "indexer.proj.weight";
    }
    routed_expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_mla_layout();
  const std::string a = "model.layers.{}.self_attn.";
  if (c.dsa_topk > 0) {
    n.dsa_wq = a + "indexer.wq_b.weight", n.dsa_wk = a + "indexer.wk.weight";
    n.dsa_k_norm = a + "indexer.k_norm.weight", n.dsa_k_norm_b = a + "indexer.k_norm.bias";
    n.dsa_w = a + "indexer.weights_proj.weight";
  }
  routed_expert_names(m, n);
  if (c.post_moe_norm) n.post_ffn_norm = "model.layers.{}.post_mlp_layernorm.weight"; // (A.X K1)
  if (c.gated_norm_rank > 0) { // (A.X K2's gated norms: the norm, W_down, W_up under each)
    const std::string in = "model.layers.{}.input_layernorm.",
                      post = "model.layers.{}.post_attention_layernorm.";
    n.attn_norm = in + "norm.weight";
    n.attn_norm_gate_down = in + "W_down.weight", n.attn_norm_gate_up = in + "W_up.weight";
    n.ffn_norm_gated = post + "norm.weight";
    n.ffn_norm_gate_down = post + "W_down.weight", n.ffn_norm_gate_up = post + "W_up.weight";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

void hf_expert_names(decoder_names& n, const std::string& prefix) {
  n.moe_gate = prefix + "experts.{e}.gate_proj.weight";
  n.moe_up = prefix + "experts.{e}.up_proj.weight";
  n.moe_down = prefix + "experts.{e}.down_proj.weight";
}

void hf_shared_expert_names(decoder_names& n, const std::string& prefix) {
  n.shexp_gate = prefix + "shared_experts.gate_proj.weight";
  n.shexp_up = prefix + "shared_experts.up_proj.weight";
  n.shexp_down = prefix + "shared_experts.down_proj.weight";
}

void gguf_mla_names(decoder_names& n) {
  const std::string b = "blk.{}.";
  n.mla_q = b + "attn_q.weight", n.mla_q_a = b + "attn_q_a.weight";
  n.mla_q_a_norm = b + "attn_q_a_norm.weight", n.mla_q_b = b + "attn_q_b.weight";
  n.mla_kv_a = b + "attn_kv_a_mqa.weight", n.mla_kv_a_norm = b + "attn_kv_a_norm.weight";
  n.mla_k_b = b + "attn_k_b.weight", n.mla_v_b = b + "attn_v_b.weight";
}

decoder_names hf_mla_layout(const std::string& a) {
  decoder_names n = hf_llama_layout(false, false, false);
  n.wq.clear(), n.wk.clear(), n.wv.clear();
  n.mla_q = a + "q_proj.weight", n.mla_q_a = a + "q_a_proj.weight";
  n.mla_q_a_norm = a + "q_a_layernorm.weight", n.mla_q_b = a + "q_b_proj.weight";
  n.mla_kv_a = a + "kv_a_proj_with_mqa.weight", n.mla_kv_a_norm = a + "kv_a_layernorm.weight";
  n.mla_kv_b = a + "kv_b_proj.weight";
  return n;
}

void routed_expert_names(const model_source& m, decoder_names& n) {
  if (m.format != "hf") { // llama.cpp's merged experts, the bias as exp_probs_b
    expert_names(m, n);
    n.shexp_gate_inp.clear(); // the shared experts are not gated
    n.moe_router_bias = "blk.{}.exp_probs_b.bias";
    return;
  }
  const std::string p = "model.layers.{}.mlp.";
  n.moe_router = p + "gate.weight", n.moe_router_bias = p + "gate.e_score_correction_bias";
  hf_expert_names(n, p);
  hf_shared_expert_names(n, p);
  // experts packed per layer (Mistral 4 as published: gate_up_proj [E, 2F, C], each expert's
  // gate rows then its up rows, and down_proj [E, C, F])
  for (int64_t l = 0; l < m.config.n_layer; ++l)
    if (m.config.layer_moe(l) &&
        m.tensors->contains(fmt::format("model.layers.{}.mlp.experts.gate_up_proj", l))) {
      n.moe_gate_up = p + "experts.gate_up_proj", n.moe_down = p + "experts.down_proj";
      n.moe_gate.clear(), n.moe_up.clear();
      break;
    }
}

} // namespace troupe::arch
