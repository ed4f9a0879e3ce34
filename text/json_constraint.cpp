// json_constraint.cpp: token_vocab (the tokens' bytes, their tries, the free-string set) and
// json_token_constraint's mask walk (json_constraint.hpp).
#include "text/json_constraint.hpp"

#include <algorithm>
#include <numeric>

#include "text/tokenizer.hpp"

namespace troupe {

namespace {

// Printable ASCII but '"' and '\\', or whole UTF-8 characters: bytes a JSON string may hold
// as they are, in any free string state, leaving it as it was.
bool free_string_bytes(std::string_view b) {
  if (b.empty()) return false;
  size_t i = 0;
  while (i < b.size()) {
    const auto c = static_cast<uint8_t>(b[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == '"' || c == '\\' || c == 0x7f) return false;
      ++i;
      continue;
    }
    // a whole, well-formed UTF-8 character (the grammar's rule)
    const utf8_lead l = utf8_lead_of(c);
    const auto n = static_cast<size_t>(l.more);
    if (n == 0 || i + n >= b.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<uint8_t>(b[i + k]);
      if (k == 1 ? (d < l.lo || d > l.hi) : (d & 0xc0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

// A trie over the given ids' bytes, built from them in sorted order.
token_vocab::trie build_trie(const std::vector<std::string>& bytes, std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes[static_cast<size_t>(a)] < bytes[static_cast<size_t>(b)] ||
           (bytes[static_cast<size_t>(a)] == bytes[static_cast<size_t>(b)] && a < b);
  });
  // nodes in creation order (depth first, children by byte): parent, byte; tokens per node
  std::vector<int32_t> parent = {-1};
  std::vector<uint8_t> byte = {0};
  std::vector<std::vector<int32_t>> toks(1);
  std::vector<int32_t> path = {0}; // nodes of the previous token's bytes
  std::string_view prev;
  for (int32_t id : ids) {
    const std::string_view b = bytes[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < prev.size() && common < b.size() && prev[common] == b[common]) ++common;
    path.resize(common + 1);
    for (size_t k = common; k < b.size(); ++k) {
      parent.push_back(path.back());
      byte.push_back(static_cast<uint8_t>(b[k]));
      toks.emplace_back();
      path.push_back(static_cast<int32_t>(parent.size() - 1));
    }
    toks[static_cast<size_t>(path.back())].push_back(id);
    prev = b;
  }
  const size_t n = parent.size();
  token_vocab::trie t;
  std::vector<int32_t> count(n, 0);
  for (size_t i = 1; i < n; ++i) ++count[static_cast<size_t>(parent[i])];
  t.first.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) t.first[i + 1] = t.first[i] + count[i];
  t.edge_byte.resize(n - 1);
  t.edge_child.resize(n - 1);
  std::vector<int32_t> fill(t.first.begin(), t.first.end() - 1);
  for (size_t i = 1; i < n; ++i) { // creation order keeps each node's children by byte
    const auto p = static_cast<size_t>(parent[i]);
    t.edge_byte[static_cast<size_t>(fill[p])] = byte[i];
    t.edge_child[static_cast<size_t>(fill[p]++)] = static_cast<int32_t>(i);
  }
  t.tok_first.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    t.tok_first[i + 1] = t.tok_first[i] + static_cast<int32_t>(toks[i].size());
  for (const auto& v : toks) t.toks.insert(t.toks.end(), v.begin(), v.end());
  return t;
}

// Every token below node n whose bytes the grammar g takes from here, into bits. forks: the
// walk's one list of readings that anyOf branches starting alike add (empty but where they
// meet; a level's own are those past the size it found, taken off again when done).
// Forks: false where the schema has no such anyOf (nothing to keep track of at every byte).
template <bool Forks>
void walk(const token_vocab::trie& t, int32_t n, const json_grammar& g, uint64_t* bits,
          std::vector<json_grammar>& forks) {
  const auto un = static_cast<size_t>(n);
  const size_t mark = forks.size();
  for (int32_t e = t.first[un]; e < t.first[un + 1]; ++e) {
    json_grammar h = g;
    if constexpr (Forks) h.fork_into(&forks);
    const bool ok = h.feed(t.edge_byte[static_cast<size_t>(e)]);
    if (!ok && (!Forks || forks.size() == mark)) continue;
    const auto c = static_cast<size_t>(t.edge_child[static_cast<size_t>(e)]);
    for (int32_t k = t.tok_first[c]; k < t.tok_first[c + 1]; ++k) {
      const int32_t id = t.toks[static_cast<size_t>(k)];
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    const bool deeper = t.first[c] < t.first[c + 1];
    if (ok && deeper) walk<Forks>(t, static_cast<int32_t>(c), h, bits, forks);
    if constexpr (Forks)
      while (forks.size() > mark) { // (rare) the other readings of this byte
        const json_grammar f = forks.back();
        forks.pop_back();
        if (deeper) walk<Forks>(t, static_cast<int32_t>(c), f, bits, forks);
      }
  }
}

} // namespace

void token_vocab::build() {
  std::vector<int32_t> all, not_free;
  free_.assign((bytes_.size() + 63) / 64, 0);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].empty()) continue;
    all.push_back(static_cast<int32_t>(id));
    if (free_string_bytes(bytes_[id]))
      free_[id >> 6] |= uint64_t{1} << (id & 63);
    else
      not_free.push_back(static_cast<int32_t>(id));
  }
  all_ = build_trie(bytes_, all);
  not_free_ = build_trie(bytes_, not_free);
}

std::shared_ptr<const token_vocab> token_vocab::from_bytes(std::vector<std::string> bytes) {
  auto v = std::make_shared<token_vocab>();
  v->bytes_ = std::move(bytes);
  v->build();
  return v;
}

std::shared_ptr<const token_vocab> token_vocab::from(const tokenizer& tok) {
  // a token's bytes inside a text: decoded after an anchor token and the anchor's own bytes
  // taken off (a SentencePiece decoder drops the leading space of a text's first token only)
  const int32_t V = tok.vocab_size();
  int32_t anchor = -1;
  for (const char* a : {"a",
                        "\xe2\x96\x81"
                        "a",
                        "Ġa", "the"}) {
    anchor = tok.find(a);
    if (anchor >= 0 && !tok.is_special(anchor)) break;
    anchor = -1;
  }
  std::string head;
  if (anchor >= 0) head = tok.decode_bytes(std::vector<int32_t>{anchor});
  std::vector<std::string> bytes(static_cast<size_t>(V));
  for (int32_t id = 0; id < V; ++id) {
    if (tok.is_special(id)) continue;
    if (anchor < 0) {
      bytes[static_cast<size_t>(id)] = tok.decode_bytes(std::vector<int32_t>{id});
      continue;
    }
    const std::string both = tok.decode_bytes(std::vector<int32_t>{anchor, id});
    if (both.size() > head.size() && both.compare(0, head.size(), head) == 0)
      bytes[static_cast<size_t>(id)] = both.substr(head.size());
  }
  return from_bytes(std::move(bytes));
}

json_token_constraint::json_token_constraint(std::shared_ptr<const json_schema> schema,
                                             std::shared_ptr<const token_vocab> vocab,
                                             std::vector<int32_t> eos)
    : schema_(std::move(schema))
    , vocab_(std::move(vocab))
    , eos_(std::move(eos))
    , g_(*schema_) {}

std::unique_ptr<token_constraint> json_token_constraint::clone() const {
  return std::make_unique<json_token_constraint>(*this);
}

bool json_token_constraint::advance(int32_t token) {
  if (std::find(eos_.begin(), eos_.end(), token) != eos_.end()) return g_.done();
  const std::string_view b = vocab_->bytes(token);
  return !b.empty() && g_.feed(b);
}

void json_token_constraint::allowed(std::vector<uint64_t>& bits) const {
  bits.assign((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  if (g_.done()) {
    for (int32_t e : eos_)
      if (e >= 0 && e < vocab_->size())
        bits[static_cast<size_t>(e >> 6)] |= uint64_t{1} << (e & 63);
    return;
  }
  for (const json_grammar& g : g_.states()) { // every reading's tokens
    if (g.in_free_string()) {
      const auto& free = vocab_->free_string();
      if (g_.states().size() == 1)
        bits = free;
      else
        for (size_t i = 0; i < bits.size() && i < free.size(); ++i) bits[i] |= free[i];
      (schema_->alike ? walk<true> : walk<false>)(vocab_->not_free(), 0, g, bits.data(), forks_);
    } else {
      (schema_->alike ? walk<true> : walk<false>)(vocab_->all(), 0, g, bits.data(), forks_);
    }
  }
}

expected<std::shared_ptr<const token_constraint>>
response_format_constraint(std::string_view response_format,
                           std::shared_ptr<const token_vocab> vocab, std::vector<int32_t> eos) {
  auto s = compile_response_format(response_format);
  if (!s) return s.error();
  auto schema = std::make_shared<const json_schema>(std::move(*s));
  return std::shared_ptr<const token_constraint>(
      std::make_shared<json_token_constraint>(schema, std::move(vocab), std::move(eos)));
}

} // namespace troupe
