// render.cpp: walks a parsed template (ast.hpp) over a context and writes the text. Scopes as
// jinja2 has them: a for loop's body and a macro's body get their own (a `set` inside a loop
// does not leak out, hence the templates' namespace objects); `if` does not. Globals are
// transformers' (raise_exception, strftime_now, namespace, range, dict). Guards against a
// template that would not end: 2 million steps (statements and loop turns), macro calls 256 deep,
// range() of 1 million.
#include "text/jinja/render.hpp"

#include <ctime>
#include <map>

#include <fmt/core.h>

#include "text/jinja/builtins.hpp"

namespace troupe::jinja {
namespace {

struct scope {
  std::map<std::string, value, std::less<>> vars;
  scope* parent = nullptr;

  const value* find(std::string_view name) const {
    for (const scope* s = this; s; s = s->parent)
      if (auto it = s->vars.find(name); it != s->vars.end()) return &it->second;
    return nullptr;
  }
};

enum class flow { normal, brk, cont };

// Whether `v` is, or holds, the dict `d` (values nest at most 512 deep).
bool holds(const value& v, const dict* d, int depth) {
  if (depth > value::kMaxDepth) return false;
  if (v.is_dict()) {
    if (&v.as_dict() == d) return true;
    for (const auto& [k, e] : v.as_dict().items)
      if (holds(e, d, depth + 1)) return true;
  } else if (v.is_list()) {
    for (const auto& e : v.as_list())
      if (holds(e, d, depth + 1)) return true;
  }
  return false;
}

class renderer {
 public:
  renderer(const render_options& opt)
      : opt_(opt) {}

  flow exec(const body& b, scope& sc, std::string& out) {
    for (const auto& s : b) {
      tick();
      flow f = exec_one(*s, sc, out);
      if (f != flow::normal) return f;
    }
    return flow::normal;
  }

  void tick() {
    if (++steps_ > 2'000'000) throw jinja_error("the template ran too long");
  }

  value eval(const expr& e, scope& sc) {
    switch (e.k) {
    case expr::kind::literal:
      return e.lit;
    case expr::kind::name: {
      if (const value* v = sc.find(e.name)) return *v;
      return value::undefined(e.name);
    }
    case expr::kind::list:
    case expr::kind::tuple: {
      std::vector<value> items;
      for (const auto& k : e.kids) items.push_back(eval(*k, sc));
      return value::list(std::move(items));
    }
    case expr::kind::dict: {
      value d = dict::make();
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        value k = eval(*e.kids[i], sc);
        if (k.is_list() || k.is_dict() || k.is_undefined())
          throw jinja_error(fmt::format("line {}: unhashable dict key", e.line));
        d.as_dict().set(std::move(k), eval(*e.kids[i + 1], sc));
      }
      return d.refresh_depth();
    }
    case expr::kind::attr:
      return get_attr(eval(*e.kids[0], sc), e.name);
    case expr::kind::item:
      return get_item(eval(*e.kids[0], sc), eval(*e.kids[1], sc));
    case expr::kind::slice: {
      auto opt = [&](size_t i) { return e.kids[i] ? eval(*e.kids[i], sc) : value::undefined(); };
      return get_slice(eval(*e.kids[0], sc), opt(1), opt(2), opt(3));
    }
    case expr::kind::call: {
      value f = eval(*e.kids[0], sc);
      call_args a = arguments(e, sc);
      if (!f.is_func()) {
        if (f.is_undefined()) {
          const std::string& what = f.as_undefined_name();
          throw jinja_error(fmt::format(
              "line {}: {}", e.line,
              what.find(' ') != std::string::npos
                  ? what
                  : fmt::format("'{}' is undefined, not callable", what.empty() ? "value" : what)));
        }
        throw jinja_error(fmt::format("line {}: a {} is not callable", e.line, f.type_name()));
      }
      return f.as_func()(a);
    }
    case expr::kind::filter: {
      value x = eval(*e.kids[0], sc);
      call_args a = arguments(e, sc);
      return call_filter(e.name, x, a);
    }
    case expr::kind::test: {
      value x = eval(*e.kids[0], sc);
      call_args a = arguments(e, sc);
      return value(call_test(e.name, x, a) != e.negated);
    }
    case expr::kind::unary: {
      value x = eval(*e.kids[0], sc);
      if (e.name == "not") return value(!x.truthy());
      if (x.is_bool()) x = value(int64_t{x.as_bool()});
      if (!x.is_number())
        throw jinja_error(fmt::format("line {}: bad operand for unary {}", e.line, e.name));
      if (e.name == "+") return x;
      return x.is_int() ? value(-x.as_int()) : value(-x.as_double());
    }
    case expr::kind::binary: {
      if (e.name == "and") {
        value a = eval(*e.kids[0], sc);
        return a.truthy() ? eval(*e.kids[1], sc) : a;
      }
      if (e.name == "or") {
        value a = eval(*e.kids[0], sc);
        return a.truthy() ? a : eval(*e.kids[1], sc);
      }
      return binary_op(e.name, eval(*e.kids[0], sc), eval(*e.kids[1], sc));
    }
    case expr::kind::compare: {
      value left = eval(*e.kids[0], sc);
      for (size_t i = 1; i < e.kids.size(); ++i) {
        value right = eval(*e.kids[i], sc);
        if (!binary_op(e.kwnames[i], left, right).truthy()) return value(false);
        left = std::move(right);
      }
      return value(true);
    }
    case expr::kind::cond:
      if (eval(*e.kids[0], sc).truthy()) return eval(*e.kids[1], sc);
      return e.kids[2] ? eval(*e.kids[2], sc) : value::undefined();
    }
    return value::undefined();
  }

