// chat_template.hpp: turns chat messages into a prompt for the common template families.
// Checkpoints ship their template as Jinja (tokenizer_config.json, GGUF tokenizer.chat_template);
// rather than run arbitrary Jinja, Troupe recognises the family from the template's marker
// tokens and renders it natively: Llama 2 ([INST] with <<SYS>>), Llama 3 (header ids),
// ChatML (<|im_start|>, Qwen), Mistral ([INST] without <<SYS>>), Gemma (<start_of_turn>).
// A model with no template gets the plain fallback, documented in the README:
//   "{system}\n\nUser: {text}\nAssistant: {text}\n...User: {text}\nAssistant:"
// Rendered text carries the family's special tokens literally; encode it with special-token
// parsing on and without adding BOS again. Tests: tests/actors/gateway_api_test.cpp
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace troupe {

enum class chat_format { plain, llama2, llama3, chatml, mistral, gemma };
std::string_view to_string(chat_format f);

struct chat_message {
  std::string role; // system, user, assistant
  std::string content;
};

chat_format detect_chat_format(std::string_view jinja_template);
/// The prompt text; invalid_argument for an unknown role or an empty conversation.
expected<std::string> render_chat(chat_format f, const std::vector<chat_message>& messages);
/// True when the rendered text already starts with the BOS token (do not add another).
bool chat_has_bos(chat_format f);
/// The token text that ends an assistant turn (added as a stop token), or empty.
std::string_view chat_end_of_turn(chat_format f);

} // namespace troupe
