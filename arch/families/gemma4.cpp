// gemma4.cpp (arch/families): Gemma 4 (text; Gemma4ForCausalLM, and the language model of
// Gemma4ForConditionalGeneration as published). Gemma 3's layer (sandwich norms, GeGLU, q/k
// norms per head, sliding layers with their own RoPE, the embeddings times sqrt(hidden)) with:
// the full-attention layers of their own geometry (global_head_dim, num_global_key_value_heads)
// and proportional RoPE; on them, with attention_k_eq_v, the values are the keys' projection
// (no v_proj); every layer's values RMS-normed per head without a weight; norms that scale by w
// (not 1 + w); attention scores unscaled (the q norm sets their size); each layer's output
// times a scalar of the checkpoint (layer_scalar); logits soft-capped. The MoE model (26B-A4B,
// enable_moe_block) runs on every layer GeGLU experts beside the dense MLP, routed from the
// layer's input (RMS-normed, times a learned scale), each choice times its expert's scale. E2B /
// E4B add per-layer embeddings (hidden_size_per_layer_input) and let their last layers attend
// over an earlier layer's KV cache (num_kv_shared_layers), those with 2F-wide FFNs where
// use_double_wide_mlp.
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// global_head_dim / num_global_key_value_heads as published, or transformers 5's own
// per_layer_config ({layer index: {"head_dim", "num_key_value_heads"}}, every full layer alike)
status read_full_geometry(hf_cfg& j, model_config& c, bool k_eq_v) {
  int64_t D = 0, Hkv = 0;
  if (const json& plc = j.raw("per_layer_config"); !plc.is_null()) {
    if (!plc.is_object()) return j.bad("'per_layer_config' must be an object");
    for (auto& [k, v] : plc.items()) {
      const auto index = parse_index(k);
      if (!index)
        return j.unsupported(fmt::format("per_layer_config for '{}' (a layer index expected)", k));
      int64_t l = *index;
      if (l < 0 || l >= c.n_layer || c.layer_window(l) != 0 || !v.is_object())
        return j.unsupported(fmt::format(
            "per_layer_config for layer {} (only full-attention layers may differ)", k));
      for (auto& [key, val] : v.items()) {
        if (!val.is_number_integer() || val.get<int64_t>() <= 0)
          return j.bad(fmt::format("per_layer_config.{}.{} must be a positive integer", k, key));
        int64_t& to = key == "head_dim" ? D : key == "num_key_value_heads" ? Hkv : l;
        if (&to == &l)
          return j.unsupported(fmt::format("per_layer_config.{}.{} is not supported", k, key));
        if (to != 0 && to != val.get<int64_t>())
          return j.unsupported("per_layer_config: full-attention layers of different shapes");
        to = val.get<int64_t>();
      }
    }
    j.mark("global_head_dim");
    j.mark("num_global_key_value_heads");
  } else {
    TROUPE_TRY_ASSIGN(gd, j.i("global_head_dim", 512));
    TROUPE_TRY_ASSIGN(gk, j.i("num_global_key_value_heads", 0));
    D = gd;
    Hkv = k_eq_v ? gk : 0; // transformers applies it only with attention_k_eq_v
  }
  c.D_full = D > 0 ? D : c.D;
  c.Hkv_full = Hkv > 0 ? Hkv : c.Hkv;
  return {};
}

} // namespace

int64_t share_kv_layers(model_config& c, int64_t shared) {
  const int64_t L = c.n_layer, first = L - shared;
  if (shared <= 0) return -1;
  c.kv_source.resize(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    int64_t src = l;
    if (l >= first) {
      src = -1;
      for (int64_t p = first - 1; p >= 0 && src < 0; --p)
        if (c.layer_window(p) == c.layer_window(l)) src = p;
      if (src < 0) return l;
    }
    c.kv_source[static_cast<size_t>(l)] = static_cast<int32_t>(src);
  }
  return -1;
}

expected<int64_t> read_kv_shared_layers(hf_cfg& j, model_config& c) {
  const int64_t L = c.n_layer;
  TROUPE_TRY_ASSIGN(shared, j.i("num_kv_shared_layers", 0));
  if (shared > L) return j.bad(fmt::format("'num_kv_shared_layers' {} of {} layers", shared, L));
  if (const int64_t l = share_kv_layers(c, shared); l >= 0)
    return j.unsupported(
        fmt::format("'num_kv_shared_layers' {}: layer {} has no earlier layer of its type to share",
                    shared, l));
  return shared;
}

