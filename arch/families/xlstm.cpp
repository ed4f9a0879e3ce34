// xlstm.cpp (arch/families): xLSTM (xLSTMForCausalLM: NX-AI's xLSTM-7b). A stack of pre-norm
// blocks, each an mLSTM layer (decoder::mlstm: a matrix memory per head with exponential input
// and sigmoid forget gates, soft-capped, and a normaliser; no attention, no positions) and a
// SwiGLU FFN of round_up(hidden_size x ffn_proj_factor, ffn_round_up_to_multiple_of); RMS norms
// everywhere (the final one out_norm), logits soft-capped at output_logit_soft_cap. Its
// weights separate (weight_mode "single") or fused (q, k, v and the output gate in one tensor,
// the two gates in another, the FFN's gate and up in one). backbone.* names, lm_head untied by
// default. No GGUF form (llama.cpp has no xLSTM).
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// transformers' widths: the config class rounds C x factor up to a multiple of 64 (its cache is
// sized so) where the layer takes int(C x factor); a published model has the two agree
expected<int64_t> mlstm_width(hf_cfg& j, int64_t C, const char* key) {
  TROUPE_TRY_ASSIGN(factor, j.f(key, 0.5));
  const double x = static_cast<double>(C) * factor;
  const auto width = static_cast<int64_t>(x);
  const auto cached = static_cast<int64_t>(std::floor((x + 63) / 64) * 64);
  if (factor <= 0 || width <= 0 || width != cached)
    return j.unsupported(fmt::format("'{}' {}: hidden_size x {} = {} is not a positive multiple "
                                     "of 64 (transformers' layer and its cache would disagree)",
                                     key, factor, key, x));
  return width;
}

// a soft cap: null is none (xLSTM's library passes None through)
expected<double> soft_cap(hf_cfg& j, const char* key, double fallback) {
  if (j.present(key) && j.raw(key).is_null()) return 0.0;
  TROUPE_TRY_ASSIGN(v, j.f(key, fallback));
  if (v < 0) return j.bad(fmt::format("'{}' {} (a cap must not be negative)", key, v));
  return v;
}

} // namespace

