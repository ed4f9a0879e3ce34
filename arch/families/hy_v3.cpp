// hy_v3.cpp (arch/families): Tencent Hy3 (HYV3ForCausalLM). Llama's pre-norm decoder with an RMS
// norm of every q and k head before RoPE (Apertus' attention), dense SwiGLU layers where
// mlp_layer_types says "dense" (the first one by default), the others DeepSeek-V3's mixture of
// experts without groups: sigmoid scores, the choice by scores plus the correction bias
// (mlp.expert_bias), the chosen scores renormalised (+ 1e-20) times router_scaling_factor, and a
// shared MLP of num_shared_experts x moe_intermediate_size added to them. Tensor names as
// published (mlp.router.gate, mlp.expert_bias, mlp.shared_mlp, the experts one by one); the
// multi-token-prediction layer past num_hidden_layers is not run (its tensors stay unread).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_hy_v3_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_qk_normed_attention(j, c, 1e-5));
  if (j.b("mlp_bias", false)) return j.unsupported("mlp_bias true");
  TROUPE_TRY(read_rope(j, c, 11158840.0, 1.0));
  j.mark("enable_moe_fp32_combine"); // (the sum's precision in bf16 runs; f32 here anyway)
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  TROUPE_TRY_ASSIGN(shared, j.i("num_shared_experts", 1));
  TROUPE_TRY_ASSIGN(scale, j.f("router_scaling_factor", 2.826));
  c.F_expert = fe;
  c.F_shared = shared * fe;
  c.router_sigmoid = c.router_bias = c.norm_topk = true;
  c.expert_scale = scale;
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
  if (!listed) { // the config class's default: the first layer dense
    c.moe_layers.assign(static_cast<size_t>(c.n_layer), 1);
    if (c.n_layer > 0) c.moe_layers[0] = 0;
  }
  return {};
}

status build_hy_v3(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string p = "model.layers.{}.mlp.";
  n.moe_router = p + "router.gate.weight", n.moe_router_bias = p + "expert_bias";
  hf_expert_names(n, p);
  n.shexp_gate = p + "shared_mlp.gate_proj.weight", n.shexp_up = p + "shared_mlp.up_proj.weight";
  n.shexp_down = p + "shared_mlp.down_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
