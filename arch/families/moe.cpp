// moe.cpp (arch/families): mixture-of-experts FFNs on the Llama-style decoder: Mixtral
// (Mistral attention, every layer 8-of-N SwiGLU experts, softmax then top-k renormalised),
// Qwen2-MoE (Qwen2 attention, experts of moe_intermediate_size plus a shared expert gated by
// sigmoid(x w), top-k not renormalised unless norm_topk_prob) and Qwen3-MoE (Qwen3 attention
// with q/k norms, norm_topk_prob). decoder_sparse_step and mlp_only_layers say which layers
// are dense. GGUF: Mixtral is llama.cpp's `llama` with expert_count > 0, the others qwen2moe /
// qwen3moe; a layer is a MoE layer where its router tensor is there, and top-k is
// renormalised as llama.cpp does it for each architecture (llama, qwen3moe: yes; qwen2moe:
// no). The experts run as one `moe` op (kernels/op.hpp) that reads only the chosen experts.
// Mellum (MellumForCausalLM): Qwen3-MoE's attention and experts with windows on the layers
// layer_types names sliding, each layer type its own RoPE, and dense layers by mlp_layer_types.
// Kolibri (Kolibri1ForCausalLM): EXAONE 4's attention (q / k norms per head, windows on four
// layers in five, RoPE on those only) in GLM-4's sandwich norms over experts on every layer chosen
// by their logits plus a correction bias, weighted by the chosen logits' sigmoids (renormalised
// with norm_topk_prob), and a shared expert. Flint (FlintForCausalLM): Qwen3-MoE's attention with
// a sink per head and RoPE only on its sliding layers, dense layers by mlp_only_layers, the others
// experts chosen by sigmoid (renormalised with norm_topk_prob) plus an ungated-in shared expert.
#include <algorithm>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_experts_hf(hf_cfg& j, model_config& c) {
  if (c.family == "mixtral") {
    // jitter noise multiplies the router input only while training
    j.mark("router_jitter_noise");
    TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
    c.F_expert = c.F;
    c.norm_topk = true;
    return {};
  }
  if (c.family == "ernie4_5_moe") {
    // ERNIE 4.5 MoE: softmax scores, the choice by scores + moe_statics' correction bias, the
    // chosen scores renormalised (over a sum clamped at moe_norm_min: a softmax's top-k sums to
    // at least k / E, far above it); shared experts ungated; MoE layers from
    // moe_layer_start_index to moe_layer_end_index, every moe_layer_interval-th
    j.mark("router_aux_loss_coef"); // training losses
    j.mark("output_router_logits");
    TROUPE_TRY_ASSIGN(e, j.req("moe_num_experts"));
    TROUPE_TRY_ASSIGN(k, j.req("moe_k"));
    if (k > e) return j.bad(fmt::format("'moe_k' {} of {} experts", k, e));
    c.n_expert = e, c.n_expert_used = k;
    j.mark("moe_norm_min");
    j.mark("num_nextn_predict_layers"); // multi-token prediction: not used to generate
    TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
    c.F_expert = fe;
    TROUPE_TRY_ASSIGN(shared, j.i("moe_num_shared_experts", 0));
    c.F_shared = shared * fe;
    c.norm_topk = true;
    c.router_bias = true;
    TROUPE_TRY_ASSIGN(start, j.i("moe_layer_start_index", 0));
    TROUPE_TRY_ASSIGN(end, j.i("moe_layer_end_index", c.n_layer - 1));
    TROUPE_TRY_ASSIGN(interval, j.i("moe_layer_interval", 1));
    if (interval <= 0) return j.bad("'moe_layer_interval' must be positive");
    c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.moe_layers[static_cast<size_t>(l)] = (l + 1) % interval == 0 && l >= start && l <= end;
    return {};
  }
  // qwen2_moe, qwen3_moe, qwen3_next, qwen3_5_moe
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  c.F_expert = fe;
  // transformers' defaults: Qwen3-Next renormalises unless told not to, Qwen3.5-MoE always does,
  // and so does Qwen3-VL-MoE (its router has no such switch: the key, if there, changes nothing)
  const bool vl = c.arch == "Qwen3VLMoeForConditionalGeneration";
  c.norm_topk = vl || j.b("norm_topk_prob", c.family == "qwen3_next" || c.family == "qwen3_5_moe");
  if (vl) j.mark("norm_topk_prob");
  if (c.family == "qwen3_5_moe" && !c.norm_topk)
    return j.unsupported("'norm_topk_prob' false (Qwen3.5-MoE's router always renormalises)");
  if (c.family == "qwen2_moe" || c.family == "qwen3_next" || c.family == "qwen3_5_moe") {
    TROUPE_TRY_ASSIGN(fs, j.i("shared_expert_intermediate_size", 0));
    c.F_shared = fs;
    c.shared_gate = fs > 0;
  }
  TROUPE_TRY_ASSIGN(step, j.i("decoder_sparse_step", 1));
  std::vector<int64_t> dense;
  const json& only = j.raw("mlp_only_layers");
  if (!only.is_null()) {
    if (!only.is_array()) return j.bad("mlp_only_layers must be a list of layer indices");
    for (const auto& v : only) {
      if (!v.is_number_integer()) return j.bad("mlp_only_layers must be a list of layer indices");
      dense.push_back(v.get<int64_t>());
    }
  }
  if (step != 1 || !dense.empty()) {
    c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.moe_layers[static_cast<size_t>(l)] =
          step > 0 && (l + 1) % step == 0 &&
          std::find(dense.begin(), dense.end(), l) == dense.end();
  }
  return {};
}

