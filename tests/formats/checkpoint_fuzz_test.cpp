// checkpoint_fuzz_test.cpp: mutation testing of everything that reads checkpoint bytes. Each
// round takes a real small model (stories260K as GGUF, as safetensors, and its
// tokenizer.json / config.json), corrupts it (bit flips and random bytes in the header,
// 64-bit fields set to extreme values, truncation, inserted or deleted bytes), then runs
// the readers, the config and tokenizer builders, the shape checks, and touches every byte
// of every tensor that claims to exist. Built with AddressSanitizer and UBSan (see
// CMakeLists.txt): a crash, an out-of-bounds read or a hang fails the test. A loader may
// accept or reject a mutant; it may not misbehave. Rounds: TROUPE_FUZZ_ROUNDS (default 10000).
#include <chrono>
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/model_config.hpp"
#include "arch/model_source.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"
#include "text/tokenizer.hpp"

using namespace troupe;

namespace {

int rounds() {
  const char* env = std::getenv("TROUPE_FUZZ_ROUNDS");
  return env ? std::max(1, std::atoi(env)) : 10000;
}

std::vector<uint8_t> mutate(const std::vector<uint8_t>& in, std::mt19937_64& rng, size_t hot) {
  std::vector<uint8_t> b = in;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !b.empty(); ++e) {
    switch (rng() % 6) {
    case 0:
      b[pick(std::min(hot, b.size()))] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1:
      b[pick(std::min(hot, b.size()))] = static_cast<uint8_t>(rng());
      break;
    case 2: { // an extreme 64-bit value at a random aligned-ish spot of the header
      static const uint64_t extremes[] = {0,
                                          1,
                                          0x7fffffffffffffffull,
                                          0xffffffffffffffffull,
                                          1ull << 32,
                                          0x80000000ull,
                                          0xfffffffeull};
      const size_t at = pick(std::min(hot, b.size()));
      const uint64_t v = extremes[rng() % 7];
      for (size_t k = 0; k < 8 && at + k < b.size(); ++k)
        b[at + k] = static_cast<uint8_t>(v >> (8 * k));
      break;
    }
    case 3:
      b.resize(pick(b.size()));
      break;
    case 4:
      b.insert(b.begin() + pick(std::min(hot, b.size())), 1 + rng() % 16,
               static_cast<uint8_t>(rng()));
      break;
    case 5: {
      const size_t at = pick(std::min(hot, b.size()));
      b.erase(b.begin() + at, b.begin() + std::min(b.size(), at + 1 + rng() % 16));
      break;
    }
    }
  }
  return b;
}

// Reads every byte of every tensor the index claims, so ASan sees any bad pointer.
uint64_t touch(const tensor_index& idx) {
  uint64_t sum = 0;
  for (const auto& n : idx.names()) {
    const tensor_info* t = idx.find(n);
    for (uint64_t i = 0; i < t->nbytes; i += 61) sum += t->data[i];
    if (t->nbytes) sum += t->data[t->nbytes - 1];
  }
  return sum;
}

} // namespace

TEST(CheckpointFuzz, GgufMutants) {
  const auto good = test::read_file(test::model_path("stories260K/stories260K.gguf"));
  const std::vector<uint8_t> bytes(good.begin(), good.end());
  std::mt19937_64 rng(42);
  int accepted = 0;
  const int n = rounds() / 2;
  for (int i = 0; i < n; ++i) {
    auto g = parse_gguf(mapped_file::from_memory(mutate(bytes, rng, 12000), "mutant.gguf"));
    if (!g) {
      ASSERT_FALSE(g.error().message.empty());
      continue;
    }
    touch((*g)->tensors);
    auto cfg = config_from_gguf(**g);
    auto tok = tokenizer::from_gguf(**g);
    if (tok) (void)(*tok)->encode("Once upon a time, a mutant.", true, true);
    if (cfg) {
      model_source m;
      m.path = "mutant.gguf";
      m.format = "gguf";
      m.config = *cfg;
      m.tensors = std::shared_ptr<const tensor_index>(std::shared_ptr<void>(), &(*g)->tensors);
      (void)check_shapes(m);
    }
    ++accepted;
  }
  RecordProperty("accepted", accepted);
}

