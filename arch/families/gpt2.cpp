// gpt2.cpp (arch/families): GPT-2 (GPT2LMHeadModel): learned absolute positions added to the
// token embeddings, pre-LayerNorm blocks with biases, a GELU MLP, and Conv1D weights stored
// transposed ([in, out]); c_attn holds q, k and v as column blocks. Checkpoints name the
// tensors with or without the "transformer." prefix (the original OpenAI conversion has none).
// GPT-BigCode (GPTBigCodeForCausalLM: StarCoder, SantaCoder, WizardCoder ...) is GPT-2 with
// nn.Linear weights ([out, in]) and multi-query attention (c_attn: the queries, then one key and
// one value head), or without multi_query each head's q, k, v in turn; GGUF: llama.cpp's
// starcoder (multi-query only, its FFN 4 n_embd). GPT-J (GPTJForCausalLM): one LayerNorm feeding
// attention and MLP in parallel, q / k / v without biases, RoPE on neighbouring pairs of the first
// rotary_dim of each head, a GELU MLP with biases, the lm_head with a bias. OPT (OPTForCausalLM:
// facebook/opt-125m ... 66b): GPT-2's pre-LayerNorm block with nn.Linear weights, a ReLU MLP, and
// learned positions read two rows on (the table's first two rows are never used: prepare_opt_hf
// gives the rest as the table); the post-norm form (opt-350m's do_layer_norm_before false) and its
// projections in and out (word_embed_proj_dim) refuse by name. CodeGen (CodeGenForCausalLM,
// Salesforce codegen-350M ... 16B, mono / multi / nl): GPT-J with q, v and k in one qkv_proj of
// four model-parallel slices ([4, 3, C / 4]: each slice's q rows, then v's, then k's) and
// rotary_dim required (a null one is not a model transformers runs). BioGPT (BioGptForCausalLM:
// microsoft/biogpt, BioGPT-Large): OPT's block with an erf GELU, the token embeddings times
// sqrt(hidden) (scale_embedding), LayerNorm eps 1e-12, the head as output_projection.
#include "arch/families/decoder.hpp"

#include <cmath>

namespace troupe::arch {

status read_gpt2_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(C, j.req("n_embd"));
  TROUPE_TRY_ASSIGN(L, j.req("n_layer"));
  TROUPE_TRY_ASSIGN(H, j.req("n_head"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.req("n_positions"));
  TROUPE_TRY_ASSIGN(F, j.i("n_inner", 4 * C));
  TROUPE_TRY_ASSIGN(eps, j.f("layer_norm_epsilon", 1e-5));
  c.C = C, c.n_layer = L, c.H = H, c.Hkv = H, c.V = V, c.ctx = ctx, c.F = F ? F : 4 * C;
  c.D = C / H;
  c.norm_eps = eps;
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.rope_enabled = false;
  c.learned_positions = true;
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.names.output = "lm_head.weight";
  if (!j.b("scale_attn_weights", true)) c.attn_scale = 1.0;
  c.attn_scale_by_layer = j.b("scale_attn_by_inverse_layer_idx", false);
  j.mark("reorder_and_upcast_attn"); // the same math in higher precision
  j.mark("n_ctx");                   // old configs: unused by the model
  if (j.b("add_cross_attention", false))
    return j.unsupported("'add_cross_attention' (an encoder-decoder GPT-2) is not supported");
  const bool bigcode = c.family == "gpt_bigcode";
  if (bigcode) {
    // (softmax in f32, and whether its scale is applied there: the same math in f32)
    for (const char* k : {"attention_softmax_in_fp32", "scale_attention_softmax_in_fp32"})
      j.mark(k);
    c.Hkv = j.b("multi_query", true) ? 1 : H;
    if (j.has("num_key_value_heads")) { // (transformers 5 writes the multi_query's count)
      TROUPE_TRY_ASSIGN(kv, j.i("num_key_value_heads", c.Hkv));
      if (kv != c.Hkv)
        return j.bad(fmt::format("num_key_value_heads {} against multi_query's {}", kv, c.Hkv));
    }
  }
  TROUPE_TRY(read_activation(j.s("activation_function", bigcode ? "gelu_pytorch_tanh" : "gelu_new"),
                             c, j.where()));
  return {};
}

// GGUF: the converter transposes the Conv1D weights to [out, in] and keeps c_attn fused
// (attn_qkv); context_length is the position table's length.
status read_gpt2_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_epsilon", 1e-5));
  c.D = c.C / c.H;
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.rope_enabled = false;
  c.learned_positions = true;
  c.act = act_kind::gelu_tanh; // gelu_new (GPT-BigCode: gelu_pytorch_tanh, the same)
  return {};
}

