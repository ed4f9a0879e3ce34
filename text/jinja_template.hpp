// jinja_template.hpp: a checkpoint's Jinja chat template (tokenizer_config.json's
// chat_template, GGUF's tokenizer.chat_template), run as transformers runs it: jinja2 with
// trim_blocks and lstrip_blocks, loop controls, transformers' tojson (no ASCII or HTML
// escaping), raise_exception and strftime_now, in the immutable sandbox (a template cannot
// modify a list or dict it is given). What the published templates use is implemented
// (text/jinja/: statements if / for / set / macro / filter, jinja2's filters and tests, the
// str / dict methods they call); anything else fails the parse or the render with an error
// naming it, never a different text. Parse once at load; render is const and thread-safe.
// Tests: tests/text/jinja_test.cpp against jinja2's renderings of ~60 published templates
// (tests/fixtures/jinja_templates.json, make_jinja_fixtures.py).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/expected.hpp"

namespace troupe {
class tokenizer;
namespace jinja {
struct program;
}

class jinja_template {
 public:
  /// invalid_argument naming the line for a syntax error or a tag this interpreter lacks.
  static expected<jinja_template> parse(std::string_view source);
  /// The text for `context` (messages, tools, add_generation_prompt, bos_token, ...);
  /// invalid_argument with the template's own words for raise_exception ("Conversation roles
  /// must alternate user/assistant/user/assistant/..."), or naming what failed.
  /// `now`: what strftime_now() reads (unix seconds, local time); 0: the clock.
  expected<std::string> render(const nlohmann::ordered_json& context, int64_t now = 0) const;

 private:
  std::shared_ptr<const jinja::program> p_;
};

/// The variables transformers' apply_chat_template gives a chat template: messages, tools and
/// documents (null when absent), add_generation_prompt, and the vocabulary's bos_token /
/// eos_token texts where it has them. Callers add their own (template kwargs).
nlohmann::ordered_json chat_template_variables(const tokenizer& tok,
                                               nlohmann::ordered_json messages,
                                               nlohmann::ordered_json tools,
                                               bool add_generation_prompt);

} // namespace troupe