  call_args arguments(const expr& e, scope& sc) {
    call_args a;
    for (size_t i = 1; i < e.kids.size(); ++i) {
      if (e.kwnames[i].empty())
        a.args.push_back(eval(*e.kids[i], sc));
      else
        a.kwargs.emplace_back(e.kwnames[i], eval(*e.kids[i], sc));
    }
    return a;
  }

  void assign(scope& sc, const std::vector<std::string>& targets, const value& v, int line) {
    if (targets.size() == 1) {
      sc.vars[targets[0]] = v;
      return;
    }
    auto items = iterate(v);
    if (items.size() != targets.size())
      throw jinja_error(fmt::format("line {}: cannot unpack {} values into {} names", line,
                                    items.size(), targets.size()));
    for (size_t i = 0; i < targets.size(); ++i) sc.vars[targets[i]] = items[i];
  }

  flow exec_one(const stmt& s, scope& sc, std::string& out) {
    switch (s.k) {
    case stmt::kind::text:
      out += s.text;
      return flow::normal;
    case stmt::kind::output:
      out += to_str(eval(*s.e, sc));
      return flow::normal;
    case stmt::kind::if_:
      for (const auto& [cond, b] : s.branches)
        if (eval(*cond, sc).truthy()) return exec(b, sc, out);
      return exec(s.else_body, sc, out);
    case stmt::kind::for_:
      return run_for(s, sc, out);
    case stmt::kind::set: {
      value v = eval(*s.e, sc);
      if (!s.attr.empty()) {
        const value* ns = sc.find(s.targets[0]);
        if (!ns || !ns->is_dict() || !ns->as_dict().is_namespace)
          throw jinja_error(
              fmt::format("line {}: cannot assign attribute on non-namespace object", s.line));
        if (holds(v, &ns->as_dict(), 0)) // a cycle would never be freed
          throw jinja_error(fmt::format("line {}: a namespace cannot hold itself", s.line));
        ns->as_dict().set(value(s.attr), std::move(v));
        return flow::normal;
      }
      assign(sc, s.targets, v, s.line);
      return flow::normal;
    }
    case stmt::kind::set_block: {
      std::string text;
      exec(s.inner, sc, text);
      value v(std::move(text));
      if (s.e) { // {% set x | trim %}: the filters over the block's text
        scope inner{{}, &sc};
        inner.vars["\x01filtered"] = std::move(v);
        v = eval(*s.e, inner);
      }
      sc.vars[s.targets[0]] = std::move(v);
      return flow::normal;
    }
    case stmt::kind::with: {
      scope inner{{}, &sc};
      for (const auto& [name, e] : s.params) inner.vars[name] = eval(*e, inner);
      return exec(s.inner, inner, out);
    }
    case stmt::kind::macro:
      sc.vars[s.text] = make_macro(s, sc);
      return flow::normal;
    case stmt::kind::filter_block: {
      std::string text;
      exec(s.inner, sc, text);
      scope inner{{}, &sc};
      inner.vars["\x01filtered"] = value(std::move(text));
      out += to_str(eval(*s.e, inner));
      return flow::normal;
    }
    case stmt::kind::break_:
      return flow::brk;
    case stmt::kind::continue_:
      return flow::cont;
    }
    return flow::normal;
  }

