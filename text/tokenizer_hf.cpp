// tokenizer_hf.cpp: builds a tokenizer from Hugging Face tokenizer.json (+ tokenizer_config.json).
// Supported: model BPE (vocab, merges as "a b" strings or [a, b] pairs, byte_fallback,
// fuse_unk, unk_token, ignore_merges); normalizers Sequence, Prepend, Replace (string),
// NFC/NFD/NFKC/NFKD, Lowercase, Strip; pre-tokenizers Sequence, Metaspace, ByteLevel, Split,
// Digits; post-processors TemplateProcessing, ByteLevel, Sequence; decoders Sequence,
// Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace. Anything else is refused with
// `unsupported` naming the component, rather than tokenizing differently from the original.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "text/tokenizer_impl.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;

error unsupported(const std::string& where, std::string_view what, const json& j) {
  std::string type = j.is_object() && j.contains("type") && j["type"].is_string()
                         ? j["type"].get<std::string>()
                         : "?";
  return make_error(errc::unsupported, "{}: {} '{}' is not supported", where, what, type);
}

error corrupt(const std::string& where, std::string_view what) {
  return make_error(errc::corrupt_file, "{}: {}", where, what);
}

std::string str(const json& j, const char* key, const std::string& fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool flag(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// The pattern of a Split / Replace step: {"Regex": "..."} or {"String": "..."}.
expected<std::pair<std::string, bool>> pattern_of(const json& j, const std::string& where) {
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object()) return corrupt(where, "pattern missing");
  if (it->contains("Regex") && (*it)["Regex"].is_string())
    return std::pair{(*it)["Regex"].get<std::string>(), true};
  if (it->contains("String") && (*it)["String"].is_string())
    return std::pair{(*it)["String"].get<std::string>(), false};
  return corrupt(where, "pattern must be Regex or String");
}

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::strchr("\\^$.|?*+()[]{}", c)) out += '\\';
    out += c;
  }
  return out;
}

status add_normalizer(tokenizer_impl& t, const json& n, const std::string& where) {
  if (n.is_null()) return {};
  const std::string type = str(n, "type");
  if (type == "Sequence") {
    if (!n.contains("normalizers") || !n["normalizers"].is_array())
      return corrupt(where, "normalizer Sequence without a list");
    for (const auto& x : n["normalizers"]) TROUPE_TRY(add_normalizer(t, x, where));
  } else if (type == "Prepend") {
    t.normalizers.push_back({normalizer_step::prepend, str(n, "prepend"), {}});
  } else if (type == "Replace") {
    TROUPE_TRY_ASSIGN(p, pattern_of(n, where));
    if (p.second)
      return make_error(errc::unsupported,
                        "{}: Replace normalizer with a regex pattern is not supported", where);
    t.normalizers.push_back({normalizer_step::replace, p.first, str(n, "content")});
  } else if (type == "NFC")
    t.normalizers.push_back({normalizer_step::nfc, {}, {}});
  else if (type == "NFD")
    t.normalizers.push_back({normalizer_step::nfd, {}, {}});
  else if (type == "NFKC")
    t.normalizers.push_back({normalizer_step::nfkc, {}, {}});
  else if (type == "NFKD")
    t.normalizers.push_back({normalizer_step::nfkd, {}, {}});
  else if (type == "Lowercase")
    t.normalizers.push_back({normalizer_step::lowercase, {}, {}});
  else if (type == "Strip") {
    normalizer_step s{normalizer_step::strip, {}, {}};
    s.left = flag(n, "strip_left", true);
    s.right = flag(n, "strip_right", true);
    t.normalizers.push_back(s);
  } else
    return unsupported(where, "normalizer", n);
  return {};
}

expected<split_behavior> behavior_of(const json& j, const std::string& where) {
  const std::string b = str(j, "behavior", "Isolated");
  if (b == "Isolated") return split_behavior::isolated;
  if (b == "Removed") return split_behavior::removed;
  if (b == "MergedWithPrevious") return split_behavior::merged_with_previous;
  if (b == "MergedWithNext") return split_behavior::merged_with_next;
  if (b == "Contiguous") return split_behavior::contiguous;
  return corrupt(where, fmt::format("unknown split behavior '{}'", b));
}

