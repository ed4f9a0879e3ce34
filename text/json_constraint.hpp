// json_constraint.hpp: a response_format as a token_constraint (core/token_constraint.hpp):
// the JSON grammar (json_grammar.hpp) driven by whole tokens. token_vocab holds, once per
// tokenizer, every ordinary token's bytes as they appear in a longer text (a SentencePiece
// token's leading space kept), a trie of them, and the tokens that are free string content
// (printable, no quote or backslash, whole UTF-8 characters). The next tokens are found by
// walking the trie with a copy of the grammar per byte, a branch dropped at its first refused
// byte; inside a free string the free tokens are allowed at once and only the others walked.
// The grammar's state is a set of readings (json_readings: anyOf branches that start alike
// read side by side): the mask is the union of each reading's walk, and a walk follows the
// readings a byte forks into (only for schemas that have such unions). Special tokens are
// never allowed; EOS only once the document is complete.
// Tests: tests/text/json_grammar_test.cpp
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"
#include "core/token_constraint.hpp"
#include "text/json_grammar.hpp"
#include "text/json_schema.hpp"

namespace troupe {

class tokenizer;

class token_vocab {
 public:
  static std::shared_ptr<const token_vocab> from(const tokenizer& tok);
  /// From the bytes of each id (empty: never allowed), for tests.
  static std::shared_ptr<const token_vocab> from_bytes(std::vector<std::string> bytes);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  std::string_view bytes(int32_t id) const {
    return id >= 0 && id < size() ? std::string_view(bytes_[static_cast<size_t>(id)])
                                  : std::string_view();
  }

  struct trie {
    // node i's children are edges [first[i], first[i + 1]), its tokens toks[tok_first[i] ..
    // tok_first[i + 1]); node 0 is the root
    std::vector<int32_t> first, tok_first, toks;
    std::vector<uint8_t> edge_byte;
    std::vector<int32_t> edge_child;
  };
  const trie& all() const { return all_; }
  const trie& not_free() const { return not_free_; }
  const std::vector<uint64_t>& free_string() const { return free_; }

 private:
  std::vector<std::string> bytes_;
  trie all_, not_free_;
  std::vector<uint64_t> free_;
  void build();
};

class json_token_constraint final : public token_constraint {
 public:
  json_token_constraint(std::shared_ptr<const json_schema> schema,
                        std::shared_ptr<const token_vocab> vocab, std::vector<int32_t> eos);
  std::unique_ptr<token_constraint> clone() const override;
  bool advance(int32_t token) override;
  void allowed(std::vector<uint64_t>& bits) const override;
  bool done() const override { return g_.done(); }

 private:
  std::shared_ptr<const json_schema> schema_;
  std::shared_ptr<const token_vocab> vocab_;
  std::vector<int32_t> eos_;
  json_readings g_;
  mutable std::vector<json_grammar> forks_; // the mask walk's scratch (empty between calls)
};

/// The constraint of a response_format's text (compile_response_format's errors).
expected<std::shared_ptr<const token_constraint>>
response_format_constraint(std::string_view response_format,
                           std::shared_ptr<const token_vocab> vocab, std::vector<int32_t> eos);

} // namespace troupe
