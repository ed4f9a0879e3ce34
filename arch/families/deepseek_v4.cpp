// deepseek_v4.cpp (arch/families): DeepSeek-V4 (DeepseekV4ForCausalLM): manifold-constrained
// hyper-connections (hc_mult residual streams a token, mixed into and out of each sublayer by
// weights its own streams give, the residual mix projected by Sinkhorn-Knopp towards a doubly
// stochastic matrix), shared-KV multi-query attention with sinks over a sliding window, plus on
// most layers entries that compress a window of tokens each (4: overlapping windows, of which a
// lightning indexer picks index_topk; 128: all of them), a grouped low-rank output projection,
// hash routing (a table of experts per token id) on the first layers and sqrt-softplus scores
// on the rest, clamped SwiGLU experts and a shared expert. config.json as transformers 5 writes it
// (layer_types, compress_rates, mlp_layer_types, rope_parameters {main, compress}) or as
// DeepSeek publishes it (compress_ratios, num_hash_layers, qk_rope_head_dim, rope_theta /
// compress_rope_theta / rope_scaling); tensor names as published (attn.wq_a, ffn.experts.{e}.w1,
// hc_attn_fn ...), with or without transformers' "model." prefix. The multi-token-prediction
// layers are not read. FP8 / FP4 checkpoints are refused (quantization_config); GGUF has no form.
#include <cmath>
#include <cstring>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

namespace {

// the compressed layers' RoPE (rope_parameters["compress"]), or the legacy keys: YaRN (and the
// like) from rope_scaling on compress_rope_theta, its attention factor 1 unless given
status read_v4_rope(hf_cfg& j, model_config& c) {
  const json& rp = j.raw("rope_parameters");
  j.mark("rope_theta"), j.mark("compress_rope_theta"), j.mark("rope_scaling");
  j.mark("partial_rotary_factor"), j.mark("qk_rope_head_dim");
  const std::string where = j.where();
  if (rp.is_object() && rp.contains("main") && rp.contains("compress")) {
    TROUPE_TRY(read_rope_dict(rp["main"], c, c.rope, 10000.0, where));
    TROUPE_TRY(read_rope_dict(rp["compress"], c, c.rope_compress, 160000.0, where));
  } else {
    TROUPE_TRY_ASSIGN(theta, j.f("rope_theta", 10000.0));
    TROUPE_TRY_ASSIGN(ctheta, j.f("compress_rope_theta", 160000.0));
    json main = {{"rope_type", "default"}, {"rope_theta", theta}};
    json comp = json::object();
    const json& legacy = rp.is_object() ? rp : j.raw("rope_scaling");
    if (legacy.is_object()) comp = legacy;
    comp["rope_theta"] = ctheta;
    if (!comp.contains("rope_type")) comp["rope_type"] = comp.value("type", std::string("default"));
    if (comp["rope_type"] == "yarn" && !comp.contains("attention_factor"))
      comp["attention_factor"] = 1.0;
    TROUPE_TRY(read_rope_dict(main, c, c.rope, theta, where));
    TROUPE_TRY(read_rope_dict(comp, c, c.rope_compress, ctheta, where));
  }
  return {};
}

} // namespace

