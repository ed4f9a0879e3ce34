// model_config.cpp: model_config from Hugging Face config.json or GGUF metadata, and the
// table of architectures (model_config.hpp). Each architecture entry sets the recipe fields
// that differ from a plain Llama; everything else is read from the config.
#include "arch/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "arch/spec.hpp"
#include "formats/gguf.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;

weight_names hf_names() {
  weight_names n;
  n.tok_embd = "model.embed_tokens.weight";
  n.output_norm = "model.norm.weight";
  n.output = "lm_head.weight";
  n.attn_norm = "model.layers.{}.input_layernorm.weight";
  n.wq = "model.layers.{}.self_attn.q_proj.weight";
  n.wk = "model.layers.{}.self_attn.k_proj.weight";
  n.wv = "model.layers.{}.self_attn.v_proj.weight";
  n.wo = "model.layers.{}.self_attn.o_proj.weight";
  n.bq = "model.layers.{}.self_attn.q_proj.bias";
  n.bk = "model.layers.{}.self_attn.k_proj.bias";
  n.bv = "model.layers.{}.self_attn.v_proj.bias";
  n.bo = "model.layers.{}.self_attn.o_proj.bias";
  n.ffn_norm = "model.layers.{}.post_attention_layernorm.weight";
  n.w_gate = "model.layers.{}.mlp.gate_proj.weight";
  n.w_up = "model.layers.{}.mlp.up_proj.weight";
  n.w_down = "model.layers.{}.mlp.down_proj.weight";
  return n;
}

weight_names gguf_names() {
  weight_names n;
  n.tok_embd = "token_embd.weight";
  n.output_norm = "output_norm.weight";
  n.output = "output.weight";
  n.attn_norm = "blk.{}.attn_norm.weight";
  n.wq = "blk.{}.attn_q.weight";
  n.wk = "blk.{}.attn_k.weight";
  n.wv = "blk.{}.attn_v.weight";
  n.wo = "blk.{}.attn_output.weight";
  n.bq = "blk.{}.attn_q.bias";
  n.bk = "blk.{}.attn_k.bias";
  n.bv = "blk.{}.attn_v.bias";
  n.bo = "blk.{}.attn_output.bias";
  n.ffn_norm = "blk.{}.ffn_norm.weight";
  n.w_gate = "blk.{}.ffn_gate.weight";
  n.w_up = "blk.{}.ffn_up.weight";
  n.w_down = "blk.{}.ffn_down.weight";
  return n;
}

// The architectures Troupe knows: HF class name or GGUF arch -> family recipe.
struct arch_entry {
  const char* hf_name;
  const char* gguf_name;
  const char* family;
  bool qkv_bias;
};
constexpr arch_entry arch_table[] = {
    {"LlamaForCausalLM", "llama", "llama", false},
    {"MistralForCausalLM", "mistral", "mistral", false},
    {"Qwen2ForCausalLM", "qwen2", "qwen2", true},
};

const arch_entry* find_arch(std::string_view name, bool gguf) {
  for (const auto& a : arch_table)
    if (name == (gguf ? a.gguf_name : a.hf_name)) return &a;
  return nullptr;
}

const arch_entry* find_family(std::string_view family) {
  for (const auto& a : arch_table)
    if (family == a.family) return &a;
  return nullptr;
}

std::string known_archs(bool gguf) {
  std::string s;
  for (const auto& a : arch_table)
    s += std::string(s.empty() ? "" : ", ") + (gguf ? a.gguf_name : a.hf_name);
  return s;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Reads an integer field; `fallback` when absent or null; an error when of another type.
expected<int64_t> int_field(const json& j, const char* key, int64_t fallback,
                            const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return make_error(errc::corrupt_file, "{}: '{}' must be a non-negative integer", where, key);
  return it->get<int64_t>();
}

expected<double> num_field(const json& j, const char* key, double fallback,
                           const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number())
    return make_error(errc::corrupt_file, "{}: '{}' must be a number", where, key);
  return it->get<double>();
}

