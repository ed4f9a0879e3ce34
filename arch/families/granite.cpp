// granite.cpp (arch/families): Granite, which is Llama with four scalars: the embeddings
// times embedding_multiplier, each sublayer's output times residual_multiplier before the
// residual add, attention scores times attention_multiplier (instead of 1/sqrt(head_dim)),
// and the logits divided by logits_scaling.
// Granite 4.0 (GraniteMoeHybridForCausalLM): the same multipliers, each layer attention (RoPE
// only where position_embedding_type says "rope", none otherwise, as transformers builds it) or
// Mamba-2's mixer (the -H models: layer_types "mamba", the mamba_* keys), then the FFN: one
// SwiGLU "shared_mlp" of shared_intermediate_size with gate and up in one input_linear, and where
// num_local_experts > 0 (Granite 4.0-H Tiny / Small) GraniteMoE's experts beside it (softmax over
// the top-k logits) with the shared MLP as their shared expert. GraniteMoeShared
// (GraniteMoeSharedForCausalLM) is GraniteMoE with that shared MLP beside its experts. Granite SWA
// and GraniteMoe SWA (GraniteSWAForCausalLM, GraniteMoeSWAForCausalLM): Granite / GraniteMoeShared
// with sliding-window layers, a sink logit per head and a RoPE base per layer. HyperCLOVA X
// (HyperCLOVAXForCausalLM, HyperCLOVAX-SEED-Think): Granite's multipliers, but the logits times
// logits_scaling, the attention multiplier head_dim^-0.5 unless given, and (use_post_norm, the
// default) an RMS norm on each sublayer's output before the residual add (Peri-LN).
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// Granite SWA / GraniteMoe SWA: windows on the layers layer_types names sliding (all but every
// fourth by default), a learned sink logit per head (GPT-OSS's, applied to the output as
// sigmoid(lse - sink)), and a RoPE base per layer (layer_rope_theta; 0: no RoPE), which Troupe
// holds as one base for the full layers and one for the sliding ones
status read_granite_swa(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 128));
  const int64_t window = sw < c.ctx ? sw : 0;
  TROUPE_TRY(read_layer_types(j, c, window, [](int64_t l) { return l % 4 != 0; }));
  c.attn_sinks = true;
  const json& th = j.raw("layer_rope_theta");
  if (th.is_null()) return {}; // the global base on every layer
  if (!th.is_array() || static_cast<int64_t>(th.size()) != c.n_layer)
    return j.bad(fmt::format("'layer_rope_theta' must list {} layers", c.n_layer));
  double full = 0, sliding = 0;
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const json& t = th[static_cast<size_t>(l)];
    if (!t.is_number() || t.get<double>() < 0)
      return j.bad(fmt::format("layer_rope_theta[{}] must be a number >= 0", l));
    const double theta = t.get<double>();
    if (theta == 0) {
      c.nope_layers[static_cast<size_t>(l)] = 1;
      continue;
    }
    double& base = c.layer_window(l) > 0 ? sliding : full;
    if (base != 0 && base != theta)
      return j.unsupported(
          fmt::format("layer_rope_theta with more than one base among the {} layers ({} and {})",
                      c.layer_window(l) > 0 ? "sliding" : "full", base, theta));
    base = theta;
  }
  if (sliding != 0 && window == 0 && full != 0 && sliding != full)
    return j.unsupported("layer_rope_theta: sliding layers with their own base and no window");
  if (full != 0) c.rope.theta = full;
  if (sliding != 0 && window > 0) {
    c.rope_local = c.rope;
    c.rope_local.theta = sliding;
    c.has_rope_local = true;
  } else if (sliding != 0) {
    c.rope.theta = sliding;
  }
  return {};
}

