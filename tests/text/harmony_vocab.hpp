// harmony_vocab.hpp: a vocabulary with harmony's special tokens for tests: the byte-level BPE
// fixture (tests/fixtures/tokenizers/gpt2_style) with <|start|> .. <|constrain|> added as
// special tokens at ids 641-647, after its own, as o200k_harmony adds them after o200k's.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "text/tokenizer.hpp"

namespace troupe::test {

inline std::unique_ptr<troupe::tokenizer> harmony_vocab() {
  nlohmann::json t = load_json(fixture_path("tokenizers/gpt2_style/tokenizer.json"));
  int id = 641;
  for (const char* s : {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>",
                        "<|call|>", "<|constrain|>"})
    t["added_tokens"].push_back({{"id", id++},
                                 {"content", s},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  auto tok = troupe::tokenizer::from_hf_json(t.dump(), "", "harmony test vocab");
  EXPECT_TRUE(tok) << tok.error().message;
  return tok ? std::move(*tok) : nullptr;
}

} // namespace troupe::test