status read_gptj_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(C, j.req("n_embd"));
  TROUPE_TRY_ASSIGN(L, j.req("n_layer"));
  TROUPE_TRY_ASSIGN(H, j.req("n_head"));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("n_positions", 2048));
  TROUPE_TRY_ASSIGN(F, j.i("n_inner", 4 * C));
  TROUPE_TRY_ASSIGN(eps, j.f("layer_norm_epsilon", 1e-5));
  if (L > max_layers || C % H)
    return j.bad(fmt::format("n_embd {}, n_head {}, n_layer {}", C, H, L));
  c.C = C, c.n_layer = L, c.H = c.Hkv = H, c.V = V, c.ctx = ctx, c.F = F ? F : 4 * C;
  c.D = C / H;
  c.norm_eps = eps;
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.mlp_bias = true;
  c.lm_head_bias = true;
  c.residual = residual_kind::parallel;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_activation(j.s("activation_function", "gelu_new"), c, j.where()));
  // RoPE on the first rotary_dim dims of each head (null: all), neighbouring pairs, base 10000
  if (c.family == "codegen") {
    if (j.raw("rotary_dim").is_null()) return j.unsupported("'rotary_dim' null");
    for (const char* k : {"n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop"}) j.mark(k);
  }
  TROUPE_TRY_ASSIGN(rot, j.i("rotary_dim", c.D));
  if (rot <= 0 || rot > c.D || rot % 2)
    return j.bad(fmt::format("rotary_dim {} for heads of {}", rot, c.D));
  c.rope.theta = 10000.0;
  c.rope.rot_dim = static_cast<int>(rot);
  c.rope.layout = rope_layout::interleaved;
  return {};
}

status read_opt_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  // (ffn_dim read as intermediate_size: the family's hf_aliases; nn.LayerNorm's eps)
  TROUPE_TRY(read_hf_dims(j, c, nullptr, 1e-5));
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.rope_enabled = false;
  c.learned_positions = true;
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  if (j.b("enable_bias", true)) c.qkv_bias = c.o_bias = c.mlp_bias = true;
  if (!j.b("do_layer_norm_before", true))
    return j.unsupported("'do_layer_norm_before' false (OPT-350m's norms after each sublayer)");
  if (j.b("_remove_final_layer_norm", false))
    return j.unsupported("'_remove_final_layer_norm' true");
  if (!j.b("layer_norm_elementwise_affine", true))
    return j.unsupported("'layer_norm_elementwise_affine' false");
  TROUPE_TRY_ASSIGN(proj, j.i("word_embed_proj_dim", c.C));
  if (proj != c.C)
    return j.unsupported(
        fmt::format("word_embed_proj_dim {} (projections in and out of {})", proj, c.C));
  for (const char* k : {"dropout", "layerdrop", "init_std"}) j.mark(k);
  return read_activation(j.s("activation_function", "relu"), c, j.where());
}