// The architecture families' GGUF readers (tests/fixtures/gguf/: fused qkv, rope factor
// tensors, window patterns, multipliers ...), mutated where their metadata and tensor infos
// live. Their family files are the ones CMakeLists.txt compiles with the sanitizers
// (TROUPE_FUZZ_FAMILIES): a fixture of another family added here needs its file named there.
TEST(CheckpointFuzz, GgufFamilyMutants) {
  const char* names[] = {"phi3_longrope", "llama3",    "gemma2",        "gemma3",    "qwen3",
                         "olmo",          "olmo2",     "granite",       "phi2",      "gpt2",
                         "gpt_neox",      "stablelm",  "stablelm_qkln", "cohere",    "falcon",
                         "bloom",         "mpt",       "mixtral",       "qwen2_moe", "qwen3_moe",
                         "deepseek_v3",   "deci_ultra"};
  std::mt19937_64 rng(99);
  const int n = std::max(1, rounds() / 32);
  for (const char* name : names) {
    const auto good = test::read_file(test::fixture_path(std::string("gguf/") + name + ".gguf"));
    const std::vector<uint8_t> bytes(good.begin(), good.end());
    auto clean = parse_gguf(mapped_file::from_memory(bytes, "good.gguf"));
    ASSERT_TRUE(clean) << name;
    const size_t header = static_cast<size_t>((*clean)->data_offset);
    for (int i = 0; i < n; ++i) {
      auto g = parse_gguf(mapped_file::from_memory(mutate(bytes, rng, header), "mutant.gguf"));
      if (!g) {
        ASSERT_FALSE(g.error().message.empty());
        continue;
      }
      touch((*g)->tensors);
      auto cfg = config_from_gguf(**g);
      if (!cfg) {
        ASSERT_FALSE(cfg.error().message.empty());
        continue;
      }
      model_source m;
      m.path = "mutant.gguf";
      m.format = "gguf";
      m.config = *cfg;
      m.tensors = std::shared_ptr<const tensor_index>(std::shared_ptr<void>(), &(*g)->tensors);
      (void)check_shapes(m);
    }
  }
}

TEST(CheckpointFuzz, SafetensorsMutants) {
  const auto good = test::read_file(test::model_path("stories260K-hf/model.safetensors"));
  const std::vector<uint8_t> bytes(good.begin(), good.end());
  std::mt19937_64 rng(7);
  const int n = rounds() * 3 / 10;
  for (int i = 0; i < n; ++i) {
    tensor_index idx;
    auto r = parse_safetensors(
        mapped_file::from_memory(mutate(bytes, rng, 6000), "mutant.safetensors"), idx);
    if (r) touch(idx);
  }
}

TEST(CheckpointFuzz, TokenizerAndConfigJsonMutants) {
  const std::string tj = test::read_file(test::model_path("stories260K-hf/tokenizer.json"));
  const std::string cj = test::read_file(test::model_path("stories260K-hf/config.json"));
  const std::string qj = test::read_file(test::fixture_path("models/qwen2/tokenizer.json"));
  std::mt19937_64 rng(3);
  const int n = rounds() / 5;
  for (int i = 0; i < n; ++i) {
    const std::string& base = i % 2 ? tj : qj;
    auto m = mutate(std::vector<uint8_t>(base.begin(), base.end()), rng, base.size());
    auto tok =
        tokenizer::from_hf_json(std::string(m.begin(), m.end()), "", "mutant/tokenizer.json");
    if (tok) {
      auto ids = (*tok)->encode("Hello, mutant world! 🤖 12345", true, true);
      if (ids) (void)(*tok)->decode(*ids);
    }
    auto c = mutate(std::vector<uint8_t>(cj.begin(), cj.end()), rng, cj.size());
    (void)config_from_hf_json(std::string(c.begin(), c.end()), "", "mutant/config.json");
  }
}
