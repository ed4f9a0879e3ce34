// ast.hpp: the parsed form of a Jinja template (parse.cpp builds it, render.cpp walks it).
// Expressions and statements are plain tagged nodes owning their children; a parsed template
// is immutable and may be rendered from several threads at once.
// Tests: tests/text/jinja_test.cpp
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.hpp"

namespace troupe::jinja {

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  enum class kind {
    literal, // lit
    name,    // name
    list,    // kids
    tuple,   // kids
    dict,    // kids: key, value, key, value ...
    attr,    // kids[0].name
    item,    // kids[0][kids[1]]
    slice,   // kids[0][kids[1]:kids[2]:kids[3]] (null kids absent)
    call,    // kids[0](kids[1..], with kwnames)
    filter,  // kids[0] | name(kids[1..], with kwnames)
    test,    // kids[0] is [not] name(kids[1..])
    unary,   // name: "-", "+", "not"
    binary,  // name: "+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=",
             // "in", "not in", "and", "or"
    cond,    // kids[1] if kids[0] else kids[2] (kids[2] may be null)
    compare, // a chain: kids[0] kwnames[1] kids[1] kwnames[2] kids[2] ... (1 < x <= 3)
  };
  kind k;
  int line = 0;
  std::string name;
  value lit;
  bool negated = false;
  std::vector<expr_ptr> kids;
  std::vector<std::string> kwnames; // call / filter / test: the keyword of each argument or ""
};

struct stmt;
using body = std::vector<std::unique_ptr<stmt>>;

struct stmt {
  enum class kind {
    text,         // text
    output,       // {{ e }}
    if_,          // branches (cond, body) ..., else_body
    for_,         // targets in e [if cond] body, else_body
    set,          // targets (or ns.attr when attr set) = e
    set_block,    // {% set targets[0] [| filters] %} body {% endset %} (e: the filters, or null)
    macro,        // name(params) body
    filter_block, // {% filter name(args) %} body: e is the filter applied to a placeholder
    with,         // params: name = value ... over inner, in a scope of its own
    break_,
    continue_,
  };
  kind k;
  int line = 0;
  std::string text;
  expr_ptr e;
  expr_ptr cond;
  std::vector<std::string> targets;
  std::string attr; // set ns.attr = ...
  std::vector<std::pair<expr_ptr, body>> branches;
  body inner;
  body else_body;
  std::vector<std::pair<std::string, expr_ptr>> params; // macro parameters and defaults
};

/// A parsed template: the top-level body.
struct program {
  body top;
};

/// Parses Jinja source with transformers' settings (trim_blocks, lstrip_blocks, loop controls).
/// Throws jinja_error with the line on a syntax error.
std::shared_ptr<const program> parse_program(std::string_view source);

} // namespace troupe::jinja
