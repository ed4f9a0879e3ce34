// synth.cpp: random Llama checkpoints (synth.hpp).
#include "arch/synth.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/convert.hpp"
#include "core/half.hpp"
#include "core/kquant.hpp"
#include "formats/checkpoint_writer.hpp"
#include "text/tokenizer_export.hpp"

namespace troupe {
namespace {

struct preset {
  int64_t C, L, H, Hkv, F, V, ctx;
  bool tied;
  int64_t E = 0, k = 0; // experts (every layer's FFN is E experts of width F, k chosen)
};

struct named_preset {
  const char* name;
  preset p;
};

// Every preset but tiny-mla-moe (DeepSeek's layout has its own writer below, vocabulary 512).
const named_preset presets[] = {
    {"bench-134m", {768, 12, 12, 12, 2048, 32000, 2048, false}},
    {"llama-1b", {2048, 22, 32, 4, 5632, 32000, 2048, false}}, // TinyLlama's shape
    {"tiny", {64, 2, 4, 2, 128, 512, 512, false}},
    {"tiny-k", {512, 2, 8, 4, 1024, 512, 512, false}}, // K-quant blocks
    // the smallest with K-quant rows everywhere: llama.cpp fixtures (tests/fixtures/llama_kquant)
    {"tiny-k256", {256, 2, 4, 2, 512, 512, 512, false}},
    {"moe-1b", {1024, 16, 16, 8, 512, 32000, 2048, false, 32, 4}},
    {"tiny-moe", {64, 2, 4, 2, 64, 512, 512, false, 8, 2}},
};
constexpr const char* latent_preset = "tiny-mla-moe";
constexpr int64_t latent_vocab = 512;

expected<preset> find_preset(const std::string& name) {
  for (const auto& np : presets)
    if (name == np.name) return np.p;
  std::string names;
  for (const auto& n : synth_presets()) names += (names.empty() ? "" : ", ") + n;
  return make_error(errc::invalid_argument, "unknown preset '{}' ({})", name, names);
}

uint64_t hash_name(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// xoshiro256** seeded by splitmix64; Box-Muller for normals.
struct rng {
  uint64_t s[4];
  explicit rng(uint64_t seed) {
    for (auto& x : s) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      x = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t r = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return r;
  }
  double uniform() {
    return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
};

// HF stores q/k rows for rotate_half rope: row (h, p, j) of HF is row (h, j, p) of the
// interleaved (GGUF / Meta) layout, j < D/2, p in {0, 1}. 0 heads: no permutation.
std::vector<float> permute_rows(const std::vector<float>& v, int64_t heads, int64_t D, int64_t C) {
  std::vector<float> out(v.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t j = 0; j < D / 2; ++j)
        std::copy_n(v.begin() + ((h * D) + 2 * j + p) * C, C,
                    out.begin() + ((h * D) + p * (D / 2) + j) * C);
  return out;
}

// llama-quantize's Q4_K_M / Q5_K_M rule: Q6_K for output.weight, and for attn_v / ffn_down of
// the layers it gives more bits (the first and last eighth, and every third in between).
dtype k_m_type(const std::string& tensor, dtype base, int64_t layers) {
  if (tensor == "output.weight") return dtype::q6_k;
  int layer = -1;
  char kind[64] = {};
  if (std::sscanf(tensor.c_str(), "blk.%d.%63s", &layer, kind) != 2) return base;
  const std::string k = kind;
  if (k != "attn_v.weight" && k != "ffn_down.weight") return base;
  const int64_t n = layers, i = layer;
  const bool more = i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
  return more ? dtype::q6_k : base;
}

// `values`: whose random values to draw (a K-quant: its random blocks, stored as `type`,
// expanded when `type` is not that K-quant); otherwise normal(0, 0.02) stored as `type`.
fill_fn random_fill(const std::string& name, dtype type, int64_t n, uint64_t seed, bool ones,
                    int64_t permute_heads = 0, int64_t D = 0, dtype values = dtype::f32) {
  return [=](uint8_t* dst, size_t) {
    if (!ones && is_expanded(values)) {
      std::vector<uint8_t> blocks(static_cast<size_t>(row_bytes(values, n)));
      rng r(hash_name(name, seed));
      random_blocks(
          values, n / block_elems(values), 0.02f, [&r] { return r.next(); }, blocks.data());
      if (type == values) {
        std::memcpy(dst, blocks.data(), blocks.size());
        return;
      }
      std::vector<float> v(n);
      to_f32(values, blocks.data(), v.data(), n);
      from_f32(type, v.data(), dst, n);
      return;
    }
    std::vector<float> v(n);
    if (ones) {
      std::fill(v.begin(), v.end(), 1.0f);
    } else {
      rng r(hash_name(name, seed));
      for (int64_t i = 0; i + 1 < n; i += 2) {
        const double u1 = r.uniform(), u2 = r.uniform();
        const double m = std::sqrt(-2.0 * std::log(u1)) * 0.02;
        v[i] = static_cast<float>(m * std::cos(2 * M_PI * u2));
        v[i + 1] = static_cast<float>(m * std::sin(2 * M_PI * u2));
      }
      if (n % 2) v[n - 1] = static_cast<float>(0.02 * (r.uniform() - 0.5));
    }
    if (permute_heads) v = permute_rows(v, permute_heads, D, n / (permute_heads * D));
    from_f32(type, v.data(), dst, n);
  };
}

status write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) return make_error(errc::io_error, "{}: cannot write", p.string());
  return {};
}

// "tiny-mla-moe": DeepSeek-V3's layout in HF form (latent attention with a q bottleneck,
// sigmoid group-limited routing with a correction bias, a shared expert, a dense first layer).
status synthesize_latent(const synth_options& o, const gguf_file& vocab,
                         const std::function<void(int, int)>& progress) {
  namespace fs = std::filesystem;
  if (o.format != "hf")
    return make_error(errc::invalid_argument, "synth: preset {} is written as hf only", o.preset);
  if (is_quantized(o.type))
    return make_error(errc::invalid_argument,
                      "synth: the hf format stores f32, f16 or bf16, not {}", name(o.type));
  const int64_t C = 64, L = 2, H = 4, QL = 32, KVL = 32, NOPE = 16, ROPE = 8, VH = 16, E = 8,
                FE = 32, F = 128, V = latent_vocab;
  struct spec {
    std::string name;
    shape dims;
    bool ones = false, f32 = false;
  };
  std::vector<spec> specs;
  specs.push_back({"model.embed_tokens.weight", {V, C}});
  for (int64_t i = 0; i < L; ++i) {
    const std::string a = fmt::format("model.layers.{}.self_attn.", i),
                      m = fmt::format("model.layers.{}.mlp.", i);
    specs.push_back({fmt::format("model.layers.{}.input_layernorm.weight", i), {C}, true});
    specs.push_back({a + "q_a_proj.weight", {QL, C}});
    specs.push_back({a + "q_a_layernorm.weight", {QL}, true});
    specs.push_back({a + "q_b_proj.weight", {H * (NOPE + ROPE), QL}});
    specs.push_back({a + "kv_a_proj_with_mqa.weight", {KVL + ROPE, C}});
    specs.push_back({a + "kv_a_layernorm.weight", {KVL}, true});
    specs.push_back({a + "kv_b_proj.weight", {H * (NOPE + VH), KVL}});
    specs.push_back({a + "o_proj.weight", {C, H * VH}});
    specs.push_back({fmt::format("model.layers.{}.post_attention_layernorm.weight", i), {C}, true});
    if (i == 0) { // first_k_dense_replace 1
      specs.push_back({m + "gate_proj.weight", {F, C}});
      specs.push_back({m + "up_proj.weight", {F, C}});
      specs.push_back({m + "down_proj.weight", {C, F}});
      continue;
    }
    specs.push_back({m + "gate.weight", {E, C}, false, true});
    specs.push_back({m + "gate.e_score_correction_bias", {E}, false, true});
    for (int64_t e = 0; e < E; ++e) {
      specs.push_back({fmt::format("{}experts.{}.gate_proj.weight", m, e), {FE, C}});
      specs.push_back({fmt::format("{}experts.{}.up_proj.weight", m, e), {FE, C}});
      specs.push_back({fmt::format("{}experts.{}.down_proj.weight", m, e), {C, FE}});
    }
    specs.push_back({m + "shared_experts.gate_proj.weight", {FE, C}});
    specs.push_back({m + "shared_experts.up_proj.weight", {FE, C}});
    specs.push_back({m + "shared_experts.down_proj.weight", {C, FE}});
  }
  specs.push_back({"model.norm.weight", {C}, true});
  specs.push_back({"lm_head.weight", {V, C}});
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return make_error(errc::io_error, "{}: cannot create: {}", o.out, ec.message());
  safetensors_writer w;
  w.set_metadata("format", "pt");
  int done = 0;
  const int total = static_cast<int>(specs.size());
  for (const auto& s : specs) {
    const dtype t = s.ones || s.f32 || s.dims.rank == 1 ? dtype::f32 : o.type;
    auto fill = random_fill(s.name, t, s.dims.numel(), o.seed, s.ones);
    w.add_tensor(s.name, t, s.dims, [&, fill](uint8_t* d, size_t n) {
      fill(d, n);
      if (progress) progress(++done, total);
    });
  }
  TROUPE_TRY(w.write((fs::path(o.out) / "model.safetensors").string()));
  nlohmann::ordered_json cfg = {
      {"architectures", {"DeepseekV3ForCausalLM"}},
      {"model_type", "deepseek_v3"},
      {"hidden_size", C},
      {"intermediate_size", F},
      {"moe_intermediate_size", FE},
      {"num_hidden_layers", L},
      {"num_attention_heads", H},
      {"num_key_value_heads", H},
      {"q_lora_rank", QL},
      {"kv_lora_rank", KVL},
      {"qk_nope_head_dim", NOPE},
      {"qk_rope_head_dim", ROPE},
      {"v_head_dim", VH},
      {"n_routed_experts", E},
      {"num_experts_per_tok", 2},
      {"n_group", 2},
      {"topk_group", 1},
      {"n_shared_experts", 1},
      {"first_k_dense_replace", 1},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 2.5},
      {"vocab_size", V},
      {"max_position_embeddings", 512},
      {"rms_norm_eps", 1e-6},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
      {"rope_interleave", true},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", false},
      {"bos_token_id", vocab.get_int_or("tokenizer.ggml.bos_token_id", 1)},
      {"eos_token_id", vocab.get_int_or("tokenizer.ggml.eos_token_id", 2)},
      {"torch_dtype", o.type == dtype::f32   ? "float32"
                      : o.type == dtype::f16 ? "float16"
                                             : "bfloat16"}};
  TROUPE_TRY(write_text(fs::path(o.out) / "config.json", cfg.dump(2)));
  TROUPE_TRY_ASSIGN(tj, spm_to_tokenizer_json(vocab));
  TROUPE_TRY(write_text(fs::path(o.out) / "tokenizer.json", tj));
  TROUPE_TRY_ASSIGN(tc, spm_tokenizer_config(vocab));
  return write_text(fs::path(o.out) / "tokenizer_config.json", tc);
}

} // namespace

