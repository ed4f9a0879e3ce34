// pipeline_test.cpp: stories260K through the actor pipeline for every (TP, PP) in
// {1, 2, 4} x {1, 2, 5} and an uneven placement: greedy tokens identical to the single-device
// generator, log-probabilities within 1e-4; several concurrent requests give what each gives
// alone; per-shard resident weights shrink with TP x PP.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <tuple>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../exact_activations.hpp"
#include "../family_fixtures.hpp"
#include "../test_paths.hpp"
#include "actors/host.hpp"
#include "arch/synth.hpp"
#include "exec/generator.hpp"
#include "kernels/device.hpp"

using namespace troupe;
using namespace troupe::actors;
using json = nlohmann::json;

namespace {

std::shared_ptr<const model_source> stories() {
  static auto m = [] {
    auto r = open_model(test::model_path("stories260K/stories260K.gguf"));
    EXPECT_TRUE(r);
    return *r;
  }();
  return m;
}

struct reference {
  std::vector<int32_t> prompt, tokens;
  std::vector<float> logits;
};

const reference& single_device() {
  static reference ref = [] {
    reference r;
    auto g = exec::generator::create(stories(), {});
    r.prompt = *stories()->tok->encode("Once upon a time", true, false);
    exec::generate_options o;
    o.max_tokens = 32;
    o.stop_at_eos = false;
    auto out = (*g)->run(r.prompt, o);
    r.tokens = out->tokens;
    r.logits = out->prompt_logits;
    return r;
  }();
  return ref;
}

std::unique_ptr<host> start(placement p) {
  host_options o;
  o.place = std::move(p);
  auto h = host::start(stories(), o);
  EXPECT_TRUE(h) << (h ? "" : h.error().to_string());
  if (!h) return nullptr;
  EXPECT_TRUE((*h)->wait_ready(60));
  return std::move(*h);
}

gen_request greedy_request(const std::vector<int32_t>& prompt, int n_tokens, int top_logprobs = 0) {
  gen_request r;
  r.prompt = prompt;
  r.max_tokens = n_tokens;
  r.ignore_eos = true;
  r.sampling.top_logprobs = top_logprobs;
  return r;
}

// The greedy tokens of the pipeline a placement string describes equal the single device's.
void expect_single_device_tokens(const std::string& placement) {
  SCOPED_TRACE(placement);
  auto p = parse_placement(stories()->config, placement);
  ASSERT_TRUE(p);
  auto h = start(*p);
  ASSERT_TRUE(h);
  auto out = h->generate(greedy_request(single_device().prompt, 32));
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].tokens, single_device().tokens);
}

} // namespace

class TpPp : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(TpPp, GreedyTokensMatchSingleDevice) {
  const auto [tp, pp] = GetParam();
  auto p = even_placement(stories()->config, tp, pp);
  ASSERT_TRUE(p);
  auto h = start(*p);
  ASSERT_TRUE(h);
  const reference& ref = single_device();
  std::vector<gen_event> events;
  auto out = h->generate(greedy_request(ref.prompt, 32, 5),
                         [&](const gen_event& e) { events.push_back(e); });
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ((*out)[0].tokens, ref.tokens) << "tp=" << tp << " pp=" << pp;
  // log-probabilities of the first token's top 5 equal the single-device log-softmax
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events[0].top_logprobs.size(), 1u);
  double mx = -1e30, sum = 0;
  for (float v : ref.logits) mx = std::max(mx, static_cast<double>(v));
  for (float v : ref.logits) sum += std::exp(v - mx);
  const double lse = mx + std::log(sum);
  for (auto [id, lp] : events[0].top_logprobs[0])
    EXPECT_NEAR(lp, ref.logits[id] - lse, 1e-4) << "token " << id;
  EXPECT_EQ((*out)[0].text, stories()->tok->decode(ref.tokens));
}

INSTANTIATE_TEST_SUITE_P(Grid, TpPp,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(1, 2, 5)));

