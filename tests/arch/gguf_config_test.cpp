// gguf_config_test.cpp: what a GGUF file's architecture keys do to the load. A GGUF fixture
// (tests/fixtures/gguf/, as llama.cpp's converter writes it) is rewritten with one more key:
// a key known to change the math that the family does not read refuses the load, naming it
// (a zero value is the same model and loads); a key nobody knows is listed once at load; a
// family reads the keys it implements (granite's multipliers, mpt's ALiBi bias and clamp).
#include <cstdio>
#include <cstring>
#include <functional>

#include <unistd.h>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/model_config.hpp"
#include "formats/checkpoint_writer.hpp"
#include "formats/gguf.hpp"

using namespace troupe;

namespace {

// `name`.gguf with `add` applied to a copy of its keys; the tensors copied as they are
std::string rewritten(const std::string& name, const std::function<void(gguf_writer&)>& add) {
  auto g = open_gguf(test::fixture_path("gguf/" + name + ".gguf"));
  EXPECT_TRUE(g) << (g ? "" : g.error().to_string());
  if (!g) return "";
  gguf_writer w;
  w.copy_keys(**g, "");
  add(w);
  for (const std::string& t : (*g)->tensors.names()) {
    const tensor_info* info = (*g)->tensors.find(t);
    w.add_tensor(t, info->type, info->dims, [info](uint8_t* dst, size_t bytes) {
      std::memcpy(dst, info->data, std::min<size_t>(bytes, info->nbytes));
    });
  }
  const std::string path = "/tmp/troupe_gguf_config_" + name + "_" + std::to_string(::getpid()) +
                           "_" + std::to_string(std::rand()) + ".gguf";
  EXPECT_TRUE(w.write(path));
  return path;
}

expected<model_config> load(const std::string& path) {
  auto g = open_gguf(path);
  if (!g) return g.error();
  auto c = config_from_gguf(**g);
  std::remove(path.c_str());
  return c;
}

} // namespace

TEST(GgufConfig, FixtureLoadsAsWritten) {
  auto c = load(rewritten("olmo", [](gguf_writer&) {}));
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "olmo");
  EXPECT_FLOAT_EQ(c->clip_qkv, 1.0f); // olmo.attention.clamp_kqv
  EXPECT_TRUE(c->ignored_keys.empty());
}

TEST(GgufConfig, UnreadMathKeyRefusesTheLoad) {
  struct refusal {
    const char* fixture;
    const char* key;
  };
  for (auto [fixture, key] :
       {refusal{"qwen2", "qwen2.attention.clamp_kqv"},
        refusal{"llama3", "llama.final_logit_softcapping"},
        refusal{"gpt2", "gpt2.attention.max_alibi_bias"}, refusal{"phi3", "phi3.expert_count"},
        refusal{"olmo2", "olmo2.rope.scaling.yarn_log_multiplier"}}) {
    auto c = load(rewritten(fixture, [key](gguf_writer& w) { w.set_f32(key, 2.0f); }));
    ASSERT_FALSE(c) << fixture << ": " << key;
    EXPECT_EQ(c.error().code, errc::unsupported);
    EXPECT_NE(c.error().message.find(key), std::string::npos) << c.error().message;
  }
}

TEST(GgufConfig, ZeroMathKeyIsTheSameModel) {
  auto c =
      load(rewritten("qwen2", [](gguf_writer& w) { w.set_f32("qwen2.attention.clamp_kqv", 0); }));
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->clip_qkv, 0);
}

// Every GGUF fixture: the family reads every architecture key the converter wrote.
TEST(GgufConfig, FamiliesReadEveryKeyTheirConverterWrites) {
  for (const char* name :
       {"llama3",      "llama_yarn", "qwen2",         "qwen3",   "gemma",     "gemma2",
        "gemma3",      "phi3",       "phi3_longrope", "phi2",    "gpt2",      "gpt_neox",
        "stablelm",    "olmo",       "olmo2",         "granite", "cohere",    "falcon",
        "falcon_mq",   "bloom",      "mpt",           "mixtral", "qwen2_moe", "qwen3_moe",
        "deepseek_v3", "deci_ultra", "exaone_8k",     "minicpm"}) {
    auto c = load(rewritten(name, [](gguf_writer&) {}));
    ASSERT_TRUE(c) << name << ": " << c.error().to_string();
    std::string keys;
    for (const auto& k : c->ignored_keys) keys += k + " ";
    EXPECT_TRUE(c->ignored_keys.empty()) << name << ": unread " << keys;
  }
}

