// tokenizer_tiktoken.cpp: a tiktoken vocabulary (tiktoken.model: one "base64(bytes) rank" line
// per token, as Kimi K2 publishes it beside tokenization_kimi.py) as the byte-level BPE it is.
// tiktoken merges, within a pre-tokenized word, the adjacent pair whose joined bytes have the
// lowest rank, and takes a word that is a whole token whole; so every split of a token into two
// tokens becomes a merge ranked by the joined token (the BPE loop then picks tiktoken's pair)
// and ignore_merges is set. The special tokens follow the base vocabulary: the ones
// tokenizer_config.json's added_tokens_decoder names, and reserved slots up to 256
// (tokenization_kimi.py's num_reserved_special_tokens) named <|reserved_token_ID|>. The split
// regex is not in the file: the caller names it (add_byte_level_split).
// Tests: tests/text/tokenizer_gguf_pre_test.cpp (against tiktoken itself)
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/tokenizer_impl.hpp"

namespace troupe {
namespace {

constexpr int32_t reserved_specials = 256;

error bad(const std::string& where, std::string_view what) {
  return make_error(errc::corrupt_file, "{}: {}", where, what);
}

// Standard base64 (RFC 4648, '=' padding); false on anything else.
bool base64(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.empty() || in.size() % 4 != 0) return false;
  out.clear();
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = value(c)) < 0) {
        return false;
      }
    }
    const uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>(n >> 16);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(n & 0xFF);
  }
  return true;
}

} // namespace

expected<std::unique_ptr<tokenizer>> tokenizer::from_tiktoken(const std::string& model_text,
                                                              const std::string& config_text,
                                                              std::string_view pre,
                                                              const std::string& where) {
  auto t = std::make_unique<tokenizer_impl>();
  t->model = tokenizer_impl::model_t::bpe;
  t->byte_level = true;
  t->ignore_merges = true;
  t->kind_name = "byte-level";
  // the ranks: token bytes by rank, each rank once, 0 .. n-1
  std::vector<std::string> bytes;
  size_t at = 0;
  while (at < model_text.size()) {
    size_t eol = model_text.find('\n', at);
    if (eol == std::string::npos) eol = model_text.size();
    std::string_view line(model_text.data() + at, eol - at);
    at = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    std::string tok;
    if (sp == std::string_view::npos || !base64(line.substr(0, sp), tok))
      return bad(where, fmt::format("line {} is not 'base64 rank'", bytes.size() + 1));
    const std::string_view r = line.substr(sp + 1);
    if (r.empty() || r.size() > 9 || r.find_first_not_of("0123456789") != std::string_view::npos)
      return bad(where, fmt::format("line {}: the rank is not a number", bytes.size() + 1));
    if (std::stoll(std::string(r)) != static_cast<int64_t>(bytes.size()))
      return bad(where, fmt::format("line {}: rank {} out of order (ranks are 0, 1, ...)",
                                    bytes.size() + 1, r));
    bytes.push_back(std::move(tok));
  }
  const auto n = static_cast<int32_t>(bytes.size());
  if (n < 256) return bad(where, "fewer than 256 tokens (every byte needs one)");
  t->pieces.reserve(static_cast<size_t>(n + reserved_specials));
  for (const auto& b : bytes) {
    std::string piece;
    for (unsigned char c : b) piece += unicode::byte_to_char(c);
    t->pieces.push_back(std::move(piece));
  }
  // the special tokens after the base vocabulary
  nlohmann::json cfg = config_text.empty() ? nlohmann::json::object()
                                           : nlohmann::json::parse(config_text, nullptr, false);
  if (!cfg.is_object()) return bad(where, "tokenizer_config.json is not a JSON object");
  std::vector<std::string> specials(reserved_specials);
  if (auto it = cfg.find("added_tokens_decoder"); it != cfg.end() && it->is_object())
    for (auto& [key, v] : it->items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (*end != '\0' || id < n || id >= n + reserved_specials || !v.is_object() ||
          !v.contains("content") || !v["content"].is_string())
        return bad(where, fmt::format("added_tokens_decoder entry '{}' is not a special token "
                                      "after the {} ranks",
                                      key, n));
      specials[static_cast<size_t>(id - n)] = v["content"].get<std::string>();
    }
  t->special.assign(static_cast<size_t>(n + reserved_specials), 0);
  for (int32_t i = 0; i < reserved_specials; ++i) {
    const int32_t id = n + i;
    std::string& s = specials[static_cast<size_t>(i)];
    if (s.empty()) s = fmt::format("<|reserved_token_{}|>", id);
    t->pieces.push_back(s);
    t->special[static_cast<size_t>(id)] = 1;
    t->added.push_back({s, id, true});
  }
  t->index_pieces();
  if (static_cast<int32_t>(t->ids.size()) != n + reserved_specials)
    return bad(where, "two tokens have the same bytes");
  // every split of a token into two tokens merges into it, ranked by the token
  for (int32_t id = 0; id < n; ++id) {
    const std::string& b = bytes[static_cast<size_t>(id)];
    if (b.size() < 2) continue;
    size_t cut = unicode::byte_to_char(static_cast<unsigned char>(b[0])).size();
    for (size_t k = 1; k < b.size(); ++k) {
      const std::string& piece = t->pieces[static_cast<size_t>(id)];
      auto l = t->ids.find(piece.substr(0, cut)), r = t->ids.find(piece.substr(cut));
      if (l != t->ids.end() && r != t->ids.end())
        t->merges.emplace((static_cast<uint64_t>(static_cast<uint32_t>(l->second)) << 32) |
                              static_cast<uint32_t>(r->second),
                          std::pair{id, id});
      cut += unicode::byte_to_char(static_cast<unsigned char>(b[k])).size();
    }
  }
  TROUPE_TRY(add_byte_level_split(*t, pre, where));
  TROUPE_TRY(apply_tokenizer_config(*t, config_text, where));
  if (t->bos < 0 && !t->prefix_ids.empty()) t->bos = t->prefix_ids.front();
  return std::unique_ptr<tokenizer>(new tokenizer(std::move(t)));
}

} // namespace troupe
