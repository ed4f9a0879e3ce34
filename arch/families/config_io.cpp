// config_io.cpp: reading config.json for the families (config_io.hpp: hf_cfg, the common keys,
// RoPE and its scaling, dimensions, layer kinds, activations); config_io_gguf.cpp reads GGUF.
#include "arch/families/config_io.hpp"

#include "arch/spec.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace troupe::arch {

bool hf_cfg::has(const char* key) const {
  auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

expected<int64_t> hf_cfg::i(const char* key, int64_t fallback) {
  read_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return make_error(errc::corrupt_file, "{}: '{}' must be a non-negative integer", where_, key);
  return it->get<int64_t>();
}

expected<int64_t> hf_cfg::req(const char* key) {
  TROUPE_TRY_ASSIGN(v, i(key, 0));
  if (v <= 0)
    return make_error(errc::corrupt_file, "{}: '{}' must be a positive integer", where_, key);
  return v;
}

expected<int64_t> hf_cfg::req(const char* key, const char* alias) {
  TROUPE_TRY_ASSIGN(v, i(key, 0));
  TROUPE_TRY_ASSIGN(a, i(alias, 0));
  if (v > 0 || a > 0) return v > 0 ? v : a;
  return req(key);
}

expected<double> hf_cfg::f(const char* key, double fallback) {
  read_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_number())
    return make_error(errc::corrupt_file, "{}: '{}' must be a number", where_, key);
  return it->get<double>();
}

