// jinja_template.cpp: the text module's face of the Jinja interpreter (text/jinja/): turns
// its jinja_error into an expected error at the boundary.
#include "text/jinja_template.hpp"

#include <nlohmann/json.hpp>

#include "text/jinja/render.hpp"

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

} // namespace troupe
