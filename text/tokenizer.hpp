// tokenizer.hpp: text <-> token ids for the checkpoints Troupe loads:
//  - SentencePiece-style BPE with byte fallback, from a GGUF "llama" vocabulary (merges by
//    piece score, as llama.cpp and sentencepiece do) or from an HF tokenizer.json (BPE
//    merges by rank, Metaspace / Prepend+Replace normalisation, byte_fallback);
//  - byte-level BPE from tokenizer.json or a GGUF "gpt2" vocabulary (GPT-2, Llama 3, Qwen),
//    with its pre-tokenizer regex run by PCRE2 (Unicode classes).
// Added / special tokens are matched in the text first when `parse_special` is set (Hugging
// Face always does this; llama.cpp only when asked). BOS / EOS come from the checkpoint.
// decode() returns valid UTF-8 (invalid bytes become U+FFFD); stream_decoder emits text as
// ids arrive without ever splitting a UTF-8 character. Immutable after loading: thread-safe.
// Tests: tests/text/tokenizer_test.cpp (fixtures from HF tokenizers / sentencepiece)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace troupe {

class gguf_file;
struct tokenizer_impl;

class tokenizer {
 public:
  ~tokenizer();
  tokenizer(tokenizer&&) noexcept;

  /// From the text of tokenizer.json (and tokenizer_config.json, may be empty).
  static expected<std::unique_ptr<tokenizer>> from_hf_json(const std::string& tokenizer_json,
                                                           const std::string& config_json,
                                                           const std::string& where);
  /// From an HF model directory (tokenizer.json, tokenizer_config.json; or Kimi's
  /// tiktoken.model, whose tokenizer_config.json maps to tokenization_kimi.py).
  static expected<std::unique_ptr<tokenizer>> from_hf_dir(const std::string& dir);
  /// From a tiktoken vocabulary (tiktoken.model's text) and tokenizer_config.json, split by the
  /// pre-tokenizer named `pre` (the regex lives in the model's Python tokenizer, not the file).
  static expected<std::unique_ptr<tokenizer>> from_tiktoken(const std::string& model_text,
                                                            const std::string& config_json,
                                                            std::string_view pre,
                                                            const std::string& where);
  /// From GGUF metadata (tokenizer.ggml.*).
  static expected<std::unique_ptr<tokenizer>> from_gguf(const gguf_file& g);

  /// Token ids for `text`: invalid_argument when the text is not valid UTF-8.
  /// add_special: BOS (and any template the checkpoint asks for); parse_special: match
  /// added / special token text in the input.
  expected<std::vector<int32_t>> encode(std::string_view text, bool add_special = true,
                                        bool parse_special = true) const;
  /// Text of `ids` (valid UTF-8); special tokens are dropped when skip_special.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  /// Raw bytes of the decoded ids, before repair (may end inside a character).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special = false) const;
  /// The vocabulary entry for `id` ("▁Once", "<s>"); empty when out of range.
  std::string_view piece(int32_t id) const;
  /// Id of an exact vocabulary entry, or -1.
  int32_t find(std::string_view piece) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool adds_bos() const;
  bool is_special(int32_t id) const;
  std::string_view kind() const; // "spm", "bpe", "byte-level"
  /// chat_template from tokenizer_config.json or GGUF tokenizer.chat_template; may be empty.
  const std::string& chat_template() const;

 private:
  explicit tokenizer(std::unique_ptr<tokenizer_impl> impl);
  std::unique_ptr<tokenizer_impl> impl_;
};

/// Turns ids into text incrementally: push() returns the new complete characters (never
/// half a UTF-8 sequence); finish() returns whatever is left (repaired). Each push decodes
/// only a short window (prefix and read offsets, as vLLM's and HF's detokenizers do): the
/// text of ids[prefix, read) was already returned, ids[prefix, end) is decoded again and the
/// difference is new. Decoding both from the same first id keeps the decoders' first-token
/// rules (a stripped leading space) out of the difference. Cost per id: O(window), not
/// O(sequence).
class stream_decoder {
 public:
  explicit stream_decoder(const tokenizer& tok, bool skip_special = true)
      : tok_(tok)
      , skip_special_(skip_special) {}
  /// Starts after `context` (the prompt) without emitting it, so the first generated word
  /// keeps its leading space. Only the context's last few ids are kept.
  void prime(std::span<const int32_t> context);
  std::string push(int32_t id);
  std::string finish();
  /// Ids pushed so far (the context not included).
  int64_t pushed() const { return pushed_; }
  /// Special tokens whose text is kept although special tokens are skipped (a tool-call
  /// format's markers); call before the first push.
  void keep_special(std::vector<int32_t> ids);
  /// Special tokens' text is part of the output (call before the first push).
  void show_special() { skip_special_ = false; }

 private:
  std::string pending() const; // bytes of ids_[read_, end) not yet returned
  std::string bytes(std::span<const int32_t> ids) const;
  const tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> keep_; // sorted
  std::vector<int32_t> ids_;  // the window: a little context, then the ids not yet settled
  size_t prefix_ = 0, read_ = 0;
  int64_t pushed_ = 0;
};

} // namespace troupe