bool hf_cfg::b(const char* key, bool fallback) {
  read_.insert(key);
  auto it = j_.find(key);
  return it != j_.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string hf_cfg::s(const char* key, const std::string& fallback) {
  read_.insert(key);
  auto it = j_.find(key);
  return it != j_.end() && it->is_string() ? it->get<std::string>() : fallback;
}

const json& hf_cfg::raw(const char* key) {
  static const json null;
  read_.insert(key);
  auto it = j_.find(key);
  return it == j_.end() ? null : *it;
}

std::vector<std::string> hf_cfg::unread() const {
  std::vector<std::string> out;
  for (auto& [k, v] : j_.items())
    if (!read_.count(k)) out.push_back(k);
  return out;
}

error hf_cfg::bad(const std::string& what) const {
  return make_error(errc::corrupt_file, "{}: {}", where_, what);
}

error hf_cfg::unsupported(const std::string& what) const {
  return make_error(errc::unsupported, "{}: {}", where_, what);
}

namespace {

// transformers' BitNetQuantConfig: which linear class (the scale divides or multiplies), offline
// (stored ternary weights) or online (master weights rounded each step); the RMS norm some
// checkpoints put inside every linear map and a modules_to_not_convert beyond lm_head are not
// implemented (refused)
status read_bitnet_quantization(const json& v, model_config& c, const hf_cfg& j) {
  for (auto& [k, x] : v.items())
    if (k != "quant_method" && k != "linear_class" && k != "quantization_mode" &&
        k != "use_rms_norm" && k != "rms_norm_eps" && k != "modules_to_not_convert")
      return j.unsupported(fmt::format("quantization_config's '{}'", k));
  auto str = [&](const char* k, const char* fallback) -> expected<std::string> {
    if (!v.contains(k) || v[k].is_null()) return std::string(fallback);
    if (!v[k].is_string())
      return j.bad(fmt::format("quantization_config's '{}' must be a string", k));
    return v[k].get<std::string>();
  };
  TROUPE_TRY_ASSIGN(cls, str("linear_class", "bitlinear"));
  TROUPE_TRY_ASSIGN(mode, str("quantization_mode", "offline"));
  if (cls != "bitlinear" && cls != "autobitlinear")
    return j.bad(fmt::format("quantization_config's linear_class '{}'", cls));
  if (mode != "offline" && mode != "online")
    return j.bad(fmt::format("quantization_config's quantization_mode '{}'", mode));
  if (mode == "online" && cls == "bitlinear") // (BitLinear has no online form: transformers
    mode = "offline";                         // ignores the mode then)
  if (v.contains("use_rms_norm") && v["use_rms_norm"] == true)
    return j.unsupported("quantization_config's use_rms_norm true (an RMS norm inside every "
                         "BitNet linear map)");
  // transformers keeps lm_head plain unless a list is given, which then replaces that default
  const json& skip = v.contains("modules_to_not_convert") ? v["modules_to_not_convert"] : json();
  if (!skip.is_null()) {
    bool head = false;
    if (!skip.is_array()) return j.bad("quantization_config's modules_to_not_convert");
    for (const json& s : skip) {
      if (!s.is_string() || s.get<std::string>() != "lm_head")
        return j.unsupported(fmt::format("quantization_config's modules_to_not_convert {} "
                                         "(only lm_head is implemented)",
                                         skip.dump()));
      head = true;
    }
    if (!head)
      return j.unsupported("quantization_config's modules_to_not_convert without lm_head (a "
                           "ternary lm_head)");
  }
  c.act_quant = true;
  c.bitnet_scale_divides = cls == "bitlinear";
  c.bitnet_online = mode == "online";
  return {};
}

} // namespace

status read_common(hf_cfg& j, model_config& c) {
  // quantized checkpoints (bitsandbytes, GPTQ, AWQ, FP8, compressed-tensors) store weights
  // that mean something else than their dtype says: never load them as if they were plain
  for (const char* q : {"quantization_config", "compression_config"})
    if (const json& v = j.raw(q); !v.is_null()) {
      std::string method =
          v.is_object() && v.contains("quant_method") && v["quant_method"].is_string()
              ? v["quant_method"].get<std::string>()
              : "";
      // GPT-OSS as published: its experts in MXFP4 (blocks and scales, which the family
      // repacks at load; the tensors it names not converted are plain)
      if (c.family == "gpt_oss" && q == std::string("quantization_config") && method == "mxfp4") {
        c.mxfp4_experts = true;
        continue;
      }
      // DeepSeek-V3 / R1 / Kimi K2 as published: E4M3 weights in 128 x 128 tiles with an f32
      // scale each (weight_scale_inv), which the family repacks at load; the activations stay
      // f32 (transformers' dequantized arithmetic; DeepSeek's own kernels also round them to
      // FP8 per 128, "activation_scheme": "dynamic", which Troupe does not imitate)
      // (MiniMax-M2 publishes the same tiles, its fmt named as torch names the type)
      // (DeepSeek-V3.2 too, its indexer's matrices among them)
      if ((c.family == "deepseek_v3" || c.family == "deepseek_v2" || c.family == "deepseek_v32" ||
           c.family == "glm_moe_dsa" || c.family == "minimax_m2") &&
          q == std::string("quantization_config") && method == "fp8") {
        const json& bs = v.contains("weight_block_size") ? v["weight_block_size"] : json();
        const std::string fmt =
            v.contains("fmt") && v["fmt"].is_string() ? v["fmt"].get<std::string>() : "e4m3";
        if ((fmt != "e4m3" && fmt != "float8_e4m3fn") || bs != json::array({128, 128}))
          return j.unsupported("fp8 quantization other than e4m3 in 128 x 128 blocks");
        c.fp8_blocks = true;
        continue;
      }
      // BitNet b1.58 as published: ternary weights packed four a byte, 8-bit activations
      if (c.family == "bitnet" && q == std::string("quantization_config") && method == "bitnet") {
        TROUPE_TRY(read_bitnet_quantization(v, c, j));
        continue;
      }
      return j.unsupported(fmt::format(
          "'{}'{} is not supported: this checkpoint's weights are quantized by a method Troupe "
          "does not implement (use an unquantized or GGUF copy)",
          q, method.empty() ? "" : " (" + method + ")"));
    }
  // bookkeeping every PretrainedConfig may carry: nothing computed depends on it
  for (const char* k : {"architectures",
                        "model_type",
                        "torch_dtype",
                        "dtype",
                        "transformers_version",
                        "_name_or_path",
                        "initializer_range",
                        "use_cache",
                        "attention_dropout",
                        "pad_token_id",
                        "return_dict",
                        "output_hidden_states",
                        "output_attentions",
                        "torchscript",
                        "use_bfloat16",
                        "is_decoder",
                        "is_encoder_decoder",
                        "chunk_size_feed_forward",
                        "id2label",
                        "label2id",
                        "tokenizer_class",
                        "problem_type",
                        "_attn_implementation",
                        "attn_implementation",
                        "bos_token_id",
                        "eos_token_id",
                        "hidden_dropout",
                        "embd_pdrop",
                        "resid_pdrop",
                        "attn_pdrop",
                        "summary_type",
                        "summary_use_proj",
                        "summary_activation",
                        "summary_proj_to_labels",
                        "summary_first_dropout",
                        "classifier_dropout",
                        "embedding_dropout",
                        "attention_probs_dropout_prob",
                        "hidden_dropout_prob",
                        "residual_dropout",
                        "embedding_pdrop"})
    j.mark(k);
  (void)c;
  return {};
}

status read_rope_scaling(const json& rs, model_config& c, const std::string& where) {
  // every key below is read (or, for mrope's, is the identity over text); any other may change
  // the rotation and is refused by name rather than dropped
  static const std::set<std::string> known = {"rope_type",
                                              "type",
                                              "rope_theta",
                                              "partial_rotary_factor",
                                              "factor",
                                              "original_max_position_embeddings",
                                              "max_position_embeddings",
                                              "low_freq_factor",
                                              "high_freq_factor",
                                              "beta_fast",
                                              "beta_slow",
                                              "attention_factor",
                                              "mscale",
                                              "mscale_all_dim",
                                              "truncate",
                                              "short_factor",
                                              "long_factor",
                                              "mrope_section",
                                              "mrope_interleaved",
                                              "llama_4_scaling_beta",
                                              "alpha",
                                              "short_mscale",
                                              "long_mscale"};
  for (const auto& [k, v] : rs.items())
    if (!known.count(k) && !v.is_null())
      return make_error(errc::unsupported, "{}: rope key '{}' is not implemented", where, k);
  for (const char* k : {"short_mscale", "long_mscale"}) // (PhiMoE's, with its longrope)
    if (rs.contains(k) && !rs[k].is_null() && c.family != "phimoe")
      return make_error(errc::unsupported, "{}: rope key '{}' is not implemented for {}", where, k,
                        c.family);
  std::string type;
  for (const char* k : {"type", "rope_type"}) { // rope_type wins where both are given
    auto it = rs.find(k);
    if (it == rs.end() || it->is_null()) continue;
    if (!it->is_string())
      return make_error(errc::corrupt_file, "{}: rope '{}' must be a string", where, k);
    type = it->get<std::string>();
  }
  if ((c.family == "phi3" || c.family == "phi4_multimodal" || c.family == "phi4mm") &&
      (type == "su" || type == "yarn"))
    type = "longrope"; // Phi3Config (and Phi4MultimodalConfig)
  // SarvamMLAConfig: its releases' "deepseek_yarn" is transformers' yarn (the same keys)
  if (c.family == "sarvam_mla" && type == "deepseek_yarn") type = "yarn";
  // Ministral 3's attention temperature: every query at position p times 1 + beta ln(1 +
  // floor(p / original_max_position_embeddings)), both from this dict (Ministral3Attention,
  // Mistral4Attention)
  if (auto it = rs.find("llama_4_scaling_beta"); it != rs.end() && !it->is_null()) {
    if (c.family != "mistral" && c.family != "mistral4")
      return make_error(errc::unsupported,
                        "{}: rope 'llama_4_scaling_beta' (an attention temperature) is "
                        "implemented for Ministral 3 and Mistral 4, not for {}",
                        where, c.family);
    auto orig = rs.find("original_max_position_embeddings");
    if (!it->is_number() || orig == rs.end() || !orig->is_number_integer() ||
        orig->get<int64_t>() <= 0)
      return make_error(errc::corrupt_file,
                        "{}: rope 'llama_4_scaling_beta' needs a number and a positive "
                        "'original_max_position_embeddings'",
                        where);
    c.attn_temp_scale = it->get<double>();
    c.attn_temp_floor = orig->get<int64_t>();
    c.attn_temp_offset = 0;
  }
  if (type.empty() || type == "default") return {};
  // Qwen2-VL / Qwen2.5-VL's M-RoPE: a text token's position is the same in all three sections,
  // so over text (all Troupe runs) it is plain RoPE
  if (type == "mrope") return {};
  // Hunyuan's NTK alpha (type dynamic with alpha): a stretched base for every sequence, which
  // read_hunyuan_hf applies (once, whichever of rope_parameters / rope_scaling carries it)
  if (auto it = rs.find("alpha"); it != rs.end() && !it->is_null() && type == "dynamic") {
    if (c.family != "hunyuan_dense" && c.family != "hunyuan_moe")
      return make_error(errc::unsupported, "{}: rope 'alpha' is implemented for Hunyuan, not {}",
                        where, c.family);
    if (!it->is_number() || !(it->get<double>() > 0))
      return make_error(errc::corrupt_file, "{}: rope 'alpha' must be a positive number", where);
    c.rope.scaling = rope_scaling::none;
    return {};
  }
  if (rs.contains("alpha") && !rs["alpha"].is_null())
    return make_error(errc::unsupported, "{}: rope 'alpha' with rope type '{}'", where, type);
  if (type == "dynamic") {
    // dynamic NTK changes the base only while a sequence is longer than
    // max_position_embeddings; Troupe never runs one (the scheduler caps the context there),
    // so the default frequencies are what transformers computes for every sequence served
    c.rope.scaling = rope_scaling::none;
    return {};
  }
  auto num = [&](const char* k, double fallback) -> expected<double> {
    auto it = rs.find(k);
    if (it == rs.end() || it->is_null()) return fallback;
    if (!it->is_number())
      return make_error(errc::corrupt_file, "{}: rope '{}' must be a number", where, k);
    return it->get<double>();
  };
  TROUPE_TRY_ASSIGN(factor, num("factor", 1.0));
  c.rope.factor = factor;
  if (type == "proportional") { // the caller sets the pairs that turn (rope_pairs)
    c.rope.scaling = factor != 1.0 ? rope_scaling::linear : rope_scaling::none;
    c.rope.turning = -1;
    return {};
  }
  if (type == "linear") {
    c.rope.scaling = rope_scaling::linear;
  } else if (type == "llama3") {
    c.rope.scaling = rope_scaling::llama3;
    TROUPE_TRY_ASSIGN(lo, num("low_freq_factor", 1.0));
    TROUPE_TRY_ASSIGN(hi, num("high_freq_factor", 4.0));
    TROUPE_TRY_ASSIGN(orig, num("original_max_position_embeddings", 8192));
    if (!(lo > 0) || !(hi > 0) || !(orig > 0))
      return make_error(errc::corrupt_file,
                        "{}: llama3 rope needs positive low_freq_factor, high_freq_factor and "
                        "original_max_position_embeddings",
                        where);
    c.rope.low_freq_factor = lo;
    c.rope.high_freq_factor = hi;
    c.rope.orig_ctx = orig;
  } else if (type == "yarn") {
    c.rope.scaling = rope_scaling::yarn;
    TROUPE_TRY_ASSIGN(orig, num("original_max_position_embeddings", static_cast<double>(c.ctx)));
    TROUPE_TRY_ASSIGN(bf, num("beta_fast", 32.0));
    TROUPE_TRY_ASSIGN(bs, num("beta_slow", 1.0));
    TROUPE_TRY_ASSIGN(af, num("attention_factor", 0.0));
    TROUPE_TRY_ASSIGN(ms, num("mscale", 0.0));
    TROUPE_TRY_ASSIGN(msa, num("mscale_all_dim", 0.0));
    c.rope.orig_ctx = orig;
    c.rope.beta_fast = bf;
    c.rope.beta_slow = bs;
    c.rope.attn_factor = af;
    c.rope.mscale = ms;
    c.rope.mscale_all_dim = msa;
    if (auto it = rs.find("truncate"); it != rs.end() && !it->is_null()) {
      if (!it->is_boolean())
        return make_error(errc::corrupt_file, "{}: rope 'truncate' must be true or false", where);
      c.rope.yarn_truncate = it->get<bool>();
    }
  } else if (type == "longrope") {
    c.rope.scaling = rope_scaling::longrope;
    auto factors = [&](const char* k, std::vector<double>& out) -> status {
      auto it = rs.find(k);
      if (it == rs.end() || !it->is_array())
        return make_error(errc::corrupt_file, "{}: longrope needs '{}' (a list of numbers)", where,
                          k);
      for (const auto& v : *it) {
        if (!v.is_number() || !(v.get<double>() > 0))
          return make_error(errc::corrupt_file, "{}: longrope '{}' must hold positive numbers",
                            where, k);
        out.push_back(v.get<double>());
      }
      return {};
    };
    TROUPE_TRY(factors("short_factor", c.rope.short_factor));
    TROUPE_TRY(factors("long_factor", c.rope.long_factor));
    // PhiMoE's: cos and sin times one of them (as the factor set chosen), its attention factor
    TROUPE_TRY_ASSIGN(sm, num("short_mscale", 0.0));
    TROUPE_TRY_ASSIGN(lm, num("long_mscale", 0.0));
    if (c.family == "phimoe" && !(sm > 0 && lm > 0))
      return make_error(errc::corrupt_file,
                        "{}: PhiMoE's longrope needs short_mscale and long_mscale > 0", where);
    c.rope_short_mscale = sm, c.rope_long_mscale = lm;
    TROUPE_TRY_ASSIGN(orig, num("original_max_position_embeddings", static_cast<double>(c.ctx)));
    TROUPE_TRY_ASSIGN(af, num("attention_factor", 0.0));
    c.rope.orig_ctx = orig;
    c.rope.attn_factor = af;
    // factor absent: max_position_embeddings / original (finish_rope)
    c.rope.factor = rs.contains("factor") && rs["factor"].is_number() ? factor : 0.0;
    return {};
  } else {
    return make_error(
        errc::unsupported,
        "{}: rope scaling '{}' is not supported (linear, dynamic, llama3, yarn, longrope are)",
        where, type);
  }
  if (c.rope.factor <= 0)
    return make_error(errc::corrupt_file, "{}: rope scaling factor must be positive", where);
  return {};
}

// LongRoPE's derived parts (config_io.hpp): transformers switches to the long factors
// (re-running the prefill) once a sequence outgrows the original context; Troupe picks one set
// for the served context (as llama.cpp does): the long set when that context is longer, which
// gives transformers' numbers for every sequence longer than the original context.
void finish_longrope(rope_spec& r, int64_t ctx) {
  if (r.factor <= 0) r.factor = static_cast<double>(ctx) / r.orig_ctx;
  if (r.attn_factor <= 0)
    r.attn_factor = r.factor <= 1 ? 1.0 : std::sqrt(1 + std::log(r.factor) / std::log(r.orig_ctx));
  r.use_long = static_cast<double>(ctx) > r.orig_ctx;
}

status read_qk_normed_attention(hf_cfg& j, model_config& c, double eps) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", eps));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  c.qk_norm = qk_norm_kind::head;
  return read_activation(j.s("hidden_act", "silu"), c, j.where());
}