status read_granite4_layers(hf_cfg& j, model_config& c) {
  const json& lt =
      j.raw("layer_types").is_null() ? j.raw("layers_block_type") : j.raw("layer_types");
  j.mark("layers_block_type"), j.mark("layer_types");
  // GraniteMoeHybridConfig's default: every layer Mamba
  c.linear_layers.assign(static_cast<size_t>(c.n_layer), lt.is_null() ? 1 : 0);
  if (!lt.is_null()) {
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer)
      return j.bad(fmt::format("'layer_types' must list {} layer types", c.n_layer));
    for (size_t i = 0; i < lt.size(); ++i)
      if (lt[i] == "mamba" || lt[i] == "linear_attention")
        c.linear_layers[i] = 1;
      else if (lt[i] != "attention" && lt[i] != "full_attention")
        return j.unsupported(fmt::format("layer_types[{}] = {}", i, lt[i].dump()));
  }
  const mamba_keys k{"mamba_n_heads",   "mamba_d_head",    "mamba_d_state",
                     "mamba_n_groups",  "mamba_d_conv",    "mamba_expand",
                     "mamba_conv_bias", "mamba_proj_bias", "mamba_chunk_size"};
  if (std::find(c.linear_layers.begin(), c.linear_layers.end(), 1) != c.linear_layers.end()) {
    TROUPE_TRY(read_mamba_mixer(j, c, k));
  } else {
    for (const char* key : {k.heads, k.head_dim, k.state, k.groups, k.conv, k.expand, k.conv_bias,
                            k.proj_bias, k.chunk, "time_step_limit"})
      j.mark(key); // (no Mamba layer)
    c.linear_layers.clear();
  }
  TROUPE_TRY_ASSIGN(fs, j.i("shared_intermediate_size", 1024));
  TROUPE_TRY_ASSIGN(experts, j.i("num_local_experts", 8));
  if (experts > 0) { // GraniteMoE's experts (intermediate_size wide), the shared MLP beside them
    TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
    c.F_expert = c.F;
    c.norm_topk = true;
    c.F_shared = fs;
  } else {
    j.mark("num_experts_per_tok"), j.mark("router_aux_loss_coef"), j.mark("output_router_logits");
  }
  c.F = fs; // the dense width TP plans with: the shared MLP's
  const json& pe = j.raw("position_embedding_type");
  if (!pe.is_null() && (!pe.is_string() || (pe != "rope" && pe != "nope")))
    return j.unsupported(fmt::format("'position_embedding_type' {}", pe.dump()));
  if (pe != "rope") c.rope_enabled = false; // None or "nope": no rotary embedding
  return {};
}

} // namespace

status read_granite_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  TROUPE_TRY_ASSIGN(em, j.f("embedding_multiplier", 1.0));
  TROUPE_TRY_ASSIGN(rm, j.f("residual_multiplier", 1.0));
  const bool hcx = c.family == "hyperclovax";
  TROUPE_TRY_ASSIGN(am, j.f("attention_multiplier", hcx ? 1 / std::sqrt(double(c.D)) : 1.0));
  TROUPE_TRY_ASSIGN(ls, j.f("logits_scaling", 1.0));
  if (!(am > 0) || ls == 0) return j.bad("'attention_multiplier' and 'logits_scaling' must be > 0");
  c.embed_scale = em == 1 ? 0 : em;
  c.residual_scale = rm;
  c.attn_scale = am;
  c.logit_scale = hcx ? ls : 1.0 / ls; // (HyperCLOVA X multiplies)
  if (hcx && j.b("use_post_norm", true)) c.norms = norm_place::sandwich;
  if (c.family == "granitemoehybrid") TROUPE_TRY(read_granite4_layers(j, c));
  if (c.family == "granite_swa" || c.family == "granitemoe_swa") TROUPE_TRY(read_granite_swa(j, c));
  if (c.family == "granitemoe" || c.family == "granitemoe_swa") { // softmax over the top-k logits
    TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
    c.F_expert = c.F;
    c.norm_topk = true;
    // GraniteMoeShared: a SwiGLU shared_mlp beside the experts (0: none, GraniteMoE's)
    TROUPE_TRY_ASSIGN(fs, j.i("shared_intermediate_size", 0));
    c.F_shared = fs;
  }
  return {};
}

