// context_test.cpp: what a query's position changes, and the context a model is served at:
// Llama 4's chunked attention and attention temperature (HF and GGUF configs, explain, past
// position 8192 against llama.cpp), Ministral 3's llama_4_scaling_beta, Hunyuan's NTK alpha and
// the configs that refuse, and a served context shorter than the published one (--context).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/family.hpp"
#include "arch/model_config.hpp"
#include "forward_util.hpp"

using namespace troupe;
using json = nlohmann::json;
using test::check_case;
using test::greedy;
using test::max_abs_diff;
using test::open_gguf_variant;

namespace {

// A copy of the GGUF `in` at `path` whose context_length says `n` (the tiny fixtures' 256 is far
// below the positions these tests reach; llama.cpp runs past it as asked)
expected<std::shared_ptr<const model_source>>
with_context_length(const gguf_file& in, const std::string& path, int64_t n) {
  return open_gguf_variant(in, path, "llama4.context_length", [n](gguf_value& v) {
    v.i = n;
    v.f = static_cast<double>(n);
    return true;
  });
}

} // namespace

// Llama 4: one expert per token is what its router's input scaling is implemented for; more
// refuse by name. Chunked attention on the layers that rotate (or those layer_types names) and
// the attention temperature on the NoPE layers, as configured, at any context (the
// llama4_chunked fixture runs both inside its prompts).
TEST(Llama4, ExpertsPerTokenChunksAndTemperature) {
  const std::string dir = test::fixture_path("models/llama4");
  const json base = test::load_json(dir + "/config.json");
  auto with = [&](const json& changes) {
    json cfg = base;
    cfg.update(changes);
    return config_from_hf_json(cfg.dump(), "", "llama4 config");
  };
  auto two = with({{"num_experts_per_tok", 2}});
  ASSERT_FALSE(two);
  EXPECT_NE(two.error().message.find("num_experts_per_tok"), std::string::npos);
  auto c = with({{"max_position_embeddings", 10485760}}); // Scout's, with 8192 / 8192
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->ctx, 10485760);
  EXPECT_TRUE(c->load_notes.empty());
  EXPECT_EQ(c->attn_chunk, 8192);
  EXPECT_EQ(c->chunked, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(c->layer_chunk(0), 8192);
  EXPECT_EQ(c->layer_chunk(3), 0);
  EXPECT_EQ(c->attn_temp_floor, 8192);
  EXPECT_DOUBLE_EQ(c->attn_temp_scale, 0.1);
  // (transformers writes layer_types out, as derived when the model was made)
  c = with({{"attention_chunk_size", nullptr},
            {"attn_temperature_tuning", false},
            {"layer_types", nullptr}});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->layer_chunk(0), 0);
  EXPECT_EQ(c->attn_temp_floor, 0);
  json no_key = base; // absent, the chunk is Llama4TextConfig's 8192
  no_key.erase("attention_chunk_size");
  c = config_from_hf_json(no_key.dump(), "", "llama4 config");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->attn_chunk, 8192);
  // no_rope_layers empty, as Scout publishes it: every no_rope_layer_interval-th layer, as
  // given, and the chunks on the others
  c = with(
      {{"no_rope_layers", json::array()}, {"no_rope_layer_interval", 2}, {"layer_types", nullptr}});
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->nope_layers, (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(c->chunked, (std::vector<uint8_t>{1, 0, 1, 0}));
  // layer_types, where given, say which layers are chunked; another kind refuses by name
  c = with({{"layer_types",
             {"full_attention", "chunked_attention", "full_attention", "full_attention"}}});
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->chunked, (std::vector<uint8_t>{0, 1, 0, 0}));
  c = with({{"layer_types",
             {"sliding_attention", "chunked_attention", "full_attention", "full_attention"}}});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("layer_types"), std::string::npos);
  c = with({{"attention_chunk_size", nullptr},
            {"layer_types",
             {"chunked_attention", "chunked_attention", "full_attention", "full_attention"}}});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("attention_chunk_size"), std::string::npos);
}