status read_rope_by_layer_type(hf_cfg& j, model_config& c, json full, json sliding) {
  const json& rp = j.raw("rope_parameters");
  if (!rp.is_null() && !rp.is_object()) return j.bad("'rope_parameters' must be an object");
  if (rp.is_object() && (rp.contains("full_attention") || rp.contains("sliding_attention"))) {
    for (auto& [k, v] : rp.items())
      if (k != "full_attention" && k != "sliding_attention")
        return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
    if (rp.contains("full_attention")) full = rp["full_attention"];
    if (rp.contains("sliding_attention")) sliding = rp["sliding_attention"];
  } else if (rp.is_object()) {
    full = sliding = rp;
  }
  TROUPE_TRY(read_rope_dict(full, c, c.rope, 1e6, j.where()));
  TROUPE_TRY(read_rope_dict(sliding, c, c.rope_local, 1e4, j.where()));
  c.has_rope_local = true;
  return {};
}

status rope_pairs(rope_spec& spec, int64_t D, double partial, const std::string& where) {
  if (spec.turning >= 0) {
    spec.rot_dim = static_cast<int>(static_cast<double>(D) * partial);
    return {};
  }
  // proportional (transformers' int(partial * head_dim // 2) pairs turn, of the whole head's)
  spec.rot_dim = static_cast<int>(D);
  spec.turning = static_cast<int>(std::floor(partial * static_cast<double>(D) / 2.0));
  if (spec.turning <= 0 || spec.turning > D / 2)
    return make_error(errc::unsupported,
                      "{}: proportional RoPE with partial_rotary_factor {} turns {} of {} pairs",
                      where, partial, spec.turning, D / 2);
  return {};
}

