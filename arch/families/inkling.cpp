// inkling.cpp (arch/families): Thinking Machines' Inkling, its text model (InklingForCausalLM;
// the decoder's inkling layers, decoder_inkling.cpp; model_config::inkling): no RoPE but a bias
// per head and distance mixed from relative states of each query (r_proj through the layer's
// profiles), short convolutions on k, v and both sublayers' outputs, q / k RMS norms, sliding
// layers of their own geometry (swa_* heads, head dim) beside full ones (log-scaled logits past
// log_scaling_n_floor), a normed embedding, dense MLPs and DeepSeek-like sigmoid experts whose
// shared experts sit in the router's normalisation; the head's input divided by
// logits_mup_width_multiplier, logits past unpadded_vocab_size never produced. HF only: in
// transformers' layout (InklingForCausalLM) and as published (InklingForConditionalGeneration:
// the text model's tensors under model.llm. by their own names, gate and up rows alternating in
// the w13 tensors, read through strided row views; the vision and audio towers stay unread).
#include <cmath>

#include "arch/families/decoder.hpp"
#include "arch/families/weights.hpp"

namespace troupe::arch {

namespace {
constexpr const char* unpadded_bias = "lm_head.unpadded_bias";
} // namespace

status read_inkling_hf(hf_cfg& j, model_config& c) {
  c.names.output =
      c.arch == "InklingForConditionalGeneration" ? "model.llm.unembed.weight" : "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6, false));
  c.tie_embeddings = false; // (embed and unembed are separate tensors, never tied)
  j.mark("tie_word_embeddings");
  auto either = [&j](const char* a, const char* b, int64_t def) -> expected<int64_t> {
    return j.has(a) ? j.req(a) : j.i(b, def);
  };
  if (j.has("model_max_length")) TROUPE_TRY_SET(c.ctx, j.req("model_max_length"));
  // the geometries: the full layers' (num_attention_heads, num_key_value_heads, head_dim) and the
  // sliding layers' (swa_*)
  TROUPE_TRY_ASSIGN(D, j.i("head_dim", 128));
  TROUPE_TRY_ASSIGN(Hs, j.i("swa_num_attention_heads", 64));
  TROUPE_TRY_ASSIGN(Hkvs, j.i("swa_num_key_value_heads", 16));
  TROUPE_TRY_ASSIGN(Ds, j.i("swa_head_dim", 128));
  TROUPE_TRY_ASSIGN(window, either("sliding_window_size", "sliding_window", 512));
  if (D <= 0 || Hs <= 0 || Hkvs <= 0 || Ds <= 0 || window <= 0 || Hs % Hkvs || c.H % c.Hkv)
    return j.bad(
        fmt::format("head_dim {}, swa heads {} / {} of {}, window {}", D, Hs, Hkvs, Ds, window));
  const int64_t L = c.n_layer, Hf = c.H;
  // which layers slide: layer_types ("hybrid_sliding" / "hybrid"), or local_layer_ids, or all
  // but every sixth
  std::vector<uint8_t> sliding(static_cast<size_t>(L), 0);
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != L)
      return j.bad(fmt::format("'layer_types' must list {} layer types", L));
    for (size_t i = 0; i < lt.size(); ++i) {
      if (lt[i] == "hybrid_sliding")
        sliding[i] = 1;
      else if (lt[i] != "hybrid")
        return j.unsupported(fmt::format("layer_types[{}] = {}", i, lt[i].dump()));
    }
    j.mark("local_layer_ids");
  } else if (const json& ids = j.raw("local_layer_ids"); !ids.is_null()) {
    if (!ids.is_array()) return j.bad("'local_layer_ids' must list layer indices");
    for (const json& i : ids) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= L)
        return j.bad(fmt::format("local_layer_ids holds {}", i.dump()));
      sliding[static_cast<size_t>(i.get<int64_t>())] = 1;
    }
  } else {
    for (int64_t i = 0; i < L; ++i) sliding[static_cast<size_t>(i)] = (i + 1) % 6 != 0;
  }
  // base geometry: the sliding layers'; the full layers' as the second geometry
  const int64_t Hkvf = c.Hkv; // (read_hf_dims's num_key_value_heads: the full layers')
  c.D = Ds, c.Hkv = Hkvs, c.D_full = D, c.Hkv_full = Hkvf;
  c.heads_by_layer.assign(static_cast<size_t>(L), 0);
  for (int64_t i = 0; i < L; ++i) c.heads_by_layer[static_cast<size_t>(i)] = sliding[i] ? Hs : Hf;
  c.H = std::max(Hs, Hf);
  c.sliding_window = window;
  c.windowed = sliding;
  c.nope_layers.assign(static_cast<size_t>(L), 1); // (no RoPE anywhere)
  c.rope_enabled = false;
  c.attn_scale = 0; // (per layer: 1 / D, set by the builder)
  c.qk_norm = qk_norm_kind::head;
  c.embed_norm = true;
  // the relative biases and the log scaling
  TROUPE_TRY_ASSIGN(d_rel, j.i("d_rel", 16));
  TROUPE_TRY_ASSIGN(extent, j.i("rel_extent", 1024));
  TROUPE_TRY_ASSIGN(conv, either("conv_kernel_size", "sconv_kernel_size", 4));
  if (d_rel <= 0 || extent <= 0 || conv < 2)
    return j.bad(fmt::format("d_rel {}, rel_extent {}, conv_kernel_size {}", d_rel, extent, conv));
  c.inkling = true, c.rel_dim = d_rel, c.rel_extent = extent, c.sconv = conv;
  if (const json& nf = j.raw("log_scaling_n_floor"); !nf.is_null()) {
    TROUPE_TRY_ASSIGN(floor, j.req("log_scaling_n_floor"));
    TROUPE_TRY_ASSIGN(alpha, j.f("log_scaling_alpha", 0.1));
    if (floor <= 0) return j.bad(fmt::format("log_scaling_n_floor {}", floor));
    c.log_scale_floor = floor, c.log_scale_alpha = alpha;
  } else {
    j.mark("log_scaling_alpha");
  }
  // the FFNs: dense MLPs (their own width where dense_intermediate_size is given, and then
  // intermediate_size is the experts') and experts
  TROUPE_TRY(read_activation(j.s("hidden_act", "silu"), c, j.where()));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 3072));
  if (j.has("dense_intermediate_size")) {
    fe = c.F;
    TROUPE_TRY_SET(c.F, j.req("dense_intermediate_size"));
  }
  c.moe_layers.assign(static_cast<size_t>(L), 1);
  TROUPE_TRY_ASSIGN(listed,
                    read_layer_kinds(j, "mlp_layer_types", L, "sparse", "dense", c.moe_layers));
  if (!listed) {
    TROUPE_TRY_ASSIGN(dense, j.i("dense_mlp_idx", 0));
    for (int64_t i = 0; i < std::min(dense, L); ++i) c.moe_layers[static_cast<size_t>(i)] = 0;
  } else {
    j.mark("dense_mlp_idx");
  }
  TROUPE_TRY_ASSIGN(e, either("n_routed_experts", "num_local_experts", 256));
  TROUPE_TRY_ASSIGN(k, j.i("num_experts_per_tok", 6));
  TROUPE_TRY_ASSIGN(shared, j.i("n_shared_experts", 2));
  TROUPE_TRY_ASSIGN(scale, j.f("route_scale", 8.0));
  if (e <= 0 || k <= 0 || k > e || shared < 1 || fe <= 0)
    return j.bad(fmt::format("{} of {} experts a token, {} shared, moe_intermediate_size {}", k, e,
                             shared, fe));
  if (!j.b("shared_expert_sink", true))
    return j.unsupported("shared_expert_sink false (transformers' router always normalises the "
                         "shared experts with the chosen ones)");
  c.n_expert = e, c.n_expert_used = k, c.F_expert = fe, c.F_shared = shared * fe;
  c.sink_shared = shared, c.expert_scale = scale;
  c.router_sigmoid = c.router_bias = true;
  // the head
  TROUPE_TRY_ASSIGN(mup, j.has("logits_mup_width_multiplier")
                             ? j.f("logits_mup_width_multiplier", 24.0)
                             : j.f("embedding_multiplier", 24.0));
  if (!(mup > 0)) return j.bad(fmt::format("logits_mup_width_multiplier {}", mup));
  c.logit_scale = 1.0 / static_cast<double>(mup);
  if (const json& u = j.raw("unpadded_vocab_size"); !u.is_null()) {
    TROUPE_TRY_ASSIGN(rows, j.req("unpadded_vocab_size"));
    if (rows <= 0 || rows > c.V)
      return j.bad(fmt::format("unpadded_vocab_size {} of vocab_size {}", rows, c.V));
    c.logit_rows = rows < c.V ? rows : 0;
  }
  for (const char* key :
       {"attention_dropout", "rms_norm_eps_moe_gate", "num_mtp_layers", "chain_hidden_post_norm",
        "mtp_hidden_states_first", "mtp_local_layer_ids", "output_router_logits",
        "router_aux_loss_coef", "initializer_range", "number_of_conv_states"})
    j.mark(key); // (training, or multi-token prediction, which is not run)
  return {};
}

