// gpt_neo.cpp (arch/families): GPT-Neo (GPTNeoForCausalLM: EleutherAI's gpt-neo-125m / 1.3B /
// 2.7B): GPT-2's block (learned absolute positions, pre-LayerNorms with biases, a GELU MLP) with
// nn.Linear weights, q / k / v without biases, attention scores not scaled by 1/sqrt(head_dim),
// and layers attending over the whole context ("global") or over the last window_size tokens,
// itself included ("local"), as attention_types lists them ([[["global", "local"], 12]]: the
// pair twelve times). Tied embeddings by default.
#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_gpt_neo_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size"));
  TROUPE_TRY_ASSIGN(L, j.req("num_layers"));
  TROUPE_TRY_ASSIGN(H, j.req("num_heads"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 2048));
  TROUPE_TRY_ASSIGN(F, j.i("intermediate_size", 4 * C)); // (null: 4 hidden_size)
  TROUPE_TRY_ASSIGN(eps, j.f("layer_norm_epsilon", 1e-5));
  if (H <= 0 || L > max_layers || C % H)
    return j.bad(fmt::format("hidden_size {}, num_heads {}, num_layers {}", C, H, L));
  c.C = C, c.n_layer = L, c.H = c.Hkv = H, c.V = V, c.ctx = ctx, c.F = F ? F : 4 * C;
  c.D = C / H;
  c.norm_eps = eps;
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.o_bias = c.mlp_bias = true;
  c.rope_enabled = false;
  c.learned_positions = true;
  c.attn_scale = 1.0; // (GPTNeoSelfAttention multiplies q by k unscaled)
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_activation(j.s("activation_function", "gelu_new"), c, j.where()));
  // attention_types: [[kinds, repeats], ...] expanded to one kind per layer
  std::vector<uint8_t> local;
  const json& types = j.raw("attention_types");
  const json fallback = json::parse(R"([[["global", "local"], 12]])");
  const json& t = types.is_null() ? fallback : types;
  if (!t.is_array()) return j.bad("'attention_types' must be a list of [kinds, repeats]");
  for (const json& item : t) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() ||
        !item[1].is_number_integer() || item[1].get<int64_t>() < 0 ||
        item[1].get<int64_t>() > max_layers)
      return j.bad("'attention_types' must be a list of [kinds, repeats]");
    for (int64_t r = 0; r < item[1].get<int64_t>(); ++r)
      for (const json& k : item[0]) {
        if (k != "global" && k != "local")
          return j.unsupported(fmt::format("attention type {}", k.dump()));
        if (static_cast<int64_t>(local.size()) > max_layers)
          return j.bad("'attention_types' lists too many layers");
        local.push_back(k == "local" ? 1 : 0);
      }
  }
  if (static_cast<int64_t>(local.size()) != L)
    return j.bad(
        fmt::format("'attention_types' lists {} layers, num_layers is {}", local.size(), L));
  TROUPE_TRY_ASSIGN(window, j.i("window_size", 256));
  if (window <= 0) return j.bad("'window_size' must be positive");
  if (window < ctx && std::find(local.begin(), local.end(), 1) != local.end()) {
    c.sliding_window = window;
    c.windowed = std::move(local);
  }
  j.mark("attention_layers"); // (GPTNeoConfig derives it from attention_types, whatever it says)
  for (const char* k :
       {"resid_dropout", "embed_dropout", "attention_dropout", "classifier_dropout"})
    j.mark(k);
  return {};
}

status build_gpt_neo(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: GPT-Neo is read from HF checkpoints only", m.path);
  const std::string t = "transformer.", h = t + "h.{}.", a = h + "attn.attention.";
  decoder_names n;
  n.tok_embd = t + "wte.weight", n.pos_embd = t + "wpe.weight";
  n.attn_norm = h + "ln_1.weight", n.attn_norm_b = h + "ln_1.bias";
  n.wq = a + "q_proj.weight", n.wk = a + "k_proj.weight", n.wv = a + "v_proj.weight";
  n.wo = a + "out_proj.weight", n.bo = a + "out_proj.bias";
  n.ffn_norm = h + "ln_2.weight", n.ffn_norm_b = h + "ln_2.bias";
  n.w_up = h + "mlp.c_fc.weight", n.b_up = h + "mlp.c_fc.bias";
  n.w_down = h + "mlp.c_proj.weight", n.b_down = h + "mlp.c_proj.bias";
  n.out_norm = t + "ln_f.weight", n.out_norm_b = t + "ln_f.bias";
  n.lm_head = c.tie_embeddings ? "" : "lm_head.weight";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