status parse_rope_scaling(const json& rs, model_config& c, const std::string& where) {
  std::string type;
  if (rs.contains("rope_type") && rs["rope_type"].is_string())
    type = rs["rope_type"].get<std::string>();
  else if (rs.contains("type") && rs["type"].is_string())
    type = rs["type"].get<std::string>();
  if (type.empty() || type == "default") return {};
  TROUPE_TRY_ASSIGN(factor, num_field(rs, "factor", 1.0, where));
  c.rope.factor = factor;
  if (type == "linear") {
    c.rope.scaling = rope_scaling::linear;
  } else if (type == "llama3") {
    c.rope.scaling = rope_scaling::llama3;
    TROUPE_TRY_ASSIGN(lo, num_field(rs, "low_freq_factor", 1.0, where));
    TROUPE_TRY_ASSIGN(hi, num_field(rs, "high_freq_factor", 4.0, where));
    TROUPE_TRY_ASSIGN(orig, num_field(rs, "original_max_position_embeddings", 8192, where));
    if (hi <= lo)
      return make_error(errc::corrupt_file,
                        "{}: llama3 rope needs high_freq_factor > low_freq_factor", where);
    c.rope.low_freq_factor = lo;
    c.rope.high_freq_factor = hi;
    c.rope.orig_ctx = orig;
  } else if (type == "yarn") {
    c.rope.scaling = rope_scaling::yarn;
    TROUPE_TRY_ASSIGN(
        orig, num_field(rs, "original_max_position_embeddings", static_cast<double>(c.ctx), where));
    TROUPE_TRY_ASSIGN(bf, num_field(rs, "beta_fast", 32.0, where));
    TROUPE_TRY_ASSIGN(bs, num_field(rs, "beta_slow", 1.0, where));
    TROUPE_TRY_ASSIGN(af, num_field(rs, "attention_factor", 0.0, where));
    TROUPE_TRY_ASSIGN(ms, num_field(rs, "mscale", 0.0, where));
    TROUPE_TRY_ASSIGN(msa, num_field(rs, "mscale_all_dim", 0.0, where));
    c.rope.orig_ctx = orig;
    c.rope.beta_fast = bf;
    c.rope.beta_slow = bs;
    c.rope.attn_factor = af;
    c.rope.mscale = ms;
    c.rope.mscale_all_dim = msa;
  } else {
    return make_error(errc::unsupported,
                      "{}: rope scaling '{}' is not supported (linear, llama3, yarn are)", where,
                      type);
  }
  if (c.rope.factor <= 0)
    return make_error(errc::corrupt_file, "{}: rope scaling factor must be positive", where);
  return {};
}