status read_expert_counts(hf_cfg& j, model_config& c, const char* key, const char* alias) {
  j.mark("router_aux_loss_coef"); // training losses
  j.mark("output_router_logits");
  TROUPE_TRY_ASSIGN(e, j.has(key) ? j.req(key) : j.req(alias));
  c.n_expert = e;
  TROUPE_TRY_ASSIGN(k, j.req("num_experts_per_tok"));
  c.n_expert_used = k;
  return {};
}

status read_expert_counts(const gguf_cfg& g, model_config& c) {
  c.n_expert = g.i("expert_count", 0);
  if (c.n_expert <= 0) return {};
  TROUPE_TRY_ASSIGN(k, g.req("expert_used_count"));
  // checked here, not only by validate(): readers divide by it (llama.cpp's default widths)
  if (k <= 0 || k > c.n_expert)
    return make_error(errc::corrupt_file, "{}: {} experts used per token of {}", g.path(), k,
                      c.n_expert);
  c.n_expert_used = k;
  return {};
}

status read_experts_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_expert_counts(g, c));
  if (c.n_expert <= 0) return {};
  // llama.cpp's defaults: qwen2moe / qwen3moe (/ qwen3vlmoe) experts F / k wide, qwen2moe's shared
  // one F
  const bool qwen = g.arch == "qwen2moe" || g.arch == "qwen3moe" || g.arch == "qwen3vlmoe";
  if (const gguf_value* v = g.g.get(g.key("expert_feed_forward_length"));
      v && v->type == gguf_type::array)
    return g.unsupported("expert_feed_forward_length per layer");
  c.F_expert = g.i("expert_feed_forward_length", qwen ? c.F / c.n_expert_used : c.F);
  c.F_shared = g.i("expert_shared_feed_forward_length", g.arch == "qwen2moe" ? c.F : 0);
  // (ERNIE 4.5's shared experts run as one MLP of their summed width, which the file gives)
  if (c.F_shared > 0 && g.i("expert_shared_count", 1) != 1 && g.arch != "ernie4_5-moe")
    return g.unsupported("expert_shared_count other than 1");
  // llama.cpp's rule per architecture, whatever expert_weights_norm says
  g.key("expert_weights_norm");
  c.norm_topk = g.arch != "qwen2moe";
  const double scale = g.f("expert_weights_scale", 0);
  c.expert_scale = scale == 0 ? 1 : scale;
  if (g.i("expert_gating_func", 1) != 1) // 1: softmax (llama.cpp's LLAMA_EXPERT_GATING_FUNC)
    return g.unsupported("expert_gating_func other than softmax");
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.moe_layers[static_cast<size_t>(l)] =
        g.has_tensor(weight_names::layer("blk.{}.ffn_gate_inp.weight", static_cast<int>(l)));
  // ERNIE 4.5: the choice by softmax scores plus exp_probs_b (moe_statics' bias)
  c.router_bias =
      g.arch == "ernie4_5-moe" &&
      g.has_tensor(weight_names::layer("blk.{}.exp_probs_b.bias", static_cast<int>(c.n_layer - 1)));
  c.shared_gate = false; // the shared expert's gate, where a MoE layer has one
  for (int64_t l = 0; l < c.n_layer && c.F_shared > 0; ++l)
    c.shared_gate =
        c.shared_gate ||
        g.has_tensor(weight_names::layer("blk.{}.ffn_gate_inp_shexp.weight", static_cast<int>(l)));
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (c.moe_layers[static_cast<size_t>(l)] && c.F_shared > 0 &&
        !g.has_tensor(weight_names::layer("blk.{}.ffn_up_shexp.weight", static_cast<int>(l))))
      return g.unsupported("a MoE layer without the shared expert the metadata announces");
  return {};
}

