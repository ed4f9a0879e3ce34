// jinja_test.cpp: Troupe's Jinja interpreter (text/jinja_template.hpp) against transformers.
// Every published template in tests/fixtures/jinja_templates.json (make_jinja_fixtures.py:
// jinja2 as transformers configures it, over plain chats, system prompts, tools, tool calls and
// results, reasoning turns) must parse, and every conversation must render to the same bytes,
// or fail where transformers failed (with the template's own words for raise_exception).
// Then the semantics a template can lean on that the published ones exercise only in part:
// whitespace control, scoping, Python's value printing, the sandbox, the guards.
#include <ctime>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "text/jinja_template.hpp"

namespace troupe {
namespace {

using ojson = nlohmann::ordered_json;

const ojson& fixture() {
  static const ojson j = ojson::parse(test::read_file(test::fixture_path("jinja_templates.json")));
  return j;
}

int64_t fixed_now() { // the fixture's FIXED_DATE, 2026-12-02 12:00 local time
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 11;
  tm.tm_mday = 2;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&tm));
}

TEST(JinjaPublished, EveryTemplateRendersAsTransformersDoes) {
  const ojson& f = fixture();
  ASSERT_GE(f["templates"].size(), 60u);
  size_t texts = 0, errors = 0;
  for (const auto& t : f["templates"]) {
    const std::string name = t["name"];
    auto tpl = jinja_template::parse(t["template"].get<std::string>());
    ASSERT_TRUE(tpl) << name << ": " << tpl.error().message;
    for (const auto& [c, want] : t["renders"].items()) {
      if (f["contexts"][c].contains("continue_final_message")) continue; // the gateway's
      auto got = tpl->render(f["contexts"][c], fixed_now());
      if (want.contains("text")) {
        EXPECT_TRUE(got) << name << " / " << c << ": " << got.error().message;
        if (got) {
          EXPECT_EQ(*got, want["text"].get<std::string>()) << name << " / " << c;
        }
        ++texts;
      } else {
        const std::string e = want["error"];
        EXPECT_FALSE(got) << name << " / " << c << ": transformers failed (" << e << ")";
        const std::string raised = "TemplateError: ";
        if (!got && e.rfind(raised, 0) == 0) {
          EXPECT_EQ(got.error().message, e.substr(raised.size())) << name << " / " << c;
        }
        ++errors;
      }
    }
  }
  EXPECT_GT(texts, 500u);
  EXPECT_GT(errors, 0u);
}

std::string render(std::string_view src, const ojson& ctx = ojson::object()) {
  auto t = jinja_template::parse(src);
  if (!t) return "PARSE: " + t.error().message;
  auto r = t->render(ctx, fixed_now());
  return r ? *r : "ERROR: " + r.error().message;
}

TEST(Jinja, WhitespaceControlAsTransformersConfiguresIt) {
  // trim_blocks eats the newline after a block tag; lstrip_blocks the indent before one
  EXPECT_EQ(render("{% if true %}\n  a\n  {% endif %}\nb"), "  a\nb");
  EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif %}"), "xy");
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb"); // not after an expression
  EXPECT_EQ(render("  {%+ if true %}k{% endif %}"), "  k");
  EXPECT_EQ(render("a {# note #} b\n  {# own line #}\nc"), "a  b\nc");
}

TEST(Jinja, ScopesFollowJinja2) {
  // a set inside a loop does not leak out; a namespace carries it
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = i %}"
                   "{% endfor %}{{ ns.x }}"),
            "2");
  EXPECT_EQ(render("{% macro m(a, b='d') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"),
            "1d23");
  EXPECT_EQ(render("{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }} "
                   "{% else %}none{% endfor %}"),
            "1/2 2/2 ");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}none{% endfor %}"), "none");
  // raw blocks, with whitespace as jinja2 treats them
  EXPECT_EQ(render("{% raw %}\n{{ not read }}{% if %}\n{% endraw %}\nx"),
            "\n{{ not read }}{% if %}\nx");
  EXPECT_EQ(render("  {% raw -%}  a  {%- endraw %}b"), "ab");
  EXPECT_EQ(render("q\n  {% raw %}  a\n  {% endraw %}\nb"), "q\n  a\nb");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(
      render("{% for x in [1,2,3,4] %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
      "12");
}