status read_gemma4_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.names.output = "lm_head.weight";
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.embed_scale = std::sqrt(static_cast<double>(c.C));
  c.embed_scale_rounded = true; // a tensor cast to the weights' dtype in transformers
  c.norms = norm_place::sandwich;
  c.qk_norm = qk_norm_kind::head;
  c.v_norm = true;
  c.layer_scalar = true;
  c.attn_scale = 1.0;
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  TROUPE_TRY(read_activation(j.s("hidden_activation", "gelu_pytorch_tanh"), c, j.where()));
  const std::string bidi = j.s("use_bidirectional_attention", "");
  if (bidi == "all")
    return j.unsupported("'use_bidirectional_attention' \"all\" (an encoder, not a causal LM)");
  if (!bidi.empty() && bidi != "vision")
    return j.unsupported(fmt::format("'use_bidirectional_attention' \"{}\"", bidi));
  // ("vision": image tokens see each other both ways; text, all Troupe takes in, is causal)
  TROUPE_TRY_ASSIGN(fcap, j.f("final_logit_softcapping", 0.0));
  c.final_softcap = fcap;
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 512));
  // layer_types: 5 sliding to 1 full by default; the last layer is always full (transformers
  // forces it)
  const int64_t L = c.n_layer;
  TROUPE_TRY(read_layer_types(j, c, sw, [L](int64_t l) { return (l + 1) % 6 != 0 && l != L - 1; }));
  if (!c.windowed.empty() && c.windowed.back()) { // (transformers makes it full, and warns)
    c.windowed.back() = 0;
    c.load_notes.push_back(
        "layer_types: the last layer is full attention (as transformers runs it)");
  }
  const bool k_eq_v = j.b("attention_k_eq_v", false);
  c.kv_shared_kv = k_eq_v;
  TROUPE_TRY(read_full_geometry(j, c, k_eq_v));
  // RoPE by layer type: sliding layers plain at 10^4, full layers proportional (a quarter of
  // their pairs turning) at 10^6, unless the config says otherwise
  json full = {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}};
  json sliding = {{"rope_type", "default"}, {"rope_theta", 1e4}};
  if (const json& rp = j.raw("rope_parameters"); !rp.is_null()) {
    if (!rp.is_object()) return j.bad("'rope_parameters' must be an object");
    for (auto& [k, v] : rp.items()) {
      if (k != "full_attention" && k != "sliding_attention")
        return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
      (k == "full_attention" ? full : sliding) = v;
    }
  }
  model_config geometry = c;
  geometry.D = c.D_full;
  TROUPE_TRY(read_rope_dict(full, geometry, c.rope, 1e6, j.where()));
  TROUPE_TRY(read_rope_dict(sliding, c, c.rope_local, 1e4, j.where()));
  c.has_rope_local = true;
  // E2B / E4B: per-layer embeddings, and the last layers attending over the KV cache of the
  // last earlier layer of their type (with twice the FFN width where use_double_wide_mlp)
  // (Gemma 4 unified, the 12B: no per-layer embeddings and no experts; its config class has no
  // such keys, so transformers ignores any a config.json carries)
  const bool unified = c.family == "gemma4_unified";
  if (unified)
    for (const char* k :
         {"hidden_size_per_layer_input", "vocab_size_per_layer_input", "enable_moe_block",
          "num_experts", "top_k_experts", "moe_intermediate_size"})
      j.mark(k);
  TROUPE_TRY_ASSIGN(ple, unified ? int64_t{0} : j.i("hidden_size_per_layer_input", 256));
  TROUPE_TRY_ASSIGN(ple_vocab, j.i("vocab_size_per_layer_input", c.V));
  if (ple > 0) {
    if (ple_vocab <= 0) return j.bad("'vocab_size_per_layer_input' must be positive");
    c.ple_dim = ple, c.ple_vocab = ple_vocab;
  }
  TROUPE_TRY_ASSIGN(shared, read_kv_shared_layers(j, c));
  const bool wide = j.b("use_double_wide_mlp", false);
  if (shared > 0) c.ffn_wide_shared = wide;
  if (!unified && j.b("enable_moe_block", false)) { // every layer: the experts beside the MLP
    TROUPE_TRY_ASSIGN(E, j.req("num_experts"));
    TROUPE_TRY_ASSIGN(k, j.req("top_k_experts"));
    TROUPE_TRY_ASSIGN(Fe, j.req("moe_intermediate_size"));
    c.n_expert = E, c.n_expert_used = k, c.F_expert = Fe;
    c.norm_topk = true;
    c.moe_beside_mlp = true;
  } else {
    for (const char* k : {"num_experts", "top_k_experts", "moe_intermediate_size"}) j.mark(k);
  }
  return {};
}