// ERNIE 4.5 MoE stores its router's correction bias as [1, E]: the same values as [E]
status prepare_ernie45_moe_hf(const model_config& c, tensor_index& t) {
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string from =
        fmt::format("model.layers.{}.mlp.moe_statics.e_score_correction_bias", l);
    const tensor_info* b = t.find(from);
    if (!b) continue;
    if (b->dims.numel() != c.n_expert)
      return make_error(errc::shape_mismatch, "{}: '{}' must hold {} values (is {})",
                        b->file ? b->file->path() : from, from, c.n_expert, b->dims.to_string());
    tensor_info info = *b;
    info.name = fmt::format("model.layers.{}.mlp.gate.e_score_correction_bias", l);
    info.dims = shape{c.n_expert};
    TROUPE_TRY(t.add(info));
    t.mark_consumed(from);
  }
  return {};
}

status prepare_qwen3_moe_hf(const model_config& c, tensor_index& t) {
  TROUPE_TRY(prepare_language_model(c, t));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
    if (c.layer_moe(l) && t.find(p + "gate_up_proj"))
      TROUPE_TRY(repack_packed_experts(t, p, c.n_expert, c.C, c.F_expert));
  }
  return {};
}

status read_mellum_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_qk_normed_attention(j, c, 1e-6));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 1024));
  TROUPE_TRY(read_layer_types(j, c, sw < c.ctx ? sw : 0, [](int64_t) { return false; }));
  TROUPE_TRY(read_rope_by_layer_type(j, c, {{"rope_type", "default"}, {"rope_theta", 5e5}},
                                     {{"rope_type", "default"}, {"rope_theta", 1e4}}));
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  c.F_expert = fe;
  c.norm_topk = j.b("norm_topk_prob", true);
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "sparse", "dense", c.moe_layers));
  if (!listed) c.moe_layers.assign(static_cast<size_t>(c.n_layer), 1);
  // the multi-token-prediction layer (mtp.*, left unread) is not used to generate
  for (const char* k : {"num_nextn_predict_layers", "mtp_layer_types", "mtp_mlp_layer_types"})
    j.mark(k);
  return {};
}

status build_mellum(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  expert_names(m, n, false);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

status read_kolibri_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.qk_norm = qk_norm_kind::head;
  c.norms = norm_place::sandwich;
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 513));
  TROUPE_TRY(read_layer_types(j, c, sw, [](int64_t l) { return (l + 1) % 5 != 0; }));
  if (sw > 0) rope_on_windowed_only(c); // (EXAONE 4's attention: no RoPE on the full layers)
  TROUPE_TRY(read_rope(j, c, 10000.0, 1.0));
  TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  TROUPE_TRY_ASSIGN(fs, j.i("shared_expert_intermediate_size", 512));
  c.F = c.F_expert = fe;
  c.F_shared = fs;
  c.norm_topk = j.b("norm_topk_prob", false);
  c.router_sigmoid = c.router_bias = c.router_bias_logits = true;
  return {};
}

status read_flint_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_qk_normed_attention(j, c, 1e-6));
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 513));
  const int64_t L = c.n_layer;
  TROUPE_TRY(
      read_layer_types(j, c, sw, [L](int64_t l) { return !(l < 2 || l % 4 == 1 || l == L - 1); }));
  if (sw > 0) rope_on_windowed_only(c); // (RoPE where the layer has a window)
  c.attn_sinks = true;
  TROUPE_TRY(read_rope(j, c, 1e6, 1.0));
  TROUPE_TRY(read_expert_counts(j, c, "num_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  TROUPE_TRY_ASSIGN(fs, j.i("shared_expert_intermediate_size", 1024));
  c.F_expert = fe, c.F_shared = fs;
  c.router_sigmoid = true;
  c.norm_topk = j.b("norm_topk_prob", true);
  // dense layers: mlp_only_layers (the class's [0, 1]) and those off decoder_sparse_step
  TROUPE_TRY_ASSIGN(step, j.i("decoder_sparse_step", 1));
  if (step <= 0) return j.bad("'decoder_sparse_step' must be positive");
  c.moe_layers.assign(static_cast<size_t>(L), 0);
  for (int64_t l = 0; l < L; ++l) c.moe_layers[static_cast<size_t>(l)] = (l + 1) % step == 0;
  const json& only = j.raw("mlp_only_layers");
  const json dense = only.is_null() ? json::array({0, 1}) : only;
  if (!dense.is_array()) return j.bad("'mlp_only_layers' must list layers");
  for (const auto& v : dense) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= L)
      return j.bad(fmt::format("mlp_only_layers entry {}", v.dump()));
    c.moe_layers[v.get<size_t>()] = 0;
  }
  return {};
}