status read_rope_dict(const json& rp, const model_config& c, rope_spec& spec, double theta,
                      const std::string& where) {
  model_config t;
  t.ctx = c.ctx;
  t.family = c.family;
  t.rope.theta = theta;
  double partial = 1.0;
  if (rp.is_object()) {
    if (rp.contains("rope_theta") && rp["rope_theta"].is_number())
      t.rope.theta = rp["rope_theta"].get<double>();
    if (rp.contains("partial_rotary_factor") && rp["partial_rotary_factor"].is_number())
      partial = rp["partial_rotary_factor"].get<double>();
    TROUPE_TRY(read_rope_scaling(rp, t, where));
  }
  spec = t.rope;
  spec.layout = rope_layout::neox;
  return rope_pairs(spec, c.D, partial, where);
}

status read_rope(hf_cfg& j, model_config& c, double theta_default, double partial_default) {
  c.rope.layout = rope_layout::neox; // HF checkpoints store q/k for rotate_half
  TROUPE_TRY_ASSIGN(theta, j.f("rope_theta", theta_default));
  c.rope.theta = theta;
  TROUPE_TRY_ASSIGN(partial, j.f("partial_rotary_factor", partial_default));
  for (const char* k : {"rope_parameters", "rope_scaling"}) // null or absent: no scaling
    if (const json& v = j.raw(k); !v.is_null() && !v.is_object())
      return j.bad(fmt::format("'{}' must be an object or null", k));
  // transformers 5 nests the settings by layer type (OLMo 3); one setting for every type is
  // one rope, settings that differ are a family's own (Gemma 3 reads them), refused here
  const json* nested = nullptr;
  if (const json& rp = j.raw("rope_parameters");
      rp.is_object() && (rp.contains("full_attention") || rp.contains("sliding_attention"))) {
    for (auto& [k, v] : rp.items()) {
      if (k != "full_attention" && k != "sliding_attention")
        return j.unsupported(fmt::format("rope_parameters for layer type '{}'", k));
      if (!v.is_object()) return j.bad(fmt::format("rope_parameters.{} must be an object", k));
      if (nested && v != *nested)
        return j.unsupported("rope_parameters that differ by layer type for this architecture");
      nested = &v;
    }
  }
  if (const json& rp = nested ? *nested : j.raw("rope_parameters"); rp.is_object()) {
    if (rp.contains("rope_theta") && rp["rope_theta"].is_number())
      c.rope.theta = rp["rope_theta"].get<double>();
    if (rp.contains("partial_rotary_factor") && rp["partial_rotary_factor"].is_number())
      partial = rp["partial_rotary_factor"].get<double>();
    TROUPE_TRY(read_rope_scaling(rp, c, j.where()));
  }
  if (const json& rs = j.raw("rope_scaling"); rs.is_object())
    TROUPE_TRY(read_rope_scaling(rs, c, j.where()));
  TROUPE_TRY(rope_pairs(c.rope, c.D, partial, j.where()));
  // transformers: a top-level original_max_position_embeddings overrides the rope dict's
  if (c.rope.scaling == rope_scaling::llama3 || c.rope.scaling == rope_scaling::yarn ||
      c.rope.scaling == rope_scaling::longrope) {
    TROUPE_TRY_ASSIGN(orig, j.f("original_max_position_embeddings", c.rope.orig_ctx));
    c.rope.orig_ctx = orig;
  } else {
    j.mark("original_max_position_embeddings");
  }
  if (c.rope.scaling == rope_scaling::longrope) {
    rope_spec& r = c.rope;
    const size_t half = static_cast<size_t>(r.rot_dim / 2);
    if (r.short_factor.size() != half || r.long_factor.size() != half)
      return j.bad(fmt::format("longrope short_factor and long_factor need {} values each (have "
                               "{} and {})",
                               half, r.short_factor.size(), r.long_factor.size()));
    if (!(r.orig_ctx > 1)) return j.bad("longrope needs original_max_position_embeddings > 1");
    finish_longrope(r, c.ctx);
    if (c.rope_short_mscale > 0)
      r.attn_factor = r.use_long ? c.rope_long_mscale : c.rope_short_mscale;
  }
  return {};
}

