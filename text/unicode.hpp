// unicode.hpp: UTF-8 helpers for the tokenizers and the streaming decoder: validation,
// code point iteration, GPT-2's byte <-> printable-character map used by byte-level BPE,
// the length of an incomplete UTF-8 tail, lossy repair (invalid bytes -> U+FFFD), and Unicode
// normalisation forms (through utf8proc). Pure functions. Tests: tests/text/tokenizer_test.cpp
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace troupe::unicode {

/// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool valid(std::string_view s);
/// Byte offset of the first invalid sequence, or npos.
size_t first_invalid(std::string_view s);
/// Length of the UTF-8 sequence starting with lead byte `c` (1 for invalid leads).
int seq_len(unsigned char c);
/// Splits valid UTF-8 into its characters (each a string_view into `s`).
std::vector<std::string_view> chars(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);
/// Number of trailing bytes that start a UTF-8 sequence not yet complete (0..3).
size_t incomplete_tail(std::string_view s);
/// Replaces every invalid byte with U+FFFD.
std::string repair(std::string_view s);

/// GPT-2 byte-level map: byte -> a printable code point, as UTF-8 text; and back.
const std::string& byte_to_char(uint8_t b);
/// Maps a byte-level token's text back to bytes; false when a character is not in the map.
bool chars_to_bytes(std::string_view text, std::string& out);

enum class nf { nfc, nfd, nfkc, nfkd };
expected<std::string> normalize(std::string_view s, nf form);
std::string lowercase(std::string_view s);

} // namespace troupe::unicode
