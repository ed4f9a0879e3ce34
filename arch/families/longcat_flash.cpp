// longcat_flash.cpp (arch/families): Meituan's LongCat-Flash (LongcatFlashForCausalLM). Each
// published layer is two sublayers, each DeepSeek-V3's latent attention (always a q LoRA,
// interleaved RoPE) and a dense SwiGLU MLP under pre-norms, plus one mixture of experts computed
// from the first sublayer's post-attention norm output and added at the end of the second (the
// "shortcut"). Troupe runs each sublayer as a layer of its own (2 num_layers layers, each with
// its KV cache, as transformers indexes them) with the experts' output carried beside the
// stream (model_config::shortcut_moe). The router is a softmax over the real experts and
// zero_expert_num zero-computation experts after them (a choice of one adds its weight times
// the input: model_config::zero_experts), the choice by score + e_score_correction_bias, the
// weights the scores times routed_scaling_factor (not renormalised). The MLA's LoRA scalings:
// q times sqrt(C / q_lora_rank) (folded into the softmax scale), the normed latent times sqrt(C
// / kv_lora_rank) before it is cached. The multi-token-prediction layer (model.mtp) is not run.
#include <cmath>

#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"

namespace troupe::arch {

status read_longcat_flash_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  // num_layers published layers, two sublayers each (num_hidden_layers, where a file gives it
  // instead, counts the sublayers, as the config class's setter reads it)
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size"));
  const bool named = j.has("num_layers");
  int64_t pairs = 28; // (the config class's default, where the file names neither)
  if (named) TROUPE_TRY_SET(pairs, j.req("num_layers"));
  if (j.has("num_hidden_layers")) {
    TROUPE_TRY_ASSIGN(subs, j.req("num_hidden_layers"));
    if (named ? subs != 2 * pairs : subs % 2 != 0)
      return j.bad(fmt::format("num_hidden_layers {} is not twice num_layers {}", subs,
                               named ? pairs : subs / 2));
    pairs = subs / 2;
  }
  if (pairs <= 0 || 2 * pairs > max_layers)
    return j.bad(fmt::format("num_layers {} (at most {})", pairs, max_layers / 2));
  TROUPE_TRY_ASSIGN(F, j.req("ffn_hidden_size"));
  TROUPE_TRY_ASSIGN(H, j.req("num_attention_heads"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 131072));
  TROUPE_TRY_ASSIGN(eps, j.f("rms_norm_eps", 1e-5));
  c.C = C, c.F = F, c.n_layer = 2 * pairs, c.H = H, c.V = V, c.ctx = ctx, c.norm_eps = eps;
  j.mark("head_dim"); // (unused: the MLA's dims below)
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  if (const std::string m = j.s("attention_method", "MLA"); m != "MLA")
    return j.unsupported(fmt::format("attention_method '{}' (MLA is)", m));
  for (const char* k : {"mla_scale_q_lora", "mla_scale_kv_lora"})
    if (!j.b(k, true)) // (transformers scales always)
      return j.unsupported(fmt::format("{} false", k));
  for (const char* k : {"qk_head_dim", "num_key_value_heads", "num_nextn_predict_layers",
                        "router_aux_loss_coef", "output_router_logits"})
    j.mark(k); // (derived, unused by MLA, the MTP layer not run, or training only)
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  if (c.act != act_kind::silu) return j.unsupported("hidden_act other than silu");
  TROUPE_TRY(read_mla_dims(j, c, {1536, 512, 128, 64, 128}));
  if (c.q_lora <= 0) return j.unsupported("q_lora_rank 0 (LongCat's attention always has it)");
  TROUPE_TRY(read_rope(j, c, 10000000.0, 1.0));
  c.rope.rot_dim = static_cast<int>(c.qk_rope);
  c.rope.layout = rope_layout::interleaved;
  mla_attention_scale(c);
  c.attn_scale *= std::sqrt(static_cast<double>(c.C) / static_cast<double>(c.q_lora));
  c.latent_scale = std::sqrt(static_cast<double>(c.C) / static_cast<double>(c.kv_lora));
  // the experts (the config's own key names)
  TROUPE_TRY_ASSIGN(E, j.req("n_routed_experts"));
  TROUPE_TRY_ASSIGN(k, j.i("moe_topk", 12));
  TROUPE_TRY_ASSIGN(fe, j.req("expert_ffn_hidden_size"));
  TROUPE_TRY_ASSIGN(zero, j.i("zero_expert_num", 0));
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 1.0));
  if (zero > 0)
    if (const std::string t = j.s("zero_expert_type", "identity"); t != "identity")
      return j.unsupported(fmt::format("zero_expert_type '{}' (identity is)", t));
  if (j.b("norm_topk_prob", false)) // (transformers never renormalises LongCat's weights)
    return j.unsupported("norm_topk_prob true");
  c.n_expert = E, c.n_expert_used = k, c.F_expert = fe, c.zero_experts = zero;
  c.expert_scale = scale;
  c.router_bias = true; // e_score_correction_bias (softmax scores)
  c.router_linear_bias = j.b("router_bias", false);
  c.shortcut_moe = true;
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0); // (every sublayer's MLP is dense)
  return {};
}

status prepare_longcat_flash_hf(const model_config&, tensor_index& t) {
  // model.layers.{i}.X.{s}.Y (sublayer s of layer i) read as sublayers.{2 i + s}.X.Y; the
  // experts (model.layers.{i}.mlp.Y) as sublayers.{2 i}.moe.Y
  for (const std::string& name : t.names()) {
    const auto lt = layer_of_name(name, "model.layers.");
    if (!lt) continue;
    const int64_t i = lt->layer;
    const std::string& rest = lt->rest;
    std::string to;
    for (const char* part :
         {"input_layernorm.", "post_attention_layernorm.", "self_attn.", "mlps."}) {
      const std::string p = part;
      if (!rest.starts_with(p) || rest.size() < p.size() + 2) continue;
      const char s = rest[p.size()];
      if ((s != '0' && s != '1') || rest[p.size() + 1] != '.') continue;
      to = fmt::format("sublayers.{}.{}{}", 2 * i + (s - '0'), p == "mlps." ? "mlp." : p,
                       rest.substr(p.size() + 2));
    }
    if (to.empty() && rest.starts_with("mlp."))
      to = fmt::format("sublayers.{}.moe.{}", 2 * i, rest.substr(4));
    if (!to.empty()) TROUPE_TRY(rename_tensor(t, name, std::move(to)));
  }
  return {};
}

status build_longcat_flash(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  const std::string a = "sublayers.{}.self_attn.", f = "sublayers.{}.mlp.", e = "sublayers.{}.moe.";
  decoder_names n = hf_mla_layout(a);
  n.wo = a + "o_proj.weight";
  n.attn_norm = "sublayers.{}.input_layernorm.weight";
  n.ffn_norm = "sublayers.{}.post_attention_layernorm.weight";
  n.w_gate = f + "gate_proj.weight", n.w_up = f + "up_proj.weight";
  n.w_down = f + "down_proj.weight";
  n.moe_router = e + "router.classifier.weight";
  n.moe_router_b = e + "router.classifier.bias";
  n.moe_router_bias = e + "router.e_score_correction_bias";
  hf_expert_names(n, e);
  if (m.tensors->contains("sublayers.0.moe.experts.gate_up_proj")) { // packed (transformers 5)
    n.moe_gate.clear(), n.moe_up.clear();
    n.moe_gate_up = e + "experts.gate_up_proj", n.moe_down = e + "experts.down_proj";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
