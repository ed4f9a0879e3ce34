// deci.cpp (arch/families): DeciLM, NVIDIA's Nemotron-NAS models (Llama-3.1-Nemotron-51B,
// Llama-3.3-Nemotron-Super-49B, Llama-3.1-Nemotron-Ultra-253B; DeciLMForCausalLM of model_type
// nemotron-nas, remote code): Llama whose layers a neural architecture search made unlike each
// other. block_configs gives each layer's attention (its KV heads, num_attention_heads /
// n_heads_in_group; no_op: none, nor its input_layernorm; replace_with_linear: one linear [C, C]
// map without a bias, self_attn.linear_attn) and its FFN (its width, int(2 ffn_mult C / 3) rounded
// up to a multiple of 256; no_op; replace_with_linear: mlp.linear_mlp), each under its own pre-norm
// (model_config::nas_blocks). What the search code knows besides (sink and window attention,
// sparsified blocks, other block kinds) is refused by name when a layer sets it. From GGUF (deci,
// as llama.cpp's converter writes the Nemotron-NAS form): per layer a head count (0: no
// attention), a KV head count (0 with heads: the linear map, as attn_output) and an FFN width (0:
// none); q and k permuted for RoPE on neighbouring pairs.
#include <algorithm>
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// the layer's attention or ffn object: refuses the keys Troupe does not run, and any it does not
// know, when set (false, null, 0 or an empty list is not set)
status refuse_unrun(hf_cfg& j, const json& block, const char* part, size_t l) {
  static const char* const known[] = {"no_op",
                                      "replace_with_linear",
                                      "n_heads_in_group",
                                      "ffn_mult",
                                      "sparsify",
                                      "window_length",
                                      "num_sink_tokens",
                                      "unshifted_sink",
                                      "use_prefill_window_in_sink_attention"};
  static const char* const unrun[] = {"sparsify", "window_length", "num_sink_tokens",
                                      "unshifted_sink", "use_prefill_window_in_sink_attention"};
  for (const auto& [k, v] : block.items()) {
    const bool set = !(v.is_null() || v == false || v == 0 || (v.is_array() && v.empty()));
    if (!set) continue;
    bool is_known = false, is_unrun = false;
    for (const char* n : known) is_known |= k == n;
    for (const char* n : unrun) is_unrun |= k == n;
    if (is_unrun || !is_known)
      return j.unsupported(fmt::format("block_configs[{}].{}.{} = {}", l, part, k, v.dump()));
  }
  return {};
}

expected<bool> flag(hf_cfg& j, const json& block, const char* key, const char* part, size_t l) {
  const auto it = block.find(key);
  if (it == block.end() || it->is_null()) return false;
  if (!it->is_boolean())
    return j.bad(fmt::format("block_configs[{}].{}.{} must be true or false", l, part, key));
  return it->get<bool>();
}

} // namespace

