// parse.cpp: Jinja source -> program. Two stages: the source is cut into text and tags with
// jinja2's whitespace rules as transformers configures them (trim_blocks: a block or comment
// tag eats the newline after it; lstrip_blocks: spaces and tabs before a block or comment tag
// that starts its line go; '-' inside a tag's delimiter strips all whitespace on that side,
// '+' keeps it), then each tag's content is tokenized and parsed by recursive descent in
// jinja2's precedence (conditional < or < and < not < comparisons and in < ~ < + - < * / // %
// < ** < unary < filters and tests < postfix).
#include <cctype>
#include <cstring>

#include <fmt/core.h>

#include "text/jinja/ast.hpp"

namespace troupe::jinja {
namespace {

enum class seg_kind { text, var, block };

struct segment {
  seg_kind k;
  std::string content; // text, or the tag's inside without delimiters and whitespace marks
  int line;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

int count_lines(std::string_view s, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to && i < s.size(); ++i) n += s[i] == '\n';
  return n;
}

std::vector<segment> segment_source(std::string_view src) {
  std::vector<segment> out;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true; // the text at pos starts a line (for lstrip_blocks)
  bool strip_next = false;   // the last tag ended with '-'
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string_view::npos && open + 1 >= src.size()) open = std::string_view::npos;
    std::string text(
        src.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos));
    if (strip_next) {
      size_t i = 0;
      while (i < text.size() && is_space(text[i])) ++i;
      text.erase(0, i);
    }
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({seg_kind::text, std::move(text), line});
      break;
    }
    const char type = src[open + 1];
    size_t inner = open + 2;
    char mark = inner < src.size() ? src[inner] : '\0';
    if (mark == '-' || mark == '+')
      ++inner;
    else
      mark = '\0';
    // whitespace before the tag
    if (mark == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (mark != '+' && type != '{') {
      const size_t nl = text.rfind('\n');
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      if (nl != std::string::npos || line_starting) {
        bool blank = true;
        for (size_t i = from; i < text.size(); ++i)
          blank = blank && (text[i] == ' ' || text[i] == '\t');
        if (blank) text.erase(from);
      }
    }
    if (!text.empty()) out.push_back({seg_kind::text, text, line});
    line += count_lines(src, pos, open);
    // find the tag's end
    size_t end = 0, after = 0;
    char end_mark = '\0';
    if (type == '#') {
      end = src.find("#}", inner);
      if (end == std::string_view::npos)
        throw jinja_error(fmt::format("line {}: unclosed comment", line));
      after = end + 2;
    } else {
      const char close = type == '{' ? '}' : '%';
      int depth = 0;
      char quote = '\0';
      size_t i = inner;
      for (; i < src.size(); ++i) {
        const char c = src[i];
        if (quote) {
          if (c == '\\')
            ++i;
          else if (c == quote)
            quote = '\0';
          continue;
        }
        if (c == '\'' || c == '"')
          quote = c;
        else if (c == '(' || c == '[' || c == '{')
          ++depth;
        else if ((c == ')' || c == ']' || (c == '}' && depth > 0)) && depth > 0)
          --depth;
        else if (depth == 0 && c == close && i + 1 < src.size() && src[i + 1] == '}')
          break;
      }
      if (i >= src.size())
        throw jinja_error(fmt::format("line {}: unclosed '{{{}' tag", line, type));
      end = i;
      after = i + 2;
    }
    if (end > inner && (src[end - 1] == '-' || src[end - 1] == '+')) end_mark = src[end - 1];
    const size_t content_end = end_mark ? end - 1 : end;
    const std::string content(src.substr(inner, content_end - inner));
    if (type == '%' && trimmed(content) == "raw") {
      // {% raw %} ... {% endraw %}: the text between is not read as template
      size_t at = after, close_open = std::string_view::npos, close_end = 0;
      char close_mark = '\0', close_end_mark = '\0';
      while ((at = src.find("{%", at)) != std::string_view::npos) {
        size_t k = at + 2;
        char m = k < src.size() && (src[k] == '-' || src[k] == '+') ? src[k++] : '\0';
        const size_t e = src.find("%}", k);
        if (e == std::string_view::npos) break;
        std::string_view body = src.substr(k, e - k);
        char em = '\0';
        if (!body.empty() && (body.back() == '-' || body.back() == '+')) {
          em = body.back();
          body.remove_suffix(1);
        }
        if (trimmed(std::string(body)) == "endraw") {
          close_open = at;
          close_end = e + 2;
          close_mark = m;
          close_end_mark = em;
          break;
        }
        at = k;
      }
      if (close_open == std::string_view::npos)
        throw jinja_error(fmt::format("line {}: {{% raw %}} without {{% endraw %}}", line));
      std::string raw(src.substr(after, close_open - after));
      if (end_mark == '-')
        raw.erase(0, raw.find_first_not_of(" \t\r\n\f\v") == std::string::npos
                         ? raw.size()
                         : raw.find_first_not_of(" \t\r\n\f\v"));
      if (close_mark == '-') {
        while (!raw.empty() && is_space(raw.back())) raw.pop_back();
      } else if (close_mark != '+') {      // lstrip_blocks before {% endraw %}; {% raw %} keeps
        const size_t nl = raw.rfind('\n'); // the newline after it (as jinja2 does)
        if (nl != std::string::npos && raw.find_first_not_of(" \t", nl + 1) == std::string::npos)
          raw.erase(nl + 1);
      }
      if (!raw.empty()) out.push_back({seg_kind::text, raw, line});
      line += count_lines(src, open, close_end);
      pos = close_end;
      strip_next = close_end_mark == '-';
      line_starting = false;
      if (!strip_next && close_end_mark != '+' && pos < src.size() && src[pos] == '\n') {
        ++pos;
        ++line;
        line_starting = true;
      }
      continue;
    }
    if (type != '#') out.push_back({type == '{' ? seg_kind::var : seg_kind::block, content, line});
    line += count_lines(src, open, after);
    pos = after;
    strip_next = end_mark == '-';
    line_starting = false;
    if (!strip_next && end_mark != '+' && type != '{' && pos < src.size() && src[pos] == '\n') {
      ++pos; // trim_blocks
      ++line;
      line_starting = true;
    }
  }
  return out;
}

