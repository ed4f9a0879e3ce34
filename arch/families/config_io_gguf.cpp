// config_io_gguf.cpp: reading GGUF metadata for the families (config_io.hpp: gguf_cfg, the
// dimension keys every architecture writes, windows, multi-token-prediction blocks, RoPE and
// the vocabulary's size, bos / eos ids and context); config_io.cpp reads config.json.
#include "arch/families/config_io.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace troupe::arch {

const std::string& gguf_cfg::path() const {
  return g.file->path();
}

std::vector<std::string> gguf_cfg::unread() const {
  std::vector<std::string> out;
  const std::string prefix = arch + ".";
  for (const auto& k : g.keys)
    if (k.starts_with(prefix) && !read_.count(k.substr(prefix.size())))
      out.push_back(k.substr(prefix.size()));
  return out;
}

error gguf_cfg::unsupported(const std::string& what) const {
  return make_error(errc::unsupported, "{}: {}", path(), what);
}

expected<std::vector<double>> read_gguf_vector(const gguf_cfg& g, const std::string& name,
                                               int64_t n) {
  const tensor_info* t = g.g.tensors.find(name);
  if (!t) return make_error(errc::not_found, "{}: no tensor {}", g.path(), name);
  if (t->type != dtype::f32 || t->dims.rank != 1 || t->dims[0] != n)
    return make_error(errc::corrupt_file, "{}: {} must be {} F32 values (is {} {})", g.path(), name,
                      n, t->raw_type, t->dims.to_string());
  std::vector<double> out(static_cast<size_t>(n));
  const auto* p = reinterpret_cast<const float*>(t->data);
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = p[i];
  return out;
}

status read_gguf_windows(const gguf_cfg& g, model_config& c, int64_t default_window,
                         int64_t period) {
  const int64_t sw = g.i("attention.sliding_window", default_window);
  const size_t L = static_cast<size_t>(c.n_layer);
  c.windowed.clear();
  c.sliding_window = 0;
  if (sw <= 0) return {};
  if (const gguf_value* v = g.g.get(g.key("attention.sliding_window_pattern"))) {
    if (v->type == gguf_type::array) {
      if (v->arr.size() != L)
        return make_error(errc::corrupt_file,
                          "{}: attention.sliding_window_pattern has {} values for {} layers",
                          g.path(), v->arr.size(), L);
      for (const auto& e : v->arr) c.windowed.push_back(e.i != 0);
    } else if (v->is_integer() && v->i > 0) {
      period = v->i;
    } else {
      return make_error(errc::corrupt_file, "{}: attention.sliding_window_pattern is malformed",
                        g.path());
    }
  }
  if (c.windowed.empty() && period > 0)
    for (size_t l = 0; l < L; ++l) c.windowed.push_back((l + 1) % static_cast<size_t>(period) != 0);
  c.sliding_window = sw;
  return {};
}