TEST(Jinja, LessCommonTagsAndFilters) {
  EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"), "3[]");
  EXPECT_EQ(render("{% set x | trim | upper %}  hi  {% endset %}[{{ x }}]"), "[HI]");
  EXPECT_EQ(render("{{ 0x1F }} {{ 0o17 }} {{ 0b101 }}"), "31 15 5");
  EXPECT_EQ(render("{{ '%s is %d (%r) %%' | format('x', 4.7, 'y') }}"), "x is 4 ('y') %");
  EXPECT_EQ(render("{{ {'k': 'v'} | attr('items') is callable }}"), "True");
  EXPECT_NE(render("{{ '%s %s' | format(1) }}").find("not enough"), std::string::npos);
}

TEST(Jinja, ValuesPrintAsPython) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.0, 1e-05, {'k': \"it's\"}] }}"),
            "[1, 'a', None, True, 1.0, 1e-05, {'k': \"it's\"}]");
  EXPECT_EQ(render("{{ x }}|{{ x is defined }}|{{ x | default('d') }}"), "|False|d");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}"),
            "3 -4 2 3.5 1024");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 2]} | tojson }}"), "{\"b\": 1, \"a\": [1, 2]}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': []} | tojson(indent=2) }}"), "{\n  \"b\": 1,\n  \"a\": []\n}");
  EXPECT_EQ(render("{{ 'é\"<' | tojson }}"), "\"é\\\"<\""); // no ASCII or HTML escaping
  EXPECT_EQ(render("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}"),
            "a b|['a', 'b', '', 'c']|['a', 'b']");
  EXPECT_EQ(render("{{ 'abcdef'[1:4] }}{{ [1,2,3][::-1] }}{{ 'abc'[-1] }}"), "bcd[3, 2, 1]c");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "02 Dec 2026");
}

TEST(Jinja, FiltersAndTestsOverLists) {
  ojson ctx = {{"ms", {{{"role", "user"}, {"c", 1}}, {{"role", "tool"}, {"c", 2}}}}};
  EXPECT_EQ(
      render("{{ ms | selectattr('role', 'equalto', 'tool') | map(attribute='c') | list }}", ctx),
      "[2]");
  EXPECT_EQ(render("{{ ms | rejectattr('role', 'in', ['tool']) | list | length }}", ctx), "1");
  EXPECT_EQ(render("{{ ms | map(attribute='role') | join(', ') }}", ctx), "user, tool");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort | first }}{{ [1, 1, 2] | unique | list }}"), "1[1, 2]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }}"), "[['a', 2], ['b', 1]]");
  EXPECT_EQ(render("{{ 'x' is string }}{{ {} is mapping }}{{ none is none }}{{ 3 is odd }}"),
            "TrueTrueTrueTrue");
}

TEST(Jinja, ErrorsNameWhatFailed) {
  EXPECT_EQ(render("{{ raise_exception('Roles must alternate') }}"), "ERROR: Roles must alternate");
  EXPECT_NE(render("{% if x %}").find("PARSE:"), std::string::npos);
  EXPECT_NE(render("{% include 'x' %}").find("unknown tag 'include'"), std::string::npos);
  EXPECT_NE(render("{{ x | frobnicate }}").find("unknown filter 'frobnicate'"), std::string::npos);
  EXPECT_NE(render("{{ x.y }}").find("'x' is undefined"), std::string::npos);
  EXPECT_NE(render("{{ 'a' + 1 }}").find("ERROR:"), std::string::npos);
  // the sandbox: the template cannot change what it was given
  EXPECT_NE(render("{{ ms.append(1) }}", {{"ms", ojson::array()}}).find("may not modify"),
            std::string::npos);
  EXPECT_NE(render("{% set ns = {} %}{% set ns.x = 1 %}").find("non-namespace"), std::string::npos);
  EXPECT_NE(render("{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}").find("hold itself"),
            std::string::npos);
  // a template that would not end, or nests without bound, stops with an error
  EXPECT_NE(render("{% for i in range(2000) %}{% for j in range(2000) %}{% endfor %}{% endfor %}")
                .find("too long"),
            std::string::npos);
  EXPECT_NE(render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}").find("too deeply"),
            std::string::npos);
  EXPECT_NE(render("{{ range(100000000) | length }}").find("too long"), std::string::npos);
}

