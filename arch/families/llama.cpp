// llama.cpp (arch/families): the Llama family and the architectures that are Llama with other
// defaults: Llama 2 / 3 (rope scaling, attention and MLP biases), Mistral (sliding window),
// Qwen2 (q/k/v biases, per-layer windows), Qwen3 (q/k RMSNorm over each head before RoPE), and
// their mixture-of-experts forms (Mixtral, Qwen2-MoE, Qwen3-MoE: the experts in moe.cpp), and
// SmolLM3 (Llama with no rotary embedding on the layers no_rope_layers marks 0, every fourth;
// from GGUF every fourth, as llama.cpp assumes),
// Seed-OSS (Llama whose o projection's bias is apart from q / k / v's), ERNIE 4.5 (Llama with
// RoPE on interleaved pairs and, with use_bias, a bias on every projection), Arcee AFM (Llama
// whose MLP is not gated: down(act(up(x))), ReLU² as published), InternLM2 / 2.5 (Llama under its
// own names, q, k and v packed per KV group into wqkv: [Hkv, q per kv + 2, D] rows), InternLM3
// and IQuestCoder (configs transformers runs as Llama), Helium (Kyutai: Llama with RoPE on
// neighbouring pairs and q / k / v biases without o's), CWM (Meta's Code World Model: Llama 3 with
// windows on three layers in four), Emu3 (BAAI: Llama; as published, Emu3ForConditionalGeneration,
// its language model under text_model. beside a VQ-VAE image tokenizer that stays unread:
// images reach the language model as the token ids that tokenizer makes).
// Pre-norm decoder: x += attn(rmsnorm(x)); x += ffn(rmsnorm(x)); SwiGLU (or another
// activation, gated or not); tied or separate lm_head.
#include "arch/families/decoder.hpp"

#include <algorithm>

namespace troupe::arch {

using namespace graph;

namespace {

// The dense family whose attention a MoE family has.
std::string dense_base(const std::string& family) {
  if (family == "mixtral" || family == "ministral") return "mistral";
  if (family == "qwen2_moe") return "qwen2";
  if (family == "qwen3_moe") return "qwen3";
  if (family == "smollm3" || family == "seed_oss" || family == "ernie4_5" ||
      family == "ernie4_5_moe" || family == "arcee" || family == "exaone" ||
      family == "internlm2" || family == "internlm3" || family == "iquestcoder" ||
      family == "helium" || family == "cwm" || family == "bitnet" || family == "diffllama" ||
      family == "emu3" || family == "minicpm")
    return "llama";
  return family;
}

} // namespace

status read_llama_hf(hf_cfg& j, model_config& c) {
  c.names.output = c.family == "internlm2" ? "output.weight" : "lm_head.weight";
  const std::string base = dense_base(c.family);
  const bool qwen = base == "qwen2" || base == "qwen3";
  c.qkv_bias = base == "qwen2" && (c.family != "qwen2_moe" || j.b("qkv_bias", true));
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (base == "llama" || base == "qwen3") {
    j.mark("pretraining_tp"); // a way of splitting the same matmuls: the same math
    if (j.b("attention_bias", false)) {
      c.qkv_bias = true;
      c.o_bias = true;
    }
    // Seed-OSS: q / k / v biases (attention_bias) and o's apart (attention_out_bias); its
    // dropouts are training's
    if (c.family == "seed_oss") {
      c.o_bias = j.b("attention_out_bias", false);
      j.mark("residual_dropout");
    }
  }
  if (base == "llama") c.mlp_bias = j.b("mlp_bias", false);
  if (c.family == "helium") c.o_bias = false; // (HeliumAttention: o_proj without a bias)
  // InternLM3 (qkv_bias / bias read as attention_bias / mlp_bias): transformers runs it as Llama,
  // whose attention_bias covers o_proj too, so only equal settings are InternLM3's model
  if (c.family == "internlm3" && c.qkv_bias != c.mlp_bias)
    return j.unsupported("qkv_bias and bias differ (transformers' Llama implementation biases q, "
                         "k, v and o alike)");
  // IQuestCoder: its config class refuses these (Llama's model would drop them)
  if (c.family == "iquestcoder") {
    if (j.has("clip_qkv")) return j.unsupported("'clip_qkv' (IQuestCoder's config refuses it)");
    if (j.b("use_sliding_window", false))
      return j.unsupported("'use_sliding_window' (IQuestCoder's config refuses it)");
  }
  if (c.family == "arcee") c.gated_ffn = false; // ArceeMLP (Nemotron's): up, act, down
  if (c.family == "cwm") { // CWM: windows on the layers layer_types names (three in four)
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 8192));
    TROUPE_TRY(read_layer_types(j, c, sw < c.ctx ? sw : 0, [](int64_t l) { return l % 4 != 0; }));
  }
  // ERNIE 4.5: use_bias puts a bias on every projection, attention's and the MLP's
  const bool ernie = c.family == "ernie4_5" || c.family == "ernie4_5_moe";
  if (ernie && j.b("use_bias", false)) c.qkv_bias = c.o_bias = c.mlp_bias = true;
  if (c.family == "smollm3") {
    // no_rope_layers: 1 where a layer rotates q and k, 0 where it does not (its interval key
    // is how the list was made)
    j.mark("no_rope_layer_interval");
    if (const json& nr = j.raw("no_rope_layers"); !nr.is_null()) {
      if (!nr.is_array() || static_cast<int64_t>(nr.size()) != c.n_layer)
        return j.bad(fmt::format("'no_rope_layers' must list {} layers", c.n_layer));
      c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
      for (size_t i = 0; i < nr.size(); ++i) {
        if (!nr[i].is_number_integer() || (nr[i] != 0 && nr[i] != 1))
          return j.bad("'no_rope_layers' must hold 0 or 1 per layer");
        c.nope_layers[i] = nr[i] == 0;
      }
    }
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    const bool use = j.b("use_sliding_window", false);
    TROUPE_TRY(read_layer_types(j, c, use && sw < c.ctx ? sw : 0, [](int64_t) { return true; }));
  }
  if (base == "qwen3") c.qk_norm = qk_norm_kind::head;
  if (base == "mistral") {
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    if (sw >= c.ctx) sw = 0; // a window as long as the context is no window
    // Ministral: the window on the layers layer_types names (every layer without the list)
    if (c.family == "ministral")
      TROUPE_TRY(read_layer_types(j, c, sw, [](int64_t) { return true; }));
    else
      c.sliding_window = sw;
  } else if (c.family == "qwen3_moe") { // every layer, when use_sliding_window
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    c.sliding_window = j.b("use_sliding_window", false) && sw < c.ctx ? sw : 0;
  } else if (qwen) {
    TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
    TROUPE_TRY_ASSIGN(mwl, j.i("max_window_layers", 28));
    // transformers: sliding_window = sliding_window if use_sliding_window else None; the
    // layers that slide are layer_types', else (Qwen2) those from max_window_layers on, or
    // (Qwen2-MoE) every other one below it
    const bool use = j.b("use_sliding_window", false);
    const bool moe = c.family == "qwen2_moe";
    TROUPE_TRY(read_layer_types(j, c, use && sw < c.ctx ? sw : 0, [mwl, moe](int64_t l) {
      return moe ? (l + 1) % 2 == 1 && l < mwl : l >= mwl;
    }));
  }
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  if (ernie || c.family == "helium") c.rope.layout = rope_layout::interleaved; // neighbours pair
  if (c.family == "mixtral" || c.family == "qwen2_moe" || c.family == "qwen3_moe" ||
      c.family == "ernie4_5_moe")
    TROUPE_TRY(read_experts_hf(j, c));
  return {};
}

