// forward_test.cpp: whole-model forward passes and greedy generation against references made
// by independent implementations: llama.cpp's output for stories260K
// (tests/fixtures/refs/), and Hugging Face transformers on CPU for stories260K-hf, the
// synthetic Llama 3 / head_dim / Mistral (sharded, f16) / Qwen2 (biases) models and the
// Llama 2 tiny-random GGUF (tests/fixtures/make_fixtures.py).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <tuple>

#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "../exact_activations.hpp"
#include "../family_fixtures.hpp"
#include "../test_paths.hpp"
#include "arch/family.hpp"
#include "arch/model_source.hpp"
#include "arch/spec.hpp"
#include "arch/synth.hpp"
#include "core/kquant.hpp"
#include "exec/executor.hpp"
#include "exec/expert_load.hpp"
#include "exec/generator.hpp"
#include "formats/checkpoint_writer.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"
#include "forward_util.hpp"
#include "greedy_util.hpp"
#include "kernels/jit.hpp"

using namespace troupe;
using json = nlohmann::json;
using troupe::test::greedy;

using test::check_case;
using test::make;
using test::max_abs_diff;
using test::open_gguf_variant;

class Stories260k : public ::testing::TestWithParam<std::string> {};

TEST_P(Stories260k, MatchesLlamaCppReference) {
  const json ref = test::load_json(test::fixture_path("refs/stories260K_once_upon_a_time.json"));
  auto g = make(test::model_path(GetParam()));
  ASSERT_TRUE(g);
  auto ids = g->source().tok->encode(ref["prompt"].get<std::string>(), true, false);
  ASSERT_TRUE(ids);
  ASSERT_EQ(*ids, ref["prompt_tokens_fed"].get<std::vector<int32_t>>());
  auto r = greedy(*g, *ids, 32);
  EXPECT_EQ(r.tokens, ref["generated_tokens"].get<std::vector<int32_t>>());
  for (const auto& top : ref["top5_last_prompt_position"]) {
    const int id = top["id"].get<int>();
    EXPECT_NEAR(r.prompt_logits.at(id), top["logit"].get<double>(), 1e-3) << "token " << id;
  }
  EXPECT_EQ(g->source().tok->decode(r.tokens), ref["generated_text"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Formats, Stories260k,
                         ::testing::Values("stories260K/stories260K.gguf", "stories260K-hf"));

TEST(Stories260kHf, MatchesTransformersOnManyPrompts) {
  const json fx = test::load_json(test::fixture_path("stories260k_hf.json"));
  auto g = make(test::model_path("stories260K-hf"));
  ASSERT_TRUE(g);
  ASSERT_GE(fx["cases"].size(), 9u);
  for (const auto& c : fx["cases"]) check_case(*g, c, 1e-3);
}

class SyntheticArch : public ::testing::TestWithParam<std::string> {};

TEST_P(SyntheticArch, MatchesTransformers) {
  const test::exact_for_fixture exact(GetParam());
  const std::string dir = test::fixture_path("models/" + GetParam());
  const json fx = test::load_json(dir + "/expected.json");
  auto g = make(dir);
  ASSERT_TRUE(g);
  // (a case may carry its own tolerance: BitNet's, where f32 noise steps an 8-bit rounding of
  // transformers' own; make_family_fixtures.py's bitnet_spread)
  for (const auto& c : fx["cases"]) check_case(*g, c, c.value("logit_tol", 2e-3));
  // every tensor transformers saved is read: a bias or norm the family does not know would
  // be a different model, even where the logits happen to come close
  auto graph = arch::build_graph(g->source());
  ASSERT_TRUE(graph);
  std::vector<std::string> unread = unread_tensors(g->source(), *graph);
  // a multimodal checkpoint's vision tower and projector: Troupe runs its language model only
  // (Gemma 4's fixtures are all multimodal, as every Gemma 4 is published, and GLM-5.3's)
  if (GetParam().find("_vl") != std::string::npos || GetParam().starts_with("gemma4") ||
      GetParam() == "glm5_next" || GetParam() == "mistral_large4" || GetParam() == "minimax_m3" ||
      GetParam() == "step3p7" || GetParam() == "phi4mm") {
    EXPECT_GT(std::erase_if(unread,
                            [](const std::string& n) {
                              for (const char* p :
                                   {"model.visual.", "visual.", "vision_model.", "vision_tower.",
                                    "multi_modal_projector.", "model.vision_tower.",
                                    "model.multi_modal_projector.", "model.embed_vision.",
                                    "model.embed_audio.", "model.vision_embedder.",
                                    "model.vision_model.", // (Llama 3.2 Vision's)
                                    // (Mistral's own names, as Mistral Large 4 is published)
                                    "vision_encoder.", "patch_merger.", "pre_mm_projector_norm.",
                                    "vision_language_adapter.",
                                    "patch_merge_mlp.",     // (MiniMax M3's)
                                    "vit_large_projector.", // (Step 3.7's)
                                    "model.audio.",         // (Inkling's audio tower)
                                    "vqmodel.",             // (Emu3's image tokenizer)
                                    // (Phi-4-multimodal's image and audio encoders)
                                    "model.embed_tokens_extend."})
                                if (n.starts_with(p)) return true;
                              // (Phi-4-multimodal's published LoRA adapters for images and audio)
                              return n.find(".lora_A.") != std::string::npos ||
                                     n.find(".lora_B.") != std::string::npos;
                            }),
              0u);
  }
  EXPECT_TRUE(unread.empty()) << unread.size() << " unread, the first " << unread.front();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SyntheticArch, ::testing::ValuesIn(test::hf_family_fixtures),
                         [](const auto& info) { return info.param; });

// The same fixtures as GGUF files, written as llama.cpp's converter writes them
// (tests/fixtures/make_gguf_fixtures.py: permuted q/k, reordered fused qkv, +1 norms, rope
// factor tensors ...) with the vocabulary as GGUF metadata, against transformers' numbers.
class GgufArch : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufArch, MatchesTransformers) {
  const test::exact_for_fixture exact(GetParam());
  const json fx = test::load_json(test::fixture_path("models/" + GetParam() + "/expected.json"));
  auto g = make(test::fixture_path("gguf/" + GetParam() + ".gguf"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->source().format, "gguf");
  // a file whose tokenizer model is not the fixture's (gemma4's, over the stories vocabulary:
  // no space prepended) encodes as llama.cpp does on it, recorded by make_gguf_fixtures.py
  const json check = test::load_json(test::fixture_path("gguf/llama_cpp_check.json"));
  const json& llama_ids = check["fixtures"][GetParam()].value("tokenize_llama_cpp_ids", json());
  const bool own_tokenizer = GetParam().starts_with("gemma4");
  ASSERT_EQ(own_tokenizer, llama_ids.is_array());
  for (size_t i = 0; i < fx["cases"].size(); ++i) {
    const auto want =
        own_tokenizer ? llama_ids[i].get<std::vector<int32_t>>() : std::vector<int32_t>{};
    check_case(*g, fx["cases"][i], 2e-3, own_tokenizer ? &want : nullptr);
  }
  auto graph = arch::build_graph(g->source()); // every tensor llama.cpp's converter wrote is read
  ASSERT_TRUE(graph);
  std::vector<std::string> unread = unread_tensors(g->source(), *graph);
  // but for the multi-token-prediction blocks past the trunk (glm4moe's nextn_predict_layers),
  // which are not run
  const int64_t L = g->source().config.n_layer;
  const auto mtp = std::erase_if(unread, [L](const std::string& n) {
    return n.starts_with("blk.") && std::atoll(n.c_str() + 4) >= L;
  });
  EXPECT_EQ(mtp > 0, GetParam() == "glm4_moe") << mtp;
  EXPECT_TRUE(unread.empty()) << unread.size() << " unread, the first " << unread.front();
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, GgufArch,
    ::testing::Values(
        "llama3", "llama_headdim", "llama_linear", "llama_yarn", "llama_bias", "llama_dynamic",
        "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "phi3_longrope", "phi2",
        "gpt2", "gpt_neox", "stablelm", "stablelm_qkln", "olmo", "olmo2", "granite", "cohere",
        "falcon", "falcon_mq", "bloom", "mpt", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3",
        "gpt_oss", "gpt_oss_mxfp4", "deepseek_v3_yarn_eq", "qwen3_5", "qwen3_5_moe",
        "qwen3_next_moe", "seed_oss", "olmo3", "exaone4", "glm4", "ernie4_5", "apertus",
        "smollm3_nope4", "cohere2_swa4", "glm4_moe", "llama4", "llama4_vl", "qwen2_5_vl",
        "minimax_m2", "olmoe", "ernie4_5_moe", "dots1", "granitemoe", "ministral3_vl", "qwen3_vl",
        "qwen3_vl_moe", "arcee", "hunyuan_dense", "hunyuan_moe", "lfm2", "lfm2_moe", "mamba2",
        "granite4_h", "nemotron_h", "falcon_h1", "mamba", "falcon_mamba", "jamba", "nemotron_h_moe",
        "gemma4", "gemma4_moe", "gemma4_e", "glm_moe_dsa_full", "deepseek_v32", "mistral4_vl",
        "kimi_linear", "exaone_moe_swa4", "afmoe", "minicpm3_4b", "starcoder2", "nemotron", "jais2",
        "dbrx", "phimoe_plain", "gpt_bigcode", "internlm3", "internlm2", "glm", "granitemoeshared",
        "gemma3n", "laguna", "laguna_m", "deci_ultra", "exaone_8k", "minicpm"),
    [](const auto& info) { return info.param; });

// A qwen35 GGUF as the converter writes a checkpoint with a multi-token-prediction head:
// block_count counts it, nextn_predict_layers says how many, and its block (blk.3 here: the
// fixture's full-attention layer again) follows the trunk. The trunk alone is the model.
TEST(GgufQwen35, TheMultiTokenPredictionBlockIsLeftOut) {
  auto f = open_gguf(test::fixture_path("gguf/qwen3_5.gguf"));
  ASSERT_TRUE(f) << f.error().to_string();
  const gguf_file& in = **f;
  gguf_writer w;
  for (const std::string& k : in.keys) {
    gguf_value v = in.kv.at(k);
    if (k == "qwen35.block_count") v.i = 4;
    if (k == "qwen35.attention.recurrent_layers") v.arr.push_back(v.arr.at(1)); // false
    w.set(k, v);
  }
  w.set_u32("qwen35.nextn_predict_layers", 1);
  auto copy = [&](const std::string& from, const std::string& to) {
    const tensor_info* t = in.tensors.find(from);
    ASSERT_NE(t, nullptr) << from;
    w.add_tensor(to, t->type, t->dims,
                 [t](uint8_t* dst, size_t bytes) { std::memcpy(dst, t->data, bytes); });
  };
  std::vector<std::string> mtp;
  for (const std::string& name : in.tensors.names()) {
    copy(name, name);
    if (name.rfind("blk.1.", 0) == 0) {
      mtp.push_back("blk.3." + name.substr(6));
      copy(name, mtp.back());
    }
  }
  mtp.push_back("blk.3.nextn.enorm.weight");
  copy("blk.1.attn_norm.weight", mtp.back());
  const std::string path = ::testing::TempDir() + "qwen3_5_mtp.gguf";
  ASSERT_TRUE(w.write(path));
  const json fx = test::load_json(test::fixture_path("models/qwen3_5/expected.json"));
  auto g = make(path);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->source().config.n_layer, 3);
  for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  auto graph = arch::build_graph(g->source());
  ASSERT_TRUE(graph);
  std::vector<std::string> unread = unread_tensors(g->source(), *graph);
  std::sort(unread.begin(), unread.end());
  std::sort(mtp.begin(), mtp.end());
  EXPECT_EQ(unread, mtp); // the MTP block's tensors, and only those
  std::remove(path.c_str());
}

// The experts' load: a generation of n tokens after a prompt of p routes (p + n - 1) tokens
// to k experts each, on every MoE layer (qwen3_moe_sparse: layer 1 only; layer 0 is dense).
TEST(ExpertLoad, CountsEveryRoutedToken) {
  auto g = make(test::fixture_path("models/qwen3_moe_sparse"));
  ASSERT_TRUE(g);
  auto layer_sum = [](int layer) {
    int64_t n = 0;
    int experts = 0;
    for (const auto& e : exec::expert_counts())
      if (e.layer == layer) n += e.tokens, ++experts;
    return std::pair<int64_t, int>{n, experts};
  };
  const auto [before1, e1] = layer_sum(1);
  const auto [before0, e0] = layer_sum(0);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  greedy(*g, prompt, 4);
  const auto [after1, experts1] = layer_sum(1);
  const auto [after0, experts0] = layer_sum(0);
  EXPECT_EQ(after1 - before1, (5 + 4 - 1) * 2); // num_experts_per_tok 2
  EXPECT_EQ(experts1, 4);
  EXPECT_EQ(after0, before0); // the dense layer routes nothing
  (void)e1, (void)e0, (void)experts0;
}

TEST(Llama2TinyRandom, LogitsMatchTransformers) {
  const json fx = test::load_json(test::fixture_path("llama2_tiny_random.json"));
  auto g = make(test::model_path("llama2-tiny-random/llama-2-tiny-random.gguf"));
  ASSERT_TRUE(g);
  for (const auto& c : fx["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    if (c.contains("text")) {
      auto ids = g->source().tok->encode(c["text"].get<std::string>(), true, false);
      ASSERT_TRUE(ids);
      EXPECT_EQ(*ids, prompt);
    }
    auto r = greedy(*g, prompt, 1);
    const auto top_ids = c["top20_ids"].get<std::vector<int32_t>>();
    const auto top_logits = c["top20_logits"].get<std::vector<float>>();
    for (size_t i = 0; i < top_ids.size(); ++i)
      EXPECT_NEAR(r.prompt_logits.at(top_ids[i]), top_logits[i], 1e-4);
    const auto fixed_ids = c["fixed_ids"].get<std::vector<int32_t>>();
    const auto fixed_logits = c["fixed_logits"].get<std::vector<float>>();
    for (size_t i = 0; i < fixed_ids.size(); ++i)
      EXPECT_NEAR(r.prompt_logits.at(fixed_ids[i]), fixed_logits[i], 1e-4);
    double sum = 0, sq = 0;
    for (float v : r.prompt_logits) sum += v, sq += static_cast<double>(v) * v;
    EXPECT_NEAR(sum, c["sum_logits"].get<double>(), 1e-2);
    EXPECT_NEAR(sq, c["sum_sq_logits"].get<double>(),
                1e-2 * std::max(1.0, c["sum_sq_logits"].get<double>()));
  }
}

TEST(ReferenceBackend, AgreesWithCpuBackend) {
  auto cpu = make(test::model_path("stories260K/stories260K.gguf"), kernels::backend::cpu);
  auto ref = make(test::model_path("stories260K/stories260K.gguf"), kernels::backend::ref);
  ASSERT_TRUE(cpu && ref);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  auto a = greedy(*cpu, prompt, 8), b = greedy(*ref, prompt, 8);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_LE(max_abs_diff(a.prompt_logits, b.prompt_logits), 1e-4);
}

// A half-precision KV cache rounds K and V once when they are stored; the answer must stay that
// of the f32 cache: the same greedy tokens on a real checkpoint, logits within rounding, on the
// fast kernels and on the reference.
class HalfKvCache : public ::testing::TestWithParam<std::tuple<dtype, kernels::backend>> {};

TEST_P(HalfKvCache, GivesTheF32CacheAnswer) {
  const auto [kv, where] = GetParam();
  const std::string path = test::model_path("stories260K-hf");
  auto full = make(path, where, dtype::f32), half = make(path, where, kv);
  ASSERT_TRUE(full && half);
  auto ids = full->source().tok->encode("Once upon a time, a little girl named Lily", true);
  ASSERT_TRUE(ids);
  auto a = greedy(*full, *ids, 24), b = greedy(*half, *ids, 24);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_LE(max_abs_diff(a.prompt_logits, b.prompt_logits), kv == dtype::f16 ? 2e-2 : 1.5e-1);
  EXPECT_GT(max_abs_diff(a.prompt_logits, b.prompt_logits), 0.0) << "the cache was not rounded";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfKvCache,
                         ::testing::Combine(::testing::Values(dtype::f16, dtype::bf16),
                                            ::testing::Values(kernels::backend::cpu,
                                                              kernels::backend::ref)));

// The fused ops (add_rmsnorm, matmul_swiglu, rope_kv_store, matmul_qkv, norms writing q8_0)
// against the op sequence they replace: an f32 checkpoint and synthetic q8_0 / q4_0 ones (int8
// activations), prompt and decode; the passes must have made each fusion.
TEST(FusedOps, GiveTheUnfusedAnswer) {
  std::vector<std::string> paths = {test::model_path("stories260K/stories260K.gguf")};
  for (dtype t : {dtype::q8_0, dtype::q4_0}) {
    synth_options so;
    so.type = t;
    so.out = ::testing::TempDir() + "fused_" + std::string(name(t)) + "_" +
             std::to_string(::getpid()) + ".gguf";
    so.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
    ASSERT_TRUE(synthesize(so));
    paths.push_back(so.out);
  }
  for (const auto& path : paths) {
    auto fused = make(path, kernels::backend::cpu, dtype::f32, true);
    auto plain = make(path, kernels::backend::cpu, dtype::f32, false);
    ASSERT_TRUE(fused && plain);
    const std::string plan = fused->runner().explain(false);
    for (const char* op :
         {"= add_rmsnorm(", "= matmul_swiglu(", "= rope_kv_store(", "= matmul_qkv("})
      EXPECT_NE(plan.find(op), std::string::npos) << path << ": no " << op;
    EXPECT_EQ(plain->runner().explain(false).find("= matmul_qkv("), std::string::npos);
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 300, 12, 99, 250};
    auto a = greedy(*fused, prompt, 12), b = greedy(*plain, prompt, 12);
    EXPECT_EQ(a.tokens, b.tokens) << path;
    // int8 activations (the synthetic files): an f32 difference of an ulp before a quantization
    // can move one code by a step, so the logits agree to q8's resolution, not f32's
    EXPECT_LE(max_abs_diff(a.prompt_logits, b.prompt_logits), path == paths[0] ? 1e-4 : 5e-4)
        << path;
  }
  for (size_t i = 1; i < paths.size(); ++i) std::remove(paths[i].c_str());
}