status read_deepseek_v4_hf(hf_cfg& j, model_config& c) {
  c.names.output = "head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-6));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (c.tie_embeddings) return j.unsupported("tie_word_embeddings true");
  if (c.Hkv != 1) return j.unsupported("num_key_value_heads other than 1 (one shared KV head)");
  if (j.b("attention_bias", false)) return j.unsupported("attention_bias true");
  if (j.b("mlp_bias", false)) return j.unsupported("mlp_bias true");
  if (j.s("hidden_act", "silu") != "silu") return j.unsupported("hidden_act other than silu");
  j.mark("num_nextn_predict_layers"); // multi-token prediction: not used to generate
  j.mark("topk_method");              // noaux_tc: the choice by score + bias (as transformers)
  j.mark("norm_topk_prob");           // transformers renormalises the chosen weights always
  for (const char* k : {"router_aux_loss_coef", "router_jitter_noise", "output_router_logits"})
    j.mark(k); // training only
  TROUPE_TRY_ASSIGN(ql, j.req("q_lora_rank"));
  TROUPE_TRY_ASSIGN(og, j.req("o_groups"));
  TROUPE_TRY_ASSIGN(orank, j.req("o_lora_rank"));
  c.q_lora = ql, c.o_groups = og, c.o_rank = orank;
  if (c.H % og) return j.bad(fmt::format("o_groups {} does not divide {} heads", og, c.H));
  // the rotated dims: qk_rope_head_dim, or head_dim times partial_rotary_factor
  TROUPE_TRY_ASSIGN(rope_dims, j.i("qk_rope_head_dim", 0));
  int64_t R = rope_dims;
  if (R == 0) {
    TROUPE_TRY_ASSIGN(partial, j.f("partial_rotary_factor", 64.0 / 512.0));
    R = static_cast<int64_t>(static_cast<double>(c.D) * partial);
  }
  if (R <= 0 || R % 2 || R > c.D) return j.bad(fmt::format("{} rotated dims of {}", R, c.D));
  c.qk_rope = R;
  TROUPE_TRY(read_v4_rope(j, c));
  for (rope_spec* s : {&c.rope, &c.rope_compress}) {
    s->layout = rope_layout::interleaved; // pairs (2i, 2i + 1) of the head's last R dims
    s->rot_dim = static_cast<int>(R);
    s->rot_offset = static_cast<int>(c.D - R);
  }
  TROUPE_TRY_ASSIGN(hc, j.req("hc_mult"));
  TROUPE_TRY_ASSIGN(iters, j.req("hc_sinkhorn_iters"));
  TROUPE_TRY_ASSIGN(hc_eps, j.f("hc_eps", 1e-6));
  if (hc > 64 || iters > 1000)
    return j.bad(fmt::format("hc_mult {}, hc_sinkhorn_iters {}", hc, iters));
  c.hc_mult = hc, c.hc_iters = iters, c.hc_eps = hc_eps;
  TROUPE_TRY_ASSIGN(win, j.req("sliding_window"));
  c.sliding_window = win;
  c.windowed.assign(static_cast<size_t>(c.n_layer), 1);
  c.attn_sinks = true;
  // the attention kind of each layer: layer_types, or the published compress_ratios (their
  // trailing entries are the multi-token-prediction layers')
  int64_t csa = 4, hca = 128;
  if (const json& cr = j.raw("compress_rates"); !cr.is_null()) {
    if (!cr.is_object()) return j.bad("'compress_rates' must be an object");
    for (const auto& [k, v] : cr.items()) {
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > 65536)
        return j.bad(fmt::format("compress_rates {} {}", k, v.dump()));
      if (k == "compressed_sparse_attention")
        csa = v.get<int64_t>();
      else if (k == "heavily_compressed_attention")
        hca = v.get<int64_t>();
      else
        return j.unsupported(fmt::format("compress_rates key '{}'", k));
    }
  }
  TROUPE_TRY_ASSIGN(rate_csa, j.i("compress_rate_csa", csa));
  TROUPE_TRY_ASSIGN(rate_hca, j.i("compress_rate_hca", hca));
  c.compress.assign(static_cast<size_t>(c.n_layer), 0);
  std::vector<uint8_t> sparse(static_cast<size_t>(c.n_layer), 0);
  const json& lt = j.raw("layer_types");
  const json& ratios = j.raw("compress_ratios");
  if (!lt.is_null()) {
    j.mark("compress_ratios");
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) < c.n_layer)
      return j.bad(fmt::format("'layer_types' must list {} layers", c.n_layer));
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const json& t = lt[static_cast<size_t>(l)];
      if (t == "compressed_sparse_attention") {
        c.compress[static_cast<size_t>(l)] = static_cast<int32_t>(rate_csa);
        sparse[static_cast<size_t>(l)] = 1;
      } else if (t == "heavily_compressed_attention") {
        c.compress[static_cast<size_t>(l)] = static_cast<int32_t>(rate_hca);
      } else if (t != "sliding_attention") {
        return j.unsupported(fmt::format("layer_types[{}] {}", l, t.dump()));
      }
    }
  } else if (!ratios.is_null()) { // 0: the window only; 4: CSA; 128: HCA (transformers' map)
    if (!ratios.is_array() || static_cast<int64_t>(ratios.size()) < c.n_layer)
      return j.bad(fmt::format("'compress_ratios' must cover {} layers", c.n_layer));
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const json& r = ratios[static_cast<size_t>(l)];
      const int64_t v = r.is_number_integer() ? r.get<int64_t>() : -1;
      if (v == 4) {
        c.compress[static_cast<size_t>(l)] = static_cast<int32_t>(rate_csa);
        sparse[static_cast<size_t>(l)] = 1;
      } else if (v == 128) {
        c.compress[static_cast<size_t>(l)] = static_cast<int32_t>(rate_hca);
      } else if (v != 0) {
        return j.unsupported(fmt::format("compress_ratios[{}] {} (0, 4 and 128 are)", l, r.dump()));
      }
    }
  } else { // DeepseekV4Config's default: 2 HCA, then CSA / HCA alternating
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const bool is_csa = l >= 2 && (l - 2) % 2 == 1;
      c.compress[static_cast<size_t>(l)] = static_cast<int32_t>(is_csa ? rate_csa : rate_hca);
      sparse[static_cast<size_t>(l)] = is_csa;
    }
  }
  c.compress_sparse = std::move(sparse);
  TROUPE_TRY_ASSIGN(topk, j.i("index_topk", 512));
  TROUPE_TRY_ASSIGN(idim, j.i("index_head_dim", 128));
  TROUPE_TRY_ASSIGN(iheads, j.i("index_n_heads", 64));
  if (topk <= 0 || topk > (1 << 24) || idim < R || idim > 4096 || iheads <= 0 || iheads > 4096)
    return j.bad(
        fmt::format("index_topk {}, index_head_dim {}, index_n_heads {}", topk, idim, iheads));
  c.dsa_topk = topk, c.dsa_dim = idim, c.dsa_heads = iheads;
  // experts: every layer's FFN; hash routing on the first ones
  TROUPE_TRY(read_expert_counts(j, c, "n_routed_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.req("moe_intermediate_size"));
  c.F_expert = fe;
  TROUPE_TRY_ASSIGN(shared, j.i("n_shared_experts", 1));
  if (shared != 1) return j.unsupported(fmt::format("n_shared_experts {} (1 is)", shared));
  c.F_shared = fe;
  TROUPE_TRY_ASSIGN(scale, j.f("routed_scaling_factor", 1.5));
  c.expert_scale = scale;
  c.norm_topk = true;
  c.router_bias = true;
  const std::string score = j.s("scoring_func", "sqrtsoftplus");
  if (score == "sqrtsoftplus")
    c.router_sqrt_softplus = true;
  else if (score == "sigmoid")
    c.router_sigmoid = true;
  else
    return j.unsupported(fmt::format("scoring_func '{}' (sqrtsoftplus, sigmoid are)", score));
  TROUPE_TRY_ASSIGN(limit, j.f("swiglu_limit", 10.0));
  c.swiglu_limit = limit, c.swiglu_clamp = limit > 0;
  c.moe_layers.assign(static_cast<size_t>(c.n_layer), 1);
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", c.n_layer, "hash_moe", "moe", c.hash_layers));
  if (listed) {
    j.mark("num_hash_layers");
  } else {
    TROUPE_TRY_ASSIGN(nh, j.i("num_hash_layers", 3));
    c.hash_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 0; l < std::min(nh, c.n_layer); ++l) c.hash_layers[static_cast<size_t>(l)] = 1;
  }
  return {};
}

