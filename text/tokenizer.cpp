// tokenizer.cpp: the encode / decode pipeline and the streaming decoder (tokenizer.hpp):
// added-token matching, normalisers, pre-tokenizers (PCRE2 for the regex splits), the merge
// model (bpe.cpp), post-processing (BOS / template ids) and decoders.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cctype>
#include <cstddef>
#include <pcre2.h>

#include <algorithm>

#include "text/tokenizer_impl.hpp"

namespace troupe {

class regex {
 public:
  explicit regex(pcre2_code* code)
      : code_(code) {
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~regex() { pcre2_code_free(code_); }
  regex(const regex&) = delete;
  regex& operator=(const regex&) = delete;
  /// [begin, end) of every match in s, left to right, non-overlapping.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const {
    std::vector<std::pair<size_t, size_t>> out;
    // match data is per call: regex objects are shared across threads
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t pos = 0;
    while (pos <= s.size()) {
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos,
                           PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t b = ov[0], e = ov[1];
      if (e == b) { // empty match: step one character
        if (b >= s.size()) break;
        pos = b + unicode::seq_len(static_cast<unsigned char>(s[b]));
        continue;
      }
      out.emplace_back(b, e);
      pos = e;
    }
    pcre2_match_data_free(md);
    return out;
  }

 private:
  pcre2_code* code_;
};

std::shared_ptr<regex> compile_regex(const std::string& pattern, std::string& err) {
  int code = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &code, &off, nullptr);
  if (!re) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof buf);
    err = fmt::format("regex error at {}: {}", off, reinterpret_cast<char*>(buf));
    return nullptr;
  }
  return std::make_shared<regex>(re);
}

std::vector<std::string> pretokenizer_regexes(std::string_view name) {
  // DeepSeek V3 / R1 / V3.1 / V3.2 (their tokenizer.json: three Splits in sequence - digits in
  // threes, runs of CJK ideographs and kana, then letters and punctuation)
  static const std::vector<std::string> deepseek_v3 = {
      R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
      R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  // o200k_base (GPT-OSS; tiktoken's pat_str)
  static const std::string o200k =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  // tekken (Mistral Nemo, Small 3, Devstral; the pattern of its tekken.json)
  static const std::string tekken =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  // Kimi K2 (tokenization_kimi.py's pat_str: runs of Han apart, letters that are not Han; its
  // class intersections [...&&[^\p{Han}]] written as a lookahead for PCRE2)
  static const std::string kimi_k2 =
      R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (name == "kimi-k2") return {kimi_k2};
  // Hunyuan's dense GGUFs split as DeepSeek-V3's (llama.cpp's hunyuan-dense)
  if (name == "deepseek-v3" || name == "hunyuan-dense") return deepseek_v3;
  if (name == "gpt-4o") return {o200k};
  if (name == "tekken") return {tekken};
  if (std::string one = pretokenizer_regex(name); !one.empty()) return {one};
  return {};
}

status add_byte_level_split(tokenizer_impl& t, std::string_view pre, const std::string& where) {
  const std::vector<std::string> patterns = pretokenizer_regexes(pre);
  if (patterns.empty())
    return make_error(errc::unsupported,
                      "{}: pre-tokenizer '{}' is not supported (gpt2, llama-bpe, qwen2, "
                      "qwen35, stablelm2, deepseek-v3, gpt-4o, tekken, kimi-k2, glm4, hunyuan, "
                      "hunyuan-dense, lfm2 are)",
                      where, pre);
  for (const auto& pattern : patterns) {
    std::string err;
    pretok_step split{pretok_step::split};
    if (!(split.pattern = compile_regex(pattern, err)))
      return make_error(errc::internal, "{}: {}", where, err);
    t.pretokenizers.push_back(std::move(split));
  }
  pretok_step bl{pretok_step::byte_level};
  bl.use_regex = false;
  t.pretokenizers.push_back(std::move(bl));
  t.decoders.push_back({decoder_step::byte_level});
  return {};
}

std::string pretokenizer_regex(std::string_view name) {
  // GPT-2 (also "default" in llama.cpp)
  static const std::string gpt2 =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  static const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  // Qwen 3.5 (its tokenizer.json): Qwen2's, with combining marks kept in words
  static const std::string qwen35 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (name == "gpt2" || name == "default" || name == "gpt-2") return gpt2;
  // GLM-4 and 4.5+ ("chatglm-bpe", "glm4") split as Llama 3 does
  if (name == "llama-bpe" || name == "llama3" || name == "smaug-bpe" || name == "chatglm-bpe" ||
      name == "glm4" || name == "lfm2")
    return llama3;
  // StableLM 2's GGUFs split as Qwen2's (llama.cpp's reading of them)
  // (and Hunyuan-A13B's, llama.cpp's hunyuan)
  if (name == "qwen2" || name == "deepseek-r1-qwen" || name == "stablelm2" || name == "hunyuan")
    return qwen2;
  if (name == "qwen35") return qwen35;
  return {};
}

namespace {

// A piece of text on its way through the pre-tokenizers; `first` marks the piece at the very
// start of the input (Metaspace's prepend_scheme "first").
struct piece_t {
  std::string text;
  bool first;
};

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// Splits `text` by `matches` according to `behavior` (HF SplitDelimiterBehavior).
std::vector<std::string> split_by(std::string_view text, std::vector<std::pair<size_t, size_t>> m,
                                  split_behavior behavior, bool invert) {
  // Build alternating segments: (is_match, begin, end)
  struct seg {
    bool match;
    size_t b, e;
  };
  std::vector<seg> segs;
  size_t pos = 0;
  for (auto [b, e] : m) {
    if (b > pos) segs.push_back({false, pos, b});
    segs.push_back({true, b, e});
    pos = e;
  }
  if (pos < text.size()) segs.push_back({false, pos, text.size()});
  if (invert)
    for (auto& s : segs) s.match = !s.match;
  std::vector<std::string> out;
  switch (behavior) {
  case split_behavior::isolated:
    for (auto& s : segs) out.emplace_back(text.substr(s.b, s.e - s.b));
    break;
  case split_behavior::removed:
    for (auto& s : segs)
      if (!s.match) out.emplace_back(text.substr(s.b, s.e - s.b));
    break;
  case split_behavior::merged_with_previous: {
    for (auto& s : segs) {
      if (s.match && !out.empty())
        out.back().append(text.substr(s.b, s.e - s.b));
      else
        out.emplace_back(text.substr(s.b, s.e - s.b));
    }
    break;
  }
  case split_behavior::merged_with_next: {
    std::string carry;
    for (auto& s : segs) {
      if (s.match) {
        carry.append(text.substr(s.b, s.e - s.b));
      } else {
        out.push_back(carry + std::string(text.substr(s.b, s.e - s.b)));
        carry.clear();
      }
    }
    if (!carry.empty()) out.push_back(carry);
    break;
  }
  case split_behavior::contiguous: {
    bool prev_match = false;
    for (auto& s : segs) {
      if (s.match && prev_match && !out.empty())
        out.back().append(text.substr(s.b, s.e - s.b));
      else
        out.emplace_back(text.substr(s.b, s.e - s.b));
      prev_match = s.match;
    }
    break;
  }
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const std::string& x) { return x.empty(); }),
            out.end());
  return out;
}

