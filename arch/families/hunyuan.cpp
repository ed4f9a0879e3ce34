// hunyuan.cpp (arch/families): Hunyuan dense (HunYuanDenseV1ForCausalLM: Hunyuan-0.5B / 1.8B /
// 4B / 7B). Llama's pre-norm decoder with an RMS norm of every q and k head *after* RoPE
// (query_layernorm / key_layernorm, weights [D]: with weights the norm does not commute with the
// rotation, so the attention applies it to the rotated heads), and RoPE stretched by NTK's alpha
// (rope type dynamic with `alpha`: the base times alpha^(D / (D - 2)), whatever the sequence's
// length). The published config.json carries its remote code's switches too; those that would
// make another model (cross-layer attention, no q/k norms, experts) refuse by name.
// Hunyuan MoE (HunYuanMoEV1ForCausalLM: Hunyuan-A13B) is the same attention over a mixture of
// experts on every layer: softmax top-k (moe_topk) renormalised, experts as wide as
// intermediate_size, and an always-on shared MLP of that width (mlp.shared_mlp), the router
// mlp.gate.wg.
// GGUF: llama.cpp's hunyuan-dense / hunyuan-moe (the base already stretched by the converter).
// Tests: tests/exec/forward_test.cpp (SyntheticArch / GgufArch hunyuan_dense, hunyuan_moe),
// pipeline_test.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

int64_t j_layers(hf_cfg& j) {
  auto n = j.i("num_hidden_layers", 0);
  return n ? *n : 0;
}

// One value for every layer: an integer, or a list of equal ones (HunYuanMoEV1Gate reads
// moe_topk per layer; transformers' experts are all alike)
expected<int64_t> same_per_layer(hf_cfg& j, const char* key, int64_t fallback) {
  const json& v = j.raw(key);
  if (v.is_null()) return fallback;
  if (v.is_number_integer() && v.get<int64_t>() > 0) return v.get<int64_t>();
  if (v.is_array() && static_cast<int64_t>(v.size()) == j_layers(j) && v[0].is_number_integer() &&
      v[0].get<int64_t>() > 0) {
    for (const auto& x : v)
      if (x != v[0]) return j.unsupported(fmt::format("'{}' that differs by layer", key));
    return v[0].get<int64_t>();
  }
  return j.bad(fmt::format("'{}' must be a positive integer or a list of one per layer", key));
}

// HunYuanMoEV1Moe: experts and the shared MLP as wide as intermediate_size
status read_hunyuan_experts(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(e, same_per_layer(j, "num_experts", 1));
  TROUPE_TRY_ASSIGN(k, same_per_layer(j, "moe_topk", 1));
  if (e < 2 || k > e) return j.bad(fmt::format("{} of {} experts per token", k, e));
  c.n_expert = e, c.n_expert_used = k;
  c.F_expert = c.F_shared = c.F;
  // the published config's own widths and counts: what transformers builds, or refused
  TROUPE_TRY_ASSIGN(fe, same_per_layer(j, "moe_intermediate_size", c.F));
  if (fe != c.F)
    return j.unsupported(fmt::format(
        "'moe_intermediate_size' {} (transformers' experts are intermediate_size {} wide)", fe,
        c.F));
  TROUPE_TRY_ASSIGN(shared, same_per_layer(j, "num_shared_expert", 1));
  if (shared != 1)
    return j.unsupported(fmt::format("'num_shared_expert' {} (one shared MLP is built)", shared));
  c.norm_topk = true;
  c.shared_gate = false;
  return {};
}

} // namespace

status read_hunyuan_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  // NTK alpha (checked by read_rope_scaling): the base times alpha^(D / (D - 2))
  for (const char* k : {"rope_parameters", "rope_scaling"}) {
    const json& rp = j.raw(k);
    if (!rp.is_object() || !rp.contains("alpha") || !rp["alpha"].is_number()) continue;
    if (c.D <= 2) return j.bad("NTK alpha needs a head_dim above 2");
    const double d = static_cast<double>(c.D);
    c.rope.theta *= std::pow(rp["alpha"].get<double>(), d / (d - 2));
    break;
  }
  c.qk_norm = qk_norm_kind::head;
  c.qk_norm_after_rope = true;
  // the remote code's switches, as published for these models; another value is another model
  if (j.b("use_cla", false)) return j.unsupported("'use_cla' (cross-layer attention)");
  if (!j.b("use_qk_norm", true)) return j.unsupported("'use_qk_norm' false");
  if (c.family == "hunyuan_moe") {
    TROUPE_TRY(read_hunyuan_experts(j, c));
  } else if (j.present("num_experts")) {
    TROUPE_TRY_ASSIGN(e, j.i("num_experts", 1));
    if (e > 1) return j.unsupported(fmt::format("'num_experts' {} (Hunyuan's MoE)", e));
  }
  for (const char* k :
       {"use_rotary_pos_emb", "attention_head_dim", "cla_share_factor", "org_vocab_size",
        "eod_token_id", "moe_topk", "moe_intermediate_size", "num_shared_expert",
        "use_mixed_mlp_moe", "moe_drop_tokens", "moe_random_routing_dropped_token",
        "capacity_factor", "add_classification_head", "class_num", "pool_type", "sep_token_id",
        "pad_id"})
    j.mark(k);
  if (const std::string nt = j.s("norm_type", "rms"); nt != "rms" && nt != "hf_rms")
    return j.unsupported(fmt::format("'norm_type' {} (RMS norms are built)", nt));
  if (!j.b("use_rotary_pos_emb", true)) return j.unsupported("'use_rotary_pos_emb' false");
  return {};
}

// llama.cpp's hunyuan-dense: the same with its keys (q / k as published: NEOX RoPE)
status read_hunyuan_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = rope_layout::neox;
  c.qk_norm = qk_norm_kind::head;
  c.qk_norm_after_rope = true;
  if (c.family == "hunyuan_moe") {
    TROUPE_TRY(read_experts_gguf(g, c));
    if (c.n_expert <= 0) return g.unsupported("hunyuan-moe without experts");
  }
  // the converter folds NTK alpha into freq_base and writes scaling none, factor 1 and a 256K
  // original context beside it, which then change nothing
  if (!g.g.get_string(g.key("rope.scaling.type")) || c.rope.scaling == rope_scaling::none) {
    if (g.f("rope.scaling.factor", 1.0) != 1.0)
      return g.unsupported("rope.scaling.factor other than 1 without a scaling type");
    g.key("rope.scaling.original_context_length");
  }
  return {};
}

status build_hunyuan(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
    const std::string a = "model.layers.{}.self_attn.";
    n.q_norm = a + "query_layernorm.weight", n.k_norm = a + "key_layernorm.weight";
  } else {
    n = gguf_layout(m);
  }
  if (c.n_expert > 0) {
    expert_names(m, n);
    n.shexp_gate_inp.clear();
    if (m.format == "hf") {
      const std::string p = "model.layers.{}.mlp.";
      n.moe_router = p + "gate.wg.weight";
      n.shexp_gate = p + "shared_mlp.gate_proj.weight";
      n.shexp_up = p + "shared_mlp.up_proj.weight";
      n.shexp_down = p + "shared_mlp.down_proj.weight";
    }
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