// From GGUF, llama.cpp's constants: NoPE on the fourth layer, chunks of 8192 on the others,
// the temperature from 8192 by 0.1 on the NoPE ones, q/k norms; 128 experts (Maverick) have no
// q/k norms.
TEST(Llama4, GgufTakesLlamaCppConstants) {
  auto f = open_gguf(test::fixture_path("gguf/llama4.gguf"));
  ASSERT_TRUE(f) << f.error().to_string();
  const std::string path = ::testing::TempDir() + "llama4_variant.gguf";
  auto base = open_model(test::fixture_path("gguf/llama4.gguf"));
  ASSERT_TRUE(base);
  EXPECT_EQ((*base)->config.ctx, 256);
  EXPECT_EQ((*base)->config.nope_layers, (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ((*base)->config.qk_norm, qk_norm_kind::head_plain);
  auto m = with_context_length(**f, path, 10485760);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ((*m)->config.ctx, 10485760);
  EXPECT_TRUE((*m)->config.load_notes.empty());
  EXPECT_EQ((*m)->config.chunked, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ((*m)->config.attn_chunk, 8192);
  EXPECT_EQ((*m)->config.attn_temp_floor, 8192);
  EXPECT_DOUBLE_EQ((*m)->config.attn_temp_scale, 0.1);
  // llama.cpp's variant without chunks (attention.sliding_window) is another layout: refused;
  // a MoE step of 0 is no model
  m = open_gguf_variant(**f, path, "llama4.attention.sliding_window", [](gguf_value& v) {
    v.type = gguf_type::u32;
    v.i = 0;
    return true;
  });
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("attention.sliding_window"), std::string::npos);
  m = open_gguf_variant(**f, path, "llama4.interleave_moe_layer_step", [](gguf_value& v) {
    v.i = 0;
    v.f = 0;
    return true;
  });
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("interleave_moe_layer_step"), std::string::npos);
  auto cfg = config_from_gguf(**f);
  ASSERT_TRUE(cfg);
  // the 128-expert rule, on the config alone (the fixture's tensors have 4)
  gguf_file copy;
  copy.keys = (*f)->keys;
  copy.kv = (*f)->kv;
  copy.file = (*f)->file;
  copy.kv["llama4.expert_count"].i = 128;
  copy.kv["llama4.expert_count"].f = 128;
  auto c128 = config_from_gguf(copy);
  ASSERT_TRUE(c128) << c128.error().to_string();
  EXPECT_EQ(c128->qk_norm, qk_norm_kind::none);
  EXPECT_EQ(cfg->qk_norm, qk_norm_kind::head_plain);
  std::remove(path.c_str());
}

// Ministral 3: rope_parameters' llama_4_scaling_beta is an attention temperature on every layer
// from original_max_position_embeddings on (positions not offset, as Ministral3Attention); the
// same key in another family's rope refuses by name (as does a rope key nothing reads), and
// without its original context it is a bad file. From GGUF (mistral3): attention.temperature_scale
// over the YaRN original context.
TEST(Ministral3, TemperatureFromRopeParameters) {
  const json base = test::load_json(test::fixture_path("models/ministral3_vl/config.json"));
  auto c = config_from_hf_json(base.dump(), "", "ministral3 config");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->attn_temp_floor, 16);
  EXPECT_DOUBLE_EQ(c->attn_temp_scale, 0.5);
  EXPECT_EQ(c->attn_temp_offset, 0);
  EXPECT_TRUE(c->layer_tempered(0) && c->layer_tempered(1));
  json no_orig = base;
  no_orig["text_config"]["rope_parameters"].erase("original_max_position_embeddings");
  c = config_from_hf_json(no_orig.dump(), "", "ministral3 config");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("llama_4_scaling_beta"), std::string::npos);
  json yarn = test::load_json(test::fixture_path("models/llama_yarn/config.json"));
  yarn["rope_parameters"]["llama_4_scaling_beta"] = 0.1;
  c = config_from_hf_json(yarn.dump(), "", "llama config");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, errc::unsupported);
  EXPECT_NE(c.error().message.find("llama_4_scaling_beta"), std::string::npos);
  // a rope key nothing reads may change the rotation: refused by name, never dropped
  yarn = test::load_json(test::fixture_path("models/llama_yarn/config.json"));
  yarn["rope_parameters"]["extrapolation_factor"] = 0.5;
  c = config_from_hf_json(yarn.dump(), "", "llama config");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("extrapolation_factor"), std::string::npos);
  auto m = open_model(test::fixture_path("gguf/ministral3_vl.gguf"));
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ((*m)->config.attn_temp_floor, 16);
  EXPECT_NEAR((*m)->config.attn_temp_scale, 0.5, 1e-7);
  EXPECT_EQ((*m)->config.attn_temp_offset, 0);
}