// Recurrent state slots: within half of the KV memory beside KV caches (Qwen3-Next's attention
// layers), all of it where no layer keeps one (xLSTM: the blocks would stand unused); at most a
// step's sequences, at least one
TEST(Pipeline, StateSlotsTakeTheMemoryNoCacheNeeds) {
  for (const char* name : {"xlstm", "qwen3_next"}) {
    auto m = open_model(test::fixture_path(std::string("models/") + name));
    ASSERT_TRUE(m) << name << ": " << m.error().to_string();
    const model_config& c = (*m)->config;
    auto p = parse_placement(c, fmt::format("0-{}:tp1", c.n_layer - 1));
    ASSERT_TRUE(p) << p.error().to_string();
    const int64_t each = state_bytes_per_seq(c, *p);
    ASSERT_GT(each, 0) << name;
    const bool kv = std::string(name) != "xlstm";
    EXPECT_EQ(state_slots_for(c, *p, 64, 10 * each), kv ? 5 : 10) << name;
    EXPECT_EQ(state_slots_for(c, *p, 4, 10 * each), 4) << name;
    EXPECT_EQ(state_slots_for(c, *p, 64, each / 2), 1) << name;
  }
}

TEST(Pipeline, UnevenPlacement) {
  ASSERT_NO_FATAL_FAILURE(expect_single_device_tokens("0-2:tp2,3-4:tp1"));
  ASSERT_NO_FATAL_FAILURE(expect_single_device_tokens("0:tp4,1-3:tp1,4:tp2"));
}

// Devices per stage and rank: pinned CPU shards give the single-device tokens; a GPU stage
// either runs (a mixed CPU + GPU pipeline, token-exact) or, on a machine without one, refuses
// the start naming the device and why.
TEST(Pipeline, DevicesPlacedPerStage) {
  ASSERT_NO_FATAL_FAILURE(expect_single_device_tokens("0-2:tp2@cpu:0;cpu:1,3-4:tp1@cpu"));
  auto p = parse_placement(stories()->config, "0-2:tp1@cuda:0,3-4:tp1@cpu");
  ASSERT_TRUE(p);
  host_options o;
  o.place = *p;
  auto g = host::start(stories(), o);
  if (!kernels::cuda_available()) {
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().code, errc::unavailable);
    EXPECT_NE(g.error().message.find("cuda:0"), std::string::npos) << g.error().message;
    EXPECT_NE(g.error().message.find("lacks"), std::string::npos) << g.error().message;
    return;
  }
  ASSERT_TRUE(g) << g.error().to_string();
  ASSERT_TRUE((*g)->wait_ready(120));
  auto out = (*g)->generate(greedy_request(single_device().prompt, 32));
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].tokens, single_device().tokens);
}

TEST(Pipeline, ConcurrentRequestsMatchSolo) {
  auto p = even_placement(stories()->config, 2, 2);
  auto h = start(*p);
  ASSERT_TRUE(h);
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Ben went to the park",
                                            "Tom had a big red ball.", "One day, a cat"};
  std::vector<std::vector<int32_t>> solo;
  for (const auto& text : prompts) {
    auto g = exec::generator::create(stories(), {});
    exec::generate_options o;
    o.max_tokens = 20;
    o.stop_at_eos = false;
    solo.push_back((*g)->run(*stories()->tok->encode(text, true, false), o)->tokens);
  }
  std::vector<std::thread> ts;
  std::vector<std::vector<int32_t>> got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ts.emplace_back([&, i] {
      auto out = h->generate(greedy_request(*stories()->tok->encode(prompts[i], true, false), 20));
      if (out) got[i] = (*out)[0].tokens;
    });
  for (auto& t : ts) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], solo[i]) << prompts[i];
  const auto s = h->stats();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST(Pipeline, ResidentWeightsShrinkWithTpTimesPp) {
  auto one = start(*even_placement(stories()->config, 1, 1));
  auto four = start(*even_placement(stories()->config, 2, 2));
  ASSERT_TRUE(one && four);
  const auto whole = one->resident_bytes();
  const auto parts = four->resident_bytes();
  ASSERT_EQ(whole.size(), 1u);
  ASSERT_EQ(parts.size(), 4u);
  for (int64_t b : parts) {
    EXPECT_LT(b, whole[0] * 0.35) << "a TP2 x PP2 shard should hold about a quarter";
    EXPECT_GT(b, whole[0] * 0.15);
  }
}

