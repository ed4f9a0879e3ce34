// kimi.cpp (arch/families): Kimi-Linear (KimiLinearForCausalLM, Kimi-Linear-48B-A3B). Kimi Delta
// Attention layers (the decoder's kda(): the gated delta rule with a decay per head and key
// channel, short convolutions over q, k and v, a sigmoid-gated RMS norm on the output) between
// latent attention layers without any rotary embedding (MLA, NoPE), and DeepSeek-V3's experts
// (sigmoid scores with a correction bias, group-limited top-k, shared experts) after dense
// layers. config.json as published (its remote code's names: num_experts, moe_renormalize,
// num_expert_group, linear_attn_config {kda_layers, full_attn_layers: 1-based}) or as
// transformers 5 writes it (layer_types, mlp_layer_types); the dense layers' MLP under mlp. as
// published or block_sparse_moe. as transformers saves it. GGUF: llama.cpp's kimi-linear.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// a key under either of its names (transformers' attribute_map)
expected<int64_t> either(hf_cfg& j, const char* a, const char* b, int64_t fallback) {
  if (j.has(a)) {
    j.mark(b);
    return j.i(a, fallback);
  }
  return j.i(b, fallback);
}

} // namespace

status read_kda_dims(hf_cfg& j, model_config& c, int64_t heads_default) {
  const json& lac = j.raw("linear_attn_config");
  auto lin = [&](const char* inner, const char* outer, int64_t fallback) -> expected<int64_t> {
    if (lac.is_object() && lac.contains(inner)) {
      j.mark(outer);
      if (!lac[inner].is_number_integer() || lac[inner].get<int64_t>() <= 0)
        return j.bad(fmt::format("linear_attn_config.{} must be a positive integer", inner));
      return lac[inner].get<int64_t>();
    }
    return j.i(outer, fallback);
  };
  TROUPE_TRY_ASSIGN(ld, lin("head_dim", "linear_head_dim", 128));
  TROUPE_TRY_ASSIGN(lh, lin("num_heads", "linear_num_heads", heads_default));
  TROUPE_TRY_ASSIGN(lk, lin("short_conv_kernel_size", "linear_conv_kernel_dim", 4));
  if (ld > 1024 || lh > 1024 || lk < 2 || lk > 64)
    return j.bad(fmt::format("KDA of {} heads of {} with a convolution of {}", lh, ld, lk));
  c.kda = true;
  c.lin_k_heads = c.lin_v_heads = lh;
  c.lin_k_dim = c.lin_v_dim = ld;
  c.lin_conv = lk;
  return {};
}