std::vector<std::pair<size_t, size_t>> literal_matches(std::string_view s, std::string_view lit) {
  std::vector<std::pair<size_t, size_t>> out;
  if (lit.empty()) return out;
  for (size_t pos = 0; (pos = s.find(lit, pos)) != std::string_view::npos; pos += lit.size())
    out.emplace_back(pos, pos + lit.size());
  return out;
}

expected<std::string> normalize(const tokenizer_impl& t, std::string s) {
  for (const auto& n : t.normalizers) {
    switch (n.kind) {
    case normalizer_step::prepend:
      if (!s.empty()) s = n.a + s;
      break;
    case normalizer_step::replace:
      s = replace_all(std::move(s), n.a, n.b);
      break;
    case normalizer_step::nfc: {
      TROUPE_TRY_ASSIGN(r, unicode::normalize(s, unicode::nf::nfc));
      s = std::move(r);
      break;
    }
    case normalizer_step::nfd: {
      TROUPE_TRY_ASSIGN(r, unicode::normalize(s, unicode::nf::nfd));
      s = std::move(r);
      break;
    }
    case normalizer_step::nfkc: {
      TROUPE_TRY_ASSIGN(r, unicode::normalize(s, unicode::nf::nfkc));
      s = std::move(r);
      break;
    }
    case normalizer_step::nfkd: {
      TROUPE_TRY_ASSIGN(r, unicode::normalize(s, unicode::nf::nfkd));
      s = std::move(r);
      break;
    }
    case normalizer_step::lowercase:
      s = unicode::lowercase(s);
      break;
    case normalizer_step::strip: {
      size_t b = 0, e = s.size();
      if (n.left)
        while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
      if (n.right)
        while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
      s = s.substr(b, e - b);
      break;
    }
    }
  }
  return s;
}