status build_flint(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  expert_names(m, n);
  n.shexp_gate_inp.clear(); // (its shared expert is added as it is)
  n.attn_sinks = "model.layers.{}.self_attn.softmax_offset"; // (its sinks, as published)
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

status build_kolibri(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string l = "model.layers.{}.", p = l + "mlp.";
  n.post_attn_norm = l + "post_attn_norm.weight";
  n.ffn_norm = l + "post_attention_layernorm.weight";
  n.post_ffn_norm = l + "post_ffn_norm.weight";
  n.moe_router = p + "gate.weight", n.moe_router_bias = l + "moe.router.expert_bias";
  hf_expert_names(n, p);
  hf_shared_expert_names(n, p);
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

namespace {
void expert_names_all(const model_source& m, decoder_names& n);
} // namespace

void expert_names(const model_source& m, decoder_names& n, bool shared) {
  expert_names_all(m, n);
  if (!shared) // (a family without shared experts: none of their names)
    n.shexp_gate_inp.clear(), n.shexp_gate.clear(), n.shexp_up.clear(), n.shexp_down.clear();
}

namespace {
// the names, shared experts' too (expert_names leaves those out where asked)
void expert_names_all(const model_source& m, decoder_names& n) {
  if (m.format == "hf") {
    const std::string& f = m.config.family;
    if (f == "mixtral" || f == "phimoe" || f == "minimax" || f == "minimax_m2" ||
        f == "minimax_m3") { // Mixtral's names
      const std::string p = "model.layers.{}.block_sparse_moe.";
      n.moe_router = p + "gate.weight";
      n.moe_gate = p + "experts.{e}.w1.weight";
      n.moe_up = p + "experts.{e}.w3.weight";
      n.moe_down = p + "experts.{e}.w2.weight";
      return;
    }
    const std::string p = "model.layers.{}.mlp.";
    n.moe_router = p + "gate.weight";
    hf_expert_names(n, p);
    for (int64_t l = 0; l < m.config.n_layer; ++l) // packed, as prepare_qwen3_moe_hf left them
      if (m.config.layer_moe(l)) {
        if (m.tensors->contains(fmt::format("model.layers.{}.mlp.experts.gate", l))) {
          n.moe_gate = p + "experts.gate";
          n.moe_up = p + "experts.up";
          n.moe_down = p + "experts.down";
        }
        break;
      }
    n.shexp_gate = p + "shared_expert.gate_proj.weight";
    n.shexp_up = p + "shared_expert.up_proj.weight";
    n.shexp_down = p + "shared_expert.down_proj.weight";
    n.shexp_gate_inp = p + "shared_expert_gate.weight";
    return;
  }
  const std::string b = "blk.{}.";
  n.moe_router = b + "ffn_gate_inp.weight";
  n.moe_gate = b + "ffn_gate_exps.weight";
  n.moe_up = b + "ffn_up_exps.weight";
  n.moe_down = b + "ffn_down_exps.weight";
  for (int64_t l = 0; l < m.config.n_layer; ++l) // gate and up fused (mistral4 as converted)
    if (m.config.layer_moe(l)) {
      if (m.tensors->contains(fmt::format("blk.{}.ffn_gate_up_exps.weight", l))) {
        n.moe_gate_up = b + "ffn_gate_up_exps.weight";
        n.moe_gate.clear(), n.moe_up.clear();
      }
      break;
    }
  n.shexp_gate = b + "ffn_gate_shexp.weight";
  n.shexp_up = b + "ffn_up_shexp.weight";
  n.shexp_down = b + "ffn_down_shexp.weight";
  n.shexp_gate_inp = b + "ffn_gate_inp_shexp.weight";
}

} // namespace

} // namespace troupe::arch