// Hunyuan dense: NTK alpha stretches the base (alpha^(D / (D - 2))); the published config's
// remote-code switches that would make another model refuse by name, as does alpha elsewhere.
TEST(Hunyuan, AlphaAndTheRemoteCodeSwitches) {
  const json base = test::load_json(test::fixture_path("models/hunyuan_dense/config.json"));
  auto c = config_from_hf_json(base.dump(), "", "hunyuan config");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_NEAR(c->rope.theta, 1e4 * std::pow(50.0, 16.0 / 14.0), 1e-6);
  EXPECT_TRUE(c->qk_norm_after_rope);
  for (const auto& [key, value] : {std::pair<const char*, json>{"use_cla", true},
                                   {"use_qk_norm", false},
                                   {"num_experts", 8}}) {
    json changed = base;
    changed[key] = value;
    c = config_from_hf_json(changed.dump(), "", "hunyuan config");
    ASSERT_FALSE(c) << key;
    EXPECT_NE(c.error().message.find(key), std::string::npos) << c.error().message;
  }
  // Hunyuan MoE's published widths and counts: what transformers builds, or refused by name
  const json moe = test::load_json(test::fixture_path("models/hunyuan_moe/config.json"));
  ASSERT_TRUE(config_from_hf_json(moe.dump(), "", "hunyuan moe config"));
  for (const auto& [key, value] : {std::pair<const char*, json>{"moe_intermediate_size", 64},
                                   {"num_shared_expert", 2},
                                   {"norm_type", "layer"},
                                   {"moe_topk", json::array({2, 1})}}) {
    json changed = moe;
    changed[key] = value;
    c = config_from_hf_json(changed.dump(), "", "hunyuan moe config");
    ASSERT_FALSE(c) << key;
    EXPECT_NE(c.error().message.find(key), std::string::npos) << c.error().message;
  }
  json llama = test::load_json(test::fixture_path("models/llama3/config.json"));
  llama["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 1.0}, {"alpha", 50.0}};
  c = config_from_hf_json(llama.dump(), "", "llama config");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("alpha"), std::string::npos);
}

// What each attention computes beyond plain causal attention is in the graph's text (troupe
// explain): Llama 4's chunks on the rotating layers, its temperature on the NoPE one.
TEST(Llama4, ExplainShowsChunksAndTemperature) {
  auto m = open_model(test::fixture_path("models/llama4_chunked"));
  ASSERT_TRUE(m) << m.error().to_string();
  auto g = arch::build_graph(**m);
  ASSERT_TRUE(g) << g.error().to_string();
  std::vector<std::string> params; // what follows each attention's inputs, layer by layer
  std::istringstream lines(g->to_string());
  for (std::string line; std::getline(lines, line);)
    if (line.find("= paged_attention(") != std::string::npos)
      params.push_back(line.substr(line.find(')', line.find("seq_table")) + 1));
  const std::string chunks = " [chunks of 5]";
  EXPECT_EQ(params, (std::vector<std::string>{chunks, chunks, chunks,
                                              " [scores x 1 + 0.25 ln(1 + floor((p + 1) / 4))]"}));
}