status read_xlstm_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  // (transformers builds the embeddings from embedding_dim and the blocks from num_blocks,
  // xLSTM's own names; hidden_size and num_hidden_layers mirror them in a saved config)
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size"));
  if (j.present("embedding_dim") && !j.raw("embedding_dim").is_null()) {
    TROUPE_TRY_ASSIGN(E, j.req("embedding_dim"));
    if (E != C) return j.bad(fmt::format("'embedding_dim' {} is not 'hidden_size' {}", E, C));
  }
  const char* layers_key = j.present("num_blocks") && !j.raw("num_blocks").is_null()
                               ? "num_blocks"
                               : "num_hidden_layers";
  TROUPE_TRY_ASSIGN(L, j.req(layers_key));
  j.mark("num_hidden_layers");
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(H, j.req("num_heads"));
  if (L > max_layers) return j.bad(fmt::format("'{}' {} (at most {})", layers_key, L, max_layers));
  c.C = C, c.n_layer = L, c.V = V;
  TROUPE_TRY_ASSIGN(eps, j.f("norm_eps", 1e-6));
  c.norm_eps = eps;
  TROUPE_TRY_ASSIGN(cell_eps, j.f("eps", 1e-6));
  c.mlstm_eps = cell_eps;
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  c.ctx = 1 << 20; // (no positions: a context as long as the state is kept)
  c.rope_enabled = false;
  if (j.b("use_bias", false))
    return j.unsupported("'use_bias' true (biases on the projections and the norms)");
  if (!j.b("add_out_norm", true))
    return j.unsupported("'add_out_norm' false (transformers applies the final norm whatever it "
                         "says)");
  const std::string mode = j.s("weight_mode", "single");
  if (mode != "single" && mode != "fused")
    return j.unsupported(fmt::format("'weight_mode' {}", j.raw("weight_mode").dump()));
  TROUPE_TRY_ASSIGN(qk, mlstm_width(j, C, "qk_dim_factor"));
  TROUPE_TRY_ASSIGN(vd, mlstm_width(j, C, "v_dim_factor"));
  if (qk % H || vd % H)
    return j.unsupported(fmt::format("'num_heads' {} does not divide the key width {} and the "
                                     "value width {}",
                                     H, qk, vd));
  TROUPE_TRY_ASSIGN(gate_cap, soft_cap(j, "gate_soft_cap", 15.0));
  TROUPE_TRY_ASSIGN(logit_cap, soft_cap(j, "output_logit_soft_cap", 30.0));
  c.mlstm_gate_cap = gate_cap;
  c.final_softcap = logit_cap;
  // the FFN: SwiGLU, C x ffn_proj_factor rounded up as Python's float floor division does
  TROUPE_TRY_ASSIGN(ffn_factor, j.f("ffn_proj_factor", 2.667));
  TROUPE_TRY_ASSIGN(ffn_round, j.i("ffn_round_up_to_multiple_of", 64));
  const double fm = static_cast<double>(std::max<int64_t>(ffn_round, 1));
  const auto F =
      static_cast<int64_t>(std::floor((static_cast<double>(C) * ffn_factor + fm - 1) / fm) * fm);
  if (ffn_factor <= 0 || ffn_round <= 0 || F <= 0)
    return j.bad(fmt::format("'ffn_proj_factor' {} rounded to 'ffn_round_up_to_multiple_of' {}",
                             ffn_factor, ffn_round));
  c.F = F;
  c.gated_ffn = true;
  c.act = act_kind::silu;
  c.mlstm = true;
  c.mlstm_fused = mode == "fused";
  c.linear_layers.assign(static_cast<size_t>(L), 1);
  c.lin_v_heads = c.lin_k_heads = H;
  c.lin_k_dim = qk / H, c.lin_v_dim = vd / H, c.lin_conv = 1;
  c.H = c.Hkv = H, c.D = c.lin_v_dim; // (what the planner sizes heads by; no KV cache)
  // how the cell is computed (kernels, chunking, the states' and kernels' dtypes), not what
  for (const char* key :
       {"chunkwise_kernel", "sequence_kernel", "step_kernel", "mode", "chunk_size",
        "return_last_states", "autocast_kernel_dtype", "inference_state_dtype",
        "norm_reduction_force_float32", "max_inference_chunksize"})
    j.mark(key);
  return {};
}

status build_xlstm(const model_source& m, graph::graph& g) {
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: xLSTM is read from HF checkpoints only", m.path);
  const bool fused = m.config.mlstm_fused;
  decoder_names n;
  const std::string b = "backbone.", p = b + "blocks.{}.", x = p + "mlstm_layer.", f = p + "ffn.";
  n.tok_embd = b + "embeddings.weight";
  n.out_norm = b + "out_norm.weight";
  n.lm_head = "lm_head.weight";
  n.attn_norm = p + "norm_mlstm.weight";
  n.ffn_norm = p + "norm_ffn.weight";
  n.w_down = f + "proj_down.weight";
  n.mlstm_fused = fused;
  if (fused) {
    n.lin_q = x + "qkv_opreact.weight";
    n.mlstm_i = x + "ifgate_preact.weight", n.mlstm_i_b = x + "ifgate_preact.bias";
    n.w_gate_up = f + "proj_up_gate_z.weight";
  } else {
    n.lin_q = x + "q.weight", n.lin_k = x + "k.weight", n.lin_v = x + "v.weight";
    n.lin_z = x + "ogate_preact.weight";
    n.mlstm_i = x + "igate_preact.weight", n.mlstm_i_b = x + "igate_preact.bias";
    n.mlstm_f = x + "fgate_preact.weight", n.mlstm_f_b = x + "fgate_preact.bias";
    n.w_gate = f + "proj_up_gate.weight", n.w_up = f + "proj_up.weight";
  }
  n.lin_norm = x + "multihead_norm.weight";
  n.lin_out = x + "out_proj.weight";
  if (m.config.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