// What a black-box pass found against jinja2 (each line was wrong or crashed before).
TEST(Jinja, PythonStringsAreUnicode) {
  // Python's whitespace: trim / strip / split remove U+00A0, U+3000 ...
  EXPECT_EQ(render("{{ ' \u00a0hi\u3000 ' | trim }}|{{ 'a\u00a0b'.split() }}"), "hi|['a', 'b']");
  EXPECT_EQ(render("{{ 'a\r\nb\u2028c'.splitlines() }}{{ 'a\nb'.splitlines(true) }}"),
            "['a', 'b', 'c']['a\\n', 'b']");
  // positions count code points
  EXPECT_EQ(render("{% set c = '日本語</think>answer' %}{{ c[c.find('</think>') + 8:] }}"),
            "answer");
  EXPECT_EQ(
      render("{{ 'é' | upper }}{{ 'ÉCOLE' | lower }}{{ 'ß'.upper() }}{{ 'über alles' | title }}"),
      "Éécole"
      "SS"
      "Über Alles");
  EXPECT_EQ(render("{{ \"they're\" | title }}|{{ \"they're\".title() }}"), "They're|They'Re");
  EXPECT_EQ(render("[{{ '日本' | center(6) }}]"), "[  日本  ]");
  // Python's string escapes in a template's literals
  EXPECT_EQ(render("{{ '\\u00e9\\x41\\101\\U0001F600\\q' }}"), "éAA😀\\q");
  EXPECT_EQ(render("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\n"), "a\nb\nc");
}

TEST(Jinja, NumbersAndOperatorsAreJinja2s) {
  EXPECT_EQ(render("{{ -3 | abs }} {{ 3 > 2 > 1 }} {{ 1 < 2 == 2 }} {{ 1 < 3 < 2 }}"),
            "3 True True False");
  EXPECT_EQ(render("{{ 2.5 | round }} {{ 0.125 | round(2) }} {{ 2.1 | round(0, 'ceil') }} "
                   "{{ 7 | round }}"),
            "2.0 0.12 3.0 7");
  EXPECT_EQ(render("{{ [1, 2, 3, 4, 5] | slice(2) | list }}"), "[[1, 2, 3], [4, 5]]");
  EXPECT_EQ(render("{{ ['a', 'A', 'b'] | unique | list }}"), "['a', 'b']");
  EXPECT_NE(render("{{ 2 ** 64 }}").find("overflows 64 bits"), std::string::npos);
  EXPECT_NE(render("{{ 9223372036854775807 + 1 }}").find("overflows"), std::string::npos);
  EXPECT_EQ(
      render("{% macro f(a) %}{{ a }}{{ kwargs }}{{ varargs }}{% endmacro %}{{ f(1, 2, b=3) }}"),
      "1{'b': 3}[2]");
  EXPECT_NE(render("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, b=3) }}").find("no keyword"),
            std::string::npos);
  EXPECT_NE(render("{{ 'ab'.zfill(4) }}").find("'str' object has no attribute 'zfill'"),
            std::string::npos);
}

TEST(Jinja, WhatWouldExhaustTheServerIsAnError) {
  std::string deep = "{{ ";
  for (int i = 0; i < 50000; ++i) deep += "[";
  for (int i = 0; i < 50000; ++i) deep += "]";
  EXPECT_NE(render(deep + " }}").find("nests too deeply"), std::string::npos);
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_NE(render(nots + "1 }}").find("nests too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 20000; ++i) ifs += "{% if true %}";
  EXPECT_NE(render(ifs).find("nests too deeply"), std::string::npos);
  const std::string grow = "{% set ns = namespace(x=[], y=[]) %}{% for i in range(100000) %}"
                           "{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}";
  EXPECT_NE(render(grow).find("nests too deeply"), std::string::npos); // before it is printed
  EXPECT_NE(render("{% set ns = namespace(x={}) %}{% for i in range(100000) %}"
                   "{% set ns.x = {'a': ns.x} %}{% endfor %}")
                .find("nests too deeply"),
            std::string::npos);
  for (const char* big : {"{{ 'x' * 10**9 }}", "{{ ([1] * 10**9) | length }}",
                          "{{ 'x\ny' | indent(10**9) }}", "{{ 'x' | center(10**9) }}",
                          "{% set ns = namespace(s='xx') %}{% for i in range(40) %}"
                          "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"})
    EXPECT_NE(render(big).find("more than"), std::string::npos) << big;
  // replace is linear: 40 doublings stop at the size limit, not after minutes
  EXPECT_NE(render("{% set ns = namespace(s='xx') %}{% for i in range(40) %}"
                   "{% set ns.s = ns.s | replace('x', 'xx') %}{% endfor %}")
                .find("more than 64 MiB"),
            std::string::npos);
  const ojson deep_value =
      ojson::parse(std::string(30000, '[') + std::string(30000, ']')); // parsed without recursion
  EXPECT_NE(render("{{ x }}", {{"x", deep_value}}).find("nests too deeply"), std::string::npos);
}

} // namespace
} // namespace troupe
