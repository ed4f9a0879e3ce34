// nanochat.cpp (arch/families): NanoChat (NanoChatForCausalLM, karpathy/nanochat): a decoder of
// weightless RMS norms (one on the embeddings before the first layer too), attention with a
// weightless RMS norm over each q and k head (after RoPE there, which a rotation of pairs leaves
// equal to before it) and RoPE by the negated angle, an ungated MLP (fc1, relu^2, fc2) and the
// logits soft-capped (final_logit_softcapping, 15 by default). The negated angle is NanoChat's
// rotate_half, cat(x2, -x1): it equals the usual rotation of each head with its halves swapped,
// so q_proj's and k_proj's rows load with each head's halves swapped (model_config::
// rope_sin_flipped) and the same scores come out of the usual RoPE kernels.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_nanochat_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.norm_weight = false;
  c.embed_norm = true;
  c.qk_norm = qk_norm_kind::head_plain;
  c.rope_sin_flipped = true;
  c.gated_ffn = false;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true; // (Qwen3's attention)
  TROUPE_TRY(read_activation(j.s("hidden_act", "relu2"), c, j.where()));
  TROUPE_TRY_ASSIGN(cap, j.f("final_logit_softcapping", 0.0)); // (null: none)
  if (cap < 0) return j.bad("'final_logit_softcapping' must not be negative");
  c.final_softcap = cap;
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  if (c.rope.rot_dim != c.D || c.rope.layout != rope_layout::neox)
    return j.unsupported("'partial_rotary_factor' other than 1 (NanoChat rotates whole heads)");
  return {};
}

status build_nanochat(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: NanoChat is read from HF checkpoints only", m.path);
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string l = "model.layers.{}.";
  n.attn_norm.clear(), n.ffn_norm.clear(), n.out_norm.clear(); // (weightless)
  n.w_gate.clear();
  n.w_up = l + "mlp.fc1.weight";
  n.w_down = l + "mlp.fc2.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