// a key written once or per layer (the converter's arrays): the value of every layer
expected<std::vector<int64_t>> gguf_per_layer(const gguf_cfg& g, const char* k, int64_t L) {
  const gguf_value* v = g.g.get(g.key(k));
  if (!v) return make_error(errc::corrupt_file, "{}: {} is missing", g.path(), k);
  if (v->type != gguf_type::array) {
    if (!v->is_integer())
      return make_error(errc::corrupt_file, "{}: {} is not a count", g.path(), k);
    return std::vector<int64_t>(static_cast<size_t>(L), v->i);
  }
  if (static_cast<int64_t>(v->arr.size()) != L)
    return make_error(errc::corrupt_file, "{}: {} has {} values for {} layers", g.path(), k,
                      v->arr.size(), L);
  std::vector<int64_t> out;
  for (const auto& e : v->arr) {
    if (!e.is_integer() || e.i <= 0)
      return make_error(errc::corrupt_file, "{}: {} holds a value that is not a count", g.path(),
                        k);
    out.push_back(e.i);
  }
  return out;
}

// llama.cpp's converter (gemma4): the full layers' head dim as key_length, the sliding ones' as
// key_length_swa; KV heads and FFN widths per layer; the full layers' proportional RoPE as
// rope_freqs (1 for the pairs that turn, 1e30 for the others); attention_k_eq_v as full layers
// without attn_v; the shared KV layers as a count, llama.cpp pairing each with the last layer
// (full) or the one before it (sliding) before them.
status read_gemma4_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  TROUPE_TRY_ASSIGN(H, g.req("attention.head_count"));
  if (L <= 0 || L > 4096) return make_error(errc::corrupt_file, "{}: block_count {}", g.path(), L);
  c.C = C, c.n_layer = L, c.H = H;
  TROUPE_TRY(read_gguf_windows(g, c, 0, 5));
  c.D_full = g.i("attention.key_length", 512);
  c.D = g.i("attention.key_length_swa", c.D_full);
  if (g.i("attention.value_length", c.D_full) != c.D_full ||
      g.i("attention.value_length_swa", c.D) != c.D)
    return g.unsupported("value lengths other than the key lengths");
  TROUPE_TRY_ASSIGN(kv, gguf_per_layer(g, "attention.head_count_kv", L));
  TROUPE_TRY_ASSIGN(ff, gguf_per_layer(g, "feed_forward_length", L));
  c.Hkv = 0, c.Hkv_full = 0;
  for (int64_t l = 0; l < L; ++l) {
    int64_t& to = c.layer_window(l) ? c.Hkv : c.Hkv_full;
    if (to != 0 && to != kv[static_cast<size_t>(l)])
      return g.unsupported("attention.head_count_kv that differs between layers of one kind");
    to = kv[static_cast<size_t>(l)];
  }
  if (c.Hkv == 0) c.Hkv = c.Hkv_full;
  if (c.Hkv_full == 0) c.Hkv_full = c.Hkv;
  c.norm_eps = g.f("attention.layer_norm_rms_epsilon", 1e-6);
  c.tie_embeddings = !g.has_tensor("output.weight");
  // the full layers' RoPE (read_gguf_common reads rope_freqs over their pairs)
  const int64_t D = c.D;
  c.D = c.D_full;
  TROUPE_TRY(read_gguf_common(g, c));
  c.D = D;
  c.rope.layout = rope_layout::neox;
  if (c.rope.scaling == rope_scaling::factors) { // 1 then 1e30 (a pair that never turns)
    const auto& f = c.rope.short_factor;
    size_t turn = 0;
    while (turn < f.size() && f[turn] == 1.0) ++turn;
    for (size_t i = turn; i < f.size(); ++i)
      if (!(f[i] >= 1e29))
        return g.unsupported("rope_freqs other than 1 then 1e30 (proportional RoPE)");
    c.rope.scaling = rope_scaling::none;
    c.rope.short_factor.clear();
    c.rope.turning = turn == f.size() ? 0 : static_cast<int>(turn);
  }
  read_gguf_rope_swa(g, c, g.i("rope.dimension_count_swa", c.D));
  c.final_softcap = g.f("final_logit_softcapping", 0.0);
  c.embed_scale = std::sqrt(static_cast<double>(C)); // llama.cpp scales in f32
  c.act = act_kind::gelu_tanh;
  c.norms = norm_place::sandwich;
  c.qk_norm = qk_norm_kind::head;
  c.v_norm = c.layer_scalar = true;
  c.attn_scale = 1.0;
  c.F = ff[0];
  // the full layers without attn_v take the values from attn_k
  for (int64_t l = 0; l < L; ++l)
    if (!c.layer_window(l)) {
      c.kv_shared_kv = !g.has_tensor(fmt::format("blk.{}.attn_v.weight", l));
      break;
    }
  const int64_t shared = g.i("attention.shared_kv_layers", 0);
  if (shared < 0 || shared >= L)
    return make_error(errc::corrupt_file, "{}: shared_kv_layers {} of {} layers", g.path(), shared,
                      L);
  if (shared > 0) {
    const int64_t first = L - shared;
    c.kv_source.resize(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l)
      c.kv_source[static_cast<size_t>(l)] =
          static_cast<int32_t>(l < first ? l : first - (c.layer_window(l) ? 2 : 1));
    if (first < 2) return g.unsupported("shared_kv_layers leaving fewer than 2 layers");
  }
  for (int64_t l = 0; l < L; ++l) { // 2F on the sharing layers (use_double_wide_mlp), else F
    const int64_t want = ff[static_cast<size_t>(l)];
    const bool sharing = shared > 0 && l >= L - shared;
    if (want == 2 * c.F && sharing && l > 0)
      c.ffn_wide_shared = true;
    else if (want != c.F)
      return g.unsupported(fmt::format("feed_forward_length {} on layer {} (F {})", want, l, c.F));
  }
  if (const int64_t P = g.i("embedding_length_per_layer_input", 0); P > 0) {
    c.ple_dim = P;
    const tensor_info* t = g.g.tensors.find("per_layer_token_embd.weight");
    c.ple_vocab = t && t->dims.rank == 2 ? t->dims[0] : c.V;
  }
  if (const int64_t E = g.i("expert_count", 0); E > 0) {
    c.n_expert = E;
    c.n_expert_used = g.i("expert_used_count", 0);
    c.F_expert = g.i("expert_feed_forward_length", 0);
    c.norm_topk = true;
    c.moe_beside_mlp = true;
  }
  return {};
}

