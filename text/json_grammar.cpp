// json_grammar.cpp: the byte automaton of json_grammar.hpp. Each mode takes a byte or refuses
// it; a byte that ends a number or an enum value of different lengths ("1" against "12") is
// taken again by the mode that follows the value.
#include "text/json_grammar.hpp"

namespace troupe {

namespace {

const std::string_view builtin[3] = {"true", "false", "null"};

bool is_ws(uint8_t c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}
bool is_hex(uint8_t c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

} // namespace

json_grammar::json_grammar(const json_schema& s)
    : s_(&s)
    , node_(s.root) {}

void json_grammar::copy_from(const json_grammar& o) {
  s_ = o.s_;
  m_ = o.m_;
  node_ = o.node_;
  ws_ = o.ws_;
  esc_ = o.esc_;
  utf8_ = o.utf8_;
  lead_ = o.lead_;
  num_ = o.num_;
  lit_builtin_ = o.lit_builtin_;
  free_key_ = o.free_key_;
  cand_ = o.cand_;
  pos_ = o.pos_;
  digits_ = o.digits_;
  depth_ = o.depth_;
  hex_ = o.hex_;
  low_due_ = o.low_due_;
  kh_ = o.kh_;
  nkeyh_ = o.nkeyh_;
  for (int32_t i = 0; i < nkeyh_; ++i) keyh_[i] = o.keyh_[i];
  for (int32_t i = 0; i < depth_; ++i) stack_[i] = o.stack_[i];
  forks_ = o.forks_;
}

json_grammar::json_grammar(const json_grammar& o) {
  copy_from(o);
}

json_grammar& json_grammar::operator=(const json_grammar& o) {
  if (this != &o) copy_from(o);
  return *this;
}

// A run of whitespace, as llama.cpp's JSON grammar has it: one space, or a newline and an
// indent of at most max_ws spaces or tabs (pretty-printed JSON), nothing longer: weak models
// otherwise spend their tokens padding. ws_: 0 none yet, 0x40 after the one space, 0x80 + n
// after a newline and n indent bytes.
bool json_grammar::space(uint8_t c) {
  if (ws_ == 0) {
    if (c == ' ') {
      ws_ = 0x40;
      return true;
    }
    if (c == '\n') {
      ws_ = 0x80;
      return true;
    }
    return false;
  }
  if (!(ws_ & 0x80) || (c != ' ' && c != '\t')) return false;
  ++ws_;
  return (ws_ & 0x3f) <= max_ws;
}

// The first byte of a value of node_.
// Several anyOf branches start alike: each is read on in a state of its own (a fork), this
// state takes the first that takes c; without a fork list, only that one is read. Out of
// start_value's way (a whole state is copied here).
__attribute__((noinline)) bool json_grammar::start_alike(uint8_t c, int cls) {
  const json_grammar before = *this;
  bool took = false;
  for (int32_t b : node(node_).branches) {
    if (!(node(b).starts & cls)) continue;
    json_grammar g = before;
    g.node_ = b;
    if (!g.start_value(c)) continue;
    if (!took) {
      *this = g;
      took = true;
      if (!forks_) break;
    } else {
      forks_->push_back(g);
    }
  }
  return took;
}

bool json_grammar::start_value(uint8_t c) {
  const json_node& n = node(node_);
  ws_ = 0;
  if (n.never) return false;
  if (!n.branches.empty()) { // anyOf / oneOf: the branches this first character starts
    const int cls = json_first_class(c);
    int32_t first = -1, count = 0; // (a branch no value fits starts with nothing)
    for (int32_t b : n.branches)
      if (node(b).starts & cls) {
        if (first < 0) first = b;
        ++count;
      }
    if (first < 0) return false;
    if (count == 1) { // one reading, as in every union whose branches start differently
      node_ = first;
      return start_value(c);
    }
    return start_alike(c, cls);
  }
  // enum values, or true / false / null (literal_byte's builtin list)
  auto literal = [&](bool builtin, uint64_t cand) {
    m_ = mode::literal;
    lit_builtin_ = builtin;
    cand_ = cand;
    pos_ = 0;
    bool again = false;
    return literal_byte(c, again) && !again;
  };
  if (!n.literals.empty())
    return literal(false,
                   n.literals.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << n.literals.size()) - 1);
  if (c == '{' && (n.types & json_node::t_obj)) {
    if (depth_ == max_depth) return false;
    stack_[depth_++] = {node_, true, 0, 0, 0, nkeyh_};
    m_ = mode::key_or_end;
    return true;
  }
  if (c == '[' && (n.types & json_node::t_arr)) {
    if (depth_ == max_depth) return false;
    stack_[depth_++] = {node_, false, 0, 0, 0, nkeyh_};
    m_ = mode::item_or_end;
    return true;
  }
  if (c == '"' && (n.types & json_node::t_str)) {
    m_ = mode::string;
    esc_ = utf8_ = 0;
    pos_ = 0;
    return true;
  }
  if ((c == 't' || c == 'f') && (n.types & json_node::t_bool)) return literal(true, 3);
  if (c == 'n' && (n.types & json_node::t_null)) return literal(true, 4);
  if ((c == '-' || is_digit(c)) && (n.types & (json_node::t_int | json_node::t_num))) {
    m_ = mode::number;
    num_ = 0;
    digits_ = 0;
    bool again = false;
    return number_byte(c, again);
  }
  return false;
}

// String content (values and keys): escapes, UTF-8, the closing quote.
bool json_grammar::string_byte(uint8_t c, bool& closed) {
  closed = false;
  if (esc_ == 1) {
    if (c == 'u') {
      esc_ = 2;
      hex_ = 0;
      return true;
    }
    if (low_due_) return false; // a high surrogate's low half must follow
    if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
        c == 't') {
      esc_ = 0;
      return true;
    }
    return false;
  }
  if (esc_ >= 2) { // \uXXXX: surrogates only as a high half followed by a low one
    if (!is_hex(c)) return false;
    const int v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    if (esc_ == 2 && low_due_ && v != 0xd) return false; // a low half is \uDC00-\uDFFF
    hex_ = static_cast<uint16_t>(hex_ << 4 | v);
    if (esc_ == 3) { // the first two digits say whether it is a surrogate
      const bool low = hex_ >= 0xdc && hex_ <= 0xdf;
      if (low != low_due_) return false;
    }
    if (esc_ < 5) {
      ++esc_;
      return true;
    }
    esc_ = 0;
    low_due_ = !low_due_ && hex_ >= 0xd800 && hex_ <= 0xdbff;
    return true;
  }
  if (low_due_) { // only a backslash may start the low half
    if (c != '\\') return false;
    esc_ = 1;
    return true;
  }
  if (utf8_ > 0) { // well-formed UTF-8 only (utf8_lead_of's ranges)
    const utf8_lead l = utf8_lead_of(lead_);
    if (utf8_ == l.more ? (c < l.lo || c > l.hi) : (c & 0xc0) != 0x80) return false;
    --utf8_;
    return true;
  }
  if (c == '"') {
    closed = true;
    return true;
  }
  if (c == '\\') {
    esc_ = 1;
    return true;
  }
  if (c < 0x20) return false;
  if (c < 0x80) return true;
  utf8_ = static_cast<uint8_t>(utf8_lead_of(c).more);
  lead_ = c;
  return utf8_ > 0;
}

