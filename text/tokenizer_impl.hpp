// tokenizer_impl.hpp: the data behind a tokenizer (tokenizer.hpp), shared by its loaders
// (tokenizer_hf.cpp, tokenizer_gguf.cpp) and the encode / decode pipeline (tokenizer.cpp,
// bpe.cpp). A pipeline is normalisers, pre-tokenizers, a merge model, and decoders, each a
// list of plain steps as in Hugging Face tokenizer.json. Internal to text/.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.hpp"
#include "text/unicode.hpp"

namespace troupe {

class regex; // PCRE2 pattern, tokenizer.cpp

struct normalizer_step {
  enum kind_t { prepend, replace, nfc, nfd, nfkc, nfkd, lowercase, strip } kind;
  std::string a, b; // prepend: a; replace: a -> b
  bool left = true, right = true;
};

enum class split_behavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };

struct pretok_step {
  enum kind_t { metaspace, byte_level, split, digits } kind;
  // metaspace
  std::string replacement = "\xe2\x96\x81"; // U+2581
  enum class prepend_t { always, first, never } prepend = prepend_t::always;
  bool split_words = true;
  // byte_level
  bool add_prefix_space = false;
  bool use_regex = true;
  // split
  std::shared_ptr<regex> pattern;
  split_behavior behavior = split_behavior::isolated;
  bool invert = false;
  // digits
  bool individual_digits = false;
};

struct decoder_step {
  enum kind_t { replace, byte_fallback, fuse, strip, byte_level, metaspace } kind;
  std::string a, b; // replace a -> b; strip content a
  int start = 0, stop = 0;
  bool prepend_first = true; // metaspace: drop the first token's leading space
};

struct added_token {
  std::string content;
  int32_t id;
  bool special;
  bool lstrip = false, rstrip = false;
  bool normalized = false;
};

struct tokenizer_impl {
  enum class model_t { bpe, spm } model = model_t::bpe;
  bool byte_level = false;    // pieces are GPT-2 byte-mapped text
  bool byte_fallback = false; // unknown characters become <0xXX> tokens
  bool fuse_unk = false;
  bool ignore_merges = false; // whole word in vocab wins (Llama 3)
  int32_t unk_id = -1;
  int32_t bos = -1, eos = -1;
  bool add_bos = false, add_eos = false;
  std::vector<int32_t> prefix_ids, suffix_ids; // template tokens added with add_special

  std::vector<std::string> pieces;              // id -> text
  std::unordered_map<std::string, int32_t> ids; // text -> id
  std::vector<float> scores;                    // spm: piece scores
  std::vector<uint8_t> mergeable;               // spm: 1 when text may merge into it
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges; // (l, r) -> (rank, merged)
  std::vector<int32_t> byte_ids;                                    // byte b -> <0xXX> id, or -1
  std::vector<uint8_t> special;                                     // id -> control / special
  std::vector<added_token> added; // matched in the text before the model

  std::vector<normalizer_step> normalizers;
  std::vector<pretok_step> pretokenizers;
  std::vector<decoder_step> decoders;
  std::string chat_template;
  std::string kind_name;

  void index_pieces();
  /// Model step on one pre-tokenized word (already normalised / byte-mapped).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
};

/// tokenizer_config.json's bos / eos (by name), add_bos_token / add_eos_token and chat template
/// onto `t` (tokenizer_hf.cpp; the tiktoken reader uses it too).
status apply_tokenizer_config(tokenizer_impl& t, const std::string& config_text,
                              const std::string& where);

/// Pre-tokenizer regexes by name (GGUF tokenizer.ggml.pre), or empty when unknown.
std::string pretokenizer_regex(std::string_view name);
/// The Splits a GGUF's tokenizer.ggml.pre names, in order (one regex for most; empty: unknown).
std::vector<std::string> pretokenizer_regexes(std::string_view name);
/// A byte-level BPE's pre-tokenizers and decoder for the split named `pre` (GGUF "gpt2"
/// vocabularies, tiktoken files): each Split isolating its matches in sequence, then the byte
/// mapping; unsupported, naming `pre`, when the name is unknown.
status add_byte_level_split(tokenizer_impl& t, std::string_view pre, const std::string& where);
std::shared_ptr<regex> compile_regex(const std::string& pattern, std::string& error);

} // namespace troupe
