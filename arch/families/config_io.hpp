// config_io.hpp (arch/families, internal): how a family reads its configuration. hf_cfg
// wraps config.json and remembers every key a reader asked for, so the keys a family never
// reads (which its transformers class ignores too) are listed once at load rather than
// silently dropped; a key it reads but does not implement is refused by the reader, naming
// it. gguf_cfg reads `<arch>.<key>` metadata. The shared pieces (RoPE and its scaling, the
// EOS ids, the bookkeeping keys every config carries) live here.
#pragma once

#include <optional>

#include <functional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "arch/model_config.hpp"
#include "formats/gguf.hpp"

namespace troupe::arch {

using json = nlohmann::json;

class hf_cfg {
 public:
  hf_cfg(const json& j, std::string where)
      : j_(j)
      , where_(std::move(where)) {}
  const std::string& where() const { return where_; }
  bool has(const char* key) const;
  /// Whether the key is in the file at all (null included).
  bool present(const char* key) const { return j_.contains(key); }
  /// A non-negative integer; `fallback` when absent or null; an error naming the key when
  /// of another type.
  expected<int64_t> i(const char* key, int64_t fallback);
  /// A positive integer that must be there.
  expected<int64_t> req(const char* key);
  /// The same, under `key` or else under its older name `alias` (Falcon's and Bloom's n_embed).
  expected<int64_t> req(const char* key, const char* alias);
  expected<double> f(const char* key, double fallback);
  bool b(const char* key, bool fallback);
  std::string s(const char* key, const std::string& fallback);
  /// The raw value (null when absent); marks the key read.
  const json& raw(const char* key);
  void mark(const char* key) { read_.insert(key); }
  /// Keys present and never read.
  std::vector<std::string> unread() const;
  error bad(const std::string& what) const;
  error unsupported(const std::string& what) const;