void read_special_ids(hf_cfg& j, const std::string& generation_json, model_config& c) {
  auto eos_of = [](const json& x, std::vector<int64_t>& out) {
    auto it = x.find("eos_token_id");
    if (it == x.end()) return;
    if (it->is_number_integer()) {
      out = {it->get<int64_t>()};
    } else if (it->is_array()) {
      out.clear();
      for (const auto& e : *it)
        if (e.is_number_integer()) out.push_back(e.get<int64_t>());
    }
  };
  const json& bos = j.raw("bos_token_id");
  if (bos.is_number_integer()) c.bos_id = bos.get<int64_t>();
  json eos = {{"eos_token_id", j.raw("eos_token_id")}};
  eos_of(eos, c.eos_ids);
  if (!generation_json.empty()) {
    json g = json::parse(generation_json, nullptr, false);
    if (g.is_object()) {
      eos_of(g, c.eos_ids);
      if (g.contains("bos_token_id") && g["bos_token_id"].is_number_integer())
        c.bos_id = g["bos_token_id"].get<int64_t>();
    }
  }
}

std::string quote_nonfinite(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      continue;
    }
    bool replaced = false;
    for (std::string_view word : {"-Infinity", "Infinity", "NaN"})
      if (text.substr(i, word.size()) == word) {
        out += fmt::format("{{\"__float__\": \"{}\"}}", word);
        i += word.size() - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += ch;
  }
  return out;
}