status read_gguf_dims(const gguf_cfg& g, model_config& c, const char* eps_key, double eps_default,
                      bool heads_per_layer) {
  TROUPE_TRY_ASSIGN(C, g.req("embedding_length"));
  // a model whose every FFN is experts may give no dense width (Qwen3.5-MoE): the experts'
  TROUPE_TRY_ASSIGN(F, g.has("feed_forward_length") || !g.has("expert_feed_forward_length")
                           ? g.req("feed_forward_length")
                           : g.req("expert_feed_forward_length"));
  TROUPE_TRY_ASSIGN(L, g.req("block_count"));
  // readers size per-layer tables from it before the config is validated
  if (L <= 0 || L > max_layers)
    return make_error(errc::corrupt_file, "{}: block_count {} (1 to {})", g.path(), L, max_layers);
  // one head count, or (Laguna's converter) one per layer: H the largest
  int64_t H = 0;
  c.heads_by_layer.clear();
  if (const gguf_value* hv = g.g.get(g.key("attention.head_count"));
      hv && hv->type == gguf_type::array) {
    if (static_cast<int64_t>(hv->arr.size()) != L)
      return make_error(errc::corrupt_file, "{}: attention.head_count has {} values for {} blocks",
                        g.path(), hv->arr.size(), L);
    for (const auto& e : hv->arr) {
      if (!e.is_integer() || e.i <= 0)
        return make_error(errc::corrupt_file, "{}: attention.head_count holds a count of {}",
                          g.path(), e.i);
      c.heads_by_layer.push_back(e.i);
      H = std::max(H, e.i);
    }
    if (std::all_of(c.heads_by_layer.begin(), c.heads_by_layer.end(),
                    [H](int64_t h) { return h == H; }))
      c.heads_by_layer.clear();
    else if (!heads_per_layer)
      return g.unsupported("attention.head_count differing by layer");
  } else {
    TROUPE_TRY_SET(H, g.req("attention.head_count"));
  }
  c.C = C, c.F = F, c.n_layer = L, c.H = H;
  // one KV head count, or one per layer (LFM2's converter writes 0 for its layers without
  // attention); per layer, the non-zero counts must agree
  if (const gguf_value* kv = g.g.get(g.key("attention.head_count_kv"));
      kv && kv->type == gguf_type::array) {
    if (static_cast<int64_t>(kv->arr.size()) != L || (L > 0 && !kv->arr[0].is_integer()))
      return g.unsupported(fmt::format("attention.head_count_kv that is not a count per layer "
                                       "({} blocks)",
                                       L));
    c.Hkv = 0;
    g.no_kv.assign(static_cast<size_t>(L), 0);
    for (int64_t l = 0; l < L; ++l) {
      const int64_t n = kv->arr[static_cast<size_t>(l)].i;
      if (n == 0) {
        g.no_kv[static_cast<size_t>(l)] = 1;
      } else if (c.Hkv != 0 && n != c.Hkv) {
        return g.unsupported(
            fmt::format("attention.head_count_kv {} and {} on different layers", c.Hkv, n));
      } else {
        c.Hkv = n;
      }
    }
    if (c.Hkv <= 0) return g.unsupported("attention.head_count_kv 0 on every layer");
  } else {
    c.Hkv = g.i("attention.head_count_kv", H);
  }
  c.D = g.i("attention.key_length", H > 0 ? C / H : 0);
  // (latent attention's files describe their heads by key_length_mla / value_length_mla, and the
  // family reads value_length itself: kimi-linear's is the config's head_dim, which llama.cpp
  // does not read)
  if (!g.has("attention.kv_lora_rank") && g.i("attention.value_length", c.D) != c.D)
    return g.unsupported("attention.value_length other than key_length is not supported");
  c.norm_eps = g.f(eps_key, eps_default);
  // biases are tensors the file has or lacks (llama.cpp's loaders take them as optional)
  c.qkv_bias = g.has_tensor("blk.0.attn_q.bias") || g.has_tensor("blk.0.attn_qkv.bias");
  c.o_bias = g.has_tensor("blk.0.attn_output.bias");
  c.mlp_bias = g.has_tensor("blk.0.ffn_up.bias") || g.has_tensor("blk.0.ffn_down.bias");
  c.tie_embeddings = !g.has_tensor("output.weight");
  return read_gguf_common(g, c);
}

void read_gguf_rope_swa(const gguf_cfg& g, model_config& c, int64_t rot_dim) {
  c.has_rope_local = true;
  c.rope_local = rope_spec{};
  c.rope_local.layout = rope_layout::neox;
  c.rope_local.theta = g.f("rope.freq_base_swa", 10000.0);
  c.rope_local.rot_dim = static_cast<int>(rot_dim);
}

status drop_gguf_nextn(const gguf_cfg& g, model_config& c) {
  const int64_t nextn = g.i("nextn_predict_layers", 0);
  if (nextn < 0 || nextn >= c.n_layer)
    return g.unsupported(fmt::format("nextn_predict_layers {} of {} blocks", nextn, c.n_layer));
  c.n_layer -= nextn;
  return {};
}

