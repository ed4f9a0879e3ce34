// dory.cpp (arch/families): NVIDIA's Dory (DoryForCausalLM, Nemotron Labs Dory 1.0): a normalized
// transformer (nGPT; the decoder's ngpt layers, decoder_ngpt.cpp) with a recurrent middle:
// n_input_layers layers, then n_recurrent_layers layers run n_recurrent_loops times, then
// n_output_layers layers. Each run of a recurrent layer is a layer of its own here, reading the
// first run's weights (model_config::weight_layer; the output layers' tensors renamed to their
// place after the runs) and, with recurrent_kv_cache_mode "per_loop", attending over its own
// KV cache (transformers' copies per loop); with "last_loop" every run of a layer writes one
// cache and attends over it (transformers' earlier runs read the cache and their own entries
// without writing, and the last run writes: the same entries, as each run here overwrites the
// tokens of its step before attending). Sliding windows on the layers layer_types names so (by
// default three in four), each layer type with its RoPE base (rope_parameters by type). The
// published config.json lists each layer as two blocks (its attention type, then "mlp") with
// every layer count doubled, as transformers writes it back; both forms are read. HF only
// (llama.cpp writes no GGUF of it).
#include <algorithm>

#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"

namespace troupe::arch {

status read_dory_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6)); // (its norms are L2 norms, eps 1e-6)
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.mlp_bias = j.b("mlp_bias", false);
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  j.mark("attention_dropout"); // (training only)
  TROUPE_TRY_ASSIGN(init, j.f("initializer_range", 0.0177));
  TROUPE_TRY_ASSIGN(alpha, j.f("ngpt_alpha_init", 0.05));
  if (!(init > 0) || !(alpha >= 0))
    return j.bad(fmt::format("initializer_range {}, ngpt_alpha_init {} (the learned scales are "
                             "stored divided by initializer_range)",
                             init, alpha));
  c.ngpt = true, c.ngpt_init = init, c.ngpt_alpha = alpha;
  c.norm_weight = false;
  c.attn_value_gate = true;
  // the sections, in layers (the published form: in blocks, two a layer)
  TROUPE_TRY_ASSIGN(n_in, j.i("n_input_layers", 8));
  TROUPE_TRY_ASSIGN(n_out, j.i("n_output_layers", 8));
  TROUPE_TRY_ASSIGN(loops, j.i("n_recurrent_loops", 2));
  int64_t n_rec = -1;
  if (!j.raw("n_recurrent_layers").is_null()) TROUPE_TRY_SET(n_rec, j.req("n_recurrent_layers"));
  int64_t L = c.n_layer;
  std::vector<uint8_t> sliding; // per layer
  const json& lt = j.raw("layer_types");
  if (!lt.is_null() && !lt.is_array()) return j.bad("'layer_types' must be a list");
  const bool blocks = lt.is_array() && std::find(lt.begin(), lt.end(), json("mlp")) != lt.end();
  if (blocks) {
    if (static_cast<int64_t>(lt.size()) != L || L % 2 || n_in % 2 || n_out % 2 ||
        (n_rec >= 0 && n_rec % 2))
      return j.bad(fmt::format("layer_types in blocks (attention, mlp) must list {} of them, and "
                               "num_hidden_layers {}, n_input_layers {}, n_output_layers {}, "
                               "n_recurrent_layers {} count blocks, two a layer",
                               L, L, n_in, n_out, n_rec));
    L /= 2, n_in /= 2, n_out /= 2;
    if (n_rec >= 0) n_rec /= 2;
  } else if (lt.is_array() && static_cast<int64_t>(lt.size()) != L) {
    return j.bad(fmt::format("'layer_types' must list {} layer types", L));
  }
  for (int64_t i = 0; i < L; ++i) {
    if (!lt.is_array()) {
      sliding.push_back((i + 1) % 4 != 0);
      continue;
    }
    const json& t = lt[static_cast<size_t>(blocks ? 2 * i : i)];
    if (blocks && lt[static_cast<size_t>(2 * i + 1)] != "mlp")
      return j.bad(fmt::format("layer_types[{}] = {}: each attention block is followed by 'mlp'",
                               2 * i + 1, lt[static_cast<size_t>(2 * i + 1)].dump()));
    if (t != "sliding_attention" && t != "full_attention")
      return j.unsupported(
          fmt::format("layer_types[{}] = {} is not supported", blocks ? 2 * i : i, t.dump()));
    sliding.push_back(t == "sliding_attention");
  }
  if (n_rec < 0) n_rec = L - n_in - n_out;
  if (n_in < 0 || n_out < 0 || n_rec < 0 || n_in + n_rec + n_out != L || loops < 1)
    return j.bad(fmt::format("n_input_layers {} + n_recurrent_layers {} + n_output_layers {} must "
                             "be num_hidden_layers {}, n_recurrent_loops {} at least 1",
                             n_in, n_rec, n_out, L, loops));
  const std::string mode = j.s("recurrent_kv_cache_mode", "per_loop");
  if (mode != "per_loop" && mode != "last_loop")
    return j.unsupported(fmt::format("recurrent_kv_cache_mode '{}'", mode));
  // the runs as layers: input, every run of the section, output
  const int64_t runs = n_rec * loops, V = n_in + runs + n_out;
  if (V > max_layers)
    return j.bad(
        fmt::format("{} layers with {} runs of {} (at most {})", L, loops, n_rec, max_layers));
  c.n_layer = V;
  if (n_rec > 0) c.loop_begin = n_in, c.loop_layers = n_rec, c.loops = loops;
  c.weight_layer.resize(static_cast<size_t>(V));
  std::vector<uint8_t> windowed(static_cast<size_t>(V));
  if (mode == "last_loop" && loops > 1) {
    c.kv_source.resize(static_cast<size_t>(V));
    c.kv_source_writes = true;
  }
  for (int64_t l = 0; l < V; ++l) {
    const bool run = l >= n_in && l < n_in + runs;
    const int64_t first = run ? n_in + (l - n_in) % n_rec : l; // the layer whose weights
    const int64_t real = run ? first : l < n_in ? l : l - runs + n_rec;
    c.weight_layer[static_cast<size_t>(l)] = static_cast<int32_t>(first);
    windowed[static_cast<size_t>(l)] = sliding[static_cast<size_t>(real)];
    if (!c.kv_source.empty()) c.kv_source[static_cast<size_t>(l)] = static_cast<int32_t>(first);
  }
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 1024));
  if (std::find(windowed.begin(), windowed.end(), 1) != windowed.end()) {
    if (sw <= 0) return j.bad(fmt::format("sliding_window {} with sliding layers", sw));
    c.sliding_window = sw;
    c.windowed = std::move(windowed);
  }
  // RoPE by layer type (DoryConfig's bases where rope_parameters leaves them out)
  return read_rope_by_layer_type(j, c, json{{"rope_type", "default"}, {"rope_theta", 1e7}},
                                 json{{"rope_type", "default"}, {"rope_theta", 1e4}});
}

