// tool_formats.hpp: the tool-call formats published chat templates teach, as data: the markers
// that open and close a reply's block of calls, the markers inside it, and the reader that
// turns a block's body into calls (false when the body is not calls: the block is content).
// tool_call_parser (tool_calls.cpp) streams a reply through a format's markers; the readers
// know each format's body. Internal to text/. Tests: tests/text/tool_calls_test.cpp (each
// format on its own, and every published template's rendered call read back).
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "text/tool_calls.hpp"

namespace troupe::tool_formats {

using reader = bool (*)(std::string_view body, std::vector<tool_call>& out);

struct spec {
  tool_format format;
  std::string_view name;
  std::string_view open, close; // a block of calls; close empty: it runs to the reply's end
  reader read; // the body (between open and close) as calls, appended to out (which the
               // caller drops when it returns false: the body is not calls)
  std::array<std::string_view, 8> inner{}; // markers inside a block (tokenizers may make them
                                           // special tokens, which decoding must keep)
};

/// The spec of a format read as blocks; nullptr for none and llama3 (whose calls are the
/// whole reply, with no marker to open them).
const spec* find(tool_format f);
/// Every format's spec, in the order detect_tool_format tries them.
std::vector<const spec*> all();

/// Python calls, [name(key=literal, ...), ...] (LFM2; tool_pythonic.cpp).
bool read_pythonic(std::string_view body, std::vector<tool_call>& out);

// Shared pieces of the readers (tool_calls.cpp's JSON readers use them too).
std::string_view trim(std::string_view s);
bool blank(std::string_view s);
/// A value as the model wrote it between its tags: one newline on each side is layout.
std::string bare(std::string_view v);

} // namespace troupe::tool_formats