// ---- tokens inside a tag ----

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

enum class tok_kind { name, string, integer, number, op, end };

struct token {
  tok_kind k;
  std::string text;
  value lit;
};

std::vector<token> tokenize(std::string_view s, int line) {
  std::vector<token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({tok_kind::name, std::string(s.substr(i, j - i)), {}});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string digits;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') digits += s[k];
      token t{is_float ? tok_kind::number : tok_kind::integer, digits, {}};
      try {
        t.lit =
            is_float ? value(std::stod(digits)) : value(static_cast<int64_t>(std::stoll(digits)));
      } catch (const std::exception&) {
        throw jinja_error(fmt::format("line {}: bad number '{}'", line, digits));
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string text;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          text += s[j];
          continue;
        }
        const char e = s[++j];
        auto hex = [&](int digits) { // \xHH, \uHHHH, \UHHHHHHHH: a code point
          uint32_t cp = 0;
          for (int k = 0; k < digits; ++k) {
            const char h = j + 1 < s.size() ? s[j + 1] : '\0';
            if (!std::isxdigit(static_cast<unsigned char>(h)))
              throw jinja_error(fmt::format("line {}: truncated \\{} escape", line, e));
            const int v = std::isdigit(static_cast<unsigned char>(h))
                              ? h - '0'
                              : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10;
            cp = cp * 16 + static_cast<uint32_t>(v);
            ++j;
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            throw jinja_error(fmt::format("line {}: escape of an invalid code point", line));
          append_utf8(text, cp);
        };
        switch (e) {
        case 'n':
          text += '\n';
          break;
        case 't':
          text += '\t';
          break;
        case 'r':
          text += '\r';
          break;
        case 'a':
          text += '\a';
          break;
        case 'b':
          text += '\b';
          break;
        case 'f':
          text += '\f';
          break;
        case 'v':
          text += '\v';
          break;
        case '\\':
          text += '\\';
          break;
        case '\'':
          text += '\'';
          break;
        case '"':
          text += '"';
          break;
        case '\n':
          break;
        case 'x':
          hex(2);
          break;
        case 'u':
          hex(4);
          break;
        case 'U':
          hex(8);
          break;
        default:
          if (e >= '0' && e <= '7') { // octal, up to three digits
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && j + 1 < s.size() && s[j + 1] >= '0' && s[j + 1] <= '7'; ++k)
              cp = cp * 8 + static_cast<uint32_t>(s[++j] - '0');
            append_utf8(text, cp);
          } else {
            text += '\\';
            text += e;
          }
        }
      }
      if (j >= s.size()) throw jinja_error(fmt::format("line {}: unterminated string", line));
      out.push_back({tok_kind::string, text, value(text)});
      i = j + 1;
      continue;
    }
    static const char* const ops[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[",
                                      "]",  "{",  "}",  ".",  ",",  ":",  "|", "~", "+",
                                      "-",  "*",  "/",  "%",  "<",  ">",  "="};
    bool found = false;
    for (const char* op : ops) {
      const size_t n = std::strlen(op);
      if (s.substr(i, n) == op) {
        out.push_back({tok_kind::op, op, {}});
        i += n;
        found = true;
        break;
      }
    }
    if (!found) throw jinja_error(fmt::format("line {}: unexpected character '{}'", line, c));
  }
  out.push_back({tok_kind::end, "", {}});
  return out;
}