bool bool_field(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string string_field(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

void read_eos(const json& j, std::vector<int64_t>& out) {
  auto it = j.find("eos_token_id");
  if (it == j.end()) return;
  if (it->is_number_integer())
    out = {it->get<int64_t>()};
  else if (it->is_array()) {
    out.clear();
    for (const auto& e : *it)
      if (e.is_number_integer()) out.push_back(e.get<int64_t>());
  }
}

// Keys every config.json may carry that do not change the computation (bookkeeping, the
// generic PretrainedConfig fields) or that config_from_hf_json reads for every family.
const std::set<std::string>& common_keys() {
  static const std::set<std::string> k = {"architectures",
                                          "model_type",
                                          "torch_dtype",
                                          "dtype",
                                          "transformers_version",
                                          "_name_or_path",
                                          "initializer_range",
                                          "use_cache",
                                          "attention_dropout",
                                          "pad_token_id",
                                          "bos_token_id",
                                          "eos_token_id",
                                          "tie_word_embeddings",
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
                                          "vocab_size",
                                          "hidden_size",
                                          "intermediate_size",
                                          "num_hidden_layers",
                                          "num_attention_heads",
                                          "num_key_value_heads",
                                          "hidden_act",
                                          "max_position_embeddings",
                                          "rms_norm_eps",
                                          "rope_theta",
                                          "rope_scaling",
                                          "rope_parameters",
                                          "partial_rotary_factor",
                                          "head_dim"};
  return k;
}

// The keys each family's transformers class reads beyond the common ones. A key outside
// both sets is one transformers ignores for this architecture, so Troupe ignores it too
// (and lists it at load).
const std::set<std::string>& family_keys(const std::string& family) {
  static const std::set<std::string> llama = {"pretraining_tp", "attention_bias", "mlp_bias"};
  static const std::set<std::string> mistral = {"sliding_window"};
  static const std::set<std::string> qwen2 = {"use_sliding_window", "sliding_window",
                                              "max_window_layers", "layer_types"};
  static const std::set<std::string> none;
  return family == "llama"     ? llama
         : family == "mistral" ? mistral
         : family == "qwen2"   ? qwen2
                               : none;
}

// Reads what differs by family (biases, sliding windows), refuses what changes the math and
// is not implemented, and records the keys nobody reads.
status read_family_keys(const json& j, model_config& c, const std::string& where) {
  // quantized checkpoints (bitsandbytes, GPTQ, AWQ, FP8, compressed-tensors) store weights
  // that mean something else than their dtype says: never load them as if they were plain
  for (const char* q : {"quantization_config", "compression_config"})
    if (auto it = j.find(q); it != j.end() && !it->is_null()) {
      std::string method = it->is_object() ? string_field(*it, "quant_method", "") : "";
      return make_error(errc::unsupported,
                        "{}: '{}'{} is not supported: this checkpoint's weights are quantized by "
                        "a method Troupe does not implement (use an unquantized or GGUF copy)",
                        where, q, method.empty() ? "" : " (" + method + ")");
    }
  if (c.family == "llama") {
    if (bool_field(j, "attention_bias", false)) {
      c.qkv_bias = true;
      c.o_bias = true;
    }
    if (bool_field(j, "mlp_bias", false))
      return make_error(errc::unsupported,
                        "{}: 'mlp_bias': true (biases on gate/up/down) is not supported", where);
  } else if (c.family == "mistral") {
    TROUPE_TRY_ASSIGN(sw, int_field(j, "sliding_window", 0, where));
    c.sliding_window = sw >= c.ctx ? 0 : sw; // a window as long as the context is no window
  } else if (c.family == "qwen2") {
    TROUPE_TRY_ASSIGN(sw, int_field(j, "sliding_window", 0, where));
    TROUPE_TRY_ASSIGN(mwl, int_field(j, "max_window_layers", 28, where));
    const bool use = bool_field(j, "use_sliding_window", false);
    std::vector<uint8_t> windowed(static_cast<size_t>(c.n_layer), 0);
    if (auto lt = j.find("layer_types"); lt != j.end() && !lt->is_null()) {
      if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c.n_layer)
        return make_error(errc::corrupt_file, "{}: 'layer_types' must list {} layer types", where,
                          c.n_layer);
      for (size_t i = 0; i < lt->size(); ++i) {
        const json& t = (*lt)[i];
        if (t == "sliding_attention")
          windowed[i] = 1;
        else if (t != "full_attention")
          return make_error(errc::unsupported, "{}: layer_types[{}] = {} is not supported", where,
                            i, t.dump());
      }
    } else {
      for (int64_t i = mwl; i < c.n_layer; ++i) windowed[static_cast<size_t>(i)] = 1;
    }
    // transformers: sliding_window = sliding_window if use_sliding_window else None
    if (use && sw > 0 && sw < c.ctx &&
        std::find(windowed.begin(), windowed.end(), 1) != windowed.end()) {
      c.sliding_window = sw;
      c.windowed = std::move(windowed);
    }
  }
  const auto& fam = family_keys(c.family);
  for (auto& [k, v] : j.items())
    if (!common_keys().count(k) && !fam.count(k)) c.ignored_keys.push_back(k);
  return {};
}

} // namespace