status read_llama_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  // every layer slides unless sliding_window_pattern says which (llama.cpp's n_swa)
  TROUPE_TRY(read_gguf_windows(g, c, 0, 0));
  if (c.sliding_window >= c.ctx) c.sliding_window = 0, c.windowed.clear();
  // llama.cpp's converters undo HF's q/k permutation for llama; qwen2 stays rotate_half
  const std::string base = dense_base(c.family);
  // (Seed-OSS's converter leaves q and k as they are; ERNIE 4.5 pairs neighbours natively)
  c.rope.layout =
      (base == "llama" || base == "mistral") && c.family != "seed_oss" && c.family != "exaone"
          ? rope_layout::interleaved
          : rope_layout::neox;
  // EXAONE 3.x (exaone): the converter leaves q and k as they are (llama.cpp rotates halves); the
  // files LG publishes carry layer_norm_epsilon as the RMS epsilon, the converter's later form
  // as attention.layer_norm_epsilon
  if (c.family == "exaone" && !g.has("attention.layer_norm_rms_epsilon"))
    c.norm_eps = g.f("attention.layer_norm_epsilon", 1e-5);
  if (base == "qwen3") c.qk_norm = qk_norm_kind::head;
  // qwen2vl (Qwen2-VL, Qwen2.5-VL), qwen3vl / qwen3vlmoe (Qwen3-VL): M-RoPE's sections, every one
  // the token's position over text; Qwen3-VL's deepstack features are added to image tokens only
  if (g.arch == "qwen2vl" || g.arch == "qwen3vl" || g.arch == "qwen3vlmoe")
    g.key("rope.dimension_sections");
  if (g.arch == "qwen3vl" || g.arch == "qwen3vlmoe") g.key("n_deepstack_layers");
  // mistral3 (Ministral 3): YaRN's mscale_all_dim as yarn_log_multiplier, taken as mscale too (the
  // converter writes no other; the rotation's factor is then 1), and llama_4_scaling_beta as
  // attention.temperature_scale over positions / the YaRN original context (llama.cpp's
  // n_attn_temp_floor_scale = n_ctx_orig_yarn, offset 0), on every layer
  if (g.arch == "mistral3") {
    if (c.rope.scaling == rope_scaling::yarn && g.has("rope.scaling.yarn_log_multiplier")) {
      const double m = g.f("rope.scaling.yarn_log_multiplier", 0.0);
      if (!(m > 0)) return g.unsupported("a mistral3 yarn_log_multiplier that is not positive");
      c.rope.mscale = c.rope.mscale_all_dim = m;
    } else if (g.has("rope.scaling.yarn_log_multiplier")) {
      return g.unsupported("rope.scaling.yarn_log_multiplier without YaRN");
    }
    if (const double beta = g.f("attention.temperature_scale", 0.0); beta != 0) {
      // (llama.cpp's n_ctx_orig_yarn: the original context where the file gives one)
      const double floor =
          c.rope.scaling == rope_scaling::yarn
              ? c.rope.orig_ctx
              : g.f("rope.scaling.original_context_length", static_cast<double>(c.ctx));
      if (!(floor >= 1))
        return g.unsupported("attention.temperature_scale without an original context");
      c.attn_temp_scale = beta;
      c.attn_temp_floor = static_cast<int64_t>(floor);
      c.attn_temp_offset = 0;
    }
  }
  if (c.family == "arcee") { // llama.cpp's arcee: ffn_up, ReLU², ffn_down
    c.gated_ffn = false;
    TROUPE_TRY(read_activation("relu2", c, g.path()));
  }
  if (c.family == "smollm3") { // llama.cpp's smollm3: every fourth layer without RoPE (no key)
    c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 3; l < c.n_layer; l += 4) c.nope_layers[static_cast<size_t>(l)] = 1;
  }
  return read_experts_gguf(g, c);
}