bool json_grammar::literal_byte(uint8_t c, bool& reprocess) {
  reprocess = false;
  const json_node& n = node(node_);
  auto text = [&](int i) -> std::string_view {
    return lit_builtin_ ? builtin[i] : std::string_view(n.literals[static_cast<size_t>(i)]);
  };
  const int count = lit_builtin_ ? 3 : static_cast<int>(n.literals.size());
  uint64_t next = 0;
  bool ended = false; // a candidate ended right before c
  for (int i = 0; i < count; ++i) {
    if (!((cand_ >> i) & 1)) continue;
    const std::string_view t = text(i);
    if (static_cast<size_t>(pos_) == t.size())
      ended = true;
    else if (static_cast<uint8_t>(t[static_cast<size_t>(pos_)]) == c)
      next |= uint64_t{1} << i;
  }
  if (next == 0) {
    if (!ended) return false;
    m_ = mode::after; // c follows the value
    reprocess = true;
    return true;
  }
  cand_ = next;
  ++pos_;
  bool all_end = true;
  for (int i = 0; i < count; ++i)
    if (((cand_ >> i) & 1) && text(i).size() != static_cast<size_t>(pos_)) all_end = false;
  if (all_end) m_ = mode::after;
  return true;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; integers without fraction or exponent.
bool json_grammar::number_byte(uint8_t c, bool& reprocess) {
  reprocess = false;
  const bool integer = !(node(node_).types & json_node::t_num);
  // at most 24 digits before the exponent (which has its own two): '.' only while one more
  // may follow it
  if (is_digit(c) && num_ < 6 && ++digits_ > 24) return false;
  if (c == '.' && digits_ >= 24) return false;
  switch (num_) {
  case 0: // start
    if (c == '-') {
      num_ = 1;
      return true;
    }
    [[fallthrough]];
  case 1: // after '-'
    if (c == '0')
      num_ = 3;
    else if (is_digit(c))
      num_ = 2;
    else
      return false;
    return true;
  case 2: // integer digits
  case 3: // a leading 0
    if (num_ == 2 && is_digit(c)) return true;
    if (c == '.' && !integer) {
      num_ = 4;
      return true;
    }
    if ((c == 'e' || c == 'E') && !integer) {
      num_ = 6;
      return true;
    }
    break;
  case 4: // after '.'
    if (!is_digit(c)) return false;
    num_ = 5;
    return true;
  case 5: // fraction digits
    if (is_digit(c)) return true;
    if (c == 'e' || c == 'E') {
      num_ = 6;
      return true;
    }
    break;
  case 6: // after 'e'
    if (c == '+' || c == '-') {
      num_ = 7;
      return true;
    }
    [[fallthrough]];
  case 7: // after the exponent's sign
    if (!is_digit(c)) return false;
    num_ = 8;
    pos_ = 1; // exponent digits
    return true;
  case 8: // exponent digits: at most 2, so the number stays within a double's range
    if (is_digit(c)) return ++pos_ <= 2;
    break;
  default:
    return false;
  }
  // c ends the number (states 2, 3, 5 and 8 are complete)
  if (is_digit(c)) return false; // a digit after a leading 0
  m_ = mode::after;
  reprocess = true;
  return true;
}

// A byte of an object key: the schema's keys not yet present whose text still matches, and,
// where other keys are allowed, any string.
bool json_grammar::key_byte(uint8_t c) {
  frame& f = stack_[depth_ - 1];
  const json_node& obj = node(f.node);
  const uint8_t esc_before = esc_;
  bool closed = false;
  if (!string_byte(c, closed)) return false;
  if (closed) { // the key ends here: one of the schema's keys (each once), or any other
    for (size_t i = 0; i < obj.keys.size(); ++i)
      if (((cand_ >> i) & 1) && obj.keys[i].size() == static_cast<size_t>(pos_)) {
        if (((f.used >> i) & 1) || node(obj.key_nodes[i]).never) return false;
        f.used |= uint64_t{1} << i;
        f.value = obj.key_nodes[i];
        m_ = mode::colon;
        return true;
      }
    if (!free_key_) return false;
    for (int32_t i = f.keyh0; i < nkeyh_; ++i)
      if (keyh_[i] == kh_) return false; // this object has that key already
    if (nkeyh_ == max_other_keys) return false;
    keyh_[nkeyh_++] = kh_;
    f.value = obj.additional;
    m_ = mode::colon;
    return true;
  }
  kh_ = (kh_ ^ c) * 0x100000001b3ull;
  uint64_t next = 0;
  for (size_t i = 0; i < obj.keys.size(); ++i)
    if (((cand_ >> i) & 1) && obj.keys[i].size() > static_cast<size_t>(pos_) &&
        static_cast<uint8_t>(obj.keys[i][static_cast<size_t>(pos_)]) == c)
      next |= uint64_t{1} << i;
  if (next == 0) {
    if (!free_key_) return false;
    // another key is written as the schema's are (JSON's short escapes only, no \u or \/),
    // so a key the schema names cannot come back in another spelling
    if (esc_before == 1 && (c == 'u' || c == '/')) return false;
  }
  cand_ = next;
  ++pos_;
  return true;
}

void json_grammar::close_container() {
  nkeyh_ = stack_[depth_ - 1].keyh0; // its other keys' hashes are done with
  --depth_;
  m_ = depth_ == 0 ? mode::done : mode::after;
}

bool json_grammar::feed(uint8_t c, std::vector<json_grammar>* forks) {
  forks_ = forks;
  const bool ok = feed(c);
  forks_ = nullptr;
  for (auto& f : *forks) f.forks_ = nullptr;
  return ok;
}

bool json_grammar::same_future(const json_grammar& o) const {
  if (s_ != o.s_ || m_ != o.m_ || ws_ != o.ws_ || depth_ != o.depth_ || nkeyh_ != o.nkeyh_)
    return false;
  for (int32_t i = 0; i < depth_; ++i) {
    const frame &a = stack_[i], &b = o.stack_[i];
    if (a.node != b.node || a.object != b.object || a.used != b.used || a.count != b.count ||
        a.value != b.value || a.keyh0 != b.keyh0)
      return false;
  }
  for (int32_t i = 0; i < nkeyh_; ++i)
    if (keyh_[i] != o.keyh_[i]) return false;
  const bool text = esc_ == o.esc_ && utf8_ == o.utf8_ && lead_ == o.lead_ && hex_ == o.hex_ &&
                    low_due_ == o.low_due_;
  switch (m_) { // what each mode reads on; the rest is left over from earlier values
  case mode::value:
    return node_ == o.node_;
  case mode::string:
    return node_ == o.node_ && text && pos_ == o.pos_;
  case mode::key:
    return text && free_key_ == o.free_key_ && cand_ == o.cand_ && pos_ == o.pos_ && kh_ == o.kh_;
  case mode::number:
    return node_ == o.node_ && num_ == o.num_ && digits_ == o.digits_;
  case mode::literal:
    return node_ == o.node_ && lit_builtin_ == o.lit_builtin_ && cand_ == o.cand_ && pos_ == o.pos_;
  default:
    return true;
  }
}

bool json_readings::feed(uint8_t c) {
  std::vector<json_grammar> next, forks;
  auto keep = [&](const json_grammar& g) {
    for (const auto& h : next)
      if (h.same_future(g)) return;
    if (next.size() < max_readings) next.push_back(g); // one fewer reading narrows, never widens
  };
  for (const auto& s : states_) {
    json_grammar g = s;
    forks.clear();
    if (g.feed(c, &forks)) keep(g);
    for (const auto& f : forks) keep(f);
  }
  if (next.empty()) return false;
  states_ = std::move(next);
  return true;
}

bool json_readings::done() const {
  for (const auto& s : states_)
    if (s.done()) return true;
  return false;
}

bool json_grammar::feed(uint8_t c) {
  for (;;) {
    switch (m_) {
    case mode::value:
      if (is_ws(c)) return space(c);
      return start_value(c);
    case mode::string: {
      // c begins a character (or closes); a low surrogate's half is the same character
      const bool starts = esc_ == 0 && utf8_ == 0 && !low_due_;
      bool closed = false;
      if (!string_byte(c, closed)) return false;
      const json_node& n = node(node_);
      if (closed) {
        if (pos_ < n.min_length) return false;
        m_ = mode::after;
        return true;
      }
      if (starts && ++pos_ > n.max_length) return false;
      return true;
    }
    case mode::key:
      return key_byte(c);
    case mode::number: {
      bool again = false;
      if (!number_byte(c, again)) return false;
      if (again) continue;
      return true;
    }
    case mode::literal: {
      bool again = false;
      if (!literal_byte(c, again)) return false;
      if (again) continue;
      return true;
    }
    case mode::after: {
      if (depth_ == 0) {
        m_ = mode::done;
        return false;
      }
      frame& f = stack_[depth_ - 1];
      if (f.object) {
        m_ = mode::comma_or_end;
      } else {
        ++f.count;
        m_ = mode::item_comma_or_end;
      }
      ws_ = 0;
      continue;
    }
    case mode::key_or_end:
    case mode::key_next: {
      if (is_ws(c)) return space(c);
      frame& f = stack_[depth_ - 1];
      const json_node& obj = node(f.node);
      if (c == '}' && m_ == mode::key_or_end) {
        if ((f.used & obj.required) != obj.required) return false;
        ws_ = 0;
        close_container();
        return true;
      }
      if (c != '"') return false;
      uint64_t unused = 0;
      for (size_t i = 0; i < obj.keys.size(); ++i)
        if (!((f.used >> i) & 1) && !node(obj.key_nodes[i]).never) unused |= uint64_t{1} << i;
      if (unused == 0 && obj.additional < 0) return false;
      m_ = mode::key;
      kh_ = 0xcbf29ce484222325ull;
      // with other keys allowed, the used ones stay candidates so that a repeat is refused
      // at its closing quote rather than taken as another key
      cand_ = obj.additional >= 0
                  ? (obj.keys.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << obj.keys.size()) - 1)
                  : unused;
      free_key_ = obj.additional >= 0;
      pos_ = 0;
      esc_ = utf8_ = 0;
      ws_ = 0;
      return true;
    }
    case mode::colon:
      if (is_ws(c)) return space(c);
      if (c != ':') return false;
      node_ = stack_[depth_ - 1].value;
      m_ = mode::value;
      ws_ = 0;
      return true;
    case mode::comma_or_end: {
      if (is_ws(c)) return space(c);
      frame& f = stack_[depth_ - 1];
      const json_node& obj = node(f.node);
      if (c == '}') {
        if ((f.used & obj.required) != obj.required) return false;
        ws_ = 0;
        close_container();
        return true;
      }
      if (c != ',') return false;
      bool more = obj.additional >= 0;
      for (size_t i = 0; i < obj.keys.size() && !more; ++i)
        if (!((f.used >> i) & 1) && !node(obj.key_nodes[i]).never) more = true;
      if (!more) return false;
      m_ = mode::key_next;
      ws_ = 0;
      return true;
    }
    case mode::item_or_end:
    case mode::item_comma_or_end: {
      if (is_ws(c)) return space(c);
      frame& f = stack_[depth_ - 1];
      const json_node& arr = node(f.node);
      if (c == ']') {
        if (f.count < arr.min_items) return false;
        ws_ = 0;
        close_container();
        return true;
      }
      if (node(arr.items).never) return false; // only [] fits
      if (m_ == mode::item_comma_or_end) {
        if (c != ',' || f.count >= arr.max_items) return false;
        node_ = arr.items;
        m_ = mode::value;
        ws_ = 0;
        return true;
      }
      if (f.count >= arr.max_items) return false;
      node_ = arr.items;
      m_ = mode::value;
      continue; // the item's first byte
    }
    case mode::done:
      return false;
    }
    return false;
  }
}

} // namespace troupe