// Full-model logits of the fast CPU kernels against the reference backend (f64 accumulation,
// f32 activations) on the same checkpoint, for every weight dtype: each stays within its
// dtype's tolerance (quantized weights: the fast path also quantizes activations to q8).
TEST(FastKernels, LogitsWithinEachDtypeTolerance) {
  const std::pair<dtype, double> cases[] = {{dtype::f32, 1e-5},  {dtype::f16, 1e-4},
                                            {dtype::bf16, 1e-4}, {dtype::q8_0, 2e-2},
                                            {dtype::q4_0, 2e-2}, {dtype::mxfp4, 2e-2}};
  for (auto [t, tol] : cases) {
    synth_options so;
    so.type = t;
    so.seed = 7;
    so.out = ::testing::TempDir() + "fastref_" + std::string(name(t)) + "_" +
             std::to_string(::getpid()) + ".gguf";
    so.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
    ASSERT_TRUE(synthesize(so));
    auto fast = make(so.out, kernels::backend::cpu), ref = make(so.out, kernels::backend::ref);
    ASSERT_TRUE(fast && ref);
    std::vector<int32_t> prompt = {1};
    for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500); // prefill tiles and blocks
    auto a = greedy(*fast, prompt, 6), b = greedy(*ref, prompt, 6);
    double scale = 0;
    for (float v : b.prompt_logits) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    const double rel = max_abs_diff(a.prompt_logits, b.prompt_logits) / scale;
    std::printf("%-5s max |fast - ref| / max |ref| = %.2e\n", std::string(name(t)).c_str(), rel);
    EXPECT_LE(rel, tol) << name(t);
    if (!is_quantized(t)) {
      EXPECT_EQ(a.tokens, b.tokens) << name(t);
    } else {
      // random weights give near-flat logits: q8 activations may pick another token of a
      // near tie, never one the reference scores lower than the best by more than the tolerance
      const float best = *std::max_element(b.prompt_logits.begin(), b.prompt_logits.end());
      EXPECT_GE(b.prompt_logits.at(a.tokens.at(0)), best - tol * scale) << name(t);
    }
    std::remove(so.out.c_str());
  }
}