std::optional<double> config_number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_object() || v.size() != 1 || !v.contains("__float__") || !v["__float__"].is_string())
    return std::nullopt;
  const std::string s = v["__float__"].get<std::string>();
  if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

status read_hf_dims(hf_cfg& j, model_config& c, const char* eps_key, double eps_default,
                    bool head_dim, bool ffn_per_layer) {
  TROUPE_TRY_ASSIGN(C, j.req("hidden_size"));
  TROUPE_TRY_ASSIGN(L, j.req("num_hidden_layers"));
  if (L > max_layers) // readers size per-layer tables from it
    return j.bad(fmt::format("'num_hidden_layers' {} (at most {})", L, max_layers));
  std::vector<int64_t> widths;
  if (const json& is = j.raw("intermediate_size"); ffn_per_layer && is.is_array()) {
    if (static_cast<int64_t>(is.size()) != L)
      return j.bad(fmt::format("'intermediate_size' must list {} layers", L));
    for (const json& w : is) {
      if (!w.is_number_integer() || w.get<int64_t>() <= 0)
        return j.bad("'intermediate_size' must list positive integers");
      widths.push_back(w.get<int64_t>());
    }
  }
  // a model whose every FFN is a mixture of experts may give no dense width (Qwen3.5-MoE): the
  // experts' stands in (what TP's FFN cut is planned on)
  TROUPE_TRY_ASSIGN(F, !widths.empty()
                           ? expected<int64_t>(*std::max_element(widths.begin(), widths.end()))
                       : j.has("intermediate_size") || !j.has("moe_intermediate_size")
                           ? j.req("intermediate_size")
                           : j.req("moe_intermediate_size"));
  c.ffn_widths = std::move(widths);
  TROUPE_TRY_ASSIGN(H, j.req("num_attention_heads"));
  TROUPE_TRY_ASSIGN(Hkv, j.i("num_key_value_heads", H));
  TROUPE_TRY_ASSIGN(V, j.req("vocab_size"));
  TROUPE_TRY_ASSIGN(ctx, j.i("max_position_embeddings", 2048));
  if (!head_dim) j.mark("head_dim");
  TROUPE_TRY_ASSIGN(D, head_dim ? j.i("head_dim", C / H) : expected<int64_t>(C / H));
  // absent or null: the defaults above; written as 0: no model (not multi-head attention)
  if (j.has("num_key_value_heads") && Hkv == 0)
    return j.unsupported("num_key_value_heads 0: a model needs at least one KV head");
  if (head_dim && j.has("head_dim") && D == 0)
    return j.unsupported("head_dim 0: heads need a size");
  c.C = C, c.F = F, c.n_layer = L, c.H = H, c.Hkv = Hkv, c.V = V, c.ctx = ctx;
  c.D = D;
  if (eps_key) {
    TROUPE_TRY_ASSIGN(eps, j.f(eps_key, eps_default));
    c.norm_eps = eps;
  } else {
    c.norm_eps = eps_default;
  }
  return {};
}