status read_gguf_common(const gguf_cfg& g, model_config& c) {
  c.ctx = g.i("context_length", 2048);
  c.rope.theta = g.f("rope.freq_base", 10000.0);
  c.rope.rot_dim = static_cast<int>(g.i("rope.dimension_count", c.D));
  const int64_t half = c.rope.rot_dim / 2;
  g.key("rope.scaling.finetuned"); // bookkeeping of the conversion
  if (auto st = g.g.get_string(g.key("rope.scaling.type")); st && *st != "none") {
    c.rope.factor = g.f("rope.scaling.factor", 1.0);
    if (*st == "linear") {
      c.rope.scaling = rope_scaling::linear;
    } else if (*st == "yarn") {
      c.rope.scaling = rope_scaling::yarn;
      c.rope.orig_ctx = g.f("rope.scaling.original_context_length", static_cast<double>(c.ctx));
      // yarn_attn_factor: HF's attention_factor (replaces YaRN's 0.1 ln(s) + 1);
      // attn_factor: llama.cpp's multiplier on top of either
      const double mul = g.f("rope.scaling.attn_factor", 1.0);
      const double att = g.f("rope.scaling.yarn_attn_factor", 0.0);
      if (att > 0 || mul != 1)
        c.rope.attn_factor = mul * (att > 0             ? att
                                    : c.rope.factor > 1 ? 0.1 * std::log(c.rope.factor) + 1
                                                        : 1);
      c.rope.beta_fast = g.f("rope.scaling.yarn_beta_fast", c.rope.beta_fast);
      c.rope.beta_slow = g.f("rope.scaling.yarn_beta_slow", c.rope.beta_slow);
      // yarn_log_multiplier: deepseek2's and mistral4's mscale_all_dim (read by
      // read_deepseek_gguf), and mistral3's (read by read_llama_gguf)
      if ((g.arch != "deepseek2" && g.arch != "mistral4" && g.arch != "mistral3" &&
           g.has("rope.scaling.yarn_log_multiplier")) ||
          g.has("rope.scaling.yarn_ext_factor"))
        return g.unsupported("rope.scaling.yarn_log_multiplier / yarn_ext_factor are not "
                             "supported");
    } else if (*st != "longrope") {
      return make_error(errc::unsupported, "{}: rope scaling '{}' is not supported", g.path(), *st);
    }
  }
  if (g.has_tensor("rope_freqs.weight")) { // Llama 3 scaling, tabulated by the converter
    TROUPE_TRY_ASSIGN(f, read_gguf_vector(g, "rope_freqs.weight", half));
    c.config_tensors.push_back("rope_freqs.weight");
    c.rope.scaling = rope_scaling::factors;
    c.rope.short_factor = std::move(f);
  }
  if (g.has_tensor("rope_factors_long.weight") || g.has_tensor("rope_factors_short.weight")) {
    // LongRoPE (Phi-3): the short set up to the original context, the long set past it;
    // picked for the served context as in the HF reader (read_rope)
    TROUPE_TRY_ASSIGN(lf, read_gguf_vector(g, "rope_factors_long.weight", half));
    TROUPE_TRY_ASSIGN(sf, read_gguf_vector(g, "rope_factors_short.weight", half));
    c.config_tensors.push_back("rope_factors_long.weight");
    c.config_tensors.push_back("rope_factors_short.weight");
    rope_spec& r = c.rope;
    r.scaling = rope_scaling::longrope;
    r.long_factor = std::move(lf), r.short_factor = std::move(sf);
    r.orig_ctx = g.f("rope.scaling.original_context_length", 0.0);
    if (!(r.orig_ctx > 1))
      return make_error(errc::corrupt_file,
                        "{}: LongRoPE factors need rope.scaling.original_context_length > 1",
                        g.path());
    r.factor = 0;
    r.attn_factor = g.f("rope.scaling.attn_factor", 0.0);
    finish_longrope(r, c.ctx);
  } else if (auto st = g.g.get_string(g.key("rope.scaling.type")); st && *st == "longrope") {
    return make_error(errc::corrupt_file,
                      "{}: rope scaling 'longrope' without rope_factors_long / _short.weight",
                      g.path());
  } else {
    g.key("rope.scaling.original_context_length"); // Phi-3 writes it without LongRoPE too
  }
  if (auto tokens = g.g.get(std::string("tokenizer.ggml.tokens"));
      tokens && tokens->type == gguf_type::array)
    c.V = static_cast<int64_t>(tokens->arr.size());
  c.V = g.i("vocab_size", c.V);
  if (const tensor_info* e = g.g.tensors.find("token_embd.weight");
      e && e->dims.rank == 2 && c.V == 0)
    c.V = e->dims[0];
  c.bos_id = g.g.get_int_or("tokenizer.ggml.bos_token_id", -1);
  if (auto eos = g.g.get_int("tokenizer.ggml.eos_token_id")) c.eos_ids = {*eos};
  if (auto eot = g.g.get_int("tokenizer.ggml.eot_token_id");
      eot && (c.eos_ids.empty() || c.eos_ids[0] != *eot))
    c.eos_ids.push_back(*eot);
  return {};
}

} // namespace troupe::arch