 private:
  const json& j_;
  std::string where_;
  std::set<std::string> read_;
};

/// config.json text with Python's non-finite numbers (bare Infinity, -Infinity, NaN, as json.dumps
/// writes them) turned into transformers 5's {"__float__": "Infinity"} objects: valid JSON.
std::string quote_nonfinite(std::string_view text);
/// A number of a config: a JSON number, or transformers 5's {"__float__": "Infinity" | "-Infinity"
/// | "NaN"}; nullopt for anything else.
std::optional<double> config_number(const json& v);

/// Marks what every config.json carries that changes nothing computed (architectures,
/// dtype, ids of special tokens are read elsewhere ...); refuses quantized checkpoints
/// (quantization_config, compression_config) by name.
status read_common(hf_cfg& j, model_config& c);
/// rope_theta / rope_scaling (legacy) or rope_parameters (transformers 5), and
/// partial_rotary_factor; `theta` and `partial` are the family's defaults.
status read_rope(hf_cfg& j, model_config& c, double theta, double partial);
/// One rope dict ({"rope_type", "rope_theta", "partial_rotary_factor", "factor" ...}: one layer
/// type's, as transformers 5 nests them) into `spec`, in rotate_half layout; `theta` where the
/// dict gives none.
/// The attention of Qwen3's line: config.json's dims (rms_norm_eps, `eps` by default), untied
/// unless tie_word_embeddings, q / k / v / o biases with attention_bias, an RMS norm of every q
/// and k head, and hidden_act (dots.llm1, Mellum, Hy3).
status read_qk_normed_attention(hf_cfg& j, model_config& c, double eps);
/// transformers 5's rope_parameters nested by layer type (full_attention, sliding_attention; a dict
/// that is not nested holds for both): c.rope and c.rope_local (has_rope_local), each type's dict
/// `full` / `sliding` where the config gives none.
status read_rope_by_layer_type(hf_cfg& j, model_config& c, json full, json sliding);
status read_rope_dict(const json& rp, const model_config& c, rope_spec& spec, double theta,
                      const std::string& where);
/// The rotated dimensions from partial_rotary_factor: D * partial, or for proportional RoPE
/// (read_rope_scaling marks it turning -1) the whole head with floor(partial D / 2) pairs turning.
status rope_pairs(rope_spec& spec, int64_t D, double partial, const std::string& where);
/// LongRoPE's derived parts, from the served context `ctx`: the scale factor (when not given),
/// the attention factor sqrt(1 + ln f / ln orig) (when not given), and which factor set.
void finish_longrope(rope_spec& r, int64_t ctx);
/// The scaling part of a rope dict (linear, llama3, yarn, dynamic, longrope).
status read_rope_scaling(const json& rs, model_config& c, const std::string& where);
/// bos / eos ids from config.json and generation_config.json text (may be empty).
void read_special_ids(hf_cfg& j, const std::string& generation_json, model_config& c);
/// Layers a config may give (llama.cpp's limit is 512): more is a corrupt file, refused before
/// any per-layer table is sized from it.
inline constexpr int64_t max_layers = 1 << 16;
/// The dimension keys most config.json files share (hidden_size, intermediate_size,
/// num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
/// max_position_embeddings, head_dim) and the norm epsilon under `eps_key`.
/// head_dim false: the config's head_dim means something else (GLM-5.3's: its rotary dims), left
/// unread (D = C / H until the family sets it). ffn_per_layer: intermediate_size may also list
/// one width per layer (Gemma 3n's): c.ffn_widths, F the largest.
status read_hf_dims(hf_cfg& j, model_config& c, const char* eps_key, double eps_default,
                    bool head_dim = true, bool ffn_per_layer = false);
/// Which layers slide: `layer_types` when config.json lists them ("sliding_attention" /
/// "full_attention"), else `fallback(layer)`; the window `window` applies to those (0: none).
/// Windows of sliding_window on the layers layer_types names sliding (or, without it, all but
/// every sliding_window_pattern-th), and RoPE on those layers only: the full-attention layers
/// have no positional encoding (Cohere 2, EXAONE 4). False when the config has no
/// sliding_window (then nothing is set: every layer full, with RoPE).
expected<bool> read_windows_rope_on_sliding(hf_cfg& j, model_config& c);
/// RoPE on the windowed layers only: every full layer one of nope_layers (EXAONE 4 / MoE, Command
/// R7B, AFMoE).
void rope_on_windowed_only(model_config& c);
status read_layer_types(hf_cfg& j, model_config& c, int64_t window,
                        const std::function<bool(int64_t)>& fallback);
/// A list of one of two kinds per layer under `key` (mlp_layer_types' "sparse" / "dense", Kimi's
/// "linear_attention" / "full_attention"): `out` [n_layer] with 1 where `one`. False (and `out`
/// as it was) where the key is absent or null; another length or kind is refused naming it. A list
/// `padded` entries longer (a hub config's multi-token-prediction layers) is read for its first
/// n_layer.
expected<bool> read_layer_kinds(hf_cfg& j, const char* key, int64_t n_layer, const char* one,
                                const char* other, std::vector<uint8_t>& out, int64_t padded = 0);
/// A layer index written in decimal, all of `s` (a config's per-layer key, a tensor name's
/// field): nullopt for anything else (a sign, other characters, more than 9 digits).
std::optional<int64_t> parse_index(std::string_view s);
/// A limit per layer under `key` (a SwiGLU clip: Ling 3, Step 3.7): numbers >= 0, or null where
/// `null_none` (0: none); `out` [n_layer], all 0 where the key is absent. A list `padded` entries
/// longer (the multi-token-prediction layers a hub config appends) is read for its first
/// n_layer.
status read_layer_limits(hf_cfg& j, const char* key, int64_t n_layer, int64_t padded,
                         bool null_none, std::vector<double>& out);
/// c.moe_layers from mlp_layer_types ("sparse" / "dense"), else the first first_k_dense_replace
/// layers dense (`first_dense` when absent), the others experts.
status read_dense_then_sparse(hf_cfg& j, model_config& c, int64_t first_dense);
/// Maps an HF activation name to a kernel or a built-in expression; unsupported otherwise
/// (an --arch-spec file may still define it).
status read_activation(const std::string& name, model_config& c, const std::string& where);

/// `<arch>.<key>` metadata of a GGUF file; remembers the keys a reader asked for, so the
/// architecture's keys a family never reads are listed once at load.
struct gguf_cfg {
  const gguf_file& g;
  std::string arch;
  mutable std::set<std::string> read_;
  std::string key(const char* k) const {
    read_.insert(k);
    return arch + "." + k;
  }
  /// An integer (a float) key, `fallback` when absent; a key of another type is recorded
  /// (mistyped) and config_from_gguf refuses the file naming it, never reading the fallback.
  int64_t i(const char* k, int64_t fallback) const {
    const gguf_value* v = g.get(key(k));
    if (v && !v->is_integer()) mistyped.insert(k);
    return g.get_int_or(key(k), fallback);
  }
  double f(const char* k, double fallback) const {
    const gguf_value* v = g.get(key(k));
    if (v && !v->is_integer() && !v->is_float()) mistyped.insert(k);
    return g.get_float_or(key(k), fallback);
  }
  mutable std::set<std::string> mistyped;
  /// Layers whose attention.head_count_kv (written per layer) is 0: layers without attention,
  /// which config_from_gguf accepts only where the family made them linear layers.
  mutable std::vector<uint8_t> no_kv;
  expected<int64_t> req(const char* k) const { return g.get_int(key(k)); }
  bool has(const char* k) const { return g.get(key(k)) != nullptr; }
  bool has_tensor(const std::string& name) const { return g.tensors.contains(name); }
  const std::string& path() const;
  /// `<arch>.*` keys present and never read (without the prefix).
  std::vector<std::string> unread() const;
  error unsupported(const std::string& what) const;
};

/// The dimension keys every GGUF architecture writes (embedding_length, feed_forward_length,
/// block_count, attention.head_count / head_count_kv / key_length) and the norm epsilon
/// under `eps_key` (attention.layer_norm_rms_epsilon or attention.layer_norm_epsilon), then
/// read_gguf_common. attention.head_count may be one per layer (all equal, or different where
/// `heads_per_layer`: c.heads_by_layer; a family that cannot run that refuses it).
status read_gguf_dims(const gguf_cfg& g, model_config& c, const char* eps_key, double eps_default,
                      bool heads_per_layer = false);
/// The converters count the multi-token-prediction blocks in block_count (nextn_predict_layers
/// of them, blk.{n_layer} on, after the trunk, as llama.cpp's n_layer() leaves them out): the
/// trunk alone is the model (their tensors stay unread).
status drop_gguf_nextn(const gguf_cfg& g, model_config& c);
/// The sliding layers' own RoPE (c.rope_local, NEOX halves): rope.freq_base_swa (10000 where
/// absent) over `rot_dim` dims of each head.
void read_gguf_rope_swa(const gguf_cfg& g, model_config& c, int64_t rot_dim);
/// attention.sliding_window and which layers slide: attention.sliding_window_pattern (a
/// period p: all but every p-th layer; or one bool per layer), else `period` (0: every
/// layer). No window key (or 0): none.
status read_gguf_windows(const gguf_cfg& g, model_config& c, int64_t default_window,
                         int64_t period);
/// A 1-D F32 tensor of `n` values read at load (rope factors); corrupt_file otherwise.
expected<std::vector<double>> read_gguf_vector(const gguf_cfg& g, const std::string& name,
                                               int64_t n);

/// What every GGUF reader shares: the vocabulary size (tokens, or the embedding rows),
/// bos / eos / eot ids, rope base / dimension count / scaling, and the context length.
status read_gguf_common(const gguf_cfg& g, model_config& c);

} // namespace troupe::arch