status prepare_inkling_hf(const model_config& c, tensor_index& t) {
  // the multi-token-prediction layers are not run
  for (const std::string& name : t.names())
    if (name.starts_with("model.mtp.") || name.starts_with("mtp.")) t.mark_consumed(name);
  if (c.logit_rows <= 0) return {};
  // logits past unpadded_vocab_size dropped: a bias on them of -1e30 once the head's input is
  // divided by the muP multiplier (logit_scale scales the biased logits)
  std::vector<uint8_t> bias(static_cast<size_t>(c.V) * sizeof(float), 0);
  auto* b = reinterpret_cast<float*>(bias.data());
  std::fill(b + c.logit_rows, b + c.V, static_cast<float>(-1e30 / c.logit_scale));
  return add_derived_tensor(t, unpadded_bias, dtype::f32, shape{c.V}, "F32", std::move(bias),
                            "the logits past unpadded_vocab_size (derived)");
}

namespace {
// The published checkpoint's names (model.llm.*; transformers' conversion_mapping renames them)
decoder_names published_names() {
  decoder_names n;
  const std::string l = "model.llm.layers.{}.", a = l + "attn.", f = l + "mlp.";
  n.tok_embd = "model.llm.embed.weight", n.embd_norm = "model.llm.embed_norm.weight";
  n.out_norm = "model.llm.norm.weight", n.lm_head = "model.llm.unembed.weight";
  n.attn_norm = l + "attn_norm.weight", n.ffn_norm = l + "mlp_norm.weight";
  n.wq = a + "wq_du.weight", n.wk = a + "wk_dv.weight", n.wv = a + "wv_dv.weight";
  n.wo = a + "wo_ud.weight", n.q_norm = a + "q_norm.weight", n.k_norm = a + "k_norm.weight";
  n.inkling_r = a + "wr_du.weight", n.inkling_rel = a + "rel_logits_proj.proj";
  n.inkling_k_conv = a + "k_sconv.weight", n.inkling_v_conv = a + "v_sconv.weight";
  n.inkling_attn_conv = l + "attn_sconv.weight", n.inkling_mlp_conv = l + "mlp_sconv.weight";
  n.inkling_mlp_scale = f + "global_scale";
  n.gate_up_interleaved = true; // w13: gate and up rows alternate
  n.w_gate_up = f + "w13_dn.weight", n.w_down = f + "w2_md.weight";
  n.moe_router = f + "gate.weight", n.moe_router_bias = f + "gate.bias";
  n.inkling_router_scale = f + "gate.global_scale";
  n.moe_gate_up = f + "experts.w13_weight", n.moe_down = f + "experts.w2_weight";
  n.shexp_gate_up = f + "shared_experts.shared_w13_weight";
  n.shexp_down = f + "shared_experts.shared_w2_weight";
  return n;
}
} // namespace

