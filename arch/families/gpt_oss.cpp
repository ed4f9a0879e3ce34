// gpt_oss.cpp (arch/families): OpenAI's GPT-OSS (GptOssForCausalLM: gpt-oss-20b, -120b). A
// pre-norm decoder whose attention has biases, a learned sink logit per head (in every softmax's
// denominator, weighing no value) and alternating sliding-window / full layers (layer_types;
// window 128), YaRN RoPE with `truncate` false; every FFN a mixture of experts: a router with a
// bias, softmax over the top-k logits (the renormalised top-k of a softmax: the same numbers),
// and experts with biases on all three products and a clamped SwiGLU ((clamp(u, +-L) + 1)
// min(g, L) sigmoid(alpha min(g, L))).
//
// HF stores the experts as the model multiplies them: gate_up_proj [E, C, 2F] (x W, gate and
// up interleaved column by column), down_proj [E, F, C], or as published, in MXFP4
// (quantization_config quant_method "mxfp4"): *_blocks [E, N, K / 32, 16] (two E2M1 codes a
// byte, low nibble first) and *_scales [E, N, K / 32] (e8m0) with N the output rows. prepare_hf
// turns either into the merged [E, F, C] / [E, C, F] tensors GGUF has (blocks repacked into
// GGUF's MXFP4 layout, float experts transposed in their own dtype; the interleaved gate / up
// rows and biases split), so the decoder reads both formats alike. The copy covers every layer
// in each shard's process (a PP or EP shard keeps only its own slice once the graph is cut).
#include <cstring>

#include <fmt/format.h>

#include "arch/families/decoder.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

namespace {

const std::string hf_experts = "model.layers.{}.mlp.experts.";

// MXFP4 as HF stores it: rows of N outputs over K inputs, blocks [E, N, K/32, 16] and scales
// [E, N, K/32], into GGUF's blocks (e, then value j in qs[j]'s low nibble and j + 16 in its
// high one) for the rows `pick` of each expert (all, even ones or odd ones).
expected<std::vector<uint8_t>> repack_mxfp4(const tensor_info& blocks, const tensor_info& scales,
                                            int64_t E, int64_t N, int64_t K, int pick) {
  const int64_t nb = K / 32, rows = pick < 0 ? N : N / 2;
  if (blocks.raw_type != "U8" || scales.raw_type != "U8")
    return make_error(errc::unsupported, "{}: MXFP4 blocks and scales must be U8 tensors",
                      blocks.name);
  std::vector<uint8_t> out(static_cast<size_t>(E * rows * nb * 17));
  uint8_t* o = out.data();
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = pick < 0 ? r : 2 * r + pick;
      const uint8_t* b = blocks.data + ((e * N + n) * nb) * 16;
      const uint8_t* s = scales.data + (e * N + n) * nb;
      for (int64_t k = 0; k < nb; ++k, o += 17, b += 16) {
        auto code = [b](int v) { return (b[v / 2] >> (4 * (v % 2))) & 0x0f; };
        o[0] = s[k];
        for (int j = 0; j < 16; ++j) o[1 + j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
      }
    }
  return out;
}

// Every other element of a bias [E, 2F] (gate: even, up: odd), as f32 [E, F].
std::vector<uint8_t> split_bias(const tensor_info& b, int64_t E, int64_t F, int pick) {
  std::vector<float> all(static_cast<size_t>(E * 2 * F));
  to_f32(b.type, b.data, all.data(), E * 2 * F);
  std::vector<uint8_t> out(static_cast<size_t>(E * F) * sizeof(float));
  auto* o = reinterpret_cast<float*>(out.data());
  for (int64_t i = 0; i < E * F; ++i) o[i] = all[static_cast<size_t>(2 * i + pick)];
  return out;
}

} // namespace

status read_gpt_oss_hf(hf_cfg& j, model_config& c) {
  c.names.output = "lm_head.weight";
  TROUPE_TRY(read_hf_dims(j, c, "rms_norm_eps", 1e-5));
  c.tie_embeddings = j.b("tie_word_embeddings", false);
  const bool bias = j.b("attention_bias", true);
  c.qkv_bias = c.o_bias = bias;
  j.mark("hidden_act"); // the experts' activation is their own clamped SwiGLU
  TROUPE_TRY_ASSIGN(sw, j.i("sliding_window", 128));
  TROUPE_TRY(read_layer_types(j, c, sw > 0 && sw < c.ctx ? sw : 0,
                              [](int64_t l) { return (l + 1) % 2 != 0; }));
  TROUPE_TRY(read_rope(j, c, 150000.0, 1.0));
  TROUPE_TRY(read_expert_counts(j, c, "num_local_experts", "num_experts"));
  c.F_expert = c.F;
  c.norm_topk = true; // softmax over the chosen logits
  TROUPE_TRY_ASSIGN(alpha, j.f("swiglu_alpha", 1.702));
  TROUPE_TRY_ASSIGN(limit, j.f("swiglu_limit", 7.0));
  if (!(limit > 0)) return j.bad("swiglu_limit must be positive");
  c.swiglu_alpha = alpha, c.swiglu_limit = limit;
  c.router_linear_bias = c.expert_bias = c.attn_sinks = true;
  return {};
}