// The three ways an element-wise activation runs: JIT-compiled on the CPU (TROUPE_JIT=1),
// composed from primitive ops (TROUPE_JIT=0), and interpreted by the reference backend.
struct activation_path {
  const char* jit;
  kernels::backend where;
};
constexpr activation_path activation_paths[] = {
    {"1", kernels::backend::cpu}, {"0", kernels::backend::cpu}, {"1", kernels::backend::ref}};

// A model whose activation Troupe does not know (hidden_act "relu6"): refused, naming the
// key, until a spec file defines it as an expression; then transformers' tokens and logits,
// through the JIT, through the composition of primitives (no JIT), and through the reference
// backend's interpreter. (relu2, a built-in expression, is SyntheticArch's llama_relu2.)
TEST(ArchSpec, ExpressionActivationMatchesTransformers) {
  const std::string dir = test::fixture_path("models/llama_relu6");
  const json fx = test::load_json(dir + "/expected.json");
  clear_arch_specs();
  auto refused = open_model(dir);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("hidden_act 'relu6'"), std::string::npos)
      << refused.error().message;
  auto spec = load_arch_spec(test::fixture_path("specs/relu6.json"));
  ASSERT_TRUE(spec) << spec.error().to_string();
  register_arch_spec(*spec);
  for (auto [jit, where] : activation_paths) {
    setenv("TROUPE_JIT", jit, 1);
    const auto before = kernels::jit_counters();
    auto g = make(dir, where);
    ASSERT_TRUE(g);
    const std::string plan = g->runner().explain(false);
    if (where == kernels::backend::ref) {
      EXPECT_NE(plan.find("ref/elementwise/interpreted"), std::string::npos);
    } else if (std::string(jit) == "1") {
      EXPECT_NE(plan.find("cpu/elementwise/jit"), std::string::npos) << "no compiler here?";
    } else {
      EXPECT_EQ(plan.find("elementwise"), std::string::npos);
      EXPECT_NE(plan.find("composed from min(relu(x), 6)"), std::string::npos);
      EXPECT_GT(kernels::jit_counters().composed, before.composed);
    }
    for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  }
  unsetenv("TROUPE_JIT");
  clear_arch_specs();
}