// Llama 4 past position 8192 as llama.cpp runs it (gguf/llama4_long.json, by
// make_long_context_refs.py): from 8192 on the rotating layers see only their chunk's keys, and
// from 8191 the NoPE layer's queries are scaled up; one prompt crosses that in its prefill, one
// while decoding. (The file says a context of 256, which llama.cpp runs past; here it is raised.)
TEST(GgufLongContext, Llama4PastItsFirstChunk) {
  const json ref = test::load_json(test::fixture_path("gguf/llama4_long.json"));
  auto f = open_gguf(test::fixture_path("gguf/llama4.gguf"));
  ASSERT_TRUE(f) << f.error().to_string();
  const std::string path = ::testing::TempDir() + "llama4_long.gguf";
  auto m = with_context_length(**f, path, 16384);
  ASSERT_TRUE(m) << m.error().to_string();
  exec::exec_options opt;
  auto g = test::generator_of(*m, opt);
  ASSERT_TRUE(g);
  ASSERT_EQ(ref["cases"].size(), 2u);
  for (const auto& c : ref["cases"]) {
    const auto want = c["greedy_tokens"].get<std::vector<int32_t>>();
    auto r =
        greedy(*g, c["prompt_tokens"].get<std::vector<int32_t>>(), static_cast<int>(want.size()));
    EXPECT_LE(max_abs_diff(r.prompt_logits, c["last_logits"].get<std::vector<float>>()), 2e-3)
        << c["n_prompt"];
    EXPECT_EQ(r.tokens, want) << c["n_prompt"];
  }
  std::remove(path.c_str());
}

// A model's published context may be far more than a machine holds (Llama 4 Scout's 10M
// tokens: a KV cache of terabytes): with_context (troupe serve / generate --context) serves a
// shorter one, the same weights and tokenizer, and generates as the model does.
TEST(ServedContext, AShorterContextServesTheSameModel) {
  auto f = open_gguf(test::fixture_path("gguf/llama4.gguf"));
  ASSERT_TRUE(f) << f.error().to_string();
  const std::string path = ::testing::TempDir() + "llama4_10m.gguf";
  auto m = with_context_length(**f, path, 10485760);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ((*m)->config.ctx, 10485760);
  auto served = with_context(*m, 200);
  ASSERT_TRUE(served) << served.error().to_string();
  EXPECT_EQ((*served)->config.ctx, 200);
  EXPECT_EQ((*served)->tok.get(), (*m)->tok.get());
  EXPECT_EQ(*with_context(*m, 0), *m);
  EXPECT_FALSE(with_context(*m, 10485761));
  EXPECT_FALSE(with_context(*m, 1));
  exec::exec_options opt;
  auto g = test::generator_of(*served, opt);
  ASSERT_TRUE(g);
  const json fx = test::load_json(test::fixture_path("models/llama4/expected.json"));
  for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  std::remove(path.c_str());
  // LongRoPE's factor set follows the served context: the short one up to the original
  auto phi = open_model(test::fixture_path("models/phi3_longrope"));
  ASSERT_TRUE(phi) << phi.error().to_string();
  ASSERT_TRUE((*phi)->config.rope.use_long);
  const auto orig = static_cast<int64_t>((*phi)->config.rope.orig_ctx);
  EXPECT_FALSE((*with_context(*phi, orig))->config.rope.use_long);
  EXPECT_TRUE((*with_context(*phi, orig + 1))->config.rope.use_long);
  // a learned position table keeps its rows (GPT-2's 256) whatever the served context
  auto gpt2 = open_model(test::fixture_path("models/gpt2"));
  ASSERT_TRUE(gpt2) << gpt2.error().to_string();
  auto short_gpt2 = with_context(*gpt2, 100);
  ASSERT_TRUE(short_gpt2);
  auto g2 = test::generator_of(*short_gpt2, opt);
  ASSERT_TRUE(g2);
  for (const auto& c : test::load_json(test::fixture_path("models/gpt2/expected.json"))["cases"])
    check_case(*g2, c, 2e-3);
}
