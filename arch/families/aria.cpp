// aria.cpp (arch/families): Aria (Rhymes AI; AriaForConditionalGeneration as published, its text
// model AriaTextForCausalLM). Llama's attention over a mixture of experts on every layer: the
// top moe_topk of moe_num_experts by the router's logits, weighted by the softmax over those
// (Mixtral's renormalised top k), SwiGLU experts of intermediate_size, plus shared experts as one
// SwiGLU MLP moe_num_shared_experts times as wide, added. The experts are published packed,
// experts.fc1 [E, C, 2F] (gate columns, then up) and fc2 [E, F, C], and repacked at load into the
// moe op's rows. The vision tower and projector are not read.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_aria_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_llama_hf(j, c));
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  if (j.b("mlp_bias", false))
    return j.unsupported("'mlp_bias' (biases on the shared experts are not implemented)");
  TROUPE_TRY_ASSIGN(E, j.i("moe_num_experts", 8));
  TROUPE_TRY_ASSIGN(k, j.i("moe_topk", 2));
  TROUPE_TRY_ASSIGN(S, j.i("moe_num_shared_experts", 2));
  if (E <= 0 || k <= 0 || k > E) return j.bad(fmt::format("moe_num_experts {}, moe_topk {}", E, k));
  c.n_expert = E, c.n_expert_used = k;
  c.F_expert = c.F, c.F_shared = c.F * S;
  c.norm_topk = true;
  return {};
}

status prepare_aria_hf(const model_config& c, tensor_index& t) {
  TROUPE_TRY(prepare_language_model(c, t));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
    TROUPE_TRY(rename_tensor(t, p + "fc1.weight", p + "gate_up_proj"));
    TROUPE_TRY(rename_tensor(t, p + "fc2.weight", p + "down_proj"));
    TROUPE_TRY(repack_packed_experts(t, p, c.n_expert, c.C, c.F_expert));
  }
  return {};
}

status build_aria(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: Aria is read from HF checkpoints only", m.path);
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string f = "model.layers.{}.mlp.";
  n.moe_router = f + "router.weight";
  n.moe_gate = f + "experts.gate", n.moe_up = f + "experts.up", n.moe_down = f + "experts.down";
  if (c.F_shared > 0) {
    n.shexp_gate = f + "shared_experts.gate_proj.weight";
    n.shexp_up = f + "shared_experts.up_proj.weight";
    n.shexp_down = f + "shared_experts.down_proj.weight";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