// EXAONE 3.x's epsilon: LG's published files (exaone_8k.gguf) carry layer_norm_epsilon as the RMS
// epsilon; the converter's later form writes it as attention.layer_norm_epsilon, read the same
TEST(GgufConfig, ExaoneEpsilonUnderEitherKey) {
  auto published = load(rewritten("exaone_8k", [](gguf_writer&) {}));
  ASSERT_TRUE(published) << published.error().to_string();
  EXPECT_FLOAT_EQ(static_cast<float>(published->norm_eps), 1e-5f);
  auto g = open_gguf(test::fixture_path("gguf/exaone_8k.gguf"));
  ASSERT_TRUE(g) << g.error().to_string();
  gguf_writer w;
  for (const std::string& k : (*g)->keys)
    if (k != "exaone.attention.layer_norm_rms_epsilon") w.set(k, (*g)->kv.at(k));
  w.set_f32("exaone.attention.layer_norm_epsilon", 1e-3f);
  for (const std::string& t : (*g)->tensors.names()) {
    const tensor_info* info = (*g)->tensors.find(t);
    w.add_tensor(t, info->type, info->dims,
                 [info](uint8_t* dst, size_t bytes) { std::memcpy(dst, info->data, bytes); });
  }
  const std::string path = ::testing::TempDir() + "exaone_later_form.gguf";
  ASSERT_TRUE(w.write(path));
  auto later = load(path);
  ASSERT_TRUE(later) << later.error().to_string();
  EXPECT_FLOAT_EQ(static_cast<float>(later->norm_eps), 1e-3f);
  EXPECT_TRUE(later->ignored_keys.empty());
}

// Mixtures of experts as llama.cpp reads them: Mixtral is `llama` with expert_count;
// qwen2moe has a gated shared expert and leaves top-k unnormalised, qwen3moe normalises.
TEST(GgufConfig, ExpertsAsLlamaCppReadsThem) {
  auto mx = load(rewritten("mixtral", [](gguf_writer&) {}));
  ASSERT_TRUE(mx) << mx.error().to_string();
  EXPECT_EQ(mx->family, "llama");
  EXPECT_EQ(mx->n_expert, 8);
  EXPECT_EQ(mx->n_expert_used, 2);
  EXPECT_EQ(mx->F_expert, mx->F);
  EXPECT_TRUE(mx->norm_topk);
  EXPECT_EQ(mx->F_shared, 0);
  auto q2 = load(rewritten("qwen2_moe", [](gguf_writer&) {}));
  ASSERT_TRUE(q2) << q2.error().to_string();
  EXPECT_EQ(q2->n_expert, 6);
  EXPECT_EQ(q2->F_expert, 32);
  EXPECT_EQ(q2->F_shared, 96);
  EXPECT_TRUE(q2->shared_gate);
  EXPECT_FALSE(q2->norm_topk);
  auto q3 = load(rewritten("qwen3_moe", [](gguf_writer&) {}));
  ASSERT_TRUE(q3) << q3.error().to_string();
  EXPECT_TRUE(q3->norm_topk);
  EXPECT_EQ(q3->n_expert_used, 3);
  EXPECT_LT(q3->active_parameters(), q3->parameters());
}

// Routing the experts other than by softmax, or in groups, is not implemented: refused by name.
TEST(GgufConfig, OtherRoutingRefusesTheLoad) {
  auto sig = load(
      rewritten("qwen3_moe", [](gguf_writer& w) { w.set_u32("qwen3moe.expert_gating_func", 2); }));
  ASSERT_FALSE(sig);
  EXPECT_NE(sig.error().message.find("expert_gating_func"), std::string::npos)
      << sig.error().message;
  auto groups = load(
      rewritten("qwen3_moe", [](gguf_writer& w) { w.set_u32("qwen3moe.expert_group_count", 4); }));
  ASSERT_FALSE(groups);
  EXPECT_NE(groups.error().message.find("expert_group_count"), std::string::npos)
      << groups.error().message;
}

// A key the family reads as a number but the file stores as another type (a bool, a string)
// refuses the load naming it; it is never read as its default.
TEST(GgufConfig, MistypedKeyRefusesTheLoad) {
  for (const char* key :
       {"qwen3moe.expert_feed_forward_length", "qwen3moe.attention.head_count_kv"}) {
    auto c = load(rewritten("qwen3_moe", [key](gguf_writer& w) { w.set_string(key, "32"); }));
    ASSERT_FALSE(c) << key;
    EXPECT_EQ(c.error().code, errc::corrupt_file) << key;
    EXPECT_NE(c.error().message.find(key), std::string::npos) << c.error().message;
  }
  auto b =
      load(rewritten("llama3", [](gguf_writer& w) { w.set_bool("llama.expert_count", true); }));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("llama.expert_count"), std::string::npos) << b.error().message;
}

TEST(GgufConfig, UnknownKeyIsListed) {
  auto c = load(rewritten("qwen3", [](gguf_writer& w) { w.set_u32("qwen3.some_new_thing", 7); }));
  ASSERT_TRUE(c) << c.error().to_string();
  ASSERT_EQ(c->ignored_keys.size(), 1u);
  EXPECT_EQ(c->ignored_keys[0], "qwen3.some_new_thing");
}