status prepare_dory_hf(const model_config& c, tensor_index& t) {
  // every form to model.layers.{i}.self_attn / .mlp / .lambda_{1,2} (gate_proj the gate), the
  // output layers moved to their place after the runs: as published (backbone.layers.{2i}.mixer
  // the attention and attn_alpha, backbone.layers.{2i + 1}.mixer the MLP and mlp_alpha, its
  // gate g_proj, backbone.embeddings), as transformers saves it (backbone.layers.{i}, g_proj), or
  // as it holds it
  const int64_t shift = c.loops > 1 ? c.loop_layers * (c.loops - 1) : 0,
                out_from = c.loop_begin + c.loop_layers;
  struct move {
    int64_t layer; // (the source's: moved from the last, so no name is taken twice)
    std::string from, to;
  };
  std::vector<move> moves;
  for (const std::string& name : t.names()) {
    const bool bb = name.starts_with("backbone.");
    const std::string n = bb ? "model." + name.substr(9) : name;
    if (n == "model.embeddings.weight") {
      moves.push_back({-1, name, "model.embed_tokens.weight"});
      continue;
    }
    const auto lt = layer_of_name(n, "model.layers.");
    if (!lt) {
      if (bb) moves.push_back({-1, name, n});
      continue;
    }
    int64_t i = lt->layer;
    std::string rest = lt->rest;
    if (rest.starts_with("mixer.")) { // (a block: even the attention, odd the MLP)
      rest = (i % 2 ? "mlp." : "self_attn.") + rest.substr(6);
      i /= 2;
    } else if (rest == "attn_alpha" || rest == "mlp_alpha") {
      rest = rest == "attn_alpha" ? "lambda_1" : "lambda_2";
      i /= 2;
    }
    if (rest.starts_with("self_attn.g_proj.")) rest = "self_attn.gate_proj." + rest.substr(17);
    if (i >= out_from) i += shift;
    const std::string to = fmt::format("model.layers.{}.{}", i, rest);
    if (to != name) moves.push_back({lt->layer, name, to});
  }
  std::sort(moves.begin(), moves.end(),
            [](const move& a, const move& b) { return a.layer > b.layer; });
  for (const move& m : moves) TROUPE_TRY(rename_tensor(t, m.from, m.to));
  return {};
}

status build_dory(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, c.mlp_bias);
  const std::string a = "model.layers.{}.self_attn.", f = "model.layers.{}.mlp.",
                    l = "model.layers.{}.";
  n.attn_norm.clear(), n.ffn_norm.clear(), n.out_norm.clear(), n.q_norm.clear(), n.k_norm.clear();
  n.mla_gate = a + "gate_proj.weight";
  n.ngpt_sqk = a + "sqk", n.ngpt_s_gate = a + "s_gate";
  n.ngpt_suv_gate = f + "suv_gate", n.ngpt_suv_up = f + "suv_up";
  n.ngpt_lambda_1 = l + "lambda_1", n.ngpt_lambda_2 = l + "lambda_2";
  n.ngpt_logit_scale = "lm_head.logit_scale";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