status read_kimi_linear_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  TROUPE_TRY_ASSIGN(ctx, either(j, "model_max_length", "max_position_embeddings", 1048576));
  c.ctx = ctx;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true (latent attention)");
  for (const char* k : {"pretraining_tp", "qk_head_dim", "num_key_value_heads", "head_dim"})
    j.mark(k); // (derived, or unused by MLA)
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  // latent attention without positions
  TROUPE_TRY_ASSIGN(ql, j.i("q_lora_rank", 0));
  TROUPE_TRY_ASSIGN(kvl, j.i("kv_lora_rank", 512));
  TROUPE_TRY_ASSIGN(nope, j.i("qk_nope_head_dim", 128));
  TROUPE_TRY_ASSIGN(rope, j.i("qk_rope_head_dim", 64));
  TROUPE_TRY_ASSIGN(vh, j.i("v_head_dim", 128));
  c.q_lora = ql, c.kv_lora = kvl, c.qk_nope = nope, c.qk_rope = rope, c.v_head = vh;
  c.Hkv = 1;
  c.D = kvl + rope;
  c.rope_enabled = false;
  c.rope.rot_dim = static_cast<int>(rope);
  for (const char* k : {"rope_theta", "rope_parameters", "rope_scaling"}) j.mark(k);
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(nope + rope));
  // the KDA layers
  TROUPE_TRY(read_kda_dims(j, c, 32));
  const json& lac = j.raw("linear_attn_config");
  const int64_t L = c.n_layer;
  c.linear_layers.assign(static_cast<size_t>(L), 0);
  TROUPE_TRY_ASSIGN(typed, read_layer_kinds(j, "layer_types", L, "linear_attention",
                                            "full_attention", c.linear_layers));
  if (!typed && lac.is_object() && lac.contains("kda_layers") && lac.contains("full_attn_layers")) {
    std::vector<uint8_t> seen(static_cast<size_t>(L), 0);
    for (const char* key : {"kda_layers", "full_attn_layers"})
      for (const auto& v : lac[key]) { // 1-based
        if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > L ||
            seen[static_cast<size_t>(v.get<int64_t>() - 1)]++)
          return j.bad(fmt::format("linear_attn_config.{}: layer {}", key, v.dump()));
        c.linear_layers[static_cast<size_t>(v.get<int64_t>() - 1)] = key[0] == 'k';
      }
    if (std::find(seen.begin(), seen.end(), 0) != seen.end())
      return j.bad("linear_attn_config names no kind for some layer");
  } else if (!typed) { // KimiLinearConfig: full attention on every fourth layer from layer 4
    for (int64_t l = 0; l < L; ++l) c.linear_layers[static_cast<size_t>(l)] = !(l && l % 4 == 0);
  }
  // DeepSeek-V3's experts under the remote code's names
  TROUPE_TRY_ASSIGN(E, either(j, "num_experts", "num_local_experts", 256));
  TROUPE_TRY_ASSIGN(k, either(j, "num_experts_per_token", "num_experts_per_tok", 8));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 1024));
  TROUPE_TRY_ASSIGN(shared, either(j, "num_shared_experts", "n_shared_experts", 1));
  TROUPE_TRY_ASSIGN(ng, either(j, "num_expert_group", "n_group", 1));
  TROUPE_TRY_ASSIGN(tg, j.i("topk_group", 1));
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 2.446));
  c.n_expert = E, c.n_expert_used = k, c.F_expert = fe, c.F_shared = shared * fe;
  c.n_group = ng, c.topk_group = tg;
  c.expert_scale = scale;
  c.norm_topk =
      j.has("moe_renormalize") ? j.b("moe_renormalize", true) : j.b("norm_topk_prob", true);
  j.mark("moe_renormalize"), j.mark("norm_topk_prob");
  c.router_sigmoid = c.router_bias = true;
  for (const char* key : {"output_router_logits", "moe_router_activation_func", "scoring_func"})
    j.mark(key); // (transformers' router is sigmoid whatever these say)
  TROUPE_TRY(read_dense_then_sparse(j, c, 1));
  return {};
}

// llama.cpp's kimi-linear: head_count_kv per layer (1 on the latent attention layers, 0 on the
// KDA ones), the KDA heads as attention.head_count with kda.head_dim and ssm.conv_kernel, the
// latent attention's keys as deepseek2's (no RoPE at all: rope.dimension_count is the positional
// dims, which turn nowhere), the experts as llama.cpp runs them (always renormalised; no group
// count: groups off)
status read_kimi_linear_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  if (g.no_kv.empty() || c.Hkv != 1)
    return g.unsupported("kimi-linear without attention.head_count_kv per layer (1 or 0)");
  c.linear_layers = g.no_kv;
  c.kda = true;
  c.lin_k_heads = c.lin_v_heads = c.H;
  TROUPE_TRY_ASSIGN(kd, g.req("kda.head_dim"));
  TROUPE_TRY_ASSIGN(kc, g.req("ssm.conv_kernel"));
  if (kd <= 0 || kd > 1024 || kc < 2 || kc > 64)
    return g.unsupported(fmt::format("KDA heads of {} with a convolution of {}", kd, kc));
  c.lin_k_dim = c.lin_v_dim = kd, c.lin_conv = kc;
  c.lin_neg_a = true; // ssm_a holds -exp(A_log)
  TROUPE_TRY_ASSIGN(kvl, g.req("attention.kv_lora_rank"));
  TROUPE_TRY_ASSIGN(kl, g.req("attention.key_length"));
  TROUPE_TRY_ASSIGN(kmla, g.req("attention.key_length_mla"));
  TROUPE_TRY_ASSIGN(vmla, g.req("attention.value_length_mla"));
  TROUPE_TRY_ASSIGN(rope, g.req("rope.dimension_count"));
  c.q_lora = g.i("attention.q_lora_rank", 0);
  c.kv_lora = kvl, c.qk_rope = rope, c.qk_nope = kmla - rope, c.v_head = vmla;
  if (c.qk_nope <= 0 || kl != kvl + rope)
    return make_error(errc::corrupt_file,
                      "{}: key_length {} is not kv_lora_rank {} + rope {}, or key_length_mla {} "
                      "leaves no nope part",
                      g.path(), kl, kvl, rope, kmla);
  c.D = kvl + rope;
  c.rope_enabled = false;
  c.rope.rot_dim = static_cast<int>(rope);
  (void)g.f("rope.freq_base", 0.0);       // (no rotation anywhere)
  (void)g.i("attention.value_length", 0); // (the config's head_dim; llama.cpp reads the MLA's)
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(kmla));
  TROUPE_TRY(read_routed_experts_gguf(g, c));
  c.norm_topk = true; // (llama.cpp's graph renormalises whatever expert_weights_norm says)
  return {};
}