status add_pretokenizer(tokenizer_impl& t, const json& p, const std::string& where) {
  if (p.is_null()) return {};
  const std::string type = str(p, "type");
  std::string err;
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
      return corrupt(where, "pre_tokenizer Sequence without a list");
    for (const auto& x : p["pretokenizers"]) TROUPE_TRY(add_pretokenizer(t, x, where));
  } else if (type == "Metaspace") {
    pretok_step s{pretok_step::metaspace};
    s.replacement = str(p, "replacement", "\xe2\x96\x81");
    const std::string scheme =
        str(p, "prepend_scheme", flag(p, "add_prefix_space", true) ? "always" : "never");
    s.prepend = scheme == "first"   ? pretok_step::prepend_t::first
                : scheme == "never" ? pretok_step::prepend_t::never
                                    : pretok_step::prepend_t::always;
    s.split_words = flag(p, "split", true);
    t.pretokenizers.push_back(std::move(s));
  } else if (type == "ByteLevel") {
    pretok_step s{pretok_step::byte_level};
    s.add_prefix_space = flag(p, "add_prefix_space", false);
    s.use_regex = flag(p, "use_regex", true);
    if (s.use_regex && !(s.pattern = compile_regex(pretokenizer_regex("gpt2"), err)))
      return corrupt(where, err);
    t.pretokenizers.push_back(std::move(s));
    t.byte_level = true;
  } else if (type == "Split") {
    pretok_step s{pretok_step::split};
    TROUPE_TRY_ASSIGN(pat, pattern_of(p, where));
    TROUPE_TRY_ASSIGN(beh, behavior_of(p, where));
    s.behavior = beh;
    s.invert = flag(p, "invert", false);
    if (!(s.pattern = compile_regex(pat.second ? pat.first : regex_escape(pat.first), err)))
      return corrupt(where, "Split pattern: " + err);
    t.pretokenizers.push_back(std::move(s));
  } else if (type == "Digits") {
    pretok_step s{pretok_step::digits};
    s.individual_digits = flag(p, "individual_digits", false);
    if (!(s.pattern = compile_regex(s.individual_digits ? "\\p{N}" : "\\p{N}+", err)))
      return corrupt(where, err);
    t.pretokenizers.push_back(std::move(s));
  } else {
    return unsupported(where, "pre_tokenizer", p);
  }
  return {};
}

status add_decoder(tokenizer_impl& t, const json& d, const std::string& where) {
  if (d.is_null()) return {};
  const std::string type = str(d, "type");
  if (type == "Sequence") {
    if (!d.contains("decoders") || !d["decoders"].is_array())
      return corrupt(where, "decoder Sequence without a list");
    for (const auto& x : d["decoders"]) TROUPE_TRY(add_decoder(t, x, where));
  } else if (type == "Replace") {
    TROUPE_TRY_ASSIGN(p, pattern_of(d, where));
    if (p.second)
      return make_error(errc::unsupported,
                        "{}: Replace decoder with a regex pattern is not supported", where);
    t.decoders.push_back({decoder_step::replace, p.first, str(d, "content")});
  } else if (type == "ByteFallback")
    t.decoders.push_back({decoder_step::byte_fallback});
  else if (type == "Fuse")
    t.decoders.push_back({decoder_step::fuse});
  else if (type == "Strip") {
    decoder_step s{decoder_step::strip, str(d, "content", " ")};
    s.start = d.contains("start") && d["start"].is_number_integer() ? d["start"].get<int>() : 0;
    s.stop = d.contains("stop") && d["stop"].is_number_integer() ? d["stop"].get<int>() : 0;
    t.decoders.push_back(s);
  } else if (type == "ByteLevel")
    t.decoders.push_back({decoder_step::byte_level});
  else if (type == "Metaspace") {
    decoder_step s{decoder_step::metaspace, str(d, "replacement", "\xe2\x96\x81")};
    const std::string scheme =
        str(d, "prepend_scheme", flag(d, "add_prefix_space", true) ? "always" : "never");
    s.prepend_first = scheme != "never";
    t.decoders.push_back(s);
  } else {
    return unsupported(where, "decoder", d);
  }
  return {};
}