decoder_names gemma_sandwich_hf(const model_config& c) {
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  n.post_attn_norm = "model.layers.{}.post_attention_layernorm.weight";
  n.ffn_norm = "model.layers.{}.pre_feedforward_layernorm.weight";
  n.post_ffn_norm = "model.layers.{}.post_feedforward_layernorm.weight";
  return n;
}

void gemma_ple_names(decoder_names& n, bool hf) {
  if (hf) {
    n.ple_table = "model.embed_tokens_per_layer.weight";
    n.ple_proj = "model.per_layer_model_projection.weight";
    n.ple_proj_norm = "model.per_layer_projection_norm.weight";
    n.ple_gate = "model.layers.{}.per_layer_input_gate.weight";
    n.ple_up = "model.layers.{}.per_layer_projection.weight";
    n.ple_norm = "model.layers.{}.post_per_layer_input_norm.weight";
  } else { // llama.cpp's
    n.ple_table = "per_layer_token_embd.weight";
    n.ple_proj = "per_layer_model_proj.weight";
    n.ple_proj_norm = "per_layer_proj_norm.weight";
    n.ple_gate = "blk.{}.inp_gate.weight";
    n.ple_up = "blk.{}.proj.weight";
    n.ple_norm = "blk.{}.post_norm.weight";
  }
}

namespace {

decoder_names gguf_names(const model_source& m) { // llama.cpp's
  const model_config& c = m.config;
  decoder_names n = gguf_layout(m);
  n.layer_scalar = "blk.{}.layer_output_scale.weight";
  if (c.ple_dim > 0) gemma_ple_names(n, false);
  if (c.moe_beside_mlp) {
    n.post_ffn_norm_1 = "blk.{}.post_ffw_norm_1.weight";
    n.ffn_norm_2 = "blk.{}.pre_ffw_norm_2.weight";
    n.post_ffn_norm_2 = "blk.{}.post_ffw_norm_2.weight";
    n.moe_router = "blk.{}.ffn_gate_inp.weight";
    n.moe_router_scale = "blk.{}.ffn_gate_inp.scale";
    n.moe_expert_scale = "blk.{}.ffn_down_exps.scale";
    n.moe_gate_up = "blk.{}.ffn_gate_up_exps.weight";
    n.moe_down = "blk.{}.ffn_down_exps.weight";
  }
  return n;
}

decoder_names hf_names(const model_config& c) {
  decoder_names n = gemma_sandwich_hf(c);
  n.layer_scalar = "model.layers.{}.layer_scalar";
  if (c.ple_dim > 0) gemma_ple_names(n, true);
  if (c.moe_beside_mlp) {
    const std::string p = "model.layers.{}.";
    n.post_ffn_norm_1 = p + "post_feedforward_layernorm_1.weight";
    n.ffn_norm_2 = p + "pre_feedforward_layernorm_2.weight";
    n.post_ffn_norm_2 = p + "post_feedforward_layernorm_2.weight";
    n.moe_router = p + "router.proj.weight";
    n.moe_router_scale = p + "router.scale";
    n.moe_expert_scale = p + "router.per_expert_scale";
    n.moe_gate_up = p + "experts.gate_up_proj"; // [E, 2F, C]: each expert's gate rows, then up
    n.moe_down = p + "experts.down_proj";       // [E, C, F]
  }
  return n;
}

} // namespace

status build_gemma4(const model_source& m, graph::graph& g) {
  decoder_names n = m.format == "hf" ? hf_names(m.config) : gguf_names(m);
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
