// tokenizer_export.hpp: writes a GGUF SentencePiece ("llama") vocabulary as a Hugging Face
// tokenizer.json: BPE with byte_fallback, merges derived from the piece scores (every split
// of a piece into two pieces, ordered by the merged piece's score), the legacy Llama
// normaliser (prepend U+2581, spaces to U+2581) and the matching decoder, BOS added by a
// TemplateProcessing post-processor. Used by `troupe synth --format hf`.
// Tests: tests/formats/checkpoint_test.cpp
#pragma once

#include <string>

#include "core/expected.hpp"

namespace troupe {

class gguf_file;

/// tokenizer.json text for the SPM vocabulary in `g`.
expected<std::string> spm_to_tokenizer_json(const gguf_file& g);
/// tokenizer_config.json text naming BOS / EOS and add_bos_token.
expected<std::string> spm_tokenizer_config(const gguf_file& g);

} // namespace troupe
