// apertus.cpp (arch/families): Apertus (swiss-ai, ApertusForCausalLM), which is Llama with
// three changes: q and k are RMS-normed over each head before RoPE (Qwen3's q_norm / k_norm),
// the norms are named attention_layernorm / feedforward_layernorm, and the MLP is not gated:
// down(xielu(up(x))). xIELU (arXiv 2411.13010) is an activation no kernel implements and its
// constants are learned per layer (mlp.act_fn.alpha_p, alpha_n: softplus-parametrised;
// beta, eps: buffers saved with them), so each layer's FFN runs its own element-wise program,
// compiled by the JIT or composed from primitives like any expression:
//   x > 0:  ap x^2 + beta x            ap = softplus(alpha_p)
//   x <= 0: an (expm1(min(x, eps)) - x) + beta x,   an = beta + softplus(alpha_n)
// The scalars are read from the checkpoint when the graph is built (they count as read);
// a config opened alone (troupe plan) takes the initial values, which size nothing. From GGUF
// (llama.cpp's apertus: q and k unpermuted, NEOX RoPE) the scalars are metadata arrays.
// Apertus 1.5's text model (Apertus1p5TextForCausalLM) is Apertus whose lm_head may be pruned to
// output_vocab_size rows (the ids past them, visual and audio codes, are never generated):
// prepare_apertus_hf pads it to the vocabulary with zero rows and a bias of -1e30 there, so the
// logits are the pruned head's and the rest are never sampled (a copy of the head at load).
// Tests: tests/exec/forward_test.cpp (SyntheticArch apertus, Apertus.*), pipeline_test
// FamilyCuts.
#include <algorithm>
#include <array>
#include <cmath>

#include "arch/families/decoder.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

namespace {

constexpr const char* act_names[] = {"alpha_p", "alpha_n", "beta", "eps"};

std::string act_tensor(int64_t l, const char* what) {
  return fmt::format("model.layers.{}.mlp.act_fn.{}", l, what);
}

// log(1 + e^x) without overflow, in double (torch's softplus, threshold 20, is this to f32)
double softplus(double x) {
  return x > 20 ? x : std::log1p(std::exp(x));
}

// One layer's xIELU as an expression over x. (1 - step(x)) keeps the negative branch off the
// positive side (xIELU jumps by an * expm1(eps) at 0, which no continuous op can express);
// min(x, 0) instead of x there keeps an infinite input from making 0 * inf.
std::string xielu_expr(double ap, double an, double beta, double eps) {
  return fmt::format("{0:.9g}*x + {1:.9g}*relu(x)^2 + {2:.9g}*(1 - step(x))*(expm1(min(x, "
                     "{3:.9g})) - min(x, 0))",
                     beta, ap, an, eps);
}

// Layer l's xIELU: the four scalars as transformers stores them (alpha_p / alpha_n [1], beta /
// eps scalars; f32, f16 or bf16), and ap, an computed as transformers does, in their dtype
// (each step rounded to it: a bf16 checkpoint's constants are bf16 values).
expected<std::string> layer_xielu(const model_source& m, int64_t l) {
  std::array<double, 4> v{};
  dtype type = dtype::f32;
  for (int i = 0; i < 4; ++i) {
    const std::string name = act_tensor(l, act_names[i]);
    const tensor_info* t = m.tensors->find(name);
    if (!t) return make_error(errc::not_found, "{}: xIELU needs the tensor {}", m.path, name);
    if (!t->supported || t->dims.numel() != 1 ||
        (t->type != dtype::f32 && t->type != dtype::f16 && t->type != dtype::bf16))
      return make_error(errc::shape_mismatch, "{}: {} must be one f32 / f16 / bf16 value", m.path,
                        name);
    float x = 0;
    to_f32(t->type, t->data, &x, 1);
    v[static_cast<size_t>(i)] = x;
    type = t->type;
  }
  const double beta = v[2];
  return xielu_expr(round_to(type, softplus(v[0])),
                    round_to(type, beta + round_to(type, softplus(v[1]))), beta, v[3]);
}

// llama.cpp's GGUF keeps every layer's four scalars as metadata (xielu.alpha_p, alpha_n,
// beta, eps, with no architecture prefix: an array of one value per layer, or one value for
// all), as stored; llama.cpp computes the softplus itself, in f32, so this does too.
constexpr const char* gguf_keys[] = {"xielu.alpha_p", "xielu.alpha_n", "xielu.beta", "xielu.eps"};

expected<std::vector<float>> gguf_xielu(const gguf_file& f, const char* key, int64_t L,
                                        const std::string& path) {
  const gguf_value* v = f.get(key);
  if (!v)
    return make_error(errc::corrupt_file,
                      "{}: an apertus GGUF needs the key {} (xIELU's constants)", path, key);
  auto number = [](const gguf_value& x) { return x.is_float() || x.is_integer(); };
  std::vector<float> out;
  if (v->type == gguf_type::array && static_cast<int64_t>(v->arr.size()) == L) {
    for (const gguf_value& e : v->arr)
      if (number(e)) out.push_back(static_cast<float>(e.f));
  } else if (number(*v)) {
    out.assign(static_cast<size_t>(L), static_cast<float>(v->f));
  }
  if (static_cast<int64_t>(out.size()) != L ||
      !std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }))
    return make_error(errc::corrupt_file,
                      "{}: {} must be a number or an array of {} numbers (one per layer)", path,
                      key, L);
  return out;
}