status read_gpt_oss_gguf(const gguf_cfg& g, model_config& c) {
  TROUPE_TRY(read_gguf_dims(g, c, "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = rope_layout::neox; // llama.cpp's gpt-oss rotates halves, as HF does
  // the published model's YaRN (rope_parameters truncate false), which no GGUF key carries;
  // llama.cpp rounds the correction range out (tests/fixtures/gguf/llama_cpp_check.json)
  c.rope.yarn_truncate = false;
  // llama.cpp: the even layers slide (its swa pattern 2), window 128 unless the file says
  TROUPE_TRY(read_gguf_windows(g, c, 128, 2));
  if (c.sliding_window >= c.ctx) c.sliding_window = 0, c.windowed.clear();
  TROUPE_TRY(read_expert_counts(g, c));
  if (c.n_expert <= 0) return g.unsupported("gpt-oss without experts");
  TROUPE_TRY_ASSIGN(fe, g.req("expert_feed_forward_length"));
  c.F_expert = fe;
  c.norm_topk = true; // llama.cpp's softmax over the chosen logits
  // llama.cpp's swiglu_oai constants (the converter writes none)
  c.swiglu_alpha = 1.702, c.swiglu_limit = 7.0;
  c.router_linear_bias = c.expert_bias = c.attn_sinks = true;
  return {};
}

status prepare_gpt_oss_hf(const model_config& c, tensor_index& t) {
  const int64_t E = c.n_expert, C = c.C, F = c.F_expert;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format(fmt::runtime(hf_experts), l);
    const tensor_info* gub = t.find(p + "gate_up_proj_blocks");
    // gate and up (rows interleaved), then down
    for (int part = 0; part < 2; ++part) {
      const bool gate_up = part == 0;
      const std::string base = p + (gate_up ? "gate_up_proj" : "down_proj");
      const int64_t N = gate_up ? 2 * F : C, K = gate_up ? C : F;
      std::vector<std::pair<std::string, int>> outs =
          gate_up ? std::vector<std::pair<std::string, int>>{{p + "gate", 0}, {p + "up", 1}}
                  : std::vector<std::pair<std::string, int>>{{p + "down", -1}};
      for (const auto& [name, pick] : outs) {
        const int64_t rows = pick < 0 ? N : N / 2;
        if (gub) {
          if (K % 32)
            return make_error(errc::shape_mismatch, "{}: {} inputs are not whole MXFP4 blocks",
                              base, K);
          TROUPE_TRY_ASSIGN(b, take_tensor(t, base + "_blocks", {E, N, K / 32, 16}));
          TROUPE_TRY_ASSIGN(s, take_tensor(t, base + "_scales", {E, N, K / 32}));
          TROUPE_TRY_ASSIGN(bytes, repack_mxfp4(*b, *s, E, N, K, pick));
          TROUPE_TRY(add_repacked_tensor(t, name, dtype::mxfp4, shape{E, rows, K}, std::move(bytes),
                                         b->file));
        } else {
          TROUPE_TRY_ASSIGN(w, take_tensor(t, base, {E, K, N}));
          TROUPE_TRY_ASSIGN(
              bytes, transpose_experts(*w, E, K, N, pick < 0 ? 0 : pick, pick < 0 ? 1 : 2, rows));
          TROUPE_TRY(
              add_repacked_tensor(t, name, w->type, shape{E, rows, K}, std::move(bytes), w->file));
        }
      }
    }
    TROUPE_TRY_ASSIGN(gb, take_tensor(t, p + "gate_up_proj_bias", {E, 2 * F}));
    if (!gb->supported || is_quantized(gb->type))
      return make_error(errc::unsupported, "{}: the expert biases must be f32 / f16 / bf16",
                        gb->name);
    for (int pick : {0, 1})
      TROUPE_TRY(add_repacked_tensor(t, p + (pick ? "up_bias" : "gate_bias"), dtype::f32,
                                     shape{E, F}, split_bias(*gb, E, F, pick), gb->file));
  }
  return {};
}

status build_gpt_oss(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  decoder_names n;
  if (m.format == "hf") {
    n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
    n.w_gate.clear(), n.w_up.clear(), n.w_down.clear();
    n.attn_sinks = "model.layers.{}.self_attn.sinks";
    const std::string r = "model.layers.{}.mlp.router.";
    n.moe_router = r + "weight";
    n.moe_router_b = r + "bias";
    n.moe_gate = hf_experts + "gate";
    n.moe_up = hf_experts + "up";
    n.moe_down = hf_experts + "down";
    n.moe_gate_b = hf_experts + "gate_bias";
    n.moe_up_b = hf_experts + "up_bias";
    n.moe_down_b = hf_experts + "down_proj_bias";
  } else {
    n = gguf_layout(m);
    n.ffn_norm = "blk.{}.post_attention_norm.weight";
    n.attn_sinks = "blk.{}.attn_sinks.weight";
    expert_names(m, n);
    n.moe_router_b = "blk.{}.ffn_gate_inp.bias";
    n.moe_gate_b = "blk.{}.ffn_gate_exps.bias";
    n.moe_up_b = "blk.{}.ffn_up_exps.bias";
    n.moe_down_b = "blk.{}.ffn_down_exps.bias";
  }
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