std::string weight_names::layer(const std::string& pattern, int index) {
  std::string s = pattern;
  auto pos = s.find("{}");
  if (pos != std::string::npos) s.replace(pos, 2, std::to_string(index));
  return s;
}

int64_t model_config::layer_window(int64_t layer) const {
  if (sliding_window <= 0) return 0;
  if (windowed.empty()) return sliding_window;
  return layer >= 0 && layer < static_cast<int64_t>(windowed.size()) && windowed[layer]
             ? sliding_window
             : 0;
}

int64_t model_config::kv_horizon() const {
  if (sliding_window <= 0) return 0;
  for (int64_t l = 0; l < n_layer; ++l)
    if (layer_window(l) == 0) return 0;
  return sliding_window;
}

double model_config::attention_scale() const {
  return attn_scale > 0 ? attn_scale : 1.0 / std::sqrt(static_cast<double>(D));
}

int64_t model_config::parameters() const {
  const int64_t attn =
      C * H * D + 2 * C * Hkv * D + H * D * C + (qkv_bias ? H * D + 2 * Hkv * D : 0);
  const int64_t ffn = (gated_ffn ? 3 : 2) * C * F;
  const int64_t per_layer = attn + ffn + 2 * C;
  return n_layer * per_layer + V * C * (tie_embeddings ? 1 : 2) + C;
}

status model_config::validate() const {
  auto bad = [this](std::string_view what) {
    return make_error(errc::corrupt_file, "model config ({}): {}", arch, what);
  };
  if (n_layer <= 0 || C <= 0 || F <= 0 || H <= 0 || Hkv <= 0 || D <= 0 || V <= 0)
    return bad(
        fmt::format("dimensions must be positive (layers {}, C {}, F {}, H {}, Hkv {}, D {}, V {})",
                    n_layer, C, F, H, Hkv, D, V));
  if (H % Hkv) return bad(fmt::format("{} heads is not a multiple of {} KV heads", H, Hkv));
  if (rope.rot_dim <= 0 || rope.rot_dim > D || rope.rot_dim % 2)
    return bad(fmt::format("rotary dimension {} must be even and at most the head dim {}",
                           rope.rot_dim, D));
  if (!(norm_eps > 0) || norm_eps > 1)
    return bad(fmt::format("norm epsilon {} out of range", norm_eps));
  if (!(rope.theta > 0)) return bad("rope theta must be positive");
  if (sliding_window < 0) return bad("sliding window must not be negative");
  if (!windowed.empty() && static_cast<int64_t>(windowed.size()) != n_layer)
    return bad(fmt::format("{} per-layer window flags for {} layers", windowed.size(), n_layer));
  if (n_layer > 100000 || C > (1 << 20) || F > (1 << 22) || H > 4096 || D > 4096 || V > (1 << 24))
    return bad("a dimension is implausibly large");
  return {};
}

