// json_grammar.hpp: a pushdown automaton over bytes that accepts exactly the JSON documents a
// json_schema allows (json_schema.hpp): feed() takes the next byte and says whether it may
// come; done() says the document is complete. One state is a few dozen bytes plus a frame per
// open object or array (at most 64 deep, as deep as a schema may nest), cheap to copy, which is
// what the token mask's walk over the vocabulary does at every byte (json_constraint.hpp).
// Whitespace between tokens is one space or a newline and an indent of at most 20 spaces or
// tabs (as llama.cpp's JSON grammar: a model cannot pad for ever); numbers have at most 24
// digits and two of exponent (a double holds them); strings must be valid UTF-8 with JSON's
// escapes; object keys are the schema's (each once) plus, where additionalProperties allows,
// any string; an object closes only when its required keys are there. anyOf branches that
// start with the same character are all read on (feed with a fork list; json_readings keeps
// the set of readings).
// Tests: tests/text/json_grammar_test.cpp
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/json_schema.hpp"

namespace troupe {

/// What a UTF-8 lead byte promises: the continuation bytes after it (0: it starts no
/// well-formed character) and the range of the first of them (after E0, ED, F0 and F4 it is
/// narrower: no overlong forms, surrogates or code points past U+10FFFF).
struct utf8_lead {
  int more;
  uint8_t lo, hi;
};
constexpr utf8_lead utf8_lead_of(uint8_t c) {
  const int more = c >= 0xc2 && c <= 0xdf   ? 1
                   : c >= 0xe0 && c <= 0xef ? 2
                   : c >= 0xf0 && c <= 0xf4 ? 3
                                            : 0;
  return {more,
          static_cast<uint8_t>(c == 0xe0   ? 0xa0
                               : c == 0xf0 ? 0x90
                                           : 0x80),
          static_cast<uint8_t>(c == 0xed   ? 0x9f
                               : c == 0xf4 ? 0x8f
                                           : 0xbf)};
}

class json_grammar {
 public:
  static constexpr int max_depth = 64; // the schema compiler's nesting limit too
  static constexpr int max_ws = 20;

  explicit json_grammar(const json_schema& s);
  // copies only the open frames (the mask's walk copies a state at every byte)
  json_grammar(const json_grammar& o);
  json_grammar& operator=(const json_grammar& o);

  /// Takes byte c if the grammar allows it here (false: refused; the state is then unchanged
  /// only up to the byte, so callers that go on keep a copy).
  bool feed(uint8_t c);
  bool feed(std::string_view bytes) {
    for (char c : bytes)
      if (!feed(static_cast<uint8_t>(c))) return false;
    return true;
  }
  /// The same, and where anyOf branches that start alike meet c (two objects, an integer and a
  /// number, ...), each state that reads c on another of them goes to `forks` (this one reads
  /// the first).
  bool feed(uint8_t c, std::vector<json_grammar>* forks);
  /// Where feed(c) puts the forks from now on (the mask's walk sets it on each copy it feeds,
  /// which saves feed(c, forks)'s bookkeeping at every byte; forks made keep the pointer).
  void fork_into(std::vector<json_grammar>* forks) { forks_ = forks; }
  /// Whether the two states take the same bytes from here on (what each mode reads on is
  /// equal; what earlier values left behind is not compared): such readings are one.
  bool same_future(const json_grammar& o) const;
  /// The document is complete (a closed root object or array).
  bool done() const { return m_ == mode::done; }
  /// Inside a string whose content is free (no length bounds, no escape or character half
  /// read): any run of printable, non-quote, non-backslash, whole UTF-8 characters may come.
  /// In an object key where any string is allowed, too (the schema's keys only narrow which
  /// rule the value gets, not which bytes may come).
  bool in_free_string() const {
    if (esc_ != 0 || utf8_ != 0 || low_due_) return false;
    if (m_ == mode::key) return free_key_;
    return m_ == mode::string && s_->nodes[static_cast<size_t>(node_)].min_length == 0 &&
           s_->nodes[static_cast<size_t>(node_)].max_length == INT32_MAX;
  }