  flow run_for(const stmt& s, scope& sc, std::string& out) {
    std::vector<value> items = iterate(eval(*s.e, sc));
    if (s.cond) { // {% for x in xs if cond %}: the loop counts only what passes
      std::vector<value> kept;
      for (auto& it : items) {
        scope probe{{}, &sc};
        assign(probe, s.targets, it, s.line);
        if (eval(*s.cond, probe).truthy()) kept.push_back(std::move(it));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, sc, out);
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      tick();
      scope inner{{}, &sc};
      value loop = dict::make();
      auto& d = loop.as_dict();
      d.items = {{"index", value(i + 1)},
                 {"index0", value(i)},
                 {"revindex", value(n - i)},
                 {"revindex0", value(n - i - 1)},
                 {"first", value(i == 0)},
                 {"last", value(i == n - 1)},
                 {"length", value(n)},
                 {"depth", value(int64_t{1})},
                 {"depth0", value(int64_t{0})},
                 {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : value::undefined()},
                 {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : value::undefined()},
                 {"cycle", value::func([i](call_args& a) {
                    if (a.args.empty()) throw jinja_error("loop.cycle needs arguments");
                    return a.args[static_cast<size_t>(i) % a.args.size()];
                  })}};
      inner.vars["loop"] = loop.refresh_depth();
      assign(inner, s.targets, items[static_cast<size_t>(i)], s.line);
      if (exec(s.inner, inner, out) == flow::brk) break;
    }
    return flow::normal;
  }

  value make_macro(const stmt& s, scope& defined_in) {
    const stmt* m = &s;
    scope* parent = &defined_in;
    // jinja2 gives a macro `varargs` and `kwargs` when its body reads them; otherwise extra
    // arguments are an error
    const bool takes_varargs = reads(m->inner, "varargs"), takes_kwargs = reads(m->inner, "kwargs");
    return value::func([this, m, parent, takes_varargs, takes_kwargs](call_args& a) {
      if (++depth_ > 256) throw jinja_error("macro calls nest too deeply");
      scope inner{{}, parent};
      if (a.args.size() > m->params.size() && !takes_varargs)
        throw jinja_error(fmt::format("macro '{}' takes not more than {} argument(s)", m->text,
                                      m->params.size()));
      value extra_kw = dict::make();
      for (const auto& [k, v] : a.kwargs) {
        bool known = false;
        for (const auto& p : m->params) known = known || p.first == k;
        if (known) continue;
        if (!takes_kwargs)
          throw jinja_error(fmt::format("macro '{}' takes no keyword argument '{}'", m->text, k));
        extra_kw.as_dict().set(value(k), v);
      }
      for (size_t i = 0; i < m->params.size(); ++i) {
        const auto& [name, def] = m->params[i];
        value v = a.get(i, name);
        if (v.is_undefined() && def) v = eval(*def, inner);
        inner.vars[name] = v;
      }
      if (takes_varargs) {
        std::vector<value> rest;
        for (size_t i = m->params.size(); i < a.args.size(); ++i) rest.push_back(a.args[i]);
        inner.vars["varargs"] = value::list(std::move(rest));
      }
      if (takes_kwargs) inner.vars["kwargs"] = extra_kw.refresh_depth();
      std::string text;
      exec(m->inner, inner, text);
      --depth_;
      return value(std::move(text));
    });
  }

