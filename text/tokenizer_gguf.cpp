// tokenizer_gguf.cpp: builds a tokenizer from GGUF metadata (tokenizer.ggml.*):
//  - model "llama": SentencePiece pieces with scores and token types; merges by score;
//    spaces become U+2581 and one is prepended (add_space_prefix, default true); unknown
//    characters fall back to <0xXX> byte pieces; control pieces (type 3) never come from text.
//  - model "gpt2": byte-level BPE with tokenizer.ggml.merges and the pre-tokenizer regex named
//    by tokenizer.ggml.pre (gpt2 / llama-bpe / qwen2).
//  - model "gemma4": BPE with tokenizer.ggml.merges over the whole text as UTF-8, spaces as
//    U+2581 (none prepended), unknown characters as <0xXX> byte pieces (Gemma 4's tokenizer.json).
// Counts and ids from the file are checked against the vocabulary size.
#include "formats/gguf.hpp"
#include "text/tokenizer_impl.hpp"

namespace troupe {
namespace {

constexpr int64_t type_normal = 1, type_control = 3, type_user_defined = 4;

} // namespace

expected<std::unique_ptr<tokenizer>> tokenizer::from_gguf(const gguf_file& g) {
  const std::string& where = g.file->path();
  TROUPE_TRY_ASSIGN(model, g.get_string("tokenizer.ggml.model"));
  TROUPE_TRY_ASSIGN(tokens, g.get_strings("tokenizer.ggml.tokens"));
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return make_error(errc::corrupt_file, "{}: tokenizer.ggml.tokens is empty", where);
  auto t = std::make_unique<tokenizer_impl>();
  t->pieces.reserve(n);
  for (auto s : tokens) t->pieces.emplace_back(s);
  std::vector<int64_t> types;
  if (g.get("tokenizer.ggml.token_type")) {
    TROUPE_TRY_ASSIGN(tt, g.get_ints("tokenizer.ggml.token_type"));
    if (static_cast<int64_t>(tt.size()) != n)
      return make_error(errc::corrupt_file, "{}: {} token types for {} tokens", where, tt.size(),
                        n);
    types = std::move(tt);
  }
  t->special.assign(n, 0);
  t->mergeable.assign(n, 1);
  for (int64_t i = 0; i < static_cast<int64_t>(types.size()); ++i) {
    t->special[i] = types[i] == type_control;
    t->mergeable[i] = types[i] == type_normal || types[i] == type_user_defined;
    if (types[i] == type_control || types[i] == type_user_defined)
      t->added.push_back({t->pieces[i], static_cast<int32_t>(i), types[i] == type_control});
  }
  t->index_pieces();
  auto id_key = [&](const char* key, int32_t& out) -> status {
    if (!g.get(key)) return {};
    TROUPE_TRY_ASSIGN(v, g.get_int(key));
    if (v < 0 || v >= n) {
      if (v == 0xffffffffLL || v == -1) return {}; // "none"
      return make_error(errc::corrupt_file, "{}: {} = {} is outside the vocabulary ({})", where,
                        key, v, n);
    }
    out = static_cast<int32_t>(v);
    return {};
  };
  TROUPE_TRY(id_key("tokenizer.ggml.bos_token_id", t->bos));
  TROUPE_TRY(id_key("tokenizer.ggml.eos_token_id", t->eos));
  TROUPE_TRY(id_key("tokenizer.ggml.unknown_token_id", t->unk_id));
  if (auto ct = g.get_string("tokenizer.chat_template")) t->chat_template = std::string(*ct);

  // tokenizer.ggml.merges ("a b", by rank) into t->merges
  auto read_merges = [&]() -> status {
    TROUPE_TRY_ASSIGN(merges, g.get_strings("tokenizer.ggml.merges"));
    int32_t rank = 0;
    for (auto m : merges) {
      const size_t sp = m.find(' ', 1);
      if (sp == std::string_view::npos)
        return make_error(errc::corrupt_file, "{}: merge '{}' has no space", where, m);
      auto li = t->ids.find(std::string(m.substr(0, sp))),
           ri = t->ids.find(std::string(m.substr(sp + 1)));
      auto mi = t->ids.find(std::string(m.substr(0, sp)) + std::string(m.substr(sp + 1)));
      if (li == t->ids.end() || ri == t->ids.end() || mi == t->ids.end())
        return make_error(errc::corrupt_file,
                          "{}: merge '{}' uses a piece missing from the vocabulary", where, m);
      const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(li->second)) << 32) |
                           static_cast<uint32_t>(ri->second);
      t->merges.emplace(key, std::pair{rank++, mi->second});
    }
    return {};
  };
  bool add_bos;
  if (model == "gemma4") {
    t->model = tokenizer_impl::model_t::bpe;
    t->byte_fallback = true;
    t->kind_name = "bpe";
    TROUPE_TRY(read_merges());
    t->normalizers.push_back({normalizer_step::replace, " ", "\xe2\x96\x81"});
    t->decoders.push_back({decoder_step::replace, "\xe2\x96\x81", " "});
    t->decoders.push_back({decoder_step::byte_fallback});
    t->decoders.push_back({decoder_step::fuse});
    add_bos = true;
  } else if (model == "llama") {
    t->model = tokenizer_impl::model_t::spm;
    t->byte_fallback = true;
    t->kind_name = "spm";
    TROUPE_TRY_ASSIGN(scores, g.get_floats("tokenizer.ggml.scores"));
    if (static_cast<int64_t>(scores.size()) != n)
      return make_error(errc::corrupt_file, "{}: {} scores for {} tokens", where, scores.size(), n);
    t->scores.assign(scores.begin(), scores.end());
    const bool space_prefix = g.get("tokenizer.ggml.add_space_prefix")
                                  ? g.get("tokenizer.ggml.add_space_prefix")->i != 0
                                  : true;
    if (space_prefix) t->normalizers.push_back({normalizer_step::prepend, " ", {}});
    t->normalizers.push_back({normalizer_step::replace, " ", "\xe2\x96\x81"});
    t->decoders.push_back({decoder_step::replace, "\xe2\x96\x81", " "});
    t->decoders.push_back({decoder_step::byte_fallback});
    t->decoders.push_back({decoder_step::fuse});
    if (space_prefix) {
      decoder_step strip{decoder_step::strip, " "};
      strip.start = 1;
      t->decoders.push_back(strip);
    }
    add_bos = true;
  } else if (model == "gpt2") {
    t->model = tokenizer_impl::model_t::bpe;
    t->byte_level = true;
    t->kind_name = "byte-level";
    TROUPE_TRY(read_merges());
    std::string pre = "gpt2";
    if (auto p = g.get_string("tokenizer.ggml.pre")) pre = std::string(*p);
    TROUPE_TRY(add_byte_level_split(*t, pre, where));
    // a word that is a whole token is that token (tiktoken's rule, which these vocabularies
    // were made by)
    // (LFM2's as llama.cpp reads its name: Llama 3's)
    t->ignore_merges = pre == "llama-bpe" || pre == "llama3" || pre == "lfm2" || pre == "tekken" ||
                       pre == "gpt-4o" || pre == "kimi-k2";
    add_bos = pre == "llama-bpe" || pre == "llama3" || pre == "lfm2";
  } else {
    return make_error(errc::unsupported,
                      "{}: tokenizer model '{}' is not supported (llama, gpt2, gemma4 are)", where,
                      model);
  }
  if (g.get("tokenizer.ggml.add_bos_token"))
    add_bos = g.get("tokenizer.ggml.add_bos_token")->i != 0;
  if (add_bos && t->bos >= 0) t->prefix_ids = {t->bos};
  if (g.get("tokenizer.ggml.add_eos_token") && g.get("tokenizer.ggml.add_eos_token")->i != 0 &&
      t->eos >= 0)
    t->suffix_ids = {t->eos};
  return std::unique_ptr<tokenizer>(new tokenizer(std::move(t)));
}

} // namespace troupe