// GGUF: Llama's tensors (q and k permuted for interleaved RoPE) and the four multipliers,
// which llama.cpp's loader requires; the logits are divided by logit_scale.
status read_granite_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope.layout = rope_layout::interleaved;
  TROUPE_TRY_ASSIGN(am, g.g.get_float(g.key("attention.scale")));
  TROUPE_TRY_ASSIGN(em, g.g.get_float(g.key("embedding_scale")));
  TROUPE_TRY_ASSIGN(rm, g.g.get_float(g.key("residual_scale")));
  TROUPE_TRY_ASSIGN(ls, g.g.get_float(g.key("logit_scale")));
  if (!(am > 0) || ls == 0)
    return g.unsupported("granite.attention.scale and granite.logit_scale must be > 0");
  c.embed_scale = em == 1 ? 0 : em;
  c.residual_scale = rm;
  c.attn_scale = am;
  c.logit_scale = 1.0 / ls;
  if (c.family == "granitemoe") return read_experts_gguf(g, c);
  if (g.arch == "granitehybrid") { // Granite 4.0-H: Mamba-2 on the layers without KV heads
    c.linear_layers = g.no_kv;
    if (c.linear_layers.empty()) c.linear_layers.assign(static_cast<size_t>(c.n_layer), 0);
    TROUPE_TRY(read_mamba_gguf_mixer(g, c));
    // the converter marks RoPE as "finetuned" where the attention rotates (Bamba, or no Mamba
    // layer), as llama.cpp's granitehybrid reads it
    const gguf_value* ft = g.g.get(g.key("rope.scaling.finetuned"));
    c.rope_enabled = ft && ft->type == gguf_type::boolean && ft->i != 0;
    // GraniteMoE's experts (feed_forward_length wide) where the file has them; the shared MLP's
    // width is the dense FFN's (or the shared expert's)
    TROUPE_TRY(read_experts_gguf(g, c));
    if (const int64_t fs = g.i("expert_shared_feed_forward_length", 0); fs > 0) c.F = fs;
    return {};
  }
  // Granite 4.0 without Mamba layers (GraniteMoeHybrid, all attention), which the converter
  // writes as granite: the FFN is the shared MLP, whose width it gives as the shared expert's
  // (feed_forward_length holding the unused experts'), and the Mamba keys describe no layer
  if (const int64_t fs = g.i("expert_shared_feed_forward_length", 0); fs > 0) c.F = fs;
  bool ssm_layers = false;
  for (int64_t l = 0; l < c.n_layer; ++l)
    ssm_layers = ssm_layers || g.has_tensor(fmt::format("blk.{}.ssm_in.weight", l));
  if (!ssm_layers)
    for (const char* k : {"ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.inner_size",
                          "ssm.time_step_rank"})
      g.key(k);
  return {};
}

status build_granite(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n =
      m.format == "hf" ? hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias) : gguf_layout(m);
  if (c.n_expert > 0 && m.format == "hf") { // GraniteMoE: gate and up rows packed per expert
    const std::string p = "model.layers.{}.block_sparse_moe.";
    const bool v5 = c.family == "granitemoe_swa"; // (transformers 5's own names: no older form)
    n.moe_router = p + (v5 ? "router.weight" : "router.layer.weight");
    n.moe_gate_up = p + (v5 ? "experts.gate_up_proj" : "input_linear.weight");
    n.moe_down = p + (v5 ? "experts.down_proj" : "output_linear.weight");
    if (c.family != "granitemoehybrid" && c.F_shared > 0) { // GraniteMoeShared's (gate, then up)
      n.shexp_gate_up = "model.layers.{}.shared_mlp.input_linear.weight";
      n.shexp_down = "model.layers.{}.shared_mlp.output_linear.weight";
    }
  } else if (c.n_expert > 0) {
    expert_names(m, n);
  }
  if (c.family == "granitemoehybrid" && m.format == "hf") {
    // the shared MLP (gate rows, then up rows): the FFN, or the experts' shared expert
    const std::string p = "model.layers.{}.shared_mlp.";
    n.w_gate.clear(), n.w_up.clear();
    (c.n_expert > 0 ? n.shexp_gate_up : n.w_gate_up) = p + "input_linear.weight";
    (c.n_expert > 0 ? n.shexp_down : n.w_down) = p + "output_linear.weight";
    mamba_names(m, n, "model.layers.{}.mamba.");
  } else if (c.mamba) {
    mamba_names(m, n, "");
  }
  if (c.attn_sinks) n.attn_sinks = "model.layers.{}.self_attn.sinks";
  if (c.norms == norm_place::sandwich) { // HyperCLOVA X's Peri-LN
    n.post_attn_norm = "model.layers.{}.post_norm1.weight";
    n.post_ffn_norm = "model.layers.{}.post_norm2.weight";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
