// step3p7.cpp (arch/families): StepFun's Step 3.7 Flash (Step3p7ForConditionalGeneration's
// language model). Laguna's attention with a sigmoid gate per head (g_proj) and its own count of
// query heads on the sliding layers (num_sliding_attention_heads), q and k RMS-normed per head,
// Gemma's (1 + w) norms everywhere, scores scaled by query_pre_attn_scalar^-0.5, each layer kind
// its RoPE; dense SwiGLU layers and MiniMax M3's experts (sigmoid scores + the correction bias,
// renormalised, times moe_router_scaling_factor, a shared expert), every SwiGLU clipped after the
// SiLU at a limit per layer (swiglu_limits for the routed experts; swiglu_limits_shared for the
// shared expert and the dense MLP; 0 none). The config as transformers writes it, or its hub form
// (lists padded with the multi-token-prediction layers, attention_other_setting, moe_layers_enum,
// rope_theta and partial_rotary_factors per layer); the MTP layers are not run. Tensors as
// published: the experts stacked per layer under moe., the shared expert under share_expert.
#include <algorithm>
#include <cmath>

#include "arch/families/decoder.hpp"

namespace troupe::arch {

status read_step3p7_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_qk_normed_attention(j, c, 1e-5));
  c.norm_add = 1; // (Gemma's norms: q and k's too)
  const int64_t L = c.n_layer;
  TROUPE_TRY_ASSIGN(mtp, j.i("num_nextn_predict_layers", 0));
  for (const char* k : {"mtp_layer_types", "mtp_mlp_layer_types"}) j.mark(k); // (not run)
  if (j.b("use_bidirectional_attention", false))
    return j.unsupported("use_bidirectional_attention true");
  // layer kinds: sliding or full; the sliding ones with their own head count
  // (transformers' Step 3.7 masks no other kind)
  std::vector<uint8_t> sliding(static_cast<size_t>(L), 0);
  TROUPE_TRY(
      read_layer_kinds(j, "layer_types", L, "sliding_attention", "full_attention", sliding, mtp));
  const bool any_sliding = std::find(sliding.begin(), sliding.end(), 1) != sliding.end();
  TROUPE_TRY_ASSIGN(sw, j.raw("sliding_window").is_null() ? int64_t{0} : j.i("sliding_window", 0));
  if (any_sliding) {
    if (sw <= 0) return j.bad(fmt::format("sliding_attention layers with a window of {}", sw));
    c.sliding_window = sw;
    c.windowed = sliding;
  }
  int64_t sliding_heads = c.H;
  if (j.has("num_sliding_attention_heads")) {
    TROUPE_TRY_SET(sliding_heads, j.req("num_sliding_attention_heads"));
  } else if (const json& other = j.raw("attention_other_setting"); other.is_object()) {
    if (other.contains("num_attention_heads") && other["num_attention_heads"].is_number_integer())
      sliding_heads = other["num_attention_heads"].get<int64_t>();
    for (auto& [k, v] : other.items())
      if (k != "num_attention_heads" && k != "attention_type" && k != "num_attention_groups" &&
          k != "head_dim")
        return j.unsupported(fmt::format("attention_other_setting.{}", k));
    if (other.contains("num_attention_groups") && other["num_attention_groups"] != c.Hkv)
      return j.unsupported("attention_other_setting.num_attention_groups other than the model's");
    if (other.contains("head_dim") && other["head_dim"] != c.D)
      return j.unsupported("attention_other_setting.head_dim other than the model's");
  }
  if (sliding_heads <= 0 || sliding_heads > 4096 || sliding_heads % c.Hkv)
    return j.bad(fmt::format("num_sliding_attention_heads {}", sliding_heads));
  j.mark("per_layer_config"); // (transformers writes the sliding layers' count there too)
  if (const json& plc = j.raw("per_layer_config"); plc.is_object())
    for (auto& [k, v] : plc.items()) {
      const bool heads_only = v.is_object() && v.size() == 1 && v.contains("num_attention_heads");
      const int64_t l = parse_index(k).value_or(-1);
      if (!heads_only || l < 0 || l >= L || !sliding[static_cast<size_t>(l)] ||
          v["num_attention_heads"] != sliding_heads)
        return j.unsupported(fmt::format("per_layer_config for '{}': {} (the sliding layers' head "
                                         "count only)",
                                         k, v.dump()));
    }
  if (any_sliding && sliding_heads != c.H) {
    c.heads_by_layer.resize(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l)
      c.heads_by_layer[static_cast<size_t>(l)] =
          sliding[static_cast<size_t>(l)] ? sliding_heads : c.H;
    c.H = std::max(c.H, sliding_heads);
  }
  c.attn_head_gate = true;
  TROUPE_TRY_ASSIGN(qpas, j.f("query_pre_attn_scalar", static_cast<double>(c.D)));
  if (!(qpas > 0)) return j.bad(fmt::format("query_pre_attn_scalar {}", qpas));
  c.attn_scale = 1.0 / std::sqrt(qpas);
  // each layer kind its RoPE: rope_parameters by kind, or the hub's rope_theta /
  // partial_rotary_factors per layer (the first layer of each kind's)
  json full{{"rope_type", "default"}, {"rope_theta", 10000.0}}, slide = full;
  const json& thetas = j.raw("rope_theta");
  const json& partials = j.raw("partial_rotary_factors");
  if (thetas.is_array() || partials.is_array()) {
    for (const json* list : {&thetas, &partials})
      if (list->is_array() && static_cast<int64_t>(list->size()) != L &&
          static_cast<int64_t>(list->size()) != L + mtp)
        return j.bad(fmt::format("rope_theta / partial_rotary_factors must list {} layers", L));
    for (int64_t l = L - 1; l >= 0; --l) { // (the first of each kind wins)
      json& d = sliding[static_cast<size_t>(l)] ? slide : full;
      if (thetas.is_array()) d["rope_theta"] = thetas[static_cast<size_t>(l)];
      if (partials.is_array()) d["partial_rotary_factor"] = partials[static_cast<size_t>(l)];
    }
  } else if (thetas.is_number()) {
    full["rope_theta"] = slide["rope_theta"] = thetas;
  }
  TROUPE_TRY(read_rope_by_layer_type(j, c, full, slide));
  // experts: MiniMax M3's router, a shared expert; dense layers by mlp_layer_types, or the hub's
  // moe_layers_enum, else the first three
  TROUPE_TRY(read_expert_counts(j, c, "n_routed_experts", "num_local_experts"));
  TROUPE_TRY_ASSIGN(fe, j.i("moe_intermediate_size", 1280));
  TROUPE_TRY_ASSIGN(fs, j.i("share_expert_dim", 1280));
  TROUPE_TRY_ASSIGN(scale, j.f("moe_router_scaling_factor", 1.0));
  if (fe <= 0 || fs <= 0)
    return j.bad(fmt::format("moe_intermediate_size {}, share_expert_dim {}", fe, fs));
  c.F_expert = fe, c.F_shared = fs, c.expert_scale = scale;
  c.router_sigmoid = c.router_bias = c.norm_topk = true;
  j.mark("router_jitter_noise");
  c.moe_layers.assign(static_cast<size_t>(L), 0);
  TROUPE_TRY_ASSIGN(
      listed, read_layer_kinds(j, "mlp_layer_types", L, "sparse", "dense", c.moe_layers, mtp));
  if (listed) {
    j.mark("moe_layers_enum");
  } else if (const json& e = j.raw("moe_layers_enum"); !e.is_null()) {
    std::vector<int64_t> ids;
    if (e.is_string()) {
      std::string s = e.get<std::string>();
      size_t at = 0;
      while (at <= s.size()) {
        const size_t comma = std::min(s.find(',', at), s.size());
        std::string item = s.substr(at, comma - at);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (!item.empty()) {
          const auto id = parse_index(item);
          if (!id) return j.bad(fmt::format("moe_layers_enum holds '{}'", item));
          ids.push_back(*id);
        }
        at = comma + 1;
      }
    } else if (e.is_array()) {
      for (const json& i : e) {
        if (!i.is_number_integer()) return j.bad(fmt::format("moe_layers_enum holds {}", i.dump()));
        ids.push_back(i.get<int64_t>());
      }
    } else {
      return j.bad("'moe_layers_enum' must be a string or a list");
    }
    for (int64_t i : ids)
      if (i >= 0 && i < L) c.moe_layers[static_cast<size_t>(i)] = 1; // (MTP layers past L)
  } else {
    for (int64_t l = 3; l < L; ++l) c.moe_layers[static_cast<size_t>(l)] = 1;
  }
  // the clips after the SiLU, per layer (the dense MLPs take the shared expert's)
  TROUPE_TRY(read_layer_limits(j, "swiglu_limits", L, mtp, true, c.swiglu_limits));
  TROUPE_TRY(read_layer_limits(j, "swiglu_limits_shared", L, mtp, true, c.swiglu_limits_shared));
  c.swiglu_clamp = c.swiglu_after_act = c.dense_clip_shared = true;
  if (j.b("mlp_bias", false)) return j.unsupported("mlp_bias true");
  return {};
}

status build_step3p7(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  const std::string l = "model.layers.{}.", e = l + "moe.", s = l + "share_expert.";
  n.attn_head_gate = l + "self_attn.g_proj.weight";
  n.moe_router = e + "gate.weight", n.moe_router_bias = e + "router_bias";
  n.moe_gate = e + "gate_proj.weight", n.moe_up = e + "up_proj.weight";
  n.moe_down = e + "down_proj.weight"; // (stacked: [E, F, C] and [E, C, F])
  n.shexp_gate = s + "gate_proj.weight", n.shexp_up = s + "up_proj.weight";
  n.shexp_down = s + "down_proj.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