std::vector<std::string> synth_presets() {
  std::vector<std::string> out;
  for (const auto& np : presets) out.push_back(np.name);
  out.push_back(latent_preset);
  return out;
}

int64_t synth_preset_vocab(const std::string& name) {
  if (name == latent_preset) return latent_vocab;
  auto p = find_preset(name);
  return p ? p->V : 0;
}

status synthesize(const synth_options& o, const std::function<void(int, int)>& progress) {
  if (o.preset == latent_preset) {
    if (o.out.empty()) return make_error(errc::invalid_argument, "synth: --out is required");
    TROUPE_TRY_ASSIGN(vocab, open_gguf(o.vocab_gguf));
    return synthesize_latent(o, *vocab, progress);
  }
  TROUPE_TRY_ASSIGN(p, find_preset(o.preset));
  if (o.out.empty()) return make_error(errc::invalid_argument, "synth: --out is required");
  TROUPE_TRY_ASSIGN(vocab, open_gguf(o.vocab_gguf));
  TROUPE_TRY_ASSIGN(tokens, vocab->get_strings("tokenizer.ggml.tokens"));
  if (static_cast<int64_t>(tokens.size()) != p.V)
    return make_error(errc::invalid_argument,
                      "synth: vocabulary {} has {} tokens, preset {} needs {}", o.vocab_gguf,
                      tokens.size(), o.preset, p.V);
  const int64_t D = p.C / p.H;
  struct spec {
    std::string gguf, hf; // hf: unused for the expert tensors (MoE presets are GGUF only)
    shape dims;
    bool norm;
    bool f32 = false; // kept f32 whatever the dtype (the router, as llama.cpp's quantizer does)
  };
  std::vector<spec> specs;
  specs.push_back({"token_embd.weight", "model.embed_tokens.weight", {p.V, p.C}, false});
  for (int64_t i = 0; i < p.L; ++i) {
    auto g = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
    auto h = [i](const char* s) { return fmt::format("model.layers.{}.{}", i, s); };
    specs.push_back({g("attn_norm.weight"), h("input_layernorm.weight"), {p.C}, true});
    specs.push_back({g("attn_q.weight"), h("self_attn.q_proj.weight"), {p.H * D, p.C}, false});
    specs.push_back({g("attn_k.weight"), h("self_attn.k_proj.weight"), {p.Hkv * D, p.C}, false});
    specs.push_back({g("attn_v.weight"), h("self_attn.v_proj.weight"), {p.Hkv * D, p.C}, false});
    specs.push_back({g("attn_output.weight"), h("self_attn.o_proj.weight"), {p.C, p.H * D}, false});
    specs.push_back({g("ffn_norm.weight"), h("post_attention_layernorm.weight"), {p.C}, true});
    if (p.E > 0) { // Mixtral's layout: the router, then E experts (merged in GGUF)
      const std::string moe = fmt::format("model.layers.{}.block_sparse_moe.", i);
      specs.push_back({g("ffn_gate_inp.weight"), moe + "gate.weight", {p.E, p.C}, false, true});
      specs.push_back(
          {g("ffn_gate_exps.weight"), moe + "experts.{}.w1.weight", {p.E, p.F, p.C}, false});
      specs.push_back(
          {g("ffn_up_exps.weight"), moe + "experts.{}.w3.weight", {p.E, p.F, p.C}, false});
      specs.push_back(
          {g("ffn_down_exps.weight"), moe + "experts.{}.w2.weight", {p.E, p.C, p.F}, false});
      continue;
    }
    specs.push_back({g("ffn_gate.weight"), h("mlp.gate_proj.weight"), {p.F, p.C}, false});
    specs.push_back({g("ffn_up.weight"), h("mlp.up_proj.weight"), {p.F, p.C}, false});
    specs.push_back({g("ffn_down.weight"), h("mlp.down_proj.weight"), {p.C, p.F}, false});
  }
  specs.push_back({"output_norm.weight", "model.norm.weight", {p.C}, true});
  specs.push_back({"output.weight", "lm_head.weight", {p.V, p.C}, false});
  const int total = static_cast<int>(specs.size());
  int done = 0;
  auto wrap = [&](fill_fn f) -> fill_fn {
    return [&, f](uint8_t* d, size_t n) {
      f(d, n);
      if (progress) progress(++done, total);
    };
  };
  if (o.format == "gguf") {
    gguf_writer w;
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", "troupe-synth-" + o.preset);
    w.set_u32("llama.context_length", static_cast<uint32_t>(p.ctx));
    w.set_u32("llama.embedding_length", static_cast<uint32_t>(p.C));
    w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(p.F));
    w.set_u32("llama.block_count", static_cast<uint32_t>(p.L));
    w.set_u32("llama.attention.head_count", static_cast<uint32_t>(p.H));
    w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(p.Hkv));
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(D));
    w.set_f32("llama.rope.freq_base", 10000.0f);
    if (p.E > 0) {
      w.set_u32("llama.expert_count", static_cast<uint32_t>(p.E));
      w.set_u32("llama.expert_used_count", static_cast<uint32_t>(p.k));
    }
    w.copy_keys(*vocab, "tokenizer.");
    for (const auto& s : specs) {
      const dtype drawn = o.values.value_or(o.type); // whose random values
      const dtype values = s.norm || s.f32 ? dtype::f32
                           : o.k_m         ? k_m_type(s.gguf, drawn, p.L)
                                           : drawn;
      const dtype t = s.norm || s.f32 ? dtype::f32 : o.values ? o.type : values;
      w.add_tensor(s.gguf, t, s.dims,
                   wrap(random_fill(s.gguf, t, s.dims.numel(), o.seed, s.norm, 0, 0, values)));
    }
    return w.write(o.out);
  }
  if (o.format != "hf")
    return make_error(errc::invalid_argument, "synth: format '{}' (gguf, hf)", o.format);
  if (p.E > 0)
    return make_error(errc::invalid_argument, "synth: preset {} (experts) is written as gguf only",
                      o.preset);
  if (is_quantized(o.type))
    return make_error(errc::invalid_argument,
                      "synth: the hf format stores f32, f16 or bf16, not {}", name(o.type));
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return make_error(errc::io_error, "{}: cannot create: {}", o.out, ec.message());
  safetensors_writer w;
  w.set_metadata("format", "pt");
  for (const auto& s : specs) {
    const dtype t = s.norm || s.f32 ? dtype::f32 : o.type;
    // same values as the GGUF of this seed; q and k rows permuted for HF's rotate_half rope
    const bool q = s.gguf.find("attn_q.") != std::string::npos,
               k = s.gguf.find("attn_k.") != std::string::npos;
    w.add_tensor(s.hf, t, s.dims,
                 wrap(random_fill(s.gguf, t, s.dims.numel(), o.seed, s.norm,
                                  q   ? p.H
                                  : k ? p.Hkv
                                      : 0,
                                  D)));
  }
  TROUPE_TRY(w.write((fs::path(o.out) / "model.safetensors").string()));
  nlohmann::ordered_json cfg = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", p.C},
      {"intermediate_size", p.F},
      {"num_hidden_layers", p.L},
      {"num_attention_heads", p.H},
      {"num_key_value_heads", p.Hkv},
      {"head_dim", D},
      {"vocab_size", p.V},
      {"max_position_embeddings", p.ctx},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", p.tied},
      {"bos_token_id", vocab->get_int_or("tokenizer.ggml.bos_token_id", 1)},
      {"eos_token_id", vocab->get_int_or("tokenizer.ggml.eos_token_id", 2)},
      {"torch_dtype", o.type == dtype::f32   ? "float32"
                      : o.type == dtype::f16 ? "float16"
                                             : "bfloat16"}};
  TROUPE_TRY(write_text(fs::path(o.out) / "config.json", cfg.dump(2)));
  TROUPE_TRY_ASSIGN(tj, spm_to_tokenizer_json(*vocab));
  TROUPE_TRY(write_text(fs::path(o.out) / "tokenizer.json", tj));
  TROUPE_TRY_ASSIGN(tc, spm_tokenizer_config(*vocab));
  TROUPE_TRY(write_text(fs::path(o.out) / "tokenizer_config.json", tc));
  return {};
}

} // namespace troupe
