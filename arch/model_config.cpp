// model_config.cpp: model_config from Hugging Face config.json or GGUF metadata
// (model_config.hpp): the architecture picks a family (arch/families/table.cpp, or a
// registered spec file), whose readers fill the config; keys the family never read are
// recorded for the load to list.
#include "arch/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "arch/families/families.hpp"
#include "arch/spec.hpp"
#include "formats/gguf.hpp"

namespace troupe {

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

int64_t model_config::layer_chunk(int64_t layer) const {
  if (attn_chunk <= 0 || layer < 0 || layer >= static_cast<int64_t>(chunked.size())) return 0;
  return chunked[static_cast<size_t>(layer)] ? attn_chunk : 0;
}

bool model_config::layer_tempered(int64_t layer) const {
  if (attn_temp_floor <= 0) return false;
  if (tempered.empty()) return true;
  return layer >= 0 && layer < static_cast<int64_t>(tempered.size()) &&
         tempered[static_cast<size_t>(layer)];
}

bool model_config::layer_rope(int64_t layer) const {
  if (!rope_enabled) return false;
  return nope_layers.empty() || layer < 0 || layer >= static_cast<int64_t>(nope_layers.size()) ||
         !nope_layers[static_cast<size_t>(layer)];
}

int64_t model_config::layer_qk_rope(int64_t layer) const {
  const bool merged = layer >= 0 && layer < static_cast<int64_t>(nope_layers.size()) &&
                      nope_layers[static_cast<size_t>(layer)];
  return merged ? 0 : qk_rope;
}

int64_t model_config::kv_horizon() const {
  if (sliding_window <= 0) return 0;
  for (int64_t l = 0; l < n_layer; ++l) // compressed entries sit in the sequence's first blocks
    if (layer_compress(l) > 0) return 0;
  for (int64_t l = 0; l < n_layer; ++l)
    if (layer_window(l) == 0) return 0;
  return sliding_window;
}

double model_config::attention_scale() const {
  return attn_scale > 0 ? attn_scale : 1.0 / std::sqrt(static_cast<double>(D));
}

bool model_config::layer_linear(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(linear_layers.size()) && linear_layers[layer];
}

bool model_config::layer_has_ffn(int64_t layer) const {
  return layer < 0 || layer >= static_cast<int64_t>(layer_blocks.size()) ||
         (layer_blocks[layer] != 1 && layer_blocks[layer] != 3);
}

bool model_config::layer_has_mixer(int64_t layer) const {
  return layer < 0 || layer >= static_cast<int64_t>(layer_blocks.size()) ||
         (layer_blocks[layer] != 2 && layer_blocks[layer] != 3);
}

bool model_config::layer_linear_attn(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(linear_blocks.size()) &&
         (linear_blocks[static_cast<size_t>(layer)] & 1);
}

bool model_config::layer_linear_ffn(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(linear_blocks.size()) &&
         (linear_blocks[static_cast<size_t>(layer)] & 2);
}

bool model_config::has_recurrent_state() const {
  return ssm_parallel || zamba || inkling || zaya ||
         std::find(linear_layers.begin(), linear_layers.end(), 1) != linear_layers.end();
}

int64_t model_config::state_values_per_seq(int64_t begin, int64_t end, int tp) const {
  const int64_t t = std::max(tp, 1);
  // the convolutions' last inputs (q and k, or Mamba's B and C, whole on every rank where their
  // groups do not divide among the ranks), and the memory: [Hv, Dk, Dv], or Mamba's [H, P, N]
  const int64_t keys = ssm_dt_rank > 0 ? 0 : 2 * lin_k_heads * lin_k_dim; // (Mamba-1: x alone)
  const int64_t conv =
      (lin_conv - 1) * ((lin_k_heads % t ? keys * t : keys) + lin_v_heads * lin_v_dim);
  const int64_t delta =
      short_conv ? 0
      : mlstm // (the memory with the normaliser's column and the stabiliser's row)
          ? lin_v_heads * (lin_k_dim + 1) * (lin_v_dim + 1)
          : lin_v_heads * lin_k_dim * lin_v_dim;
  int64_t n = 0;
  for (int64_t l = begin; l < end; ++l)
    if (layer_linear(l) || ssm_parallel || zamba) n += (conv + delta) / t;
  if (zaya) // the q and k convolutions' last two inputs (twice each), the values' last input
    for (int64_t l = begin; l < end; ++l) {
      const int64_t kv = Hkv >= t ? Hkv / t : 1;
      n += 4 * (H / t + kv) * D + kv * D;
    }
  if (inkling) // k's and v's convolutions (a shard's KV heads), the two outputs' (whole)
    for (int64_t l = begin; l < end; ++l) {
      const int64_t kv = layer_kv_heads(l);
      n += (sconv - 1) * (2 * (kv >= t ? kv / t : 1) * layer_head_dim(l) + 2 * C);
    }
  return n;
}

bool model_config::layer_moe(int64_t layer) const {
  if (n_expert <= 0) return false;
  if (moe_layers.empty()) return true;
  return layer >= 0 && layer < static_cast<int64_t>(moe_layers.size()) && moe_layers[layer];
}

int64_t model_config::layer_weights(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(weight_layer.size())) return layer;
  return weight_layer[static_cast<size_t>(layer)];
}