TEST(GgufConfig, FamiliesReadTheirKeys) {
  auto granite = load(rewritten("granite", [](gguf_writer&) {}));
  ASSERT_TRUE(granite) << granite.error().to_string();
  EXPECT_NEAR(granite->attn_scale, 0.2, 1e-6);
  EXPECT_NEAR(granite->embed_scale, 0.5, 1e-6);
  EXPECT_NEAR(granite->residual_scale, 1.5, 1e-6);
  EXPECT_NEAR(granite->logit_scale, 2.0, 1e-6); // logits divided by granite.logit_scale 0.5
  EXPECT_EQ(granite->rope.layout, rope_layout::interleaved);
  auto mpt =
      load(rewritten("mpt", [](gguf_writer& w) { w.set_f32("mpt.attention.max_alibi_bias", 4); }));
  ASSERT_TRUE(mpt) << mpt.error().to_string();
  EXPECT_FLOAT_EQ(mpt->alibi_max_bias, 4.0f);
  EXPECT_FLOAT_EQ(mpt->clip_qkv, 1.5f);
  // granite without its required multipliers: llama.cpp's loader refuses it too
  auto g2 = open_gguf(test::fixture_path("gguf/granite.gguf"));
  ASSERT_TRUE(g2);
  gguf_writer w;
  w.copy_keys(**g2, "general.");
  w.copy_keys(**g2, "tokenizer.");
  for (const char* k : {"granite.block_count", "granite.context_length", "granite.embedding_length",
                        "granite.feed_forward_length", "granite.attention.head_count",
                        "granite.attention.head_count_kv"})
    w.set_u32(k, static_cast<uint32_t>((*g2)->get_int_or(k, 0)));
  const std::string path = "/tmp/troupe_gguf_granite_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(w.write(path));
  auto refused = load(path);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("attention.scale"), std::string::npos)
      << refused.error().message;
}

TEST(GgufConfig, LongRopeFactorsAndLlama3FrequencyTable) {
  auto phi = load(rewritten("phi3_longrope", [](gguf_writer&) {}));
  ASSERT_TRUE(phi) << phi.error().to_string();
  EXPECT_EQ(phi->rope.scaling, rope_scaling::longrope);
  EXPECT_EQ(phi->rope.long_factor.size(), 8u);
  EXPECT_TRUE(phi->rope.use_long); // context 256 > the original 8
  auto llama = load(rewritten("llama3", [](gguf_writer&) {}));
  ASSERT_TRUE(llama) << llama.error().to_string();
  EXPECT_EQ(llama->rope.scaling, rope_scaling::factors);
  ASSERT_EQ(llama->rope.short_factor.size(), 8u);
  EXPECT_DOUBLE_EQ(llama->rope.short_factor[0], 1.0);
  EXPECT_NEAR(llama->rope.short_factor[7], 8.0, 1e-6);
}

// attention.head_count_kv per layer (LFM2's converter writes 0 for its convolution layers):
// lfm2 takes the zeros as its convolution layers; a family that builds attention on every
// layer refuses a 0, naming the key and the layer; counts that differ by layer refuse too.
TEST(GgufConfig, KvHeadsPerLayer) {
  auto lfm2 = load(rewritten("lfm2", [](gguf_writer&) {}));
  ASSERT_TRUE(lfm2) << lfm2.error().to_string();
  EXPECT_EQ(lfm2->Hkv, 2);
  EXPECT_TRUE(lfm2->short_conv);
  EXPECT_EQ(lfm2->linear_layers, (std::vector<uint8_t>{1, 0, 1}));
  auto all = load(rewritten("lfm2", [](gguf_writer& w) {
    w.set_i32s("lfm2.attention.head_count_kv", {2, 2, 2});
  }));
  ASSERT_TRUE(all) << all.error().to_string();
  EXPECT_EQ(all->linear_layers, (std::vector<uint8_t>{0, 0, 0}));
  auto llama = load(rewritten("llama3", [](gguf_writer& w) {
    w.set_i32s("llama.attention.head_count_kv", {0, 2});
  }));
  ASSERT_FALSE(llama);
  EXPECT_NE(llama.error().message.find("head_count_kv is 0 on layer 0"), std::string::npos)
      << llama.error().message;
  auto differ = load(rewritten("lfm2", [](gguf_writer& w) {
    w.set_i32s("lfm2.attention.head_count_kv", {0, 2, 4});
  }));
  ASSERT_FALSE(differ);
  EXPECT_NE(differ.error().message.find("head_count_kv 2 and 4"), std::string::npos)
      << differ.error().message;
}