status build_inkling(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (c.arch == "InklingForConditionalGeneration") {
    decoder_names n = published_names();
    if (c.logit_rows > 0) n.lm_head_b = unpadded_bias;
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(false, false, false);
  const std::string a = "model.layers.{}.self_attn.", l = "model.layers.{}.";
  n.embd_norm = "model.embed_tokens.embed_norm.weight";
  n.inkling_r = a + "r_proj.weight", n.inkling_rel = a + "rel_logits_proj.proj";
  n.inkling_k_conv = a + "k_sconv.conv1d.weight", n.inkling_v_conv = a + "v_sconv.conv1d.weight";
  n.inkling_attn_conv = l + "attn_sconv.conv1d.weight";
  n.inkling_mlp_conv = l + "mlp_sconv.conv1d.weight";
  n.inkling_mlp_scale = l + "mlp.global_scale";
  const std::string e = l + "mlp.";
  n.moe_router = e + "gate.weight", n.moe_router_bias = e + "gate.e_score_correction_bias";
  n.inkling_router_scale = e + "gate.global_scale";
  n.moe_gate_up = e + "experts.gate_up_proj", n.moe_down = e + "experts.down_proj";
  n.shexp_gate = e + "shared_experts.gate_proj", n.shexp_up = e + "shared_experts.up_proj";
  n.shexp_down = e + "shared_experts.down_proj";
  if (c.logit_rows > 0) n.lm_head_b = unpadded_bias;
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
