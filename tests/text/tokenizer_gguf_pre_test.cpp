// tokenizer_gguf_pre_test.cpp: the byte-level pre-tokenizers a GGUF names by tokenizer.ggml.pre
// (the file carries the name, not the regex) against Hugging Face tokenizers. Each fixture
// (tests/fixtures/make_pretok_fixtures.py) is a small BPE run under the family's published
// pre-tokenizer and its encodings of awkward texts (digit runs, CJK and kana, contractions in
// capitals, punctuation runs, whitespace); its vocabulary and merges are written here into a
// GGUF under the name, and Troupe's encodings must be HF's. The same vocabulary under each
// other name must encode some of them differently (the cases tell the splits apart). And Kimi
// K2's own form of the vocabulary (tiktoken.model beside a tokenizer_config.json that maps to
// tokenization_kimi.py) must encode as tiktoken itself does, special tokens included.
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "formats/checkpoint_writer.hpp"
#include "formats/gguf.hpp"
#include "text/tokenizer.hpp"

namespace troupe {
namespace {

std::unique_ptr<tokenizer> gguf_tokenizer(const nlohmann::json& fx, const std::string& pre) {
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", fx["tokens"].get<std::vector<std::string>>());
  w.set_strings("tokenizer.ggml.merges", fx["merges"].get<std::vector<std::string>>());
  w.set_i32s("tokenizer.ggml.token_type",
             std::vector<int32_t>(fx["tokens"].size(), 1)); // all normal
  const std::string path =
      ::testing::TempDir() + "/troupe_pretok_" + pre + "_" + std::to_string(::getpid()) + ".gguf";
  EXPECT_TRUE(w.write(path));
  auto g = open_gguf(path);
  EXPECT_TRUE(g) << (g ? "" : g.error().to_string());
  if (!g) return nullptr;
  auto tok = tokenizer::from_gguf(**g);
  ::unlink(path.c_str());
  EXPECT_TRUE(tok) << (tok ? "" : tok.error().to_string());
  return tok ? std::move(*tok) : nullptr;
}

class GgufPre : public ::testing::TestWithParam<std::string> {};

const std::vector<std::string> names = {"deepseek-v3", "gpt-4o", "tekken", "kimi-k2", "qwen35"};

TEST_P(GgufPre, EncodesAsHuggingFaceTokenizers) {
  const auto fx = test::load_json(test::fixture_path("pretok/" + GetParam() + ".json"));
  ASSERT_EQ(fx["pre"], GetParam());
  auto tok = gguf_tokenizer(fx, GetParam());
  ASSERT_TRUE(tok);
  for (const auto& c : fx["cases"]) {
    const std::string text = c["text"];
    auto ids = tok->encode(text, false, false);
    ASSERT_TRUE(ids) << text;
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << "'" << text << "'";
    EXPECT_EQ(tok->decode(*ids), text);
  }
  // the vocabulary's merges cross every boundary: the cases tell each split from the others
  for (const std::string& other : names) {
    if (other == GetParam()) continue;
    auto o = gguf_tokenizer(fx, other);
    ASSERT_TRUE(o);
    int differ = 0;
    for (const auto& c : fx["cases"])
      differ += *o->encode(c["text"].get<std::string>(), false, false) !=
                *tok->encode(c["text"].get<std::string>(), false, false);
    EXPECT_GE(differ, 1) << "the cases do not tell " << GetParam() << " from " << other;
  }
}

INSTANTIATE_TEST_SUITE_P(Names, GgufPre,
                         ::testing::Values("deepseek-v3", "gpt-4o", "tekken", "kimi-k2", "qwen35"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// Qwen 3.5's split is Qwen2's but for combining marks: the same encodings where a text has
// none, others where it does (Thai, Devanagari, Vietnamese's stacked accents)
TEST(GgufPre, Qwen35DiffersFromQwen2OnlyWhereMarksAre) {
  const auto fx = test::load_json(test::fixture_path("pretok/qwen35.json"));
  auto q35 = gguf_tokenizer(fx, "qwen35");
  auto q2 = gguf_tokenizer(fx, "qwen2");
  ASSERT_TRUE(q35 && q2);
  int differ = 0;
  for (const auto& c : fx["cases"]) {
    const std::string text = c["text"];
    const bool marks = text.find("สวัสดี") != std::string::npos ||
                       text.find("नमस्ते") != std::string::npos ||
                       text.find("Tiếng") != std::string::npos;
    const bool same = *q35->encode(text, false, false) == *q2->encode(text, false, false);
    if (!marks) {
      EXPECT_TRUE(same) << text;
    }
    differ += !same;
  }
  EXPECT_GE(differ, 2);
}

// StableLM 2's name splits as Qwen2's
TEST(GgufPre, StableLm2IsQwen2s) {
  const auto fx = test::load_json(test::fixture_path("pretok/qwen35.json"));
  auto q2 = gguf_tokenizer(fx, "qwen2");
  auto slm = gguf_tokenizer(fx, "stablelm2");
  ASSERT_TRUE(q2 && slm);
  for (const auto& c : fx["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(*slm->encode(text, false, false), *q2->encode(text, false, false)) << text;
  }
}

// Hunyuan's names split as llama.cpp reads them: hunyuan (A13B) as Qwen2, hunyuan-dense as
// DeepSeek-V3 (a vocabulary whose pieces the patterns cut differently tells them apart)
TEST(GgufPre, HunyuanNamesSplitAsLlamaCppReadsThem) {
  const auto fx = test::load_json(test::fixture_path("pretok/deepseek-v3.json"));
  auto q2 = gguf_tokenizer(fx, "qwen2"), ds = gguf_tokenizer(fx, "deepseek-v3");
  auto moe = gguf_tokenizer(fx, "hunyuan"), dense = gguf_tokenizer(fx, "hunyuan-dense");
  ASSERT_TRUE(q2 && ds && moe && dense);
  int differ = 0;
  for (const auto& c : fx["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(*moe->encode(text, false, false), *q2->encode(text, false, false)) << text;
    EXPECT_EQ(*dense->encode(text, false, false), *ds->encode(text, false, false)) << text;
    differ += *ds->encode(text, false, false) != *q2->encode(text, false, false);
  }
  EXPECT_GE(differ, 1);
}

// GLM-4's names split as Llama 3's pre-tokenizer does (one regex): same encodings
TEST(GgufPre, GlmNamesAreLlama3s) {
  const auto fx = test::load_json(test::fixture_path("pretok/gpt-4o.json"));
  auto llama3 = gguf_tokenizer(fx, "llama3");
  for (const char* name : {"glm4", "chatglm-bpe", "lfm2"}) { // (lfm2 too, as llama.cpp reads it)
    auto glm = gguf_tokenizer(fx, name);
    ASSERT_TRUE(llama3 && glm) << name;
    for (const auto& c : fx["cases"]) {
      const std::string text = c["text"];
      EXPECT_EQ(*glm->encode(text, false, false), *llama3->encode(text, false, false)) << text;
    }
  }
}

// Kimi K2's published form: tiktoken.model and a tokenizer_config.json that maps to
// tokenization_kimi.py; against tiktoken itself, special tokens included
TEST(Tiktoken, KimiDirectoryEncodesAsTiktoken) {
  const std::string dir = test::fixture_path("pretok/kimi_tiktoken");
  const auto fx = test::load_json(dir + "/cases.json");
  auto tok = tokenizer::from_hf_dir(dir);
  ASSERT_TRUE(tok) << tok.error().to_string();
  EXPECT_EQ((*tok)->vocab_size(), fx["vocab_size"].get<int32_t>());
  EXPECT_EQ((*tok)->decode(std::vector<int32_t>{(*tok)->bos_id()}), "[BOS]");
  for (const auto& c : fx["cases"]) {
    const std::string text = c["text"];
    auto ids = (*tok)->encode(text, false, true);
    ASSERT_TRUE(ids) << text;
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << "'" << text << "'";
    EXPECT_EQ((*tok)->decode(*ids), text);
  }
  // a corrupt line is a clear error, not a crash
  auto broken = tokenizer::from_tiktoken("IQ== 0\n!!! 1\n", "{}", "kimi-k2", "t.model");
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find("line 2"), std::string::npos) << broken.error().message;
}

TEST(GgufPre, AnUnknownNameIsRefusedByName) {
  const auto fx = test::load_json(test::fixture_path("pretok/deepseek-v3.json"));
  gguf_writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "frobnicate");
  w.set_strings("tokenizer.ggml.tokens", fx["tokens"].get<std::vector<std::string>>());
  w.set_strings("tokenizer.ggml.merges", fx["merges"].get<std::vector<std::string>>());
  const std::string path =
      ::testing::TempDir() + "/troupe_pretok_unknown_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(w.write(path));
  auto g = open_gguf(path);
  ASSERT_TRUE(g);
  auto tok = tokenizer::from_gguf(**g);
  ::unlink(path.c_str());
  ASSERT_FALSE(tok);
  EXPECT_NE(tok.error().message.find("frobnicate"), std::string::npos) << tok.error().message;
}

} // namespace
} // namespace troupe