std::optional<int64_t> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  int64_t v = 0;
  for (char ch : s) v = v * 10 + (ch - '0');
  return v;
}

status read_layer_limits(hf_cfg& j, const char* key, int64_t n_layer, int64_t padded,
                         bool null_none, std::vector<double>& out) {
  out.assign(static_cast<size_t>(n_layer), 0.0);
  const json& v = j.raw(key);
  if (v.is_null()) return {};
  if (!v.is_array() || (static_cast<int64_t>(v.size()) != n_layer &&
                        (padded <= 0 || static_cast<int64_t>(v.size()) != n_layer + padded)))
    return j.bad(fmt::format("'{}' must list a limit for each of the {} layers", key, n_layer));
  for (size_t l = 0; l < static_cast<size_t>(n_layer); ++l) {
    if (v[l].is_null() && null_none) continue;
    if (!v[l].is_number() || !(v[l].get<double>() >= 0) || !std::isfinite(v[l].get<double>()))
      return j.bad(fmt::format("'{}' holds {}", key, v[l].dump()));
    out[l] = v[l].get<double>();
  }
  return {};
}

status read_dense_then_sparse(hf_cfg& j, model_config& c, int64_t first_dense) {
  const int64_t L = c.n_layer;
  c.moe_layers.assign(static_cast<size_t>(L), 0);
  TROUPE_TRY_ASSIGN(listed,
                    read_layer_kinds(j, "mlp_layer_types", L, "sparse", "dense", c.moe_layers));
  if (listed) {
    j.mark("first_k_dense_replace"); // (the list wins)
    return {};
  }
  TROUPE_TRY_ASSIGN(dense, j.i("first_k_dense_replace", first_dense));
  for (int64_t l = std::max<int64_t>(dense, 0); l < L; ++l)
    c.moe_layers[static_cast<size_t>(l)] = 1;
  return {};
}