// attention.head_count per layer: Laguna's (its full layers fewer heads) loads as written; the
// same counts on every layer are one count; a family that builds one head count refuses
// counts that differ.
TEST(GgufConfig, QueryHeadsPerLayer) {
  auto laguna = load(rewritten("laguna", [](gguf_writer&) {}));
  ASSERT_TRUE(laguna) << laguna.error().to_string();
  EXPECT_EQ(laguna->heads_by_layer, (std::vector<int64_t>{4, 8, 8, 6}));
  EXPECT_EQ(laguna->H, 8);
  EXPECT_TRUE(laguna->attn_head_gate && laguna->attn_gate_softplus);
  auto same = load(rewritten("llama3", [](gguf_writer& w) {
    w.set_i32s("llama.attention.head_count", {4, 4});
  }));
  ASSERT_TRUE(same) << same.error().to_string();
  EXPECT_TRUE(same->heads_by_layer.empty());
  EXPECT_EQ(same->H, 4);
  auto differ = load(rewritten("llama3", [](gguf_writer& w) {
    w.set_i32s("llama.attention.head_count", {4, 2});
  }));
  ASSERT_FALSE(differ);
  EXPECT_NE(differ.error().message.find("head_count differing by layer"), std::string::npos)
      << differ.error().message;
}

// Granite 4.0 without Mamba layers, as the converter writes it (arch granite): the shared MLP's
// width as expert_shared_feed_forward_length is the FFN's, and the Mamba keys (which describe no
// layer) load; a file with a Mamba layer's tensors keeps them math keys that refuse.
TEST(GgufConfig, Granite4WithoutMambaLayers) {
  auto add_ssm = [](gguf_writer& w) {
    w.set_u32("granite.expert_shared_feed_forward_length", 96);
    for (const char* k :
         {"granite.ssm.conv_kernel", "granite.ssm.state_size", "granite.ssm.group_count",
          "granite.ssm.inner_size", "granite.ssm.time_step_rank"})
      w.set_u32(k, 4);
  };
  auto c = load(rewritten("granite", add_ssm));
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->F, 96);
  EXPECT_TRUE(c->ignored_keys.empty());
  auto plain = load(rewritten("granite", [](gguf_writer&) {}));
  ASSERT_TRUE(plain) << plain.error().to_string();
  EXPECT_EQ(plain->F, 128);
}

// The attention temperature as llama.cpp's deepseek2 loader reads it (mistral4 shares it):
// attention.temperature_scale from position attention.temperature_length on; the scale without
// the length is refused (llama.cpp would divide by a zero floor), and a family that does not
// read the keys refuses them (a different model).
TEST(GgufConfig, AttentionTemperature) {
  auto c = load(rewritten("mistral4_vl", [](gguf_writer&) {}));
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->family, "mistral4");
  EXPECT_EQ(c->attn_temp_floor, 16);
  EXPECT_FLOAT_EQ(static_cast<float>(c->attn_temp_scale), 0.5f);
  auto d = load(rewritten("deepseek_v3", [](gguf_writer& w) {
    w.set_f32("deepseek2.attention.temperature_scale", 0.1f);
    w.set_u32("deepseek2.attention.temperature_length", 8192);
  }));
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_EQ(d->attn_temp_floor, 8192);
  auto e = load(rewritten("mistral4_vl", [](gguf_writer& w) {
    w.set_u32("mistral4.attention.temperature_length", 0);
  }));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().to_string().find("temperature_length"), std::string::npos);
  auto q = load(rewritten(
      "qwen3", [](gguf_writer& w) { w.set_f32("qwen3.attention.temperature_scale", 0.1f); }));
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().to_string().find("temperature_scale"), std::string::npos);
}

// PhiMoE from GGUF: the sparsemixer with the published threshold; a LongRoPE file refuses (the
// converter writes its own attention factor in place of the model's short / long mscale, which no
// key carries)
TEST(GgufConfig, PhimoeLongRopeRefuses) {
  auto plain = load(rewritten("phimoe_plain", [](gguf_writer&) {}));
  ASSERT_TRUE(plain) << plain.error().to_string();
  EXPECT_TRUE(plain->router_sparsemixer);
  EXPECT_DOUBLE_EQ(plain->router_jitter, 0.01);
  EXPECT_EQ(plain->norm, norm_kind::layer);
  auto c = load(rewritten("phimoe_plain", [](gguf_writer& w) {
    for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"})
      w.add_tensor(t, dtype::f32, shape{8}, [](uint8_t* dst, size_t bytes) {
        for (size_t i = 0; i + 4 <= bytes; i += 4) {
          const float two = 2.0f;
          std::memcpy(dst + i, &two, 4);
        }
      });
  }));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, errc::unsupported);
  EXPECT_NE(c.error().message.find("mscale"), std::string::npos) << c.error().message;
}