 private:
  enum class mode : uint8_t {
    value,      // a value of node_ comes (whitespace first)
    string,     // inside a string value
    key,        // inside an object key
    number,     // inside a number
    literal,    // matching one of the candidates (enum, const, true / false / null)
    after,      // a value just ended
    key_or_end, // after '{'
    key_next,   // after ','
    colon,
    comma_or_end,      // after an object's value
    item_or_end,       // after '['
    item_comma_or_end, // after an array's item
    done
  };
  struct frame {
    int32_t node;
    bool object;
    uint64_t used; // object: keys present
    int32_t count; // array: items so far
    int32_t value; // object: the rule of the value after the key just read
    int32_t keyh0; // object: its other keys' hashes start here in keyh_
  };

  bool start_value(uint8_t c);
  bool start_alike(uint8_t c, int cls);
  bool string_byte(uint8_t c, bool& closed);
  bool literal_byte(uint8_t c, bool& reprocess);
  bool number_byte(uint8_t c, bool& reprocess);
  bool key_byte(uint8_t c);
  void close_container();
  void copy_from(const json_grammar& o);
  bool space(uint8_t c);
  const json_node& node(int32_t i) const { return s_->nodes[static_cast<size_t>(i)]; }

  const json_schema* s_;
  std::vector<json_grammar>* forks_ = nullptr; // where forks go (beside s_: a copy of a state
                                               // touches only its first lines and open frames)
  mode m_ = mode::value;
  int32_t node_ = 0;         // the rule of the value being read
  uint8_t ws_ = 0;           // whitespace bytes in the current run
  uint8_t esc_ = 0;          // 1: after '\\'; 2-5: \u hex digits read + 1
  uint8_t utf8_ = 0;         // continuation bytes still due
  uint8_t lead_ = 0;         // the lead byte they follow
  uint8_t num_ = 0;          // number: where in -?int(.frac)?(e[+-]?exp)? the lexer is
  bool lit_builtin_ = false; // literal: from true / false / null, not the node's literals
  bool free_key_ = false;    // key: a string outside the schema's keys may be read too
  uint64_t cand_ = 0;        // key / literal: candidates still matching
  int32_t pos_ = 0;          // key / literal: bytes matched; string: characters read
  int32_t digits_ = 0;
  int32_t depth_ = 0;
  // \u escapes: the value read so far; a high surrogate's low half must come next
  uint16_t hex_ = 0;
  bool low_due_ = false;
  // keys outside the schema's, of the open objects: their hashes (FNV-1a of their text), so
  // that none comes twice; at most max_other_keys at a time
  static constexpr int max_other_keys = 64;
  uint64_t kh_ = 0; // the key being read
  int32_t nkeyh_ = 0;
  uint64_t keyh_[max_other_keys];
  frame stack_[max_depth];
};

/// The readings of a document so far: a grammar state per way its bytes fit the schema. anyOf
/// branches that start alike (Union[Cat, Dog] of two objects) are all read on until the bytes
/// tell them apart; readings with the same future merge, so a closed value leaves one; at most
/// max_readings are kept (dropping one narrows what may follow, and each kept one is a valid
/// reading, so a document that ends still fits the schema).
class json_readings {
 public:
  static constexpr size_t max_readings = 16;
  explicit json_readings(const json_schema& s) { states_.emplace_back(s); }
  /// Takes byte c in every reading that allows it; false when none does (then unchanged).
  bool feed(uint8_t c);
  bool feed(std::string_view bytes) {
    for (char c : bytes)
      if (!feed(static_cast<uint8_t>(c))) return false;
    return true;
  }
  /// Some reading is a complete document.
  bool done() const;
  const std::vector<json_grammar>& states() const { return states_; }

 private:
  std::vector<json_grammar> states_;
};

} // namespace troupe