std::vector<piece_t> pretokenize(const tokenizer_impl& t, std::string text, bool first) {
  std::vector<piece_t> pieces{{std::move(text), first}};
  for (const auto& p : t.pretokenizers) {
    std::vector<piece_t> next;
    for (auto& pc : pieces) {
      switch (p.kind) {
      case pretok_step::metaspace: {
        std::string s = replace_all(pc.text, " ", p.replacement);
        const bool prepend = p.prepend == pretok_step::prepend_t::always ||
                             (p.prepend == pretok_step::prepend_t::first && pc.first);
        if (prepend && s.compare(0, p.replacement.size(), p.replacement) != 0)
          s = p.replacement + s;
        if (p.split_words) {
          bool f = pc.first;
          for (auto& w : split_by(s, literal_matches(s, p.replacement),
                                  split_behavior::merged_with_next, false)) {
            next.push_back({std::move(w), f});
            f = false;
          }
        } else {
          next.push_back({std::move(s), pc.first});
        }
        break;
      }
      case pretok_step::byte_level: {
        std::string s = pc.text;
        if (p.add_prefix_space && !s.empty() && s[0] != ' ') s = " " + s;
        std::vector<std::string> words;
        if (p.use_regex)
          words = split_by(s, p.pattern->find_all(s), split_behavior::isolated, false);
        else
          words = {s};
        bool f = pc.first;
        for (auto& w : words) {
          std::string mapped;
          mapped.reserve(w.size() * 2);
          for (unsigned char c : w) mapped += unicode::byte_to_char(c);
          next.push_back({std::move(mapped), f});
          f = false;
        }
        break;
      }
      case pretok_step::split:
      case pretok_step::digits: {
        bool f = pc.first;
        for (auto& w : split_by(pc.text, p.pattern->find_all(pc.text), p.behavior, p.invert)) {
          next.push_back({std::move(w), f});
          f = false;
        }
        break;
      }
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

} // namespace

tokenizer::tokenizer(std::unique_ptr<tokenizer_impl> impl)
    : impl_(std::move(impl)) {}
tokenizer::~tokenizer() = default;
tokenizer::tokenizer(tokenizer&&) noexcept = default;

expected<std::vector<int32_t>> tokenizer::encode(std::string_view text, bool add_special,
                                                 bool parse_special) const {
  const tokenizer_impl& t = *impl_;
  if (size_t bad = unicode::first_invalid(text); bad != std::string_view::npos)
    return make_error(errc::invalid_argument, "text is not valid UTF-8 (byte {})", bad);
  std::vector<int32_t> out;
  if (add_special) out.insert(out.end(), t.prefix_ids.begin(), t.prefix_ids.end());
  // 1. split on added tokens (leftmost, then longest)
  struct segment {
    std::string_view text;
    int32_t id; // -1: plain text
    size_t offset;
  };
  std::vector<segment> segs;
  size_t pos = 0, plain_begin = 0;
  while (pos < text.size()) {
    const added_token* best = nullptr;
    if (parse_special) {
      for (const auto& a : t.added)
        if (!a.content.empty() && text.compare(pos, a.content.size(), a.content) == 0 &&
            (!best || a.content.size() > best->content.size()))
          best = &a;
    }
    if (!best) {
      ++pos;
      continue;
    }
    std::string_view before = text.substr(plain_begin, pos - plain_begin);
    if (best->lstrip)
      while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
    if (!before.empty()) segs.push_back({before, -1, plain_begin});
    segs.push_back({best->content, best->id, pos});
    pos += best->content.size();
    if (best->rstrip)
      while (pos < text.size() && is_space(text[pos])) ++pos;
    plain_begin = pos;
  }
  if (plain_begin < text.size()) segs.push_back({text.substr(plain_begin), -1, plain_begin});
  // 2. normalise, pre-tokenize and merge each plain segment
  for (const auto& s : segs) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    TROUPE_TRY_ASSIGN(norm, normalize(t, std::string(s.text)));
    for (const auto& w : pretokenize(t, std::move(norm), s.offset == 0)) t.encode_word(w.text, out);
  }
  if (add_special) out.insert(out.end(), t.suffix_ids.begin(), t.suffix_ids.end());
  return out;
}

std::string tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special) const {
  const tokenizer_impl& t = *impl_;
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  std::vector<uint8_t> is_added;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(t.pieces.size())) continue;
    if (skip_special && t.special[id]) continue;
    toks.push_back(t.pieces[id]);
  }
  for (const auto& d : t.decoders) {
    switch (d.kind) {
    case decoder_step::replace:
      for (auto& s : toks) s = replace_all(std::move(s), d.a, d.b);
      break;
    case decoder_step::byte_fallback: {
      std::vector<std::string> next;
      std::string bytes;
      auto is_byte = [](const std::string& s, unsigned& v) {
        return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' &&
               std::sscanf(s.c_str() + 3, "%2x", &v) == 1;
      };
      for (auto& s : toks) {
        unsigned v;
        if (is_byte(s, v)) {
          bytes += static_cast<char>(v);
          continue;
        }
        if (!bytes.empty()) next.push_back(std::move(bytes)), bytes.clear();
        next.push_back(std::move(s));
      }
      if (!bytes.empty()) next.push_back(std::move(bytes));
      toks = std::move(next);
      break;
    }
    case decoder_step::fuse: {
      std::string all;
      for (auto& s : toks) all += s;
      toks = {std::move(all)};
      break;
    }
    case decoder_step::strip:
      for (auto& s : toks) {
        int n = 0;
        while (n < d.start && s.compare(0, d.a.size(), d.a) == 0 && !d.a.empty())
          s.erase(0, d.a.size()), ++n;
        n = 0;
        while (n < d.stop && s.size() >= d.a.size() && !d.a.empty() &&
               s.compare(s.size() - d.a.size(), d.a.size(), d.a) == 0)
          s.erase(s.size() - d.a.size()), ++n;
      }
      break;
    case decoder_step::byte_level:
      for (auto& s : toks) {
        std::string raw;
        if (unicode::chars_to_bytes(s, raw)) s = std::move(raw);
      }
      break;
    case decoder_step::metaspace:
      for (size_t i = 0; i < toks.size(); ++i) {
        toks[i] = replace_all(std::move(toks[i]), d.a, " ");
        if (i == 0 && d.prepend_first && !toks[i].empty() && toks[i][0] == ' ') toks[i].erase(0, 1);
      }
      break;
    }
  }
  std::string out;
  for (auto& s : toks) out += s;
  return out;
}