int64_t model_config::layer_kv_source(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(kv_source.size())) return layer;
  return kv_source[static_cast<size_t>(layer)];
}

int64_t model_config::layer_reads_from(int64_t layer) const {
  int64_t from = layer_kv_source(layer);
  if (layer >= 0 && layer < static_cast<int64_t>(dsa_source.size()))
    from = std::min<int64_t>(from, dsa_source[static_cast<size_t>(layer)]);
  return from;
}

int64_t model_config::layer_ffn(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(ffn_widths.size()))
    return ffn_widths[static_cast<size_t>(layer)];
  return ffn_wide_shared && layer_kv_source(layer) != layer ? 2 * F : F;
}

int64_t model_config::layer_heads(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(heads_by_layer.size()))
    return heads_by_layer[static_cast<size_t>(layer)];
  return H;
}

bool model_config::layer_full_geometry(int64_t layer) const {
  return (D_full > 0 || Hkv_full > 0) && layer >= 0 && layer_window(layer) == 0;
}

int64_t model_config::layer_head_dim(int64_t layer) const {
  return layer_full_geometry(layer) && D_full > 0 ? D_full : D;
}

int64_t model_config::layer_kv_heads(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(kv_heads_by_layer.size()))
    return kv_heads_by_layer[static_cast<size_t>(layer)];
  return layer_full_geometry(layer) && Hkv_full > 0 ? Hkv_full : Hkv;
}

int64_t model_config::kv_values_per_token(int tp, int64_t layer) const {
  if (hc_mult > 0 &&
      kv_lora == 0) { // DeepSeek-V4: the shared key-value row; a compressed layer's kv and gate
                      // rows and entries (one per position's slot), and its indexer's
    const int64_t m = layer_compress(layer);
    if (m <= 0) return D;
    const bool sparse = layer_compress_sparse(layer);
    const int64_t W = sparse ? 2 * D : D, Wi = 2 * dsa_dim;
    return D + 2 * W + D + (sparse ? 2 * Wi + dsa_dim : 0);
  }
  if (kv_lora > 0) { // the latent, and the indexer's key where the layer runs an indexer
    const bool indexer =
        dsa_topk > 0 && (layer < 0 || layer >= static_cast<int64_t>(dsa_source.size()) ||
                         dsa_source[static_cast<size_t>(layer)] == layer);
    // (a layer reading an earlier layer's latent caches only its indexer's keys)
    const bool latent = layer < 0 || layer_kv_source(layer) == layer;
    // (GLM-5.3's pooled indexer: each token's key and gate logits, and a pool's key per slot)
    return (latent ? kv_lora + layer_qk_rope(layer) : 0) +
           (indexer ? (dsa_pool > 0 ? 3 * dsa_dim : dsa_dim) : 0);
  }
  const int64_t kv = layer_kv_heads(layer);
  const int64_t hkv = kv >= tp ? kv / std::max(tp, 1) : 1;
  // (MiniMax M3's indexed layers: the indexer's key too, whole on every rank)
  const bool indexed = layer < 0 ? !sparse_layers.empty() : layer_sparse_attn(layer);
  // (Doge's heads carry 8 more values: each key's dynamic mask score)
  return 2 * hkv * (layer_head_dim(layer) + (doge ? doge_extra : 0)) + (indexed ? sparse_dim : 0);
}