// ---- expressions ----

// Nesting of brackets, unary operators and blocks a template may have: deeper is refused,
// not followed (the parser and the renderer recurse).
constexpr int kMaxNesting = 200;

struct nesting {
  int& depth;
  explicit nesting(int& d, int line)
      : depth(d) {
    if (++depth > kMaxNesting)
      throw jinja_error(
          fmt::format("line {}: the template nests too deeply (more than {})", line, kMaxNesting));
  }
  ~nesting() { --depth; }
};

class expr_parser {
 public:
  expr_parser(std::vector<token> toks, int line)
      : t_(std::move(toks))
      , line_(line) {}

  const token& peek(size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().k == tok_kind::end; }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).k == tok_kind::op && peek(ahead).text == op;
  }
  bool is_name(std::string_view n, size_t ahead = 0) const {
    return peek(ahead).k == tok_kind::name && peek(ahead).text == n;
  }
  [[noreturn]] void fail(std::string_view what) const {
    throw jinja_error(fmt::format("line {}: {} (at '{}')", line_, what,
                                  at_end() ? std::string("end of tag") : peek().text));
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) fail(fmt::format("expected '{}'", op));
    ++p_;
  }
  std::string expect_name() {
    if (peek().k != tok_kind::name) fail("expected a name");
    return t_[p_++].text;
  }
  bool accept_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++p_;
    return true;
  }
  bool accept_name(std::string_view n) {
    if (!is_name(n)) return false;
    ++p_;
    return true;
  }
  void expect_end() {
    if (!at_end()) fail("unexpected tokens");
  }

  expr_ptr node(expr::kind k, std::string name = {}) {
    auto e = std::make_unique<expr>();
    e->k = k;
    e->line = line_;
    e->name = std::move(name);
    return e;
  }

  /// An expression, with a bare tuple allowed (a, b) where `tuple_ok`.
  expr_ptr expression(bool tuple_ok = false) {
    nesting n(depth_, line_);
    auto first = conditional();
    if (!tuple_ok || !is_op(",")) return first;
    auto t = node(expr::kind::tuple);
    t->kids.push_back(std::move(first));
    while (accept_op(",")) {
      if (at_end() || is_op(")") || is_op("]")) break;
      t->kids.push_back(conditional());
    }
    return t;
  }

  expr_ptr conditional() {
    auto body = or_expr();
    while (accept_name("if")) {
      auto c = node(expr::kind::cond);
      c->kids.push_back(or_expr());
      c->kids.push_back(std::move(body));
      c->kids.push_back(accept_name("else") ? or_expr() : nullptr);
      body = std::move(c);
    }
    return body;
  }

  expr_ptr binary(std::string op, expr_ptr a, expr_ptr b) {
    auto e = node(expr::kind::binary, std::move(op));
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  expr_ptr or_expr() {
    auto a = and_expr();
    while (accept_name("or")) a = binary("or", std::move(a), and_expr());
    return a;
  }
  expr_ptr and_expr() {
    auto a = not_expr();
    while (accept_name("and")) a = binary("and", std::move(a), not_expr());
    return a;
  }
  expr_ptr not_expr() {
    nesting n(depth_, line_);
    if (accept_name("not")) {
      auto e = node(expr::kind::unary, "not");
      e->kids.push_back(not_expr());
      return e;
    }
    return compare();
  }
  // Python's chains: a < b < c is (a < b) and (b < c), b evaluated once
  expr_ptr compare() {
    std::vector<expr_ptr> operands;
    std::vector<std::string> ops;
    operands.push_back(concat());
    for (;;) {
      if (peek().k == tok_kind::op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        ops.push_back(t_[p_++].text);
      } else if (is_name("in")) {
        ++p_;
        ops.emplace_back("in");
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        ops.emplace_back("not in");
      } else {
        break;
      }
      operands.push_back(concat());
    }
    if (ops.empty()) return std::move(operands[0]);
    if (ops.size() == 1) return binary(ops[0], std::move(operands[0]), std::move(operands[1]));
    auto chain = node(expr::kind::compare);
    for (size_t i = 0; i < operands.size(); ++i) {
      chain->kids.push_back(std::move(operands[i]));
      chain->kwnames.push_back(i > 0 ? ops[i - 1] : std::string());
    }
    return chain;
  }
  expr_ptr concat() {
    auto a = additive();
    while (accept_op("~")) a = binary("~", std::move(a), additive());
    return a;
  }
  expr_ptr additive() {
    auto a = multiplicative();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[p_++].text;
      a = binary(op, std::move(a), multiplicative());
    }
    return a;
  }
  expr_ptr multiplicative() {
    auto a = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[p_++].text;
      a = binary(op, std::move(a), power());
    }
    return a;
  }
  expr_ptr power() {
    auto a = unary();
    while (accept_op("**")) a = binary("**", std::move(a), unary());
    return a;
  }
  // jinja2's parse_unary: a sign takes the operand without its filters, then the filters apply
  // to the signed value (-3|abs is 3)
  expr_ptr unary(bool with_filter = true) {
    nesting n(depth_, line_);
    expr_ptr e;
    if (is_op("-") || is_op("+")) {
      e = node(expr::kind::unary, t_[p_++].text);
      e->kids.push_back(unary(false));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    return with_filter ? filters(std::move(e)) : std::move(e);
  }

  void call_arguments(expr& e) {
    expect_op("(");
    while (!accept_op(")")) {
      if (peek().k == tok_kind::name && is_op("=", 1)) {
        e.kwnames.push_back(t_[p_].text);
        p_ += 2;
      } else {
        e.kwnames.emplace_back();
      }
      e.kids.push_back(expression());
      if (!is_op(")")) expect_op(",");
    }
  }

  expr_ptr filters(expr_ptr e) {
    for (;;) {
      if (accept_op("|")) {
        auto f = node(expr::kind::filter, expect_name());
        while (accept_op(".")) f->name.append(".").append(expect_name());
        f->kids.push_back(std::move(e));
        f->kwnames.emplace_back();
        if (is_op("(")) call_arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        ++p_;
        auto t = node(expr::kind::test);
        t->negated = accept_name("not");
        t->name = expect_name();
        t->kids.push_back(std::move(e));
        t->kwnames.emplace_back();
        if (is_op("(")) {
          call_arguments(*t);
        } else if (!at_end() && starts_argument()) {
          t->kids.push_back(postfix(primary()));
          t->kwnames.emplace_back();
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  bool starts_argument() const {
    const token& n = peek();
    if (n.k == tok_kind::string || n.k == tok_kind::integer || n.k == tok_kind::number) return true;
    if (n.k == tok_kind::op) return n.text == "[" || n.text == "{";
    static const char* const stop[] = {"and", "or", "else", "if",       "in",
                                       "not", "is", "for",  "recursive"};
    for (const char* s : stop)
      if (n.text == s) return false;
    return true;
  }

  expr_ptr postfix(expr_ptr e) {
    for (;;) {
      if (accept_op(".")) {
        auto a = node(expr::kind::attr);
        if (peek().k == tok_kind::integer) {
          a->k = expr::kind::item;
          a->kids.push_back(std::move(e));
          auto lit = node(expr::kind::literal);
          lit->lit = t_[p_++].lit;
          a->kids.push_back(std::move(lit));
        } else {
          a->name = expect_name();
          a->kids.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (accept_op("[")) {
        expr_ptr parts[3];
        bool is_slice = false;
        for (int i = 0; i < 3; ++i) {
          if (!is_op(":") && !is_op("]")) parts[i] = expression(true);
          if (i < 2 && accept_op(":")) {
            is_slice = true;
            continue;
          }
          break;
        }
        expect_op("]");
        auto s = node(is_slice ? expr::kind::slice : expr::kind::item);
        s->kids.push_back(std::move(e));
        if (!is_slice && !parts[0]) fail("empty subscript");
        for (int i = 0; i < (is_slice ? 3 : 1); ++i) s->kids.push_back(std::move(parts[i]));
        e = std::move(s);
      } else if (is_op("(")) {
        auto c = node(expr::kind::call);
        c->kids.push_back(std::move(e));
        c->kwnames.emplace_back();
        call_arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  expr_ptr primary() {
    const token& t = peek();
    if (t.k == tok_kind::string) {
      auto e = node(expr::kind::literal);
      std::string s;
      while (peek().k == tok_kind::string) s += t_[p_++].text; // adjacent literals join
      e->lit = value(std::move(s));
      return e;
    }
    if (t.k == tok_kind::integer || t.k == tok_kind::number) {
      auto e = node(expr::kind::literal);
      e->lit = t_[p_++].lit;
      return e;
    }
    if (t.k == tok_kind::name) {
      const std::string n = t_[p_++].text;
      auto e = node(expr::kind::literal);
      if (n == "true" || n == "True")
        e->lit = value(true);
      else if (n == "false" || n == "False")
        e->lit = value(false);
      else if (n == "none" || n == "None")
        e->lit = value(none_t{});
      else {
        e->k = expr::kind::name;
        e->name = n;
      }
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return node(expr::kind::tuple);
      auto inner = expression(true);
      expect_op(")");
      return inner;
    }
    if (accept_op("[")) {
      auto l = node(expr::kind::list);
      while (!accept_op("]")) {
        l->kids.push_back(expression());
        if (!is_op("]")) expect_op(",");
      }
      return l;
    }
    if (accept_op("{")) {
      auto d = node(expr::kind::dict);
      while (!accept_op("}")) {
        d->kids.push_back(expression());
        expect_op(":");
        d->kids.push_back(expression());
        if (!is_op("}")) expect_op(",");
      }
      return d;
    }
    fail("expected an expression");
  }

  std::vector<token> t_;
  size_t p_ = 0;
  int line_;
  int depth_ = 0;
};

// ---- statements ----

class stmt_parser {
 public:
  explicit stmt_parser(std::vector<segment> segs)
      : s_(std::move(segs)) {}

  body parse_all() {
    std::string end;
    body b = parse_body({}, end);
    if (!end.empty()) throw jinja_error(fmt::format("unexpected '{}'", end));
    return b;
  }

 private:
  std::unique_ptr<stmt> make(stmt::kind k, int line) {
    auto s = std::make_unique<stmt>();
    s->k = k;
    s->line = line;
    return s;
  }

  /// Statements up to one of `ends` (a block tag whose first word is in ends); `found` gets
  /// that word and the parser is left on its tokens (ep_).
  body parse_body(std::vector<std::string_view> ends, std::string& found) {
    nesting n(depth_, i_ < s_.size() ? s_[i_].line : 0);
    body out;
    while (i_ < s_.size()) {
      const segment& seg = s_[i_++];
      if (seg.k == seg_kind::text) {
        auto s = make(stmt::kind::text, seg.line);
        s->text = seg.content;
        out.push_back(std::move(s));
        continue;
      }
      expr_parser ep(tokenize(seg.content, seg.line), seg.line);
      if (seg.k == seg_kind::var) {
        auto s = make(stmt::kind::output, seg.line);
        s->e = ep.expression(true);
        ep.expect_end();
        out.push_back(std::move(s));
        continue;
      }
      const std::string word = ep.expect_name();
      for (std::string_view e : ends)
        if (word == e) {
          found = word;
          ep_ = std::make_unique<expr_parser>(std::move(ep));
          return out;
        }
      if (auto s = statement(word, ep, seg.line)) out.push_back(std::move(s));
    }
    if (!ends.empty())
      throw jinja_error(fmt::format("unexpected end of template (expected '{}')", ends.back()));
    return out;
  }

  std::unique_ptr<stmt> statement(const std::string& word, expr_parser& ep, int line) {
    std::string end;
    if (word == "if") {
      auto s = make(stmt::kind::if_, line);
      expr_ptr cond = ep.expression();
      ep.expect_end();
      for (;;) {
        body b = parse_body({"elif", "else", "endif"}, end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = ep_->expression();
          ep_->expect_end();
          continue;
        }
        if (end == "else") {
          ep_->expect_end();
          s->else_body = parse_body({"endif"}, end);
        }
        ep_->expect_end();
        return s;
      }
    }
    if (word == "for") {
      auto s = make(stmt::kind::for_, line);
      do {
        s->targets.push_back(ep.expect_name());
      } while (ep.accept_op(","));
      if (!ep.accept_name("in")) ep.fail("expected 'in'");
      s->e = ep.or_expr();
      if (ep.accept_name("if")) s->cond = ep.or_expr();
      if (ep.accept_name("recursive")) ep.fail("recursive loops are not supported");
      ep.expect_end();
      s->inner = parse_body({"else", "endfor"}, end);
      if (end == "else") {
        ep_->expect_end();
        s->else_body = parse_body({"endfor"}, end);
      }
      ep_->expect_end();
      return s;
    }
    if (word == "set") {
      auto s = make(stmt::kind::set, line);
      s->targets.push_back(ep.expect_name());
      if (ep.accept_op(".")) {
        s->attr = ep.expect_name();
      } else {
        while (ep.accept_op(",")) s->targets.push_back(ep.expect_name());
      }
      if (ep.at_end()) {
        if (!s->attr.empty() || s->targets.size() != 1) ep.fail("a block set takes one name");
        s->k = stmt::kind::set_block;
        s->inner = parse_body({"endset"}, end);
        ep_->expect_end();
        return s;
      }
      ep.expect_op("=");
      s->e = ep.expression(true);
      ep.expect_end();
      return s;
    }
    if (word == "macro") {
      auto s = make(stmt::kind::macro, line);
      s->text = ep.expect_name();
      ep.expect_op("(");
      while (!ep.accept_op(")")) {
        std::string name = ep.expect_name();
        expr_ptr def;
        if (ep.accept_op("=")) def = ep.expression();
        s->params.emplace_back(std::move(name), std::move(def));
        if (!ep.is_op(")")) ep.expect_op(",");
      }
      ep.expect_end();
      s->inner = parse_body({"endmacro"}, end);
      ep_->expect_end();
      return s;
    }
    if (word == "filter") {
      auto s = make(stmt::kind::filter_block, line);
      auto placeholder = ep.node(expr::kind::name, "\x01filtered");
      ep.t_.insert(ep.t_.begin() + static_cast<long>(ep.p_), token{tok_kind::op, "|", {}});
      s->e = ep.filters(std::move(placeholder));
      ep.expect_end();
      s->inner = parse_body({"endfilter"}, end);
      ep_->expect_end();
      return s;
    }
    if (word == "break" || word == "continue") {
      ep.expect_end();
      return make(word == "break" ? stmt::kind::break_ : stmt::kind::continue_, line);
    }
    if (word == "generation" || word == "endgeneration") {
      // transformers' AssistantTracker marks assistant text for masks; it renders nothing
      return nullptr;
    }
    throw jinja_error(fmt::format("line {}: unknown tag '{}'", line, word));
  }

  std::vector<segment> s_;
  size_t i_ = 0;
  int depth_ = 0;
  std::unique_ptr<expr_parser> ep_;
};

} // namespace

std::shared_ptr<const program> parse_program(std::string_view source) {
  // jinja2 reads \r\n and \r as \n, and drops one newline at the very end
  // (keep_trailing_newline off)
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  auto p = std::make_shared<program>();
  p->top = stmt_parser(segment_source(text)).parse_all();
  return p;
}

} // namespace troupe::jinja