expected<int32_t> id_of(const tokenizer_impl& t, const std::string& piece,
                        const std::string& where) {
  auto it = t.ids.find(piece);
  if (it == t.ids.end())
    return corrupt(where, fmt::format("token '{}' is not in the vocabulary", piece));
  return it->second;
}

status add_post_processor(tokenizer_impl& t, const json& p, const std::string& where) {
  if (p.is_null()) return {};
  const std::string type = str(p, "type");
  if (type == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array())
      return corrupt(where, "post_processor Sequence without a list");
    for (const auto& x : p["processors"]) TROUPE_TRY(add_post_processor(t, x, where));
  } else if (type == "ByteLevel") {
    // offsets only; no tokens added
  } else if (type == "TemplateProcessing") {
    if (!p.contains("single") || !p["single"].is_array())
      return corrupt(where, "TemplateProcessing without 'single'");
    bool seen_sequence = false;
    for (const auto& item : p["single"]) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
      } else if (item.contains("SpecialToken") && item["SpecialToken"].is_object()) {
        TROUPE_TRY_ASSIGN(id, id_of(t, str(item["SpecialToken"], "id"), where));
        (seen_sequence ? t.suffix_ids : t.prefix_ids).push_back(id);
      } else {
        return corrupt(where, "TemplateProcessing item is neither Sequence nor SpecialToken");
      }
    }
  } else {
    return unsupported(where, "post_processor", p);
  }
  return {};
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tokenizer_config.json's bos/eos may be a string or {"content": "..."}.
std::string token_text(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return str(*it, "content");
  return {};
}

} // namespace

// tokenizer_config.json: bos / eos names, add_bos_token, chat template
status apply_tokenizer_config(tokenizer_impl& t, const std::string& config_text,
                              const std::string& where) {
  json cfg = config_text.empty() ? json::object() : json::parse(config_text, nullptr, false);
  if (cfg.is_discarded()) return corrupt(where, "tokenizer_config.json is not valid JSON");
  if (cfg.is_object()) {
    if (auto b = token_text(cfg, "bos_token"); !b.empty() && t.ids.count(b)) t.bos = t.ids[b];
    if (auto e = token_text(cfg, "eos_token"); !e.empty() && t.ids.count(e)) t.eos = t.ids[e];
    if (t.prefix_ids.empty() && flag(cfg, "add_bos_token", false) && t.bos >= 0)
      t.prefix_ids = {t.bos};
    if (t.suffix_ids.empty() && flag(cfg, "add_eos_token", false) && t.eos >= 0)
      t.suffix_ids = {t.eos};
    if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
      t.chat_template = cfg["chat_template"].get<std::string>();
    } else if (cfg.contains("chat_template") && cfg["chat_template"].is_array()) {
      // named templates (Command-R: "default", "tool_use", "rag"): the default one
      for (const auto& e : cfg["chat_template"])
        if (e.is_object() && e.contains("name") && e["name"] == "default" &&
            e.contains("template") && e["template"].is_string())
          t.chat_template = e["template"].get<std::string>();
    }
  }
  return {};
}

