// parse.cpp: Jinja source -> program. The source is cut into text and tags and each tag's
// content tokenized (lex.cpp); here the tags are parsed by recursive descent in jinja2's
// precedence (conditional < or < and < not < comparisons and in (chained as Python chains them)
// < ~ < + - < * / // % < ** < unary < filters and tests < postfix) into the statement tree.
// Nesting deeper than 200 is refused (the parser and the renderer recurse).
#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/core.h>

#include "text/jinja/ast.hpp"
#include "text/jinja/lex.hpp"

namespace troupe::jinja {
namespace {

using namespace lex;

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
      if (ep.at_end() || ep.is_op("|")) { // {% set x %}...{% endset %}, maybe | filters
        if (!s->attr.empty() || s->targets.size() != 1) ep.fail("a block set takes one name");
        s->k = stmt::kind::set_block;
        if (ep.is_op("|")) s->e = ep.filters(ep.node(expr::kind::name, "\x01filtered"));
        ep.expect_end();
        s->inner = parse_body({"endset"}, end);
        ep_->expect_end();
        return s;
      }
      ep.expect_op("=");
      s->e = ep.expression(true);
      ep.expect_end();
      return s;
    }
    if (word == "with") { // {% with a = 1, b = 2 %}: names only inside
      auto s = make(stmt::kind::with, line);
      while (!ep.at_end()) {
        std::string name = ep.expect_name();
        ep.expect_op("=");
        s->params.emplace_back(std::move(name), ep.expression());
        if (!ep.at_end()) ep.expect_op(",");
      }
      s->inner = parse_body({"endwith"}, end);
      ep_->expect_end();
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