// Apertus's xIELU: an activation no kernel implements, with constants learned per layer, so
// each layer's FFN runs its own element-wise program. transformers' tokens and logits through
// the JIT (one program per layer), through the composition of primitives (step and expm1
// included), and through the reference backend's interpreter.
TEST(Apertus, LearnedActivationPerLayerMatchesTransformers) {
  const std::string dir = test::fixture_path("models/apertus");
  const json fx = test::load_json(dir + "/expected.json");
  for (auto [jit, where] : activation_paths) {
    setenv("TROUPE_JIT", jit, 1);
    auto g = make(dir, where);
    ASSERT_TRUE(g);
    const std::string plan = g->runner().explain(false);
    if (where == kernels::backend::cpu && std::string(jit) == "1") {
      EXPECT_NE(plan.find("cpu/elementwise/jit"), std::string::npos) << "no compiler here?";
    } else if (where == kernels::backend::cpu) {
      EXPECT_EQ(plan.find("elementwise"), std::string::npos);
      EXPECT_NE(plan.find("composed from"), std::string::npos);
    }
    // each layer's own constants (beta of layer 0 and of layer 1 differ in the fixture)
    const auto graph = arch::build_graph(g->source());
    ASSERT_TRUE(graph);
    std::set<std::string> programs;
    for (const auto& p : graph->programs) programs.insert(p->text);
    EXPECT_EQ(programs.size(), 2u);
    for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  }
  unsetenv("TROUPE_JIT");
}