// tid2eid as published (I64 [V, k]): an i32 copy the router reads
status prepare_deepseek_v4_hf(const model_config& c, tensor_index& t) {
  (void)c;
  for (const std::string& name : t.names()) {
    if (!name.ends_with(".gate.tid2eid")) continue;
    const tensor_info* w = t.find(name);
    if (w->raw_type == "I32") continue;
    const std::string where = w->file ? w->file->path() : name;
    if (w->raw_type != "I64" || w->dims.rank != 2 ||
        w->nbytes != static_cast<uint64_t>(w->dims[0] * w->dims[1] * 8))
      return make_error(errc::unsupported, "{}: '{}' must be an I64 or I32 table [V, k] (is {} {})",
                        where, name, w->raw_type, w->dims.to_string());
    const int64_t n = w->dims[0] * w->dims[1];
    std::vector<uint8_t> bytes(static_cast<size_t>(n * 4));
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = 0;
      std::memcpy(&v, w->data + i * 8, 8);
      const auto e = static_cast<int32_t>(v < 0 || v > (1 << 30) ? -1 : v); // (checked when run)
      std::memcpy(bytes.data() + i * 4, &e, 4);
    }
    TROUPE_TRY(add_derived_tensor(t, name, dtype::i32, w->dims, "I64", std::move(bytes),
                                  where + " (" + name + " as i32)", true));
  }
  return {};
}