status model_config::validate() const {
  auto bad = [this](std::string_view what) {
    return make_error(errc::corrupt_file, "model config ({}): {}", arch, what);
  };
  if (n_layer <= 0 || C <= 0 || F <= 0 || H <= 0 || Hkv <= 0 || D <= 0 || V <= 0)
    return bad(
        fmt::format("dimensions must be positive (layers {}, C {}, F {}, H {}, Hkv {}, D {}, V {})",
                    n_layer, C, F, H, Hkv, D, V));
  // before anything derived from them (a rotary dimension of 10^12 / 32 overflowed an int)
  if (n_layer > 100000 || C > (1 << 20) || F > (1 << 22) || H > 4096 || Hkv > 4096 || D > 4096 ||
      V > (1 << 24) || F_expert > (1 << 22) || F_shared > (1 << 22))
    return bad(fmt::format("a dimension is implausibly large (layers {}, C {}, F {}, H {}, Hkv {}, "
                           "D {}, V {}, expert F {}, shared expert F {})",
                           n_layer, C, F, H, Hkv, D, V, F_expert, F_shared));
  if (H % Hkv) return bad(fmt::format("{} heads is not a multiple of {} KV heads", H, Hkv));
  if (!heads_by_layer.empty()) {
    if (static_cast<int64_t>(heads_by_layer.size()) != n_layer)
      return bad(fmt::format("heads given for {} of {} layers", heads_by_layer.size(), n_layer));
    for (size_t l = 0; l < heads_by_layer.size(); ++l)
      if (heads_by_layer[l] <= 0 || heads_by_layer[l] > H || heads_by_layer[l] % Hkv)
        return bad(fmt::format("layer {}: {} heads (a multiple of the {} KV heads, at most {})", l,
                               heads_by_layer[l], Hkv, H));
  }
  if (!kv_heads_by_layer.empty()) {
    if (static_cast<int64_t>(kv_heads_by_layer.size()) != n_layer)
      return bad(
          fmt::format("KV heads given for {} of {} layers", kv_heads_by_layer.size(), n_layer));
    for (size_t l = 0; l < kv_heads_by_layer.size(); ++l)
      if (kv_heads_by_layer[l] <= 0 || kv_heads_by_layer[l] > H || H % kv_heads_by_layer[l])
        return bad(fmt::format("layer {}: {} KV heads (a divisor of the {} heads)", l,
                               kv_heads_by_layer[l], H));
  }
  if (!linear_blocks.empty() && static_cast<int64_t>(linear_blocks.size()) != n_layer)
    return bad(
        fmt::format("{} per-layer linear maps for {} layers", linear_blocks.size(), n_layer));
  if (!(router_softcap >= 0) || !std::isfinite(router_softcap))
    return bad(fmt::format("router logit soft-capping {}", router_softcap));
  if (D_full < 0 || D_full > 4096 || Hkv_full < 0 || Hkv_full > 4096 ||
      (Hkv_full > 0 && H % Hkv_full))
    return bad(fmt::format("the full-attention layers' head dim {} and {} KV heads (of {} heads)",
                           D_full, Hkv_full, H));
  if (ple_dim < 0 || ple_dim > 65536 || ple_vocab < 0 || ple_vocab > (1 << 24) ||
      (ple_dim > 0 && ple_vocab <= 0))
    return bad(fmt::format("per-layer embeddings of {} values over a vocabulary of {}", ple_dim,
                           ple_vocab));
  if (!kv_source.empty() && static_cast<int64_t>(kv_source.size()) != n_layer)
    return bad(fmt::format("{} KV sources for {} layers", kv_source.size(), n_layer));
  for (size_t l = 0; l < kv_source.size(); ++l) // an earlier layer's (or its own), of its kind
    if (kv_source[l] < 0 || kv_source[l] > static_cast<int64_t>(l) ||
        layer_window(kv_source[l]) != layer_window(static_cast<int64_t>(l)) ||
        layer_kv_source(kv_source[l]) != kv_source[l])
      return bad(fmt::format("layer {} shares the KV cache of layer {}", l, kv_source[l]));
  if (!dsa_source.empty() && static_cast<int64_t>(dsa_source.size()) != n_layer)
    return bad(
        fmt::format("{} sparse-attention sources for {} layers", dsa_source.size(), n_layer));
  for (size_t l = 0; l < dsa_source.size(); ++l) // an earlier layer running its own indexer
    if (dsa_source[l] < 0 || dsa_source[l] > static_cast<int64_t>(l) ||
        dsa_source[static_cast<size_t>(dsa_source[l])] != dsa_source[l])
      return bad(fmt::format("layer {} reuses the selection of layer {}", l, dsa_source[l]));
  const int64_t Dmax = std::max(D, D_full); // (the full layers' rope rotates theirs)
  if (rope_enabled && (rope.rot_dim <= 0 || rope.rot_dim > Dmax || rope.rot_dim % 2))
    return bad(fmt::format("rotary dimension {} must be even and at most the head dim {}",
                           rope.rot_dim, Dmax));
  for (const rope_spec* r : {&rope, &rope_local})
    if (r->turning < 0 || r->turning > r->rot_dim / 2)
      return bad(fmt::format("{} of {} rotary pairs turning", r->turning, r->rot_dim / 2));
  if (!(norm_eps > 0) || norm_eps > 1)
    return bad(fmt::format("norm epsilon {} out of range", norm_eps));
  if (rope_enabled && !(rope.theta > 0)) return bad("rope theta must be positive");
  if (sliding_window < 0) return bad("sliding window must not be negative");
  if (n_expert > 0) {
    if (n_expert > (1 << 16)) // the largest published has 384; a bound keeps a hostile config cheap
      return bad(fmt::format("{} experts is more than Troupe accepts (65536)", n_expert));
    if (zero_experts < 0 || zero_experts > (1 << 16))
      return bad(fmt::format("{} zero-computation experts", zero_experts));
    if (n_expert_used <= 0 || n_expert_used > n_expert + zero_experts)
      return bad(
          fmt::format("{} experts used per token of {}", n_expert_used, n_expert + zero_experts));
    if (F_expert <= 0) return bad(fmt::format("expert FFN size {} must be positive", F_expert));
    if (F_shared < 0) return bad("shared expert FFN size must not be negative");
    if (n_group > 1 && (n_expert % n_group || topk_group <= 0 || topk_group > n_group ||
                        n_expert_used > topk_group * (n_expert / n_group)))
      return bad(fmt::format("expert groups {} / {} cannot route {} of {} experts", n_group,
                             topk_group, n_expert_used, n_expert));
    if (!moe_layers.empty() && static_cast<int64_t>(moe_layers.size()) != n_layer)
      return bad(
          fmt::format("{} per-layer expert flags for {} layers", moe_layers.size(), n_layer));
  }
  if (!weight_layer.empty()) {
    if (static_cast<int64_t>(weight_layer.size()) != n_layer)
      return bad(
          fmt::format("{} per-layer weight sources for {} layers", weight_layer.size(), n_layer));
    for (int64_t l = 0; l < n_layer; ++l) {
      const int64_t s = weight_layer[static_cast<size_t>(l)];
      if (s < 0 || s > l || layer_weights(s) != s)
        return bad(fmt::format("layer {} reads the weights of layer {}", l, s));
    }
  }
  if (loop_layers < 0 || loops < 0 || loop_begin < 0 || (loop_layers > 0) != (loops > 0) ||
      loop_begin + loop_layers * loops > n_layer)
    return bad(fmt::format("{} runs of {} layers from layer {} in {} layers", loops, loop_layers,
                           loop_begin, n_layer));
  if (kv_source_writes && !ngpt) return bad("layers that write another layer's KV cache");
  if (inkling && (sconv < 2 || rel_dim < 1 || rel_extent < 1 || sink_shared < 0))
    return bad(fmt::format("short convolutions of {} taps, relative states {} over {}", sconv,
                           rel_dim, rel_extent));
  if (zamba && (zamba_blocks < 1 || zamba_rank < 0 || !mamba))
    return bad(fmt::format("{} shared blocks with adapters of rank {}", zamba_blocks, zamba_rank));
  if (cycle_layers < 0 || cycles_low < 0 ||
      (cycle_layers > 0 && n_layer % (cycle_layers * (cycles_low + 1)) != 0))
    return bad(fmt::format("{} layers are not rounds of {} passes of {} layers", n_layer,
                           cycles_low + 1, cycle_layers));
  if (!sparse_layers.empty()) {
    if (static_cast<int64_t>(sparse_layers.size()) != n_layer)
      return bad(
          fmt::format("{} per-layer sparse flags for {} layers", sparse_layers.size(), n_layer));
    if (sparse_dim <= 0 || sparse_dim > 4096 || sparse_block <= 0 || sparse_block > (1 << 20) ||
        sparse_topk <= 0 || sparse_topk > (1 << 20) || sparse_local < 0 ||
        sparse_local > sparse_topk || sparse_topk * sparse_block > (1 << 24))
      return bad(fmt::format("block-sparse attention: index dim {}, blocks of {}, top {}, local {}",
                             sparse_dim, sparse_block, sparse_topk, sparse_local));
  }
  if (shortcut_moe && (n_expert <= 0 || n_layer % 2))
    return bad(fmt::format("the experts' shortcut pairs layers: {} layers, {} experts", n_layer,
                           n_expert));
  if (zero_experts > 0 && n_expert <= 0) return bad("zero-computation experts without experts");
  if (null_experts < 0 || (null_experts > 0 && (n_expert <= 0 || zero_experts > 0)))
    return bad(fmt::format("{} skip experts beside {} experts and {} identity ones", null_experts,
                           n_expert, zero_experts));
  if (zaya && (router_dim <= 0 || router_dim > (1 << 16) || n_expert <= 0 || (Hkv * D) % 2))
    return bad(fmt::format("ZAYA: router width {}, {} experts, {} KV heads of {} (the values "
                           "split in halves)",
                           router_dim, n_expert, Hkv, D));
  if (!(latent_scale > 0) || !std::isfinite(latent_scale))
    return bad(fmt::format("latent scale {}", latent_scale));
  if (!layer_blocks.empty() && static_cast<int64_t>(layer_blocks.size()) != n_layer)
    return bad(fmt::format("{} per-layer block kinds for {} layers", layer_blocks.size(), n_layer));
  if (has_recurrent_state() &&
      (ssm_parallel || zamba ||
       std::find(linear_layers.begin(), linear_layers.end(), 1) != linear_layers.end())) {
    // (the mixers' widths: the readers check what they read; this bounds what any leaves)
    // (widths and states far past any published model's, small enough that a state per
    // sequence over every layer stays a 64-bit count)
    if (lin_v_heads <= 0 || lin_v_dim <= 0 || lin_conv < 1 || lin_v_heads > 65536 ||
        lin_v_dim > 65536 || lin_k_heads > 65536 || lin_k_dim > 65536 || lin_conv > 64 ||
        lin_v_heads * lin_v_dim > (int64_t{1} << 22) || lin_k_heads * lin_k_dim > (1 << 20) ||
        lin_k_dim > 4096 || ssm_dt_rank < 0 || ssm_dt_rank > (1 << 16))
      return bad(fmt::format("linear attention dimensions out of range (heads {} / {}, dims {} / "
                             "{}, taps {}, dt rank {})",
                             lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, lin_conv,
                             ssm_dt_rank));
    if (mamba && (lin_k_heads <= 0 || lin_k_dim <= 0 || lin_v_heads % lin_k_heads))
      return bad(fmt::format("Mamba-2: {} heads in {} groups of {} state values", lin_v_heads,
                             lin_k_heads, lin_k_dim));
  }
  if (!nope_layers.empty() && static_cast<int64_t>(nope_layers.size()) != n_layer)
    return bad(fmt::format("{} per-layer rope flags for {} layers", nope_layers.size(), n_layer));
  if (!windowed.empty() && static_cast<int64_t>(windowed.size()) != n_layer)
    return bad(fmt::format("{} per-layer window flags for {} layers", windowed.size(), n_layer));
  if (attn_chunk < 0) return bad("attention chunk must not be negative");
  if (!chunked.empty() && static_cast<int64_t>(chunked.size()) != n_layer)
    return bad(fmt::format("{} per-layer chunk flags for {} layers", chunked.size(), n_layer));
  if (attn_temp_floor < 0 || attn_temp_offset < 0)
    return bad("attention temperature floor and offset must not be negative");
  if (!tempered.empty() && static_cast<int64_t>(tempered.size()) != n_layer)
    return bad(
        fmt::format("{} per-layer temperature flags for {} layers", tempered.size(), n_layer));
  return {};
}