// A config that switches off what the published model has refuses the load by name.
TEST(Apertus, RemoteCodeSwitchesThatChangeTheMathRefuse) {
  namespace fs = std::filesystem;
  const fs::path src = test::fixture_path("models/apertus");
  for (const char* key : {"qk_norm", "post_norm", "mlp_bias"}) {
    const fs::path dir = fs::temp_directory_path() / fmt::format("troupe_apertus_{}", key);
    fs::remove_all(dir);
    fs::copy(src, dir);
    json cfg = test::load_json((dir / "config.json").string());
    cfg[key] = std::string(key) == "qk_norm" ? false : true;
    std::ofstream(dir / "config.json") << cfg.dump();
    auto m = open_model(dir.string());
    ASSERT_FALSE(m) << key;
    EXPECT_NE(m.error().message.find(key), std::string::npos) << m.error().message;
    fs::remove_all(dir);
  }
}

// llama.cpp's apertus GGUF carries the xIELU scalars as metadata: one array per constant with a
// value per layer, or one value that llama.cpp gives every layer. A missing key or an array of
// another length refuses the file naming the key; the one-value form is each layer's value.
TEST(Apertus, GgufActivationConstantsAreReadByKey) {
  auto f = open_gguf(test::fixture_path("gguf/apertus.gguf"));
  ASSERT_TRUE(f) << f.error().to_string();
  const std::string path = ::testing::TempDir() + "apertus_xielu.gguf";
  auto variant = [&](const std::string& key, const std::function<bool(gguf_value&)>& edit) {
    return open_gguf_variant(**f, path, key, edit);
  };
  auto m = variant("xielu.beta", [](gguf_value&) { return false; });
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("xielu.beta"), std::string::npos) << m.error().message;
  m = variant("xielu.eps", [](gguf_value& v) { return v.arr.pop_back(), true; });
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("xielu.eps"), std::string::npos) << m.error().message;
  // every layer given layer 0's alpha_p: layer 0's program is the fixture's, and layer 1's
  // differs from the fixture's
  auto programs = [](const model_source& s) {
    auto g = arch::build_graph(s);
    EXPECT_TRUE(g);
    std::vector<std::string> out;
    for (const auto& p : g->programs) out.push_back(p->text);
    return out;
  };
  auto base = open_model(test::fixture_path("gguf/apertus.gguf"));
  ASSERT_TRUE(base);
  m = variant("xielu.alpha_p", [](gguf_value& v) {
    const gguf_value first = v.arr.at(0);
    v = first;
    return true;
  });
  ASSERT_TRUE(m) << m.error().to_string();
  const auto want = programs(**base), got = programs(**m);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_NE(got[1], want[1]);
  std::remove(path.c_str());
}

