// chat_template.hpp: turns chat messages into a prompt for the common template families.
// Checkpoints ship their template as Jinja (tokenizer_config.json, GGUF tokenizer.chat_template);
// rather than run arbitrary Jinja, Troupe recognises the family from the template's marker
// tokens and renders it natively, byte for byte as transformers renders the published template
// of the model named here:
//   llama2     [INST] with <<SYS>>                     (Llama-2-7b-chat-hf)
//   llama3     <|start_header_id|>                     (Meta-Llama-3-8B-Instruct)
//   chatml     <|im_start|>                            (Qwen2-7B-Instruct, with the default system
//                                                       prompt its template states; StableLM 2
//                                                       chat)
//   mistral    [INST] without <<SYS>>                  (Mistral-7B-Instruct-v0.1, 2024 revision)
//   gemma      <start_of_turn>                         (gemma-7b-it; a system message, which the
//                                                       template refuses, joins the first user
//                                                       turn)
//   phi3       <|user|> with <|end|>                   (Phi-3-mini-4k-instruct)
//   command_r  <|START_OF_TURN_TOKEN|>, <|CHATBOT_TOKEN|> (c4ai-command-r-v01, "default" template)
//   olmo2      <|user|>, <|assistant|>, eos after an assistant turn, BOS first
//                                                      (OLMo-2-1124-7B-Instruct; bos = eos =
//                                                       <|endoftext|>)
//   harmony    <|start|>, <|channel|>, <|message|>     (gpt-oss-20b / 120b: a system block with
//                                                       the date and the reasoning effort, the
//                                                       first system message as the developer's
//                                                       instructions, replies on the final
//                                                       channel; the reply's channels are split
//                                                       by text/harmony.hpp)
// Look-alikes with another layout (Zephyr and StableLM 2 Zephyr, Tulu 2, OLMo 1, Tulu 3 without
// BOS) are not claimed. A model with no recognised template gets the plain fallback, documented in
// the README:
//   "{system}\n\nUser: {text}\nAssistant: {text}\n...User: {text}\nAssistant:"
// Rendered text carries the family's special tokens literally; encode it with special-token
// parsing on and without adding BOS again when chat_has_bos. Stateless and thread-safe.
// Tests: tests/text/chat_template_test.cpp (fixture tests/fixtures/chat_templates.json from
// make_chat_fixtures.py), tests/actors/gateway_api_test.cpp
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace troupe {

enum class chat_format {
  plain,
  llama2,
  llama3,
  chatml,
  mistral,
  gemma,
  phi3,
  command_r,
  olmo2,
  harmony
};
std::string_view to_string(chat_format f);

struct chat_message {
  std::string role; // system, user, assistant
  std::string content;
};

chat_format detect_chat_format(std::string_view jinja_template);
/// The system prompt a template inserts when the conversation has none, as a literal in the
/// template (Qwen2 / Qwen2.5: '<|im_start|>system\nYou are ...<|im_end|>\n'); empty if none.
/// Only ChatML templates are searched.
std::string chat_default_system(chat_format f, std::string_view jinja_template);
/// What the harmony system block states: the date ("YYYY-MM-DD"; empty: today, local time, as
/// transformers' strftime_now) and the reasoning effort (low, medium, high).
struct harmony_settings {
  std::string date;
  std::string reasoning_effort = "medium";
};

/// True for the reasoning efforts harmony states: low, medium, high.
bool valid_reasoning_effort(std::string_view effort);

/// The prompt text, ending with the generation prompt (the assistant turn's opening; Llama 2 and
/// Mistral have none after [/INST]); invalid_argument for an unknown role or an empty conversation.
/// `default_system` (chat_default_system) opens a conversation that has no system message.
expected<std::string> render_chat(chat_format f, const std::vector<chat_message>& messages,
                                  std::string_view default_system = {},
                                  const harmony_settings& harmony = {});
/// True when the rendered text already starts with the BOS token (do not add another).
/// Whether the template's generation prompt opens a <think> block ("<|im_start|>assistant\n
/// <think>\n", QwQ): the reply then starts inside its reasoning, and the prompt ends so.
bool chat_opens_think(chat_format f, std::string_view chat_template);
bool chat_has_bos(chat_format f);
/// The token texts that end an assistant turn (added as stop tokens), or none: for olmo2 the
/// turn ends with the model's eos, which generation stops on already (the model's eos ids);
/// harmony ends a reply with <|return|> or a tool call with <|call|> (<|end|> only closes one
/// of the reply's messages).
std::vector<std::string_view> chat_end_of_turn(chat_format f);

} // namespace troupe