expected<model_config> config_from_hf_json(const std::string& config_text,
                                           const std::string& gen_text, const std::string& where) {
  json j = json::parse(config_text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::corrupt_file, "{}: not a JSON object", where);
  model_config c;
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    arch = j["architectures"][0].get<std::string>();
  const arch_spec* spec = find_arch_spec(arch);
  const arch_entry* entry = spec ? find_family(spec->family) : find_arch(arch, false);
  if (!entry)
    return make_error(errc::unsupported,
                      "{}: architecture '{}' is not supported (supported: {}; an --arch-spec file "
                      "can define it from existing ops)",
                      where, arch.empty() ? "(none)" : arch, known_archs(false));
  c.arch = arch;
  c.family = entry->family;
  c.qkv_bias = entry->qkv_bias;
  c.names = hf_names();
  TROUPE_TRY_ASSIGN(C, int_field(j, "hidden_size", 0, where));
  TROUPE_TRY_ASSIGN(F, int_field(j, "intermediate_size", 0, where));
  TROUPE_TRY_ASSIGN(L, int_field(j, "num_hidden_layers", 0, where));
  TROUPE_TRY_ASSIGN(H, int_field(j, "num_attention_heads", 0, where));
  TROUPE_TRY_ASSIGN(Hkv, int_field(j, "num_key_value_heads", H, where));
  TROUPE_TRY_ASSIGN(V, int_field(j, "vocab_size", 0, where));
  TROUPE_TRY_ASSIGN(ctx, int_field(j, "max_position_embeddings", 2048, where));
  TROUPE_TRY_ASSIGN(D, int_field(j, "head_dim", H ? C / H : 0, where));
  TROUPE_TRY_ASSIGN(eps, num_field(j, "rms_norm_eps", 1e-6, where));
  c.C = C, c.F = F, c.n_layer = L, c.H = H, c.Hkv = Hkv, c.V = V, c.ctx = ctx, c.D = D;
  c.norm_eps = eps;
  c.tie_embeddings = bool_field(j, "tie_word_embeddings", false);
  TROUPE_TRY(read_family_keys(j, c, where));
  const std::string act = string_field(j, "hidden_act", "silu");
  if (act == "silu" || act == "swish")
    c.act = act_kind::silu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_new")
    c.act = act_kind::gelu_tanh;
  else if (act == "gelu")
    c.act = act_kind::gelu_erf;
  else if (spec && spec->activations.count(act))
    c.act_expr = spec->activations.at(act);
  else
    return make_error(errc::unsupported,
                      "{}: hidden_act '{}' is not supported (an --arch-spec file can define it as "
                      "an expression)",
                      where, act);
  if (spec && spec->activations.count(act)) c.act_expr = spec->activations.at(act); // spec wins
  // rope: legacy top-level rope_theta / rope_scaling, or transformers 5's rope_parameters
  c.rope.layout = rope_layout::neox; // HF checkpoints store q/k for rotate_half
  TROUPE_TRY_ASSIGN(theta, num_field(j, "rope_theta", 10000.0, where));
  c.rope.theta = theta;
  TROUPE_TRY_ASSIGN(partial, num_field(j, "partial_rotary_factor", 1.0, where));
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    TROUPE_TRY_ASSIGN(t2, num_field(rp, "rope_theta", theta, where));
    c.rope.theta = t2;
    TROUPE_TRY_ASSIGN(p2, num_field(rp, "partial_rotary_factor", partial, where));
    partial = p2;
    TROUPE_TRY(parse_rope_scaling(rp, c, where));
  }
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object())
    TROUPE_TRY(parse_rope_scaling(j["rope_scaling"], c, where));
  c.rope.rot_dim = static_cast<int>(static_cast<double>(D) * partial);
  TROUPE_TRY_ASSIGN(bos, int_field(j, "bos_token_id", -1, where));
  c.bos_id = bos;
  read_eos(j, c.eos_ids);
  if (!gen_text.empty()) {
    json g = json::parse(gen_text, nullptr, false);
    if (g.is_object()) {
      read_eos(g, c.eos_ids);
      if (g.contains("bos_token_id") && g["bos_token_id"].is_number_integer())
        c.bos_id = g["bos_token_id"].get<int64_t>();
    }
  }
  TROUPE_TRY(c.validate());
  return c;
}

expected<model_config> config_from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::exists(cfg)) return make_error(errc::not_found, "{}: no config.json", dir);
  const fs::path gen = fs::path(dir) / "generation_config.json";
  return config_from_hf_json(read_text(cfg), fs::exists(gen) ? read_text(gen) : "", cfg.string());
}

