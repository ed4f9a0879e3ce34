// diffllama.cpp (arch/families): DiffLlama (DiffLlamaForCausalLM: the Differential Transformer
// on Llama). Llama's layers with differential attention (model_config::diff_attn; the decoder's
// diff_attention): the same q and k attend twice, over the first and over the second half of the
// value heads (each repeated over every KV head, as transformers' two-call form does), head h's
// two outputs side by side; heads h < H / 2 minus lambda times heads h + H / 2, RMS-normed over
// their 2 D values without a weight, times 1 - lambda_init. Mistral's MLP (no biases).
// Built by halves of the heads (each half's q, k, v rows, caches and attentions), so that TP
// takes its share of each half and the pairs stay on one rank. HF only (llama.cpp writes no GGUF
// of it).
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_diffllama_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_llama_hf(j, c));
  c.mlp_bias = false;       // (MistralMLP: no biases whatever mlp_bias says)
  j.mark("lambda_std_dev"); // (the lambda vectors' initialisation)
  if (const json& d = j.raw("attention_dropout"); d.is_number() && d.get<double>() > 0)
    return j.unsupported("attention_dropout > 0 (transformers' DiffLlama refuses it too)");
  if (c.H % 2 || c.Hkv % 2)
    return j.unsupported(fmt::format("{} attention heads and {} KV heads: differential attention "
                                     "pairs both in halves",
                                     c.H, c.Hkv));
  if (c.sliding_window > 0 || !c.windowed.empty()) return j.unsupported("sliding windows");
  c.diff_attn = true;
  return {};
}

status build_diffllama(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string a = "model.layers.{}.self_attn.";
  n.lambda_q1 = a + "lambda_q1", n.lambda_k1 = a + "lambda_k1";
  n.lambda_q2 = a + "lambda_q2", n.lambda_k2 = a + "lambda_k2";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