status build_llama(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf" && c.family == "exaone") { // EXAONE 3's own names, as published
    const std::string l = "transformer.h.{}.", a = l + "attn.attention.";
    n.tok_embd = "transformer.wte.weight", n.out_norm = "transformer.ln_f.weight";
    n.lm_head = "lm_head.weight";
    n.attn_norm = l + "ln_1.weight", n.ffn_norm = l + "ln_2.weight";
    n.wq = a + "q_proj.weight", n.wk = a + "k_proj.weight", n.wv = a + "v_proj.weight";
    n.wo = a + "out_proj.weight";
    n.w_gate = l + "mlp.c_fc_0.weight", n.w_up = l + "mlp.c_fc_1.weight";
    n.w_down = l + "mlp.c_proj.weight";
    if (c.qkv_bias) n.bq = a + "q_proj.bias", n.bk = a + "k_proj.bias", n.bv = a + "v_proj.bias";
    if (c.o_bias) n.bo = a + "out_proj.bias";
    if (c.mlp_bias)
      n.b_gate = l + "mlp.c_fc_0.bias", n.b_up = l + "mlp.c_fc_1.bias",
      n.b_down = l + "mlp.c_proj.bias";
  } else if (m.format == "hf" && c.family == "internlm2") { // InternLM2's own names
    const std::string l = "model.layers.{}.", a = l + "attention.", f = l + "feed_forward.";
    n.tok_embd = "model.tok_embeddings.weight", n.out_norm = "model.norm.weight";
    n.lm_head = "output.weight";
    n.attn_norm = l + "attention_norm.weight", n.ffn_norm = l + "ffn_norm.weight";
    n.wqkv = a + "wqkv.weight", n.wo = a + "wo.weight";
    n.layout = qkv_layout::grouped; // each KV group's queries, then its key and value head
    if (c.qkv_bias) n.bqkv = a + "wqkv.bias", n.bo = a + "wo.bias";
    n.w_gate = f + "w1.weight", n.w_up = f + "w3.weight", n.w_down = f + "w2.weight";
  } else if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
  } else {
    n = gguf_layout(m);
    // Seed-OSS's converter names the FFN's pre-norm as llama.cpp's seed_oss arch does
    if (c.family == "seed_oss") n.ffn_norm = "blk.{}.post_attention_norm.weight";
  }
  if (c.family == "ernie4_5_moe") // DeepSeek's names (its bias moved there at load)
    routed_expert_names(m, n);
  else if (c.n_expert > 0)
    expert_names(m, n);
  if (c.tie_embeddings) n.lm_head.clear();
  if (!c.gated_ffn) n.w_gate.clear(), n.b_gate.clear();
  return build_decoder(m, n, g);
}

status prepare_emu3_hf(const model_config&, tensor_index& t) {
  // (as published: text_model.model.*, text_model.lm_head; as transformers 5 holds it:
  // model.text_model.*)
  for (const std::string& name : t.names())
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"text_model.", ""}, {"model.text_model.", "model."}})
      if (name.starts_with(from)) {
        TROUPE_TRY(rename_tensor(t, name, to + name.substr(from.size())));
        break;
      }
  return {};
}

} // namespace troupe::arch
