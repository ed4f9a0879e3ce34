// jinja_template.cpp: the text module's face of the Jinja interpreter (text/jinja/): turns
// its jinja_error into an expected error at the boundary.
#include "text/jinja_template.hpp"

#include <nlohmann/json.hpp>

#include "text/jinja/render.hpp"
#include "text/tokenizer.hpp"

namespace troupe {

expected<jinja_template> jinja_template::parse(std::string_view source) {
  try {
    jinja_template t;
    t.p_ = jinja::parse_program(source);
    return t;
  } catch (const jinja::jinja_error& e) {
    return make_error(errc::invalid_argument, "chat template: {}", e.what());
  }
}

expected<std::string> jinja_template::render(const nlohmann::ordered_json& context,
                                             int64_t now) const {
  if (!p_) return make_error(errc::invalid_argument, "chat template: not parsed");
  try {
    jinja::render_options opt;
    opt.now = now;
    return jinja::render_program(*p_, jinja::from_json(context), opt);
  } catch (const jinja::jinja_error& e) {
    return make_error(errc::invalid_argument, "{}", e.what());
  } catch (const std::bad_variant_access&) {
    return make_error(errc::invalid_argument, "chat template: a value of the wrong type");
  }
}

nlohmann::ordered_json chat_template_variables(const tokenizer& tok,
                                               nlohmann::ordered_json messages,
                                               nlohmann::ordered_json tools,
                                               bool add_generation_prompt) {
  nlohmann::ordered_json ctx = {{"messages", std::move(messages)},
                                {"tools", std::move(tools)},
                                {"documents", nullptr},
                                {"add_generation_prompt", add_generation_prompt}};
  if (tok.bos_id() >= 0) ctx["bos_token"] = std::string(tok.piece(tok.bos_id()));
  if (tok.eos_id() >= 0) ctx["eos_token"] = std::string(tok.piece(tok.eos_id()));
  return ctx;
}

} // namespace troupe