expected<model_config> config_from_gguf(const gguf_file& g) {
  model_config c;
  TROUPE_TRY_ASSIGN(arch, g.get_string("general.architecture"));
  const arch_entry* entry = find_arch(arch, true);
  if (!entry)
    return make_error(errc::unsupported, "{}: architecture '{}' is not supported (supported: {})",
                      g.file->path(), arch, known_archs(true));
  c.arch = std::string(arch);
  c.family = entry->family;
  c.qkv_bias = entry->qkv_bias;
  c.names = gguf_names();
  const std::string a(arch);
  auto key = [&a](const char* k) { return a + "." + k; };
  TROUPE_TRY_ASSIGN(C, g.get_int(key("embedding_length")));
  TROUPE_TRY_ASSIGN(F, g.get_int(key("feed_forward_length")));
  TROUPE_TRY_ASSIGN(L, g.get_int(key("block_count")));
  TROUPE_TRY_ASSIGN(H, g.get_int(key("attention.head_count")));
  c.C = C, c.F = F, c.n_layer = L, c.H = H;
  c.Hkv = g.get_int_or(key("attention.head_count_kv"), H);
  c.D = g.get_int_or(key("attention.key_length"), H > 0 ? C / H : 0);
  c.ctx = g.get_int_or(key("context_length"), 2048);
  c.norm_eps = g.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5);
  c.rope.theta = g.get_float_or(key("rope.freq_base"), 10000.0);
  if (const int64_t sw = g.get_int_or(key("attention.sliding_window"), 0); sw > 0 && sw < c.ctx)
    c.sliding_window = sw; // every layer (llama.cpp's n_swa for these families)
  c.rope.rot_dim = static_cast<int>(g.get_int_or(key("rope.dimension_count"), c.D));
  // llama.cpp's converters undo HF's q/k permutation for llama; qwen2 stays rotate_half
  c.rope.layout =
      c.family == "llama" || c.family == "mistral" ? rope_layout::interleaved : rope_layout::neox;
  if (auto st = g.get_string(key("rope.scaling.type")); st && *st != "none") {
    c.rope.factor = g.get_float_or(key("rope.scaling.factor"), 1.0);
    if (*st == "linear")
      c.rope.scaling = rope_scaling::linear;
    else if (*st == "yarn") {
      c.rope.scaling = rope_scaling::yarn;
      c.rope.orig_ctx =
          g.get_float_or(key("rope.scaling.original_context_length"), static_cast<double>(c.ctx));
    } else {
      return make_error(errc::unsupported, "{}: rope scaling '{}' is not supported", g.file->path(),
                        *st);
    }
  }
  if (g.tensors.contains("rope_freqs.weight"))
    return make_error(errc::unsupported,
                      "{}: per-frequency rope factors (rope_freqs.weight, Llama 3.1 GGUF) are not "
                      "supported yet; load the HF checkpoint",
                      g.file->path());
  if (auto tokens = g.get(std::string("tokenizer.ggml.tokens"));
      tokens && tokens->type == gguf_type::array)
    c.V = static_cast<int64_t>(tokens->arr.size());
  c.V = g.get_int_or(key("vocab_size"), c.V);
  if (const tensor_info* e = g.tensors.find(c.names.tok_embd); e && e->dims.rank == 2 && c.V == 0)
    c.V = e->dims[0];
  c.tie_embeddings = !g.tensors.contains(c.names.output);
  c.bos_id = g.get_int_or("tokenizer.ggml.bos_token_id", -1);
  if (auto eos = g.get_int("tokenizer.ggml.eos_token_id")) c.eos_ids = {*eos};
  if (auto eot = g.get_int("tokenizer.ggml.eot_token_id");
      eot && (c.eos_ids.empty() || c.eos_ids[0] != *eot))
    c.eos_ids.push_back(*eot);
  TROUPE_TRY(c.validate());
  return c;
}

} // namespace troupe