expected<model_config> config_from_hf_json(const std::string& config_text,
                                           const std::string& gen_text, const std::string& where) {
  arch::json j = arch::json::parse(config_text, nullptr, false);
  if (j.is_discarded()) // Python's json.dumps writes Infinity and NaN bare (time_step_limit)
    j = arch::json::parse(arch::quote_nonfinite(config_text), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::corrupt_file, "{}: not a JSON object", where);
  model_config c;
  std::string name;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    name = j["architectures"][0].get<std::string>();
  const arch_spec* spec = find_arch_spec(name);
  const arch::family_entry* entry = nullptr;
  if (spec) {
    entry = arch::find_family(spec->family);
  } else {
    // a wrapper around a text model of another family (Mistral3ForConditionalGeneration around
    // Mistral 4's), or a class that runs another model type (transformers saves EXAONE 3 as
    // LlamaForCausalLM of model_type exaone), is listed as "architecture/model_type"; else the
    // architecture's own family; else, as transformers' auto classes pick by model type, a
    // family listed as "*/model_type" (InternLM3's remote-code class, run as Llama)
    const arch::json* typed = &j;
    if (const auto tc = j.find("text_config"); tc != j.end() && tc->is_object()) typed = &*tc;
    std::string type;
    if (typed->contains("model_type") && (*typed)["model_type"].is_string())
      type = (*typed)["model_type"].get<std::string>();
    if (!type.empty()) entry = arch::find_family_hf(name + "/" + type);
    if (!entry) entry = arch::find_family_hf(name);
    if (!entry && !type.empty()) entry = arch::find_family_hf("*/" + type);
  }
  if (!entry)
    return make_error(errc::unsupported,
                      "{}: architecture '{}' is not supported (supported: {}; an --arch-spec file "
                      "can define it from existing ops)",
                      where, name.empty() ? "(none)" : name, arch::known_architectures(false));
  c.arch = name;
  c.family = entry->name;
  // a multimodal checkpoint (...ForConditionalGeneration) nests its language model's keys
  // under text_config: those are the model Troupe runs (text in, text out); the wrapper's own
  // keys (vision_config, image token ids ...) are listed as unread
  if (name.ends_with("ForConditionalGeneration") && j.contains("text_config") &&
      j["text_config"].is_object()) {
    arch::json text = j["text_config"];
    for (auto& [k, v] : j.items())
      if (k != "text_config" && !text.contains(k)) text[k] = v;
    // the wrapper's tie_word_embeddings is the one transformers ties by (Mistral 3's text_config
    // may say otherwise)
    if (j.contains("tie_word_embeddings")) text["tie_word_embeddings"] = j["tie_word_embeddings"];
    j = std::move(text);
  }
  if (entry->hf_aliases) { // the config class's attribute_map
    const arch::json aliases = arch::json::parse(entry->hf_aliases, nullptr, false);
    if (!aliases.is_object())
      return make_error(errc::internal, "{}: family {}'s aliases are not a JSON object", where,
                        entry->name);
    for (auto& [from, to] : aliases.items())
      if (j.contains(from) && to.is_string() && !j.contains(to.get<std::string>())) {
        j[to.get<std::string>()] = j[from];
        j.erase(from);
      }
  }
  if (entry->hf_defaults) { // transformers' config class fills what the file leaves out
    const arch::json defaults = arch::json::parse(entry->hf_defaults, nullptr, false);
    if (!defaults.is_object())
      return make_error(errc::internal, "{}: family {}'s defaults are not a JSON object", where,
                        entry->name);
    for (auto& [k, v] : defaults.items())
      if (!j.contains(k)) j[k] = v;
  }
  arch::hf_cfg cfg(j, where);
  TROUPE_TRY(arch::read_common(cfg, c));
  TROUPE_TRY(entry->read_hf(cfg, c));
  arch::read_special_ids(cfg, gen_text, c);
  c.ignored_keys = cfg.unread();
  TROUPE_TRY(c.validate());
  return c;
}