// Gemma 3 4B / 12B / 27B are published as Gemma3ForConditionalGeneration whose text_config leaves
// most keys to Gemma3TextConfig's defaults (4B's: heads, KV heads, head_dim, vocabulary, context,
// rope thetas, query_pre_attn_scalar, the pattern of global layers): read as transformers reads
// them (configs/gemma-3-4b-it/transformers.json, written by make_family_fixtures.py).
TEST(Gemma3, PublishedSparseConfigTakesTransformersDefaults) {
  const std::string dir = test::fixture_path("configs/gemma-3-4b-it");
  const json want = test::load_json(dir + "/transformers.json");
  auto c = config_from_hf_dir(dir);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "gemma3");
  EXPECT_EQ(c->V, want["vocab_size"].get<int64_t>());
  EXPECT_EQ(c->C, want["hidden_size"].get<int64_t>());
  EXPECT_EQ(c->F, want["intermediate_size"].get<int64_t>());
  EXPECT_EQ(c->n_layer, want["num_hidden_layers"].get<int64_t>());
  EXPECT_EQ(c->H, want["num_attention_heads"].get<int64_t>());
  EXPECT_EQ(c->Hkv, want["num_key_value_heads"].get<int64_t>());
  EXPECT_EQ(c->D, want["head_dim"].get<int64_t>());
  EXPECT_EQ(c->ctx, want["max_position_embeddings"].get<int64_t>());
  EXPECT_DOUBLE_EQ(c->norm_eps, want["rms_norm_eps"].get<double>());
  EXPECT_DOUBLE_EQ(c->attention_scale(),
                   1.0 / std::sqrt(want["query_pre_attn_scalar"].get<double>()));
  EXPECT_EQ(c->sliding_window, want["sliding_window"].get<int64_t>());
  ASSERT_EQ(want["layer_types"].size(), static_cast<size_t>(c->n_layer));
  for (int64_t l = 0; l < c->n_layer; ++l)
    EXPECT_EQ(c->layer_window(l) > 0,
              want["layer_types"][static_cast<size_t>(l)] == "sliding_attention")
        << l;
  const json& full = want["rope_parameters"]["full_attention"];
  EXPECT_DOUBLE_EQ(c->rope.theta, full["rope_theta"].get<double>());
  EXPECT_EQ(c->rope.scaling, rope_scaling::linear);
  EXPECT_DOUBLE_EQ(c->rope.factor, full["factor"].get<double>());
  EXPECT_DOUBLE_EQ(c->rope_local.theta,
                   want["rope_parameters"]["sliding_attention"]["rope_theta"].get<double>());
  EXPECT_EQ(c->tie_embeddings, want["tie_word_embeddings"].get<bool>());
  EXPECT_EQ(c->act, act_kind::gelu_tanh);
}