expected<std::unique_ptr<tokenizer>> tokenizer::from_hf_json(const std::string& text,
                                                             const std::string& config_text,
                                                             const std::string& where) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt(where, "not a JSON object");
  auto t = std::make_unique<tokenizer_impl>();
  const json& model = j.contains("model") ? j["model"] : json();
  if (!model.is_object()) return corrupt(where, "no model");
  const std::string mtype = str(model, "type", "BPE");
  if (mtype != "BPE")
    return make_error(errc::unsupported, "{}: tokenizer model '{}' is not supported (BPE is)",
                      where, mtype);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return corrupt(where, "model.vocab is not an object");
  int64_t max_id = -1;
  for (auto& [piece, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
      return corrupt(where, fmt::format("vocab id of '{}' is not a valid id", piece));
    max_id = std::max(max_id, id.get<int64_t>());
  }
  std::vector<added_token> added;
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() > (1 << 24) ||
          str(a, "content").empty())
        return corrupt(where, "added_tokens entry needs an id and content");
      added_token at{str(a, "content"), a["id"].get<int32_t>(), flag(a, "special", false)};
      at.lstrip = flag(a, "lstrip", false);
      at.rstrip = flag(a, "rstrip", false);
      at.normalized = flag(a, "normalized", false);
      max_id = std::max<int64_t>(max_id, at.id);
      added.push_back(std::move(at));
    }
  }
  t->pieces.assign(max_id + 1, "");
  for (auto& [piece, id] : model["vocab"].items()) t->pieces[id.get<int64_t>()] = piece;
  t->special.assign(t->pieces.size(), 0);
  for (const auto& a : added) {
    t->pieces[a.id] = a.content;
    if (a.special) t->special[a.id] = 1;
  }
  t->added = std::move(added);
  t->index_pieces();
  t->byte_fallback = flag(model, "byte_fallback", false);
  t->fuse_unk = flag(model, "fuse_unk", false);
  t->ignore_merges = flag(model, "ignore_merges", false);
  if (auto unk = str(model, "unk_token"); !unk.empty()) {
    auto it = t->ids.find(unk);
    if (it != t->ids.end()) t->unk_id = it->second;
  }
  if (model.contains("merges") && model["merges"].is_array()) {
    int32_t rank = 0;
    for (const auto& m : model["merges"]) {
      std::string l, r;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ', 1);
        if (sp == std::string::npos)
          return corrupt(where, fmt::format("merge '{}' has no space", s));
        l = s.substr(0, sp);
        r = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        l = m[0].get<std::string>();
        r = m[1].get<std::string>();
      } else {
        return corrupt(where, "a merge is neither \"a b\" nor [a, b]");
      }
      auto li = t->ids.find(l), ri = t->ids.find(r), mi = t->ids.find(l + r);
      if (li == t->ids.end() || ri == t->ids.end() || mi == t->ids.end())
        return corrupt(where,
                       fmt::format("merge '{} {}' uses a piece missing from the vocabulary", l, r));
      const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(li->second)) << 32) |
                           static_cast<uint32_t>(ri->second);
      t->merges.emplace(key, std::pair{rank++, mi->second});
    }
  }
  TROUPE_TRY(add_normalizer(*t, j.contains("normalizer") ? j["normalizer"] : json(), where));
  TROUPE_TRY(
      add_pretokenizer(*t, j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), where));
  TROUPE_TRY(add_decoder(*t, j.contains("decoder") ? j["decoder"] : json(), where));
  TROUPE_TRY(
      add_post_processor(*t, j.contains("post_processor") ? j["post_processor"] : json(), where));
  t->kind_name = t->byte_level ? "byte-level" : "bpe";
  TROUPE_TRY(apply_tokenizer_config(*t, config_text, where));
  if (t->bos < 0 && !t->prefix_ids.empty()) t->bos = t->prefix_ids.front();
  return std::unique_ptr<tokenizer>(new tokenizer(std::move(t)));
}

expected<std::unique_ptr<tokenizer>> tokenizer::from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path tj = fs::path(dir) / "tokenizer.json";
  const fs::path tc = fs::path(dir) / "tokenizer_config.json";
  if (const fs::path tt = fs::path(dir) / "tiktoken.model"; !fs::exists(tj) && fs::exists(tt)) {
    // the split is code in the model's tokenizer class: known for Kimi's
    const std::string config = fs::exists(tc) ? read_text(tc) : "";
    if (config.find("tokenization_kimi") == std::string::npos)
      return make_error(errc::unsupported,
                        "{}: tiktoken.model whose pre-tokenizer Troupe does not know (its split "
                        "is in the model's Python tokenizer; Kimi's tokenization_kimi.py is read)",
                        dir);
    return from_tiktoken(read_text(tt), config, "kimi-k2", tt.string());
  }
  if (!fs::exists(tj)) return make_error(errc::not_found, "{}: no tokenizer.json", dir);
  return from_hf_json(read_text(tj), fs::exists(tc) ? read_text(tc) : "", tj.string());
}

} // namespace troupe