status read_deci_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size"));
  TROUPE_TRY_ASSIGN(L, j.req("num_hidden_layers"));
  TROUPE_TRY_ASSIGN(H, j.req("num_attention_heads"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 2048));
  if (L > max_layers)
    return j.bad(fmt::format("'num_hidden_layers' {} (at most {})", L, max_layers));
  if (C % H) return j.bad("'hidden_size' must be a multiple of 'num_attention_heads'");
  // (DeciLM's attention takes hidden_size / heads; the published configs leave the Llama keys
  // block_configs replaces null)
  if (j.has("head_dim")) {
    TROUPE_TRY_ASSIGN(hd, j.i("head_dim", C / H));
    if (hd != C / H)
      return j.unsupported(fmt::format("'head_dim' {} (DeciLM's heads are hidden_size / "
                                       "num_attention_heads = {})",
                                       hd, C / H));
  }
  j.mark("num_key_value_heads"), j.mark("intermediate_size");
  const std::string pe = j.s("position_embedding_type", "rope_default");
  if (pe != "rope_default")
    return j.unsupported(fmt::format("'position_embedding_type' = '{}'", pe));
  const json& bc = j.raw("block_configs");
  if (bc.is_null() && j.has("num_key_value_heads_per_layer"))
    return j.unsupported("DeciLM without block_configs (Deci's DeciLM-7B, model_type deci, with "
                         "num_key_value_heads_per_layer): only the Nemotron-NAS form is read");
  if (!bc.is_array() || static_cast<int64_t>(bc.size()) != L)
    return j.bad(fmt::format("'block_configs' must list the {} layers", L));
  const size_t n = static_cast<size_t>(L);
  c.layer_blocks.assign(n, 0), c.linear_blocks.assign(n, 0);
  c.kv_heads_by_layer.assign(n, H), c.ffn_widths.assign(n, 0);
  int64_t F = 0, Hkv = 0;
  for (size_t l = 0; l < n; ++l) {
    const json& b = bc[l];
    if (!b.is_object()) return j.bad(fmt::format("block_configs[{}] must be an object", l));
    for (const auto& [k, v] : b.items())
      if (k != "attention" && k != "ffn")
        return j.unsupported(fmt::format("block_configs[{}].{}", l, k));
    static const json empty = json::object();
    const json& a = b.contains("attention") ? b["attention"] : empty;
    const json& f = b.contains("ffn") ? b["ffn"] : empty;
    if (!a.is_object() || !f.is_object())
      return j.bad(fmt::format("block_configs[{}]: attention and ffn must be objects", l));
    TROUPE_TRY(refuse_unrun(j, a, "attention", l));
    TROUPE_TRY(refuse_unrun(j, f, "ffn", l));
    TROUPE_TRY_ASSIGN(a_none, flag(j, a, "no_op", "attention", l));
    TROUPE_TRY_ASSIGN(a_linear, flag(j, a, "replace_with_linear", "attention", l));
    TROUPE_TRY_ASSIGN(f_none, flag(j, f, "no_op", "ffn", l));
    TROUPE_TRY_ASSIGN(f_linear, flag(j, f, "replace_with_linear", "ffn", l));
    c.layer_blocks[l] = static_cast<uint8_t>(a_none ? (f_none ? 3 : 2) : (f_none ? 1 : 0));
    c.linear_blocks[l] =
        static_cast<uint8_t>((a_linear && !a_none ? 1 : 0) | (f_linear && !f_none ? 2 : 0));
    if (!a_none && !a_linear) {
      const auto g = a.find("n_heads_in_group");
      if (g == a.end() || !g->is_number_integer() || g->get<int64_t>() <= 0 ||
          H % g->get<int64_t>())
        return j.bad(fmt::format("block_configs[{}].attention.n_heads_in_group must divide the {} "
                                 "heads",
                                 l, H));
      c.kv_heads_by_layer[l] = H / g->get<int64_t>();
      Hkv = std::max(Hkv, c.kv_heads_by_layer[l]);
    }
    if (!f_none && !f_linear) {
      const auto m = f.find("ffn_mult");
      if (m == f.end() || !m->is_number() || !(m->get<double>() > 0) || m->get<double>() > 1e4)
        return j.bad(fmt::format("block_configs[{}].ffn.ffn_mult must be a positive number", l));
      // (as the model's code: ffn_mult rounded to 6 decimals, int(2 ffn_mult C / 3) rounded up
      // to a multiple of 256)
      const double mult = std::round(m->get<double>() * 1e6) / 1e6;
      const auto w = static_cast<int64_t>(2 * mult * static_cast<double>(C) / 3);
      c.ffn_widths[l] = (w + 255) / 256 * 256;
      F = std::max(F, c.ffn_widths[l]);
    }
  }
  for (auto& w : c.ffn_widths) // (a layer without an FFN reads no width)
    if (w == 0) w = std::max<int64_t>(F, 256);
  c.C = C, c.n_layer = L, c.H = H, c.V = V, c.ctx = ctx, c.D = C / H;
  c.Hkv = Hkv > 0 ? Hkv : H, c.F = std::max<int64_t>(F, 256);
  c.nas_blocks = true;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  j.mark("pretraining_tp"); // (another way to split the same matmuls)
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  TROUPE_TRY_ASSIGN(eps, j.f("rms_norm_eps", 1e-6));
  c.norm_eps = eps;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  return read_rope(j, c, 10000.0, 1.0);
}