void kda_names(decoder_names& n, const std::string& a) {
  n.kda_q = a + "q_proj.weight", n.kda_k = a + "k_proj.weight", n.kda_v = a + "v_proj.weight";
  n.kda_conv_q = a + "q_conv1d.weight", n.kda_conv_k = a + "k_conv1d.weight";
  n.kda_conv_v = a + "v_conv1d.weight";
  n.kda_f_a = a + "f_a_proj.weight", n.kda_f_b = a + "f_b_proj.weight";
  n.kda_g_a = a + "g_a_proj.weight", n.kda_g_b = a + "g_b_proj.weight";
  n.lin_dt_bias = a + "dt_bias", n.lin_A_log = a + "A_log", n.lin_b = a + "b_proj.weight";
  n.lin_norm = a + "o_norm.weight", n.lin_out = a + "o_proj.weight";
}

status build_kimi_linear(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") { // llama.cpp's names
    decoder_names n = gguf_layout(m);
    const std::string b = "blk.{}.";
    n.wq.clear(), n.wk.clear(), n.wv.clear();
    n.kda_q = b + "attn_q.weight", n.kda_k = b + "attn_k.weight", n.kda_v = b + "attn_v.weight";
    n.kda_conv_q = b + "ssm_conv1d_q.weight", n.kda_conv_k = b + "ssm_conv1d_k.weight";
    n.kda_conv_v = b + "ssm_conv1d_v.weight";
    n.kda_f_a = b + "ssm_f_a.weight", n.kda_f_b = b + "ssm_f_b.weight";
    n.kda_g_a = b + "ssm_g_a.weight", n.kda_g_b = b + "ssm_g_b.weight";
    n.lin_dt_bias = b + "ssm_dt.bias", n.lin_A_log = b + "ssm_a", n.lin_b = b + "ssm_beta.weight";
    n.lin_norm = b + "ssm_norm.weight", n.lin_out = b + "attn_output.weight";
    gguf_mla_names(n);
    routed_expert_names(m, n);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_mla_layout();
  const std::string a = "model.layers.{}.self_attn.", f = "model.layers.{}.block_sparse_moe.";
  kda_names(n, a);
  // the dense layers' MLP: mlp. as published, block_sparse_moe. as transformers saves it
  bool published = false;
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (!c.layer_moe(l)) {
      published = m.tensors->contains(fmt::format("model.layers.{}.mlp.gate_proj.weight", l));
      break;
    }
  const std::string d = published ? "model.layers.{}.mlp." : f;
  n.w_gate = d + "gate_proj.weight", n.w_up = d + "up_proj.weight";
  n.w_down = d + "down_proj.weight";
  n.moe_router = f + "gate.weight", n.moe_router_bias = f + "gate.e_score_correction_bias";
  n.moe_gate = f + "experts.{e}.w1.weight", n.moe_up = f + "experts.{e}.w3.weight";
  n.moe_down = f + "experts.{e}.w2.weight";
  hf_shared_expert_names(n, f);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