expected<bool> read_layer_kinds(hf_cfg& j, const char* key, int64_t n_layer, const char* one,
                                const char* other, std::vector<uint8_t>& out, int64_t padded) {
  const json& types = j.raw(key);
  if (types.is_null()) return false;
  if (!types.is_array() ||
      (static_cast<int64_t>(types.size()) != n_layer &&
       (padded <= 0 || static_cast<int64_t>(types.size()) != n_layer + padded)))
    return j.bad(fmt::format("'{}' must list {} layers", key, n_layer));
  out.assign(static_cast<size_t>(n_layer), 0);
  for (size_t l = 0; l < static_cast<size_t>(n_layer); ++l) {
    if (types[l] != one && types[l] != other)
      return j.unsupported(fmt::format("{}[{}] {}", key, l, types[l].dump()));
    out[l] = types[l] == one;
  }
  return true;
}

status read_layer_types(hf_cfg& j, model_config& c, int64_t window,
                        const std::function<bool(int64_t)>& fallback) {
  std::vector<uint8_t> windowed(static_cast<size_t>(c.n_layer), 0);
  if (const json& lt = j.raw("layer_types"); !lt.is_null()) {
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer)
      return j.bad(fmt::format("'layer_types' must list {} layer types", c.n_layer));
    for (size_t i = 0; i < lt.size(); ++i) {
      if (lt[i] == "sliding_attention")
        windowed[i] = 1;
      else if (lt[i] != "full_attention")
        return j.unsupported(fmt::format("layer_types[{}] = {} is not supported", i, lt[i].dump()));
    }
  } else {
    for (int64_t i = 0; i < c.n_layer; ++i) windowed[static_cast<size_t>(i)] = fallback(i) ? 1 : 0;
  }
  if (window <= 0 || std::find(windowed.begin(), windowed.end(), 1) == windowed.end()) return {};
  c.sliding_window = window;
  c.windowed = std::move(windowed);
  return {};
}

expected<bool> read_windows_rope_on_sliding(hf_cfg& j, model_config& c) {
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 0));
  TROUPE_TRY_ASSIGN(pattern, j.i("sliding_window_pattern", 4));
  if (pattern <= 0) return j.bad("'sliding_window_pattern' must be positive");
  if (sw <= 0) {
    j.mark("layer_types");
    return false;
  }
  TROUPE_TRY(read_layer_types(j, c, sw, [pattern](int64_t l) { return (l + 1) % pattern != 0; }));
  rope_on_windowed_only(c);
  return true;
}

void rope_on_windowed_only(model_config& c) {
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.nope_layers[static_cast<size_t>(l)] = c.layer_window(l) == 0;
}

status read_activation(const std::string& act, model_config& c, const std::string& where) {
  // a registered spec file defines it: its expression wins over a built-in
  if (const arch_spec* spec = find_arch_spec(c.arch); spec && spec->activations.count(act)) {
    c.act_expr = spec->activations.at(act);
    return {};
  }
  if (act == "silu" || act == "swish")
    c.act = act_kind::silu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast")
    c.act = act_kind::gelu_tanh;
  else if (act == "gelu")
    c.act = act_kind::gelu_erf;
  else if (act == "quick_gelu") // transformers' QuickGELUActivation
    c.act_expr = "x * sigmoid(1.702 * x)";
  else if (act == "relu2") // ReLUSquaredActivation
    c.act_expr = "relu(x)^2";
  else if (act == "relu")
    c.act_expr = "relu(x)";
  else
    return make_error(errc::unsupported,
                      "{}: hidden_act '{}' is not supported (an --arch-spec file can define it as "
                      "an expression)",
                      where, act);
  return {};
}

} // namespace troupe::arch