// BioGPT (BioGptForCausalLM): OPT's block (learned positions from row 2, pre-LayerNorms,
// biases) with GELU, the embeddings times sqrt(hidden) where scale_embedding, the head named
// output_projection
status read_biogpt_hf(hf_cfg& j, model_config& c) {
  c.names.output = "output_projection.weight";
  TROUPE_TRY(read_hf_dims(j, c, "layer_norm_eps", 1e-12));
  c.norm = norm_kind::layer;
  c.gated_ffn = false;
  c.rope_enabled = false;
  c.learned_positions = true;
  c.tie_embeddings = j.b("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  if (j.b("scale_embedding", true)) c.embed_scale = std::sqrt(static_cast<double>(c.C));
  for (const char* k :
       {"hidden_dropout_prob", "attention_probs_dropout_prob", "layerdrop", "activation_dropout"})
    j.mark(k);
  return read_activation(j.s("hidden_act", "gelu"), c, j.where());
}

namespace {

// the position table from its third row: position p reads row p + 2 (OPT's, BioGPT's)
status positions_from2(const model_config& c, tensor_index& t, const std::string& prefix) {
  const std::string name = prefix + "embed_positions.weight";
  TROUPE_TRY_ASSIGN(w, take_tensor(t, name, {c.ctx + 2, c.C}));
  if (!w->supported || is_quantized(w->type))
    return make_error(errc::unsupported, "{}: '{}' must be f32, f16 or bf16", name, name);
  const size_t row = row_bytes(w->type, c.C);
  if (w->nbytes < static_cast<uint64_t>((c.ctx + 2) * static_cast<int64_t>(row)))
    return make_error(errc::corrupt_file, "{}: '{}' is short", name, name);
  std::vector<uint8_t> bytes(w->data + 2 * row, w->data + (c.ctx + 2) * row);
  return add_repacked_tensor(t, prefix + "embed_positions.from2", w->type, shape{c.ctx, c.C},
                             std::move(bytes), w->file);
}

} // namespace

status prepare_opt_hf(const model_config& c, tensor_index& t) {
  return positions_from2(c, t, "model.decoder.");
}

status prepare_biogpt_hf(const model_config& c, tensor_index& t) {
  return positions_from2(c, t, "biogpt.");
}

status build_gpt2(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf") {
    decoder_names n = gguf_layout(m);
    if (c.tie_embeddings) n.lm_head.clear();
    return build_decoder(m, n, g);
  }
  if (c.family == "opt" || c.family == "biogpt") {
    const bool bio = c.family == "biogpt";
    const std::string d = bio ? "biogpt." : "model.decoder.", h = d + "layers.{}.";
    decoder_names n;
    n.tok_embd = d + "embed_tokens.weight", n.pos_embd = d + "embed_positions.from2";
    n.attn_norm = h + "self_attn_layer_norm.weight",
    n.attn_norm_b = h + "self_attn_layer_norm.bias";
    const std::string a = h + "self_attn.";
    n.wq = a + "q_proj.weight", n.wk = a + "k_proj.weight", n.wv = a + "v_proj.weight";
    n.wo = a + "out_proj.weight";
    if (c.qkv_bias)
      n.bq = a + "q_proj.bias", n.bk = a + "k_proj.bias", n.bv = a + "v_proj.bias",
      n.bo = a + "out_proj.bias";
    n.ffn_norm = h + "final_layer_norm.weight", n.ffn_norm_b = h + "final_layer_norm.bias";
    n.w_up = h + "fc1.weight", n.w_down = h + "fc2.weight";
    if (c.mlp_bias) n.b_up = h + "fc1.bias", n.b_down = h + "fc2.bias";
    const std::string out = bio ? "layer_norm." : "final_layer_norm.";
    n.out_norm = d + out + "weight", n.out_norm_b = d + out + "bias";
    n.lm_head = c.tie_embeddings ? "" : bio ? "output_projection.weight" : "lm_head.weight";
    return build_decoder(m, n, g);
  }
  if (c.family == "gptj" || c.family == "codegen") {
    const std::string h = "transformer.h.{}.";
    decoder_names n;
    n.tok_embd = "transformer.wte.weight";
    n.attn_norm = h + "ln_1.weight", n.attn_norm_b = h + "ln_1.bias";
    if (c.family == "codegen") {
      n.wqkv = h + "attn.qkv_proj.weight";
      n.layout = qkv_layout::mp4_qvk;
    } else {
      n.wq = h + "attn.q_proj.weight", n.wk = h + "attn.k_proj.weight";
      n.wv = h + "attn.v_proj.weight";
    }
    n.wo = h + "attn.out_proj.weight";
    n.w_up = h + "mlp.fc_in.weight", n.b_up = h + "mlp.fc_in.bias";
    n.w_down = h + "mlp.fc_out.weight", n.b_down = h + "mlp.fc_out.bias";
    n.out_norm = "transformer.ln_f.weight", n.out_norm_b = "transformer.ln_f.bias";
    n.lm_head = c.tie_embeddings ? "" : "lm_head.weight";
    n.lm_head_b = "lm_head.bias"; // (tied or not)
    return build_decoder(m, n, g);
  }
  const std::string p = m.tensors->contains("transformer.wte.weight") ? "transformer." : "";
  const std::string h = p + "h.{}.";
  decoder_names n;
  n.tok_embd = p + "wte.weight";
  n.pos_embd = p + "wpe.weight";
  n.attn_norm = h + "ln_1.weight", n.attn_norm_b = h + "ln_1.bias";
  n.ffn_norm = h + "ln_2.weight", n.ffn_norm_b = h + "ln_2.bias";
  n.wqkv = h + "attn.c_attn.weight", n.bqkv = h + "attn.c_attn.bias";
  // GPT-BigCode: [Hkv, G + 2, D], one group of every query (multi-query) or G = 1 (per head)
  n.layout = c.family == "gpt_bigcode" ? qkv_layout::grouped : qkv_layout::blocks;
  n.wo = h + "attn.c_proj.weight", n.bo = h + "attn.c_proj.bias";
  n.w_up = h + "mlp.c_fc.weight", n.b_up = h + "mlp.c_fc.bias";
  n.w_down = h + "mlp.c_proj.weight", n.b_down = h + "mlp.c_proj.bias";
  n.out_norm = p + "ln_f.weight", n.out_norm_b = p + "ln_f.bias";
  n.lm_head = c.tie_embeddings ? "" : "lm_head.weight";
  n.transposed = c.family == "gpt2"; // (Conv1D's [in, out]; GPT-BigCode's are nn.Linear)
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