  static bool reads(const expr* e, std::string_view name) {
    if (!e) return false;
    if (e->k == expr::kind::name && e->name == name) return true;
    for (const auto& k : e->kids)
      if (reads(k.get(), name)) return true;
    return false;
  }
  static bool reads(const body& b, std::string_view name) {
    for (const auto& s : b) {
      if (reads(s->e.get(), name) || reads(s->cond.get(), name) || reads(s->inner, name) ||
          reads(s->else_body, name))
        return true;
      for (const auto& [c, br] : s->branches)
        if (reads(c.get(), name) || reads(br, name)) return true;
      for (const auto& [n, def] : s->params)
        if (reads(def.get(), name)) return true;
    }
    return false;
  }

 private:
  const render_options& opt_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

void add_globals(scope& g, const render_options& opt) {
  g.vars["raise_exception"] =
      value::func([](call_args& a) -> value { throw jinja_error(to_str(a.get(0, "message"))); });
  const int64_t now = opt.now ? opt.now : static_cast<int64_t>(std::time(nullptr));
  g.vars["strftime_now"] = value::func([now](call_args& a) {
    value f = a.get(0, "format");
    if (!f.is_string()) throw jinja_error("strftime_now takes a format string");
    std::time_t t = static_cast<std::time_t>(now);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, f.as_string().c_str(), &tm);
    return value(std::string(buf, n));
  });
  g.vars["namespace"] = value::func([](call_args& a) {
    value ns = dict::make(true);
    if (!a.args.empty() && a.args[0].is_dict())
      for (const auto& [k, v] : a.args[0].as_dict().items) ns.as_dict().set(k, v);
    for (auto& [k, v] : a.kwargs) ns.as_dict().set(value(k), v);
    return ns.refresh_depth();
  });
  g.vars["dict"] = value::func([](call_args& a) {
    value d = dict::make();
    if (!a.args.empty() && a.args[0].is_dict())
      for (const auto& [k, v] : a.args[0].as_dict().items) d.as_dict().set(k, v);
    for (auto& [k, v] : a.kwargs) d.as_dict().set(value(k), v);
    return d.refresh_depth();
  });
  g.vars["range"] = value::func([](call_args& a) {
    int64_t start = 0, stop = 0, step = 1;
    for (const auto& x : a.args)
      if (!x.is_int()) throw jinja_error("range takes integers");
    if (a.args.size() == 1)
      stop = a.args[0].as_int();
    else if (a.args.size() >= 2) {
      start = a.args[0].as_int();
      stop = a.args[1].as_int();
      if (a.args.size() > 2) step = a.args[2].as_int();
    }
    if (step == 0) throw jinja_error("range() step must not be zero");
    std::vector<value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= 1'000'000) throw jinja_error("range() too long");
      out.emplace_back(i);
    }
    return value::list(std::move(out));
  });
}

} // namespace

std::string render_program(const program& p, const value& context, const render_options& opt) {
  scope globals;
  add_globals(globals, opt);
  if (context.is_dict())
    for (const auto& [k, v] : context.as_dict().items) globals.vars[to_str(k)] = v;
  scope top{{}, &globals};
  renderer r(opt);
  std::string out;
  r.exec(p.top, top, out);
  return out;
}

} // namespace troupe::jinja