status read_deci_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  if (L <= 0 || L > max_layers)
    return make_error(errc::corrupt_file, "{}: block_count {} (1 to {})", g.path(), L, max_layers);
  // one count per layer of each (DeciLM-7B's files give one head count and one width)
  auto per_layer = [&](const char* k) -> expected<std::vector<int64_t>> {
    const gguf_value* v = g.g.get(g.key(k));
    if (!v || v->type != gguf_type::array)
      return g.unsupported(fmt::format("a deci file without {} per layer (DeciLM-7B's form)", k));
    if (static_cast<int64_t>(v->arr.size()) != L)
      return make_error(errc::corrupt_file, "{}: {} has {} values for {} blocks", g.path(), k,
                        v->arr.size(), L);
    std::vector<int64_t> out;
    for (const auto& e : v->arr) {
      if (!e.is_integer() || e.i < 0 || e.i > (1 << 22))
        return make_error(errc::corrupt_file, "{}: {} holds {}", g.path(), k, e.i);
      out.push_back(e.i);
    }
    return out;
  };
  TROUPE_TRY_ASSIGN(heads, per_layer("attention.head_count"));
  TROUPE_TRY_ASSIGN(kv, per_layer("attention.head_count_kv"));
  TROUPE_TRY_ASSIGN(ffn, per_layer("feed_forward_length"));
  const int64_t H = *std::max_element(heads.begin(), heads.end());
  if (H <= 0 || C % H)
    return make_error(errc::corrupt_file, "{}: attention.head_count {} for embedding_length {}",
                      g.path(), H, C);
  const size_t n = static_cast<size_t>(L);
  c.layer_blocks.assign(n, 0), c.linear_blocks.assign(n, 0);
  c.kv_heads_by_layer.assign(n, H), c.ffn_widths.assign(n, 0);
  int64_t F = 0, Hkv = 0;
  for (size_t l = 0; l < n; ++l) {
    if (heads[l] != 0 && heads[l] != H)
      return g.unsupported(fmt::format("layer {}: {} heads where others have {}", l, heads[l], H));
    if (heads[l] == 0 && kv[l] != 0)
      return make_error(errc::corrupt_file, "{}: layer {} has KV heads and no heads", g.path(), l);
    const bool attn = heads[l] > 0, ff = ffn[l] > 0;
    c.layer_blocks[l] = static_cast<uint8_t>(attn ? (ff ? 0 : 1) : (ff ? 2 : 3));
    if (attn && kv[l] == 0) c.linear_blocks[l] = 1;
    if (kv[l] > 0) {
      if (H % kv[l])
        return make_error(errc::corrupt_file, "{}: layer {}: {} KV heads for {} heads", g.path(), l,
                          kv[l], H);
      c.kv_heads_by_layer[l] = kv[l], Hkv = std::max(Hkv, kv[l]);
    }
    c.ffn_widths[l] = ffn[l], F = std::max(F, ffn[l]);
  }
  for (auto& w : c.ffn_widths)
    if (w == 0) w = std::max<int64_t>(F, 1);
  c.C = C, c.n_layer = L, c.H = H, c.D = C / H;
  c.Hkv = Hkv > 0 ? Hkv : H, c.F = std::max<int64_t>(F, 1);
  if (g.i("attention.key_length", c.D) != c.D || g.i("attention.value_length", c.D) != c.D)
    return g.unsupported("attention.key_length / value_length other than embedding_length / "
                         "head_count");
  c.nas_blocks = true;
  c.norm_eps = g.f("attention.layer_norm_rms_epsilon", 1e-5);
  c.rope.layout = rope_layout::interleaved; // (the converter permutes q and k for it)
  c.qkv_bias = g.has_tensor("blk.0.attn_q.bias");
  c.o_bias = g.has_tensor("blk.0.attn_output.bias");
  c.mlp_bias = g.has_tensor("blk.0.ffn_up.bias");
  c.tie_embeddings = !g.has_tensor("output.weight");
  return read_gguf_common(g, c);
}

status build_deci(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
    const std::string l = "model.layers.{}.";
    n.attn_linear = l + "self_attn.linear_attn.weight", n.ffn_linear = l + "mlp.linear_mlp.weight";
  } else { // (a linear attention's map is its attn_output; no GGUF form has a linear FFN)
    n = gguf_layout(m);
    n.attn_linear = "blk.{}.attn_output.weight";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