status build_deepseek_v4(const model_source& m, graph::graph& g) {
  // the published names, under transformers' "model." where its save_pretrained put them
  const std::string p = m.tensors->contains("model.embed_tokens.weight") ? "model." : "";
  decoder_names n;
  n.tok_embd = m.tensors->contains("embed.weight") ? "embed.weight" : p + "embed_tokens.weight";
  n.out_norm = p + "norm.weight";
  n.lm_head = "head.weight";
  const std::string L = p + "layers.{}.", a = L + "attn.", f = L + "ffn.";
  n.attn_norm = L + "attn_norm.weight", n.ffn_norm = L + "ffn_norm.weight";
  n.hc_attn_fn = L + "hc_attn_fn", n.hc_attn_base = L + "hc_attn_base";
  n.hc_attn_scale = L + "hc_attn_scale";
  n.hc_ffn_fn = L + "hc_ffn_fn", n.hc_ffn_base = L + "hc_ffn_base",
  n.hc_ffn_scale = L + "hc_ffn_scale";
  n.hc_head_fn = p + "hc_head_fn", n.hc_head_base = p + "hc_head_base";
  n.hc_head_scale = p + "hc_head_scale";
  if (m.tensors->contains(p + "hc_head.hc_fn")) // (transformers' own names for the head's)
    n.hc_head_fn = p + "hc_head.hc_fn", n.hc_head_base = p + "hc_head.hc_base",
    n.hc_head_scale = p + "hc_head.hc_scale";
  n.mla_q_a = a + "wq_a.weight", n.mla_q_a_norm = a + "q_norm.weight",
  n.mla_q_b = a + "wq_b.weight";
  n.v4_wkv = a + "wkv.weight", n.v4_kv_norm = a + "norm.weight";
  n.wo_a = a + "wo_a.weight", n.wo_b = a + "wo_b.weight";
  n.attn_sinks = a + "attn_sink";
  n.cmp_wkv = a + "compressor.wkv.weight", n.cmp_wgate = a + "compressor.wgate.weight";
  n.cmp_ape = a + "compressor.ape", n.cmp_norm = a + "compressor.norm.weight";
  n.idx_wkv = a + "indexer.compressor.wkv.weight";
  n.idx_wgate = a + "indexer.compressor.wgate.weight";
  n.idx_ape = a + "indexer.compressor.ape", n.idx_norm = a + "indexer.compressor.norm.weight";
  n.dsa_wq = a + "indexer.wq_b.weight", n.dsa_w = a + "indexer.weights_proj.weight";
  n.moe_router = f + "gate.weight", n.moe_router_bias = f + "gate.bias";
  n.moe_hash = f + "gate.tid2eid";
  n.moe_gate = f + "experts.{e}.w1.weight", n.moe_up = f + "experts.{e}.w3.weight";
  n.moe_down = f + "experts.{e}.w2.weight";
  n.shexp_gate = f + "shared_experts.w1.weight", n.shexp_up = f + "shared_experts.w3.weight";
  n.shexp_down = f + "shared_experts.w2.weight";
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