// ggml's softplus, in f32
float softplus_f32(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

// Every layer's xIELU from a GGUF's metadata.
status gguf_acts(const model_source& m, decoder_names& n) {
  std::array<std::vector<float>, 4> v;
  for (size_t i = 0; i < 4; ++i)
    TROUPE_TRY_SET(v[i], gguf_xielu(*m.gguf, gguf_keys[i], m.config.n_layer, m.path));
  for (size_t l = 0; l < v[0].size(); ++l) {
    const float beta = v[2][l];
    n.layer_act.push_back(
        xielu_expr(softplus_f32(v[0][l]), beta + softplus_f32(v[1][l]), beta, v[3][l]));
  }
  return {};
}

} // namespace

status read_apertus_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = rope_layout::neox; // the converter leaves q and k as transformers has them
  c.qk_norm = qk_norm_kind::head;
  c.gated_ffn = false;
  for (const char* k : gguf_keys) TROUPE_TRY(gguf_xielu(g.g, k, c.n_layer, g.path()));
  return {};
}

status read_apertus_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  if (j.b("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  // the published config still carries the remote code's switches; transformers' model has
  // q/k norms and pre-norms only, and no MLP bias, so any other setting is another model
  if (!j.b("qk_norm", true)) return j.unsupported("'qk_norm': false is not supported");
  if (j.b("post_norm", false)) return j.unsupported("'post_norm': true is not supported");
  if (j.b("mlp_bias", false)) return j.unsupported("'mlp_bias': true is not supported");
  c.qk_norm = qk_norm_kind::head;
  c.gated_ffn = false;
  const std::string act = j.s("hidden_act", "xielu");
  if (act != "xielu") TROUPE_TRY(read_activation(act, c, j.where()));
  TROUPE_TRY(read_rope(j, c, 12000000.0, 1.0));
  if (c.family == "apertus1p5") { // a pruned lm_head (null, or the vocabulary: none)
    if (const json& ov = j.raw("output_vocab_size"); !ov.is_null()) {
      TROUPE_TRY_ASSIGN(rows, j.i("output_vocab_size", c.V));
      if (rows < 1 || rows > c.V)
        return j.bad(fmt::format("'output_vocab_size' {} outside [1, vocab_size {}]", rows, c.V));
      if (rows < c.V && c.tie_embeddings)
        return j.unsupported("'output_vocab_size' with tied embeddings");
      c.output_vocab = rows < c.V ? rows : 0;
    }
  }
  for (int64_t l = 0; act == "xielu" && l < c.n_layer; ++l)
    for (const char* what : act_names) c.config_tensors.push_back(act_tensor(l, what));
  return {};
}

namespace {
constexpr const char* pruned_bias = "lm_head.pruned_bias";
} // namespace

status prepare_apertus_hf(const model_config& c, tensor_index& t) {
  if (c.output_vocab <= 0) return {};
  TROUPE_TRY_ASSIGN(w, take_tensor(t, "lm_head.weight", {c.output_vocab, c.C}));
  if (!w->supported || is_quantized(w->type))
    return make_error(errc::unsupported, "lm_head.weight: f32, f16 or bf16 only");
  std::vector<uint8_t> head(static_cast<size_t>(row_bytes(w->type, c.V * c.C)), 0);
  std::memcpy(head.data(), w->data, static_cast<size_t>(row_bytes(w->type, c.output_vocab * c.C)));
  std::vector<uint8_t> bias(static_cast<size_t>(c.V) * sizeof(float), 0);
  auto* b = reinterpret_cast<float*>(bias.data());
  std::fill(b + c.output_vocab, b + c.V, -1e30f);
  TROUPE_TRY(add_derived_tensor(t, "lm_head.weight", w->type, shape{c.V, c.C},
                                std::string(troupe::name(w->type)), std::move(head),
                                "lm_head.weight padded to the vocabulary", true));
  return add_derived_tensor(t, pruned_bias, dtype::f32, shape{c.V}, "F32", std::move(bias),
                            "the pruned head's bias (derived)");
}

status build_apertus(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format == "gguf") {
    decoder_names n = gguf_layout(m);
    n.w_gate.clear(), n.b_gate.clear();
    if (c.tie_embeddings) n.lm_head.clear();
    TROUPE_TRY(gguf_acts(m, n));
    return build_decoder(m, n, g);
  }
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  n.attn_norm = "model.layers.{}.attention_layernorm.weight";
  n.ffn_norm = "model.layers.{}.feedforward_layernorm.weight";
  n.w_gate.clear();
  if (c.tie_embeddings) n.lm_head.clear();
  if (c.output_vocab > 0) n.lm_head_b = pruned_bias; // (prepare_apertus_hf's)
  if (!c.config_tensors.empty()) {                   // xIELU: each layer's constants
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (m.shapes_only) { // transformers' initial values
        n.layer_act.push_back(xielu_expr(0.8, 0.8, 0.5, -1e-6));
        continue;
      }
      TROUPE_TRY_ASSIGN(e, layer_xielu(m, l));
      n.layer_act.push_back(std::move(e));
    }
  }
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