std::string tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return unicode::repair(decode_bytes(ids, skip_special));
}

std::string_view tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(impl_->pieces.size())) return {};
  return impl_->pieces[id];
}

int32_t tokenizer::find(std::string_view p) const {
  auto it = impl_->ids.find(std::string(p));
  return it == impl_->ids.end() ? -1 : it->second;
}

int32_t tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->pieces.size());
}
int32_t tokenizer::bos_id() const {
  return impl_->bos;
}
int32_t tokenizer::eos_id() const {
  return impl_->eos;
}
bool tokenizer::adds_bos() const {
  return !impl_->prefix_ids.empty();
}
bool tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(impl_->special.size()) && impl_->special[id];
}
std::string_view tokenizer::kind() const {
  return impl_->kind_name;
}
const std::string& tokenizer::chat_template() const {
  return impl_->chat_template;
}

// Context ids kept before the first pushed id: enough for any decoder rule that looks at
// the previous token (a space to strip, a byte sequence to join); vLLM keeps 5.
constexpr size_t decoder_context = 6;

void stream_decoder::prime(std::span<const int32_t> context) {
  const size_t keep = std::min(context.size(), decoder_context);
  ids_.assign(context.end() - static_cast<std::ptrdiff_t>(keep), context.end());
  prefix_ = 0;
  read_ = ids_.size();
  pushed_ = 0;
}

void stream_decoder::keep_special(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  keep_ = std::move(ids);
}

std::string stream_decoder::bytes(std::span<const int32_t> ids) const {
  if (keep_.empty() || !skip_special_) return tok_.decode_bytes(ids, skip_special_);
  std::vector<int32_t> kept; // the special tokens not kept left out, the rest decoded as text
  kept.reserve(ids.size());
  for (int32_t id : ids)
    if (!tok_.is_special(id) || std::binary_search(keep_.begin(), keep_.end(), id))
      kept.push_back(id);
  return tok_.decode_bytes(kept, false);
}

std::string stream_decoder::pending() const {
  const std::span<const int32_t> all(ids_);
  const std::string done = bytes(all.subspan(prefix_, read_ - prefix_));
  std::string now = bytes(all.subspan(prefix_));
  if (now.size() < done.size() || now.compare(0, done.size(), done) != 0)
    return {}; // a decoder rewrote settled text (not the case for the decoders above)
  return now.substr(done.size());
}

std::string stream_decoder::push(int32_t id) {
  ids_.push_back(id);
  ++pushed_;
  std::string fresh = pending();
  const size_t cut = unicode::incomplete_tail(fresh);
  if (fresh.empty() || cut > 0) return {}; // wait for the rest of a character
  // settle: what was read becomes the new prefix
  prefix_ = read_;
  read_ = ids_.size();
  if (prefix_ > decoder_context) { // drop ids no decoding needs any more
    const size_t drop = prefix_ - decoder_context;
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(drop));
    prefix_ -= drop;
    read_ -= drop;
  }
  return unicode::repair(fresh);
}

std::string stream_decoder::finish() {
  std::string fresh = pending();
  prefix_ = read_;
  read_ = ids_.size();
  return fresh.empty() ? fresh : unicode::repair(fresh);
}

} // namespace troupe