// MiniMax-M2's published config carries its remote code's switches: any that would make
// another model than transformers computes refuses naming the key.
TEST(MiniMaxM2, RemoteCodeSwitchesThatChangeTheMathRefuse) {
  const json base = test::load_json(test::fixture_path("models/minimax_m2/config.json"));
  ASSERT_TRUE(config_from_hf_json(base.dump(), "", "minimax_m2"));
  const std::vector<std::pair<std::string, json>> changes = {
      {"attn_type_list", json::array({0, 1})},
      {"qk_norm_type", "per_head"},
      {"use_qk_norm", false},
      {"scoring_func", "softmax"},
      {"use_routing_bias", false},
      {"shared_intermediate_size", 64},
      {"sliding_window", 16}};
  for (const auto& [key, value] : changes) {
    json cfg = base;
    cfg[key] = value;
    auto c = config_from_hf_json(cfg.dump(), "", "minimax_m2");
    ASSERT_FALSE(c) << key;
    EXPECT_NE(c.error().message.find(key), std::string::npos) << c.error().message;
  }
}

// OLMoE clamps q and k after their norms (clip_qkv), which is not implemented: refused by name
// rather than clamped before the norms as OLMo does.
TEST(Olmoe, ClipQkvRefuses) {
  json cfg = test::load_json(test::fixture_path("models/olmoe/config.json"));
  ASSERT_TRUE(config_from_hf_json(cfg.dump(), "", "olmoe"));
  cfg["clip_qkv"] = 8.0;
  auto c = config_from_hf_json(cfg.dump(), "", "olmoe");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("clip_qkv"), std::string::npos) << c.error().message;
}

namespace {
// The KV memory an executor of the whole model allocates for `blocks` blocks of `block_size`.
int64_t kv_bytes_of(const std::shared_ptr<const model_source>& m, int64_t blocks,
                    int64_t block_size) {
  exec::exec_options opt;
  opt.kv_blocks = blocks;
  opt.block_size = block_size;
  shard_spec spec;
  spec.layer_begin = 0;
  spec.layer_end = static_cast<int>(m->config.n_layer);
  auto e = exec::executor::create(m, spec, opt, nullptr);
  EXPECT_TRUE(e) << e.error().to_string();
  return e ? (*e)->kv_bytes() : -1;
}
} // namespace

