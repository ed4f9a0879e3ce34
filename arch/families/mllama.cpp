// mllama.cpp (arch/families): Llama 3.2 Vision (MllamaForConditionalGeneration as published,
// MllamaForCausalLM), its text path. The language model is Llama 3 with cross-attention layers
// (cross_attention_layers) that attend over an image's states; on text, with no image,
// transformers skips them, so Troupe's model is the self-attention layers alone, renumbered:
// prepare_mllama_hf reads layer o as text layer l (text.layers.{l}.*), the cross-attention
// layers' tensors as dropped (the image path), and the embedding as its first vocab_size rows
// (8 more hold the image tokens). The vision model stays unread.
#include "arch/families/decoder.hpp"

#include <set>
#include <string>
#include <vector>

namespace troupe::arch {

status read_mllama_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_llama_hf(j, c));
  j.mark("dropout");                                        // (training's)
  std::set<int64_t> cross = {3, 8, 13, 18, 23, 28, 33, 38}; // MllamaTextConfig's default
  if (const json& cl = j.raw("cross_attention_layers"); !cl.is_null()) {
    if (!cl.is_array()) return j.bad("'cross_attention_layers' must be a list");
    cross.clear();
    for (const json& l : cl) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0)
        return j.bad("'cross_attention_layers' must list layer indices");
      cross.insert(l.get<int64_t>());
    }
  }
  // (transformers builds a cross-attention layer where an index names one of its layers)
  const auto n =
      std::count_if(cross.begin(), cross.end(), [&](int64_t l) { return l < c.n_layer; });
  if (n >= c.n_layer)
    return j.unsupported("cross_attention_layers leaving no self-attention layer");
  c.n_layer -= n;
  return {};
}

status prepare_mllama_hf(const model_config& c, tensor_index& t) {
  TROUPE_TRY(prepare_language_model(c, t));
  // each stored layer's text layer (-1: a cross-attention layer)
  std::vector<int64_t> text_layer;
  int64_t l = 0;
  for (int64_t o = 0; t.find(fmt::format("model.layers.{}.input_layernorm.weight", o)); ++o) {
    const bool cross = t.find(fmt::format("model.layers.{}.cross_attn.q_proj.weight", o));
    text_layer.push_back(cross ? -1 : l++);
  }
  for (const std::string& name : t.names()) {
    const auto lt = layer_of_name(name, "model.layers.");
    if (!lt) continue; // (a name of another form: left unread, listed at load)
    const int64_t o = lt->layer;
    if (o >= static_cast<int64_t>(text_layer.size())) continue;
    const std::string rest = "." + lt->rest; // ".self_attn..."
    if (text_layer[static_cast<size_t>(o)] < 0)
      t.mark_consumed(name); // (the image path, which text skips)
    else
      TROUPE_TRY(rename_tensor(
          t, name, fmt::format("text.layers.{}", text_layer[static_cast<size_t>(o)]) + rest));
  }
  if (l != c.n_layer)
    return make_error(errc::corrupt_file,
                      "Mllama: {} self-attention layers in the checkpoint, the config implies {}",
                      l, c.n_layer);
  const tensor_info* e = t.find("model.embed_tokens.weight");
  if (!e || e->dims.rank != 2 || e->dims[0] < c.V || !e->supported)
    return make_error(errc::corrupt_file,
                      "Mllama: model.embed_tokens.weight must hold at least the {} rows of the "
                      "vocabulary",
                      c.V);
  tensor_info text = *e; // its first V rows, the same bytes
  text.name = "text.embed_tokens.weight";
  text.nbytes = e->nbytes / static_cast<uint64_t>(e->dims[0]) * static_cast<uint64_t>(c.V);
  text.dims.dims[0] = c.V;
  TROUPE_TRY(t.add(text));
  t.mark_consumed("model.embed_tokens.weight");
  return {};
}

status build_mllama(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: Mllama is read from HF checkpoints only", m.path);
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
  for (std::string* s :
       {&n.attn_norm, &n.ffn_norm, &n.wq, &n.wk, &n.wv, &n.wo, &n.bq, &n.bk, &n.bv, &n.bo,
        &n.q_norm, &n.k_norm, &n.w_gate, &n.w_up, &n.w_down, &n.b_gate, &n.b_up, &n.b_down})
    if (!s->empty()) s->replace(0, 13, "text.layers."); // model.layers. -> text.layers.
  n.tok_embd = "text.embed_tokens.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