// A sliding-window model (every layer over the last 8 positions) served by the pipeline at
// TP 2 x PP 2 with blocks of 4 tokens: the scheduler frees blocks behind the window, the
// shards see block id 0 there, and the greedy tokens are still transformers' (several
// requests at once, so freed blocks are reused by other sequences).
TEST(SlidingWindow, PipelineFreesBlocksAndMatchesTransformers) {
  const std::string dir = test::fixture_path("models/mistral_window");
  const json fx = test::load_json(dir + "/expected.json");
  auto m = open_model(dir);
  ASSERT_TRUE(m) << m.error().to_string();
  ASSERT_EQ((*m)->config.kv_horizon(), 8);
  host_options o;
  auto p = even_placement((*m)->config, 2, 2);
  ASSERT_TRUE(p);
  o.place = *p;
  o.block_size = 4;
  o.kv_blocks = 40; // 39 usable: the three requests would need 46 without freeing
  auto h = host::start(*m, o);
  ASSERT_TRUE(h) << h.error().to_string();
  ASSERT_TRUE((*h)->wait_ready(60));
  std::vector<gen_request> reqs;
  for (const auto& c : fx["cases"])
    reqs.push_back(greedy_request(c["prompt_tokens"].get<std::vector<int32_t>>(), 16));
  auto out = (*h)->generate_many(reqs);
  ASSERT_TRUE(out) << out.error().to_string();
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ((*out)[i][0].tokens, fx["cases"][i]["greedy_tokens"].get<std::vector<int32_t>>())
        << fx["cases"][i]["text"];
  const engine_stats s = (*h)->stats();
  EXPECT_GT(s.kv_window_freed_blocks, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

// Every transformers fixture family through the actor pipeline, cut two ways: TP 2 (heads,
// FFN rows and vocabulary split, all-reduces and the logits' all-gather) and PP 2 (a stage
// boundary inside the layers): the greedy tokens must be transformers'.
class FamilyCuts : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(FamilyCuts, GreedyTokensMatchTransformers) {
  const auto [full, tp, pp] = GetParam();
  // "gguf:NAME": the GGUF variant (tests/fixtures/gguf/NAME.gguf) of the same fixture;
  // "NAME@ep": the experts spread over each stage's TP shards (expert parallelism)
  const bool ep = full.ends_with("@ep");
  const std::string param = ep ? full.substr(0, full.size() - 3) : full;
  const bool gguf = param.starts_with("gguf:");
  const std::string name = gguf ? param.substr(5) : param;
  const test::exact_for_fixture exact(name);
  const std::string dir = test::fixture_path("models/" + name);
  const json fx = test::load_json(dir + "/expected.json");
  auto m = open_model(gguf ? test::fixture_path("gguf/" + name + ".gguf") : dir);
  ASSERT_TRUE(m) << m.error().to_string();
  auto p = even_placement((*m)->config, tp, pp);
  ASSERT_TRUE(p) << p.error().to_string();
  // (experts normalised whole, Ergo's, spread over TP shards by expert parallelism only)
  if (ep || (tp > 1 && (*m)->config.expert_post_norm)) {
    ASSERT_TRUE(set_expert_parallel((*m)->config, *p, tp));
  }
  host_options o;
  o.place = *p;
  auto h = host::start(*m, o);
  ASSERT_TRUE(h) << h.error().to_string();
  ASSERT_TRUE((*h)->wait_ready(60)) << (*h)->stats().not_ready_reason;
  std::vector<gen_request> reqs;
  for (const auto& c : fx["cases"])
    reqs.push_back(greedy_request(c["prompt_tokens"].get<std::vector<int32_t>>(),
                                  static_cast<int>(c["greedy_tokens"].size())));
  auto out = (*h)->generate_many(reqs);
  ASSERT_TRUE(out) << out.error().to_string();
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ((*out)[i][0].tokens, fx["cases"][i]["greedy_tokens"].get<std::vector<int32_t>>())
        << name << " tp" << tp << " pp" << pp << ": " << fx["cases"][i]["text"];
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyCuts,
                         ::testing::Combine(::testing::ValuesIn(test::hf_family_fixtures),
                                            ::testing::Values(1, 2), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_tp" +
                                  std::to_string(std::get<1>(info.param)) + "_pp" +
                                  std::to_string(std::get<2>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(
    Gguf, FamilyCuts,
    ::testing::Combine(
        ::testing::Values(
            "gguf:llama3", "gguf:llama_headdim", "gguf:llama_bias", "gguf:mistral", "gguf:qwen2",
            "gguf:qwen3", "gguf:gemma", "gguf:gemma2", "gguf:gemma3", "gguf:olmo", "gguf:olmo2",
            "gguf:granite", "gguf:phi3", "gguf:phi3_longrope", "gguf:phi2", "gguf:gpt2",
            "gguf:gpt_neox", "gguf:stablelm", "gguf:stablelm_qkln", "gguf:cohere", "gguf:falcon",
            "gguf:falcon_mq", "gguf:bloom", "gguf:mpt", "gguf:mixtral", "gguf:qwen2_moe",
            "gguf:qwen3_moe", "gguf:deepseek_v3", "gguf:gpt_oss", "gguf:gpt_oss_mxfp4",
            "gguf:deepseek_v3_yarn_eq", "gguf:qwen3_5", "gguf:qwen3_5_moe", "gguf:qwen3_next_moe",
            "gguf:seed_oss", "gguf:olmo3", "gguf:exaone4", "gguf:glm4", "gguf:ernie4_5",
            "gguf:apertus", "gguf:smollm3_nope4", "gguf:cohere2_swa4", "gguf:glm4_moe",
            "gguf:llama4", "gguf:llama4_vl", "gguf:qwen2_5_vl", "gguf:minimax_m2", "gguf:olmoe",
            "gguf:ernie4_5_moe", "gguf:dots1", "gguf:granitemoe", "gguf:lfm2", "gguf:lfm2_moe",
            "gguf:mamba2", "gguf:granite4_h", "gguf:nemotron_h", "gguf:falcon_h1", "gguf:mamba",
            "gguf:falcon_mamba", "gguf:jamba", "gguf:nemotron_h_moe", "gguf:gemma4",
            "gguf:gemma4_moe", "gguf:gemma4_e", "gguf:glm_moe_dsa_full", "gguf:deepseek_v32",
            "gguf:mistral4_vl", "gguf:kimi_linear", "gguf:exaone_moe_swa4", "gguf:afmoe",
            "gguf:minicpm3_4b", "gguf:starcoder2", "gguf:nemotron", "gguf:jais2", "gguf:dbrx",
            "gguf:phimoe_plain", "gguf:gpt_bigcode", "gguf:internlm3", "gguf:internlm2",
            "gguf:glm"),
        ::testing::Values(2), ::testing::Values(1, 2)),
    [](const auto& info) {
      return std::get<0>(info.param).substr(5) + "_tp2_pp" +
             std::to_string(std::get<2>(info.param));
    });

// Expert parallelism: each of a stage's TP shards holds whole experts (2 or 4 of 8), attention
// stays TP; every shard runs its experts for every token and the all-reduce adds the rest. The
// greedy tokens must be transformers' (EP 1 is the FamilyCuts cases above).
std::string ep_case_name(const std::string& param, int tp, int pp) {
  std::string n = param.substr(0, param.size() - 3);
  if (n.starts_with("gguf:")) n = "gguf_" + n.substr(5);
  return n + "_ep" + std::to_string(tp) + "_pp" + std::to_string(pp);
}

INSTANTIATE_TEST_SUITE_P(
    Experts, FamilyCuts,
    ::testing::Combine(
        ::testing::Values(
            "mixtral@ep", "qwen2_moe@ep", "qwen3_moe@ep", "qwen3_moe_sparse@ep", "gguf:mixtral@ep",
            "gguf:qwen2_moe@ep", "gguf:qwen3_moe@ep", "deepseek_v3@ep", "deepseek_v2@ep",
            "gguf:deepseek_v3@ep", "gpt_oss@ep", "gpt_oss_mxfp4@ep", "gguf:gpt_oss_mxfp4@ep",
            "deepseek_v3_fp8@ep", "deepseek_v32@ep", "glm_moe_dsa@ep", "kimi_linear@ep",
            "glm4_moe@ep", "qwen3_5_moe@ep", "qwen3_next@ep", "qwen3_5_moe_packed@ep", "llama4@ep",
            "gguf:glm4_moe@ep", "gguf:llama4@ep", "minimax_m2@ep", "minimax_m2_fp8@ep",
            "gguf:minimax_m2@ep", "olmoe@ep", "gguf:olmoe@ep", "ernie4_5_moe@ep",
            "gguf:ernie4_5_moe@ep", "dots1@ep", "gguf:dots1@ep", "granitemoe@ep",
            "gguf:granitemoe@ep", "qwen3_vl_moe@ep", "gguf:qwen3_vl_moe@ep", "glm4_moe_lite@ep",
            "hunyuan_moe@ep", "gguf:hunyuan_moe@ep", "exaone_moe@ep", "lfm2_moe@ep",
            "gguf:lfm2_moe@ep", "granite4_h_moe@ep", "jamba@ep", "gguf:jamba@ep",
            "nemotron_h_moe@ep", "gguf:nemotron_h_moe@ep", "gemma4_moe@ep", "gguf:gemma4_moe@ep",
            "gguf:glm_moe_dsa_full@ep", "gguf:deepseek_v32@ep", "deepseek_v4@ep", "glm5_next@ep",
            "hy_v4@ep", "mimo_v2_flash@ep", "solar_open@ep", "mistral4@ep", "mistral_large4@ep",
            "gguf:kimi_linear@ep", "gguf:exaone_moe_swa4@ep", "afmoe@ep", "dbrx@ep", "gguf:dbrx@ep",
            "phimoe@ep", "gguf:phimoe_plain@ep", "sarvam_moe@ep", "sarvam_mla@ep", "flex_olmo@ep",
            "granitemoeshared@ep", "gguf:granitemoeshared@ep", "hy_v3@ep", "mellum@ep",
            "granitemoe_swa@ep", "kolibri1@ep", "cohere2_moe@ep", "flint@ep", "minicpm5_moe@ep",
            "axk1@ep", "aria@ep", "lara_mini@ep", "minimax@ep", "inkling@ep", "inkling_vl@ep",
            "zaya@ep"),
        ::testing::Values(2), ::testing::Values(1, 2)),
    [](const auto& info) {
      return ep_case_name(std::get<0>(info.param), std::get<1>(info.param),
                          std::get<2>(info.param));
    });

INSTANTIATE_TEST_SUITE_P(Experts4, FamilyCuts,
                         ::testing::Combine(::testing::Values("mixtral@ep", "qwen3_moe@ep",
                                                              "gguf:qwen3_moe@ep", "deepseek_v3@ep",
                                                              "gpt_oss@ep"),
                                            ::testing::Values(4), ::testing::Values(1)),
                         [](const auto& info) {
                           return ep_case_name(std::get<0>(info.param), std::get<1>(info.param),
                                               std::get<2>(info.param));
                         });

// The actor pipeline over `place` gives the single-process generator's 12 greedy tokens.
void expect_sharded_like_solo(const std::shared_ptr<const model_source>& m, const placement& place,
                              const std::string& what) {
  const std::vector<int32_t> prompt = *m->tok->encode("Once upon a time", true);
  auto g = *exec::generator::create(m, {});
  exec::generate_options go;
  go.max_tokens = 12;
  go.stop_at_eos = false;
  const auto want = g->run(prompt, go)->tokens;
  host_options o;
  o.place = place;
  auto h = host::start(m, o);
  ASSERT_TRUE(h) << what << ": " << h.error().to_string();
  ASSERT_TRUE((*h)->wait_ready(60)) << what;
  auto out = (*h)->generate_many({greedy_request(prompt, 12)});
  ASSERT_TRUE(out) << what << ": " << out.error().to_string();
  EXPECT_EQ((*out)[0][0].tokens, want) << what;
}

// The synth presets for mixtures of experts (`troupe synth --preset tiny-moe / tiny-mla-moe`):
// each loads, and the actor pipeline with the experts spread over two shards (EP 2) gives the
// single-process generator's greedy tokens.
TEST(SynthPresets, MixturesOfExpertsLoadAndShardAlike) {
  for (auto [preset, format, type] :
       {std::tuple<const char*, const char*, dtype>{"tiny-moe", "gguf", dtype::q8_0},
        {"tiny-mla-moe", "hf", dtype::f32}}) {
    synth_options so;
    so.preset = preset;
    so.format = format;
    so.type = type;
    so.out = "/tmp/troupe_synth_" + std::string(preset) + "_" + std::to_string(::getpid()) +
             (std::string(format) == "gguf" ? ".gguf" : "");
    so.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
    ASSERT_TRUE(synthesize(so)) << preset;
    auto m = open_model(so.out);
    ASSERT_TRUE(m) << preset << ": " << m.error().to_string();
    EXPECT_GT((*m)->config.n_expert, 0) << preset;
    auto place = *even_placement((*m)->config, 2, 1);
    ASSERT_TRUE(set_expert_parallel((*m)->config, place, 2));
    expect_sharded_like_solo(*m, place, preset);
    std::filesystem::remove_all(so.out);
  }
}

// A Q4_K_M-mixed checkpoint (K-quant blocks of 256: TP 2 cuts each inner size at a block
// boundary) over TP 2 x PP 2 gives the single-process generator's greedy tokens.
TEST(SynthPresets, KQuantsShardAlike) {
  synth_options so;
  so.preset = "tiny-k";
  so.type = dtype::q4_k;
  so.k_m = true;
  so.out = "/tmp/troupe_synth_kq_" + std::to_string(::getpid()) + ".gguf";
  so.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
  ASSERT_TRUE(synthesize(so));
  auto m = open_model(so.out);
  ASSERT_TRUE(m) << m.error().to_string();
  expect_sharded_like_solo(*m, *even_placement((*m)->config, 2, 2), "q4_k_m");
  std::filesystem::remove(so.out);
}

// TP 4 cuts the same checkpoint's 512-column matrices at 128, inside its 256-value blocks: the
// shards refuse to load, and that is given up on at once (no restart can load it), with the
// reason named, under the default policy that otherwise retries forever.
TEST(SynthPresets, ASplitInsideKQuantBlocksFailsAtOnce) {
  synth_options so;
  so.preset = "tiny-k";
  so.type = dtype::q4_k;
  so.out = "/tmp/troupe_synth_kq4_" + std::to_string(::getpid()) + ".gguf";
  so.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
  ASSERT_TRUE(synthesize(so));
  auto m = open_model(so.out);
  ASSERT_TRUE(m) << m.error().to_string();
  host_options o;
  o.place = *even_placement((*m)->config, 4, 1);
  ASSERT_EQ(o.on_give_up, give_up_policy::retry);
  auto h = host::start(*m, o);
  ASSERT_TRUE(h) << h.error().to_string();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE((*h)->wait_ready(60));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
  const engine_stats s = (*h)->stats();
  EXPECT_TRUE(s.cannot_load);
  EXPECT_NE(s.not_ready_reason.find("whole blocks"), std::string::npos) << s.not_ready_reason;
  auto out = (*h)->generate(greedy_request({1, 2, 3}, 4));
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("whole blocks"), std::string::npos) << out.error().message;
  std::filesystem::remove(so.out);
}

// Matrices quantized at load (--quantize q8_0) in every shard of TP 2 x PP 2 (each quantizes
// its own slices) give the single-process generator's greedy tokens with the same option.
TEST(Pipeline, QuantizedAtLoadShardsLikeOneProcess) {
  exec::exec_options eo;
  eo.quantize = dtype::q8_0;
  auto g = exec::generator::create(stories(), eo);
  ASSERT_TRUE(g) << g.error().to_string();
  exec::generate_options go;
  go.max_tokens = 24;
  go.stop_at_eos = false;
  const auto want = (*g)->run(single_device().prompt, go)->tokens;
  host_options o;
  o.place = *even_placement(stories()->config, 2, 2);
  o.quantize = dtype::q8_0;
  auto h = host::start(stories(), o);
  ASSERT_TRUE(h) << h.error().to_string();
  ASSERT_TRUE((*h)->wait_ready(60)) << (*h)->stats().not_ready_reason;
  auto out = (*h)->generate(greedy_request(single_device().prompt, 24));
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ((*out)[0].tokens, want);
  // each shard holds about half its f32 bytes (ffn_down's 172 columns and the norms stay f32)
  o.quantize = dtype::f32;
  auto f = host::start(stories(), o);
  ASSERT_TRUE(f && (*f)->wait_ready(60));
  const auto q = (*h)->resident_bytes(), p = (*f)->resident_bytes();
  ASSERT_EQ(q.size(), p.size());
  for (size_t i = 0; i < q.size(); ++i) EXPECT_LT(q[i], 0.6 * p[i]) << "shard " << i;
}