// The latent KV cache: a token stores kv_lora_rank + qk_rope_head_dim values per layer (32 + 8
// here), one cache for keys and values, so a shard's KV memory is that per layer and block
// position; expanded K and V would take H (qk_nope + qk_rope) + H v_head = 160, four times
// as much, so a given --kv-memory holds four times the context.
TEST(LatentCache, StoresTheLatentPerTokenAndLayer) {
  auto m = open_model(test::fixture_path("models/deepseek_v3"));
  ASSERT_TRUE(m) << m.error().to_string();
  const model_config& c = (*m)->config;
  EXPECT_EQ(c.kv_values_per_token(), c.kv_lora + c.qk_rope);
  EXPECT_EQ(c.kv_values_per_token(2), c.kv_lora + c.qk_rope);           // replicated under TP
  EXPECT_EQ(kv_bytes_of(*m, 8, 16), c.n_layer * 8 * 16 * (32 + 8) * 4); // f32 cache
  const int64_t expanded = c.H * (c.qk_nope + c.qk_rope) + c.H * c.v_head;
  EXPECT_EQ(expanded, 4 * c.kv_values_per_token());
}

// Doge's heads carry 8 more values (each key's dynamic mask score): the KV memory the serving host
// plans from the config (kv_values_per_token) is what the executor allocates.
TEST(DogeCache, HeadsOfDPlusEightAsPlanned) {
  auto m = open_model(test::fixture_path("models/doge"));
  ASSERT_TRUE(m) << m.error().to_string();
  const model_config& c = (*m)->config;
  EXPECT_EQ(c.kv_values_per_token(), 2 * c.Hkv * (c.D + 8));
  EXPECT_EQ(kv_bytes_of(*m, 8, 16), c.n_layer * 8 * 16 * c.kv_values_per_token() * 4); // f32 cache
}

// GGUF's K-quants (Q2_K ... Q6_K, the Q4_K_M / Q5_K_M files people download): a random tiny-k
// checkpoint in each (and in the Q4_K_M mix of types), against its twin that stores the same values
// expanded to f32 (the f32 path is checked against transformers above), on the fast CPU kernels,
// and against the reference backend on the K-quant file. The K-quants' matmuls take int8
// activations (every decode kernel, and the prefill GEMM for Q4_K / Q5_K / Q6_K), so
// their logits carry q8's error, as FastKernels' q8_0 / q4_0 do, and so do IQ4_NL / IQ4_XS's;
// q4_1 / q5_0 / q5_1 expand blocks into f32 and match to f32's precision.
TEST(KQuants, ModelsComputeTheirExpandedTwinAndTheReference) {
  const std::pair<dtype, bool> cases[] = {
      {dtype::q2_k, false}, {dtype::q3_k, false},   {dtype::q4_k, false},  {dtype::q5_k, false},
      {dtype::q6_k, false}, {dtype::q4_k, true},    {dtype::q4_1, false},  {dtype::q5_0, false},
      {dtype::q5_1, false}, {dtype::iq4_nl, false}, {dtype::iq4_xs, false}};
  for (auto [t, k_m] : cases) {
    const std::string base = ::testing::TempDir() + "kq_" + std::string(name(t)) +
                             (k_m ? "_m_" : "_") + std::to_string(::getpid());
    synth_options so;
    so.preset = "tiny-k";
    so.type = t;
    so.k_m = k_m; // Q4_K_M: Q6_K output, Q6_K attn_v / ffn_down in layer 1 (mixed projections)
    so.seed = 11;
    so.out = base + ".gguf";
    so.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
    ASSERT_TRUE(synthesize(so));
    synth_options twin = so;
    twin.type = dtype::f32;
    twin.values = t;
    twin.out = base + "_f32.gguf";
    ASSERT_TRUE(synthesize(twin));
    auto kq = make(so.out), f32 = make(twin.out), ref = make(so.out, kernels::backend::ref);
    ASSERT_TRUE(kq && f32 && ref);
    std::vector<int32_t> prompt = {1};
    for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500);
    auto a = greedy(*kq, prompt, 6), b = greedy(*f32, prompt, 6), c = greedy(*ref, prompt, 6);
    double scale = 0;
    for (float v : b.prompt_logits) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    ASSERT_GT(scale, 0) << name(t);
    const bool int8 = is_kquant(t) || t == dtype::iq4_nl || t == dtype::iq4_xs;
    const double tol = int8 ? 2e-2 : 1e-5; // as FastKernels' q8_0 / q4_0
    EXPECT_EQ(a.tokens, b.tokens) << name(t);
    EXPECT_LE(max_abs_diff(a.prompt_logits, b.prompt_logits) / scale, tol) << name(t);
    EXPECT_EQ(a.tokens, c.tokens) << name(t);
    EXPECT_LE(max_abs_diff(a.prompt_logits, c.prompt_logits) / scale, tol) << name(t);
    std::remove(so.out.c_str());
    std::remove(twin.out.c_str());
  }
}
