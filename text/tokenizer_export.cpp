// tokenizer_export.cpp: GGUF SPM vocabulary -> tokenizer.json (tokenizer_export.hpp).
#include "text/tokenizer_export.hpp"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "formats/gguf.hpp"
#include "text/unicode.hpp"

namespace troupe {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int64_t type_normal = 1, type_control = 3;

ojson added(int64_t id, const std::string& text) {
  return {{"id", id},        {"content", text},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

} // namespace

expected<std::string> spm_to_tokenizer_json(const gguf_file& g) {
  TROUPE_TRY_ASSIGN(model, g.get_string("tokenizer.ggml.model"));
  if (model != "llama")
    return make_error(errc::unsupported, "only SPM (llama) vocabularies export to tokenizer.json");
  TROUPE_TRY_ASSIGN(tokens, g.get_strings("tokenizer.ggml.tokens"));
  TROUPE_TRY_ASSIGN(scores, g.get_floats("tokenizer.ggml.scores"));
  TROUPE_TRY_ASSIGN(types, g.get_ints("tokenizer.ggml.token_type"));
  if (scores.size() != tokens.size() || types.size() != tokens.size())
    return make_error(errc::corrupt_file, "vocabulary arrays disagree in length");
  std::unordered_map<std::string, int64_t> ids;
  for (size_t i = 0; i < tokens.size(); ++i)
    ids.emplace(std::string(tokens[i]), static_cast<int64_t>(i));
  struct merge {
    double score;
    int64_t l, r;
  };
  std::vector<merge> merges;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] != type_normal) continue;
    const std::string piece(tokens[i]);
    size_t k = 0;
    for (auto ch : unicode::chars(piece)) {
      k += ch.size();
      if (k >= piece.size()) break;
      auto l = ids.find(piece.substr(0, k)), r = ids.find(piece.substr(k));
      if (l == ids.end() || r == ids.end()) continue;
      if (types[l->second] != type_normal || types[r->second] != type_normal) continue;
      merges.push_back({scores[i], l->second, r->second});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const merge& a, const merge& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.l != b.l ? a.l < b.l : a.r < b.r;
  });
  const int64_t bos = g.get_int_or("tokenizer.ggml.bos_token_id", 1);
  const int64_t unk = g.get_int_or("tokenizer.ggml.unknown_token_id", 0);
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = ojson::array();
  for (size_t i = 0; i < tokens.size(); ++i)
    if (types[i] == type_control || static_cast<int64_t>(i) == unk)
      j["added_tokens"].push_back(added(static_cast<int64_t>(i), std::string(tokens[i])));
  const std::string meta = "\xe2\x96\x81";
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", meta}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", meta}}}}};
  j["pre_tokenizer"] = nullptr;
  const std::string bos_text(tokens.at(static_cast<size_t>(bos)));
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", bos_text}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair",
       {{{"SpecialToken", {{"id", bos_text}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
        {{"SpecialToken", {{"id", bos_text}, {"type_id", 1}}}},
        {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
      {"special_tokens", {{bos_text, {{"id", bos_text}, {"ids", {bos}}, {"tokens", {bos_text}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", meta}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  ojson vocab = ojson::object();
  for (size_t i = 0; i < tokens.size(); ++i)
    vocab[std::string(tokens[i])] = static_cast<int64_t>(i);
  ojson ms = ojson::array();
  for (const auto& m : merges)
    ms.push_back(std::string(tokens[m.l]) + " " + std::string(tokens[m.r]));
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", std::string(tokens.at(unk))},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", ms}};
  return j.dump(1);
}

expected<std::string> spm_tokenizer_config(const gguf_file& g) {
  TROUPE_TRY_ASSIGN(tokens, g.get_strings("tokenizer.ggml.tokens"));
  const auto bos = g.get_int_or("tokenizer.ggml.bos_token_id", 1);
  const auto eos = g.get_int_or("tokenizer.ggml.eos_token_id", 2);
  ojson j;
  j["add_bos_token"] = true;
  j["add_eos_token"] = false;
  j["bos_token"] = std::string(tokens.at(static_cast<size_t>(bos)));
  j["eos_token"] = std::string(tokens.at(static_cast<size_t>(eos)));
  j["tokenizer_class"] = "LlamaTokenizer";
  return j.dump(1);
}

} // namespace troupe