namespace {
std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
} // namespace

expected<model_config> config_from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::exists(cfg)) return make_error(errc::not_found, "{}: no config.json", dir);
  const fs::path gen = fs::path(dir) / "generation_config.json";
  return config_from_hf_json(read_text(cfg), fs::exists(gen) ? read_text(gen) : "", cfg.string());
}

expected<model_config> config_from_gguf(const gguf_file& g) {
  model_config c;
  TROUPE_TRY_ASSIGN(name, g.get_string("general.architecture"));
  const arch::family_entry* entry = arch::find_family_gguf(name);
  if (!entry)
    return make_error(errc::unsupported, "{}: architecture '{}' is not supported (supported: {})",
                      g.file->path(), name, arch::known_architectures(true));
  c.arch = std::string(name);
  c.family = entry->name;
  arch::gguf_cfg cfg{g, std::string(name)};
  TROUPE_TRY(entry->read_gguf(cfg, c));
  if (!cfg.mistyped.empty())
    return make_error(errc::corrupt_file, "{}: {}.{} is not a number", g.file->path(), cfg.arch,
                      *cfg.mistyped.begin());
  for (size_t l = 0; l < cfg.no_kv.size(); ++l)
    if (cfg.no_kv[l] && !c.layer_linear(static_cast<int64_t>(l)))
      return make_error(errc::unsupported,
                        "{}: {}.attention.head_count_kv is 0 on layer {}, which {} builds with "
                        "attention",
                        g.file->path(), cfg.arch, l, c.family);
  // keys of the architecture the family never read: those known to change the math refuse
  // the load (a different model), the rest are listed once at load
  static constexpr std::string_view math_keys[] = {"attention.max_alibi_bias",
                                                   "attn_logit_softcapping",
                                                   "final_logit_softcapping",
                                                   "attention.clamp_kqv",
                                                   "attention.scale",
                                                   "attention.temperature_scale",
                                                   "attention.temperature_length",
                                                   "embedding_scale",
                                                   "residual_scale",
                                                   "logit_scale",
                                                   "expert_count",
                                                   "expert_used_count",
                                                   "expert_shared_count",
                                                   "attention.sliding_window",
                                                   "attention.sliding_window_pattern",
                                                   "rope.freq_base_swa",
                                                   "attention.q_lora_rank",
                                                   "attention.kv_lora_rank",
                                                   "use_parallel_residual",
                                                   "rope.dimension_sections",
                                                   "full_attention_interval"};
  for (const std::string& k : cfg.unread()) {
    bool math = k.starts_with("rope.scaling.") || k.starts_with("ssm.") || k.starts_with("kda.") ||
                k.starts_with("expert_") || k.starts_with("moe_");
    for (std::string_view m : math_keys) math = math || k == m;
    const gguf_value* v = g.get(cfg.arch + "." + k);
    const bool zero = v && (v->is_integer() || v->is_float()) && v->f == 0;
    if (math && !zero)
      return make_error(errc::unsupported,
                        "{}: {}.{} changes the model and is not supported for '{}'", g.file->path(),
                        cfg.arch, k, cfg.arch);
    if (!math) c.ignored_keys.push_back(cfg.arch + "." + k);
  }
  TROUPE_TRY(c.validate());
  return c;
}

} // namespace troupe
