// bpe.cpp: the merge models of the tokenizer (tokenizer_impl.hpp), on one pre-tokenized word.
//  - bpe: Hugging Face BPE. Start from the word's characters (unknown ones become <0xXX>
//    byte tokens when byte_fallback is set, else unk), then repeatedly apply the merge of
//    lowest rank, leftmost first, until none applies.
//  - spm: SentencePiece / llama.cpp. Start from characters; repeatedly merge the adjacent pair
//    whose concatenation is a vocabulary piece of highest score, leftmost first; characters
//    left unknown become byte tokens.
// Both use a linked list of symbols and a heap of candidate merges with lazy invalidation:
// O(n log n) in the word length, so a prompt that is one long "word" stays cheap.
#include <cstdio>
#include <queue>

#include "text/tokenizer_impl.hpp"

namespace troupe {
namespace {

struct symbol {
  int prev, next;
  uint32_t off, len; // span of the word
  int32_t id;        // vocabulary id, or -1 (unknown text)
  bool alive = true;
};

inline uint64_t pair_key(int32_t l, int32_t r) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
}

void emit_unknown(const tokenizer_impl& t, std::string_view text, std::vector<int32_t>& out,
                  bool& last_unk) {
  if (t.byte_fallback) {
    bool all = true;
    for (unsigned char c : text) all = all && t.byte_ids[c] >= 0;
    if (all) {
      for (unsigned char c : text) out.push_back(t.byte_ids[c]);
      last_unk = false;
      return;
    }
  }
  if (t.unk_id < 0)
    return; // no way to represent it: dropped (vocabularies without unk are byte-complete)
  if (t.fuse_unk && last_unk) return;
  out.push_back(t.unk_id);
  last_unk = true;
}

void encode_bpe(const tokenizer_impl& t, std::string_view word, std::vector<int32_t>& out) {
  std::vector<symbol> syms;
  bool last_unk = false;
  for (std::string_view ch : unicode::chars(word)) {
    const auto off = static_cast<uint32_t>(ch.data() - word.data());
    auto it = t.ids.find(std::string(ch));
    if (it != t.ids.end()) {
      syms.push_back({0, 0, off, static_cast<uint32_t>(ch.size()), it->second});
    } else if (t.byte_fallback && [&] {
                 for (unsigned char c : ch)
                   if (t.byte_ids[c] < 0) return false;
                 return true;
               }()) {
      for (size_t k = 0; k < ch.size(); ++k)
        syms.push_back({0, 0, static_cast<uint32_t>(off + k), 1,
                        t.byte_ids[static_cast<unsigned char>(ch[k])]});
    } else {
      syms.push_back({0, 0, off, static_cast<uint32_t>(ch.size()), -1});
    }
  }
  const int n = static_cast<int>(syms.size());
  for (int i = 0; i < n; ++i) {
    syms[i].prev = i - 1;
    syms[i].next = i + 1 < n ? i + 1 : -1;
  }
  struct cand {
    int32_t rank;
    int left;
    int32_t lid, rid;
    bool operator>(const cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<cand, std::vector<cand>, std::greater<cand>> heap;
  auto consider = [&](int l) {
    if (l < 0) return;
    const int r = syms[l].next;
    if (r < 0 || syms[l].id < 0 || syms[r].id < 0) return;
    auto it = t.merges.find(pair_key(syms[l].id, syms[r].id));
    if (it != t.merges.end()) heap.push({it->second.first, l, syms[l].id, syms[r].id});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const cand c = heap.top();
    heap.pop();
    symbol& l = syms[c.left];
    if (!l.alive || l.id != c.lid || l.next < 0) continue;
    symbol& r = syms[l.next];
    if (r.id != c.rid) continue;
    l.id = t.merges.at(pair_key(c.lid, c.rid)).second;
    l.len += r.len;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0 && i < n; i = syms[i].next) {
    if (syms[i].id >= 0) {
      out.push_back(syms[i].id);
      last_unk = false;
    } else {
      emit_unknown(t, word.substr(syms[i].off, syms[i].len), out, last_unk);
    }
  }
}

void encode_spm(const tokenizer_impl& t, std::string_view word, std::vector<int32_t>& out) {
  std::vector<symbol> syms;
  for (std::string_view ch : unicode::chars(word))
    syms.push_back({0, 0, static_cast<uint32_t>(ch.data() - word.data()),
                    static_cast<uint32_t>(ch.size()), -1});
  const int n = static_cast<int>(syms.size());
  for (int i = 0; i < n; ++i) {
    syms[i].prev = i - 1;
    syms[i].next = i + 1 < n ? i + 1 : -1;
  }
  struct cand {
    float score;
    int left;
    uint32_t len; // combined length when queued, to detect stale entries
    bool operator<(const cand& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<cand> heap;
  std::string key;
  auto consider = [&](int l) {
    if (l < 0) return;
    const int r = syms[l].next;
    if (r < 0) return;
    key.assign(word.substr(syms[l].off, syms[l].len + syms[r].len));
    auto it = t.ids.find(key);
    if (it == t.ids.end() || !t.mergeable[it->second]) return;
    heap.push({t.scores[it->second], l, syms[l].len + syms[r].len});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const cand c = heap.top();
    heap.pop();
    symbol& l = syms[c.left];
    if (!l.alive || l.next < 0 || l.len + syms[l.next].len != c.len) continue;
    symbol& r = syms[l.next];
    l.len += r.len;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  bool last_unk = false;
  for (int i = 0; i >= 0 && i < n; i = syms[i].next) {
    const std::string_view text = word.substr(syms[i].off, syms[i].len);
    auto it = t.ids.find(std::string(text));
    if (it != t.ids.end() && t.mergeable[it->second]) {
      out.push_back(it->second);
      last_unk = false;
    } else {
      emit_unknown(t, text, out, last_unk);
    }
  }
}

} // namespace

void tokenizer_impl::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    auto it = ids.find(std::string(word));
    if (it != ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (model == model_t::spm)
    encode_spm(*this, word, out);
  else
    encode_bpe(*this, word, out);
}

void tokenizer_impl::index_pieces() {
  ids.clear();
  ids.reserve(pieces.size() * 2);
  for (size_t i = 0; i < pieces.size(); ++i) ids.emplace(pieces[i], static_cast<int32_t>(i));
  byte_ids.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = ids.find(name);
    if (it != ids.end()) byte_ids[b] = it->second;
  }
  if (special.size() < pieces.size()) special.resize(pieces.size(), 0);
  if (mergeable.size() < pieces.size()) mergeable.resize(pieces.size(), 1);
}

} // namespace troupe
