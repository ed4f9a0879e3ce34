// openai_api.hpp: the OpenAI-compatible request and response shapes, without CAF or sockets:
// strict parsing and validation of /v1/completions and /v1/chat/completions bodies (every
// field checked for type and range; the fields accepted are listed with what each does in
// one table, api_fields(); anything else is an error naming it), prompt construction
// (tokenizing, chat templates, the context limit), and the JSON of responses, stream chunks
// (with echo, logprobs whose token strings join into the text, usage) and errors. The one
// table from troupe error codes to HTTP statuses (error_for) lives here too.
// Tests: tests/actors/openai_api_test.cpp
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actors/api.hpp"
#include "text/chat_template.hpp"
#include "text/harmony.hpp"
#include "text/jinja_template.hpp"
#include "text/think.hpp"
#include "text/tokenizer.hpp"
#include "text/tool_calls.hpp"

namespace troupe::actors {

struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param; // the offending field, when there is one
  std::string code;  // "model_not_found", "context_length_exceeded", ...

  /// A 400 invalid_request_error about `param`.
  static api_error bad_request(std::string message, std::string param) {
    return api_error{400, std::move(message), "invalid_request_error", std::move(param), ""};
  }
};

/// The one table: a troupe error (from the engine, the parser, the gateway) -> HTTP status,
/// OpenAI error type and code.
api_error error_for(const error& e, std::string param = "");
/// {"error": {"message", "type", "param", "code"}}
std::string error_body(const api_error& e);
/// The same object as one server-sent event ("data: {...}\n\n"): a failure after a stream
/// has started.
std::string error_event(const api_error& e);

/// A request field the API accepts, and what Troupe does with it.
struct api_field {
  const char* name;
  bool completions, chat;
  const char* effect;
};
/// Every accepted field (OpenAI's, and the extensions vLLM clients send).
const std::vector<api_field>& api_fields();

struct serving_info {
  std::string model_name;
  std::vector<std::string> model_aliases; // other names a request may give for the model
  /// Whether a request's `model` names this model.
  bool serves(const std::string& name) const {
    if (name == model_name) return true;
    for (const auto& a : model_aliases)
      if (name == a) return true;
    return false;
  }
  const tokenizer* tok = nullptr;
  int64_t context = 0;
  chat_format chat = chat_format::plain;
  std::string chat_system; // the template's default system prompt (chat_default_system)
  std::optional<harmony_tokens> harmony; // harmony chat: its special tokens' ids (replies split)
  std::optional<think_tokens> think;     // a model that thinks in <think> blocks (replies split)
  bool thinking_switch = false;          // its template reads enable_thinking (Qwen3)
  bool think_opened = false;             // its generation prompt opens the block (QwQ)
  // the chat template run as Jinja, as transformers runs it (null: the native renderer of
  // `chat`), and its text
  std::shared_ptr<const jinja_template> jinja;
  std::string chat_template;
};

/// What a chat's tools ask of the reply: none (no tools, or tool_choice "none"), auto (the
/// model may call: its text is read for calls in the template's format), named (the reply is
/// held to the named function's parameters and is that call), required (held to a JSON list
/// of calls, as vLLM holds it).
enum class tool_mode { none, automatic, named, required };

struct responses_meta; // a /v1/responses request's own fields (responses_api.hpp)

struct parsed_request {
  bool chat = false;
  std::shared_ptr<const responses_meta> responses; // set: a Responses API request (chat inside)
  bool messages_api = false;   // an Anthropic Messages API request (chat inside)
  bool context_capped = false; // its max_tokens asked for more than the context's room
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false; // usage in every chunk (stream_options.continuous_usage_stats)
  bool echo = false;             // completions: the prompt comes first in each choice's text
  bool skip_special = true;      // special tokens' text left out of the reply (vLLM's default)
  bool include_stop = false;     // the stop string that ended a choice ends its text (vLLM)
  bool reasoning = false; // chat with harmony or think blocks: the reasoning is reasoning_content
  tool_mode tools = tool_mode::none; // chat_prompt's
  tool_format tool_fmt = tool_format::none;
  std::string tool_name;
  bool parallel_tools = true;
  std::vector<std::string> tool_names, tool_params;
  int n = 1;
  int completion_logprobs = -1; // completions: top-n logprobs (-1: none)
  bool chat_logprobs = false;
  int top_logprobs = 0;
  std::string model;
  std::string user;
  std::vector<std::vector<int32_t>> prompts; // completions may carry several
  std::vector<std::string> prompt_texts;     // the text of each (echo), as given or decoded
  gen_request base;                          // everything but the prompt

  bool logprobs() const { return chat ? chat_logprobs : completion_logprobs >= 0; }
};

/// A chat's prompt: the messages rendered by the model's chat template and encoded.
struct chat_prompt {
  tool_mode tools = tool_mode::none;
  tool_format tool_fmt = tool_format::none; // automatic: the format the reply is read in
  std::string tool_name;                    // named: the function
  std::string tool_rule;               // named / required: the response_format that holds the reply
  bool parallel = true;                // parallel_tool_calls
  std::vector<std::string> tool_names; // the functions offered (a call to another is text)
  std::vector<std::string> tool_params; // each one's parameters schema (JSON text; "" if none)
  std::vector<int32_t> ids;
  std::string text;
  std::vector<int32_t> stop_ids; // the tokens that end an assistant turn in this format
  bool reasoning = false;        // harmony or <think> replies: reasoning is reasoning_content
  bool think = false;            // replies split at <think> blocks (gen_request.think)
};

/// Reads messages, reasoning_effort, chat_template_kwargs, add_generation_prompt and
/// continue_final_message from a chat request (or a /tokenize body) and renders the prompt
/// (chat_prompt.cpp).
/// `body`: the request's text (tools go to the template in the client's key order).
/// `render_only` (/tokenize): tools are rendered, what the reply would need is not checked.
std::optional<api_error> build_chat_prompt(const nlohmann::json& j, const std::string& body,
                                           const serving_info& info, chat_prompt& out,
                                           bool render_only = false);

/// vLLM's /tokenize: {"prompt": ...} or {"messages": ...} (the chat's prompt as the chat
/// endpoint renders it) -> {"count", "max_model_len", "tokens", "token_strs"}; and
/// /detokenize: {"tokens": [...]} -> {"prompt": text}. The response body, or the error.
std::variant<std::string, api_error> tokenize_request(const std::string& body,
                                                      const serving_info& info);
std::variant<std::string, api_error> detokenize_request(const std::string& body,
                                                        const serving_info& info);

std::variant<parsed_request, api_error> parse_request(const std::string& body, bool chat,
                                                      const serving_info& info);

/// Logprob detail of some tokens: each token's own text in context (so the strings join
/// into the text), its logprob (none for a prompt's first token) and alternatives.
struct token_logprobs {
  std::vector<std::string> pieces;            // raw bytes each token adds to the text
  std::vector<std::optional<float>> logprobs; // nullopt: the prompt's first token
  std::vector<std::vector<std::pair<std::string, float>>> top; // (piece, logprob), best first
  std::vector<int64_t> text_offset; // code points before each token in the choice's text

  void append(const token_logprobs& o);
};

/// Chat logprobs of some tokens: [{"token", "logprob", "bytes", "top_logprobs"}], token strings
/// as OpenAI writes them ("bytes:\xNN" where a piece is not valid UTF-8). The Responses API's
/// output_text logprobs have the same shape.
nlohmann::json logprob_content(const token_logprobs& lp);

struct choice_result {
  int index = 0;
  std::string text;      // echoed prompt included
  std::string reasoning; // chat: the analysis channel's text (harmony), the think block's
  finish_reason finish = finish_reason::none;
  token_logprobs lp;
  std::vector<tool_call> calls; // chat with tools: the calls read out of the reply
  bool called = false;          // they end it: finish_reason "tool_calls" (tool_reply)
};

std::string completion_body(const parsed_request& r, const std::string& id, int64_t created,
                            const std::vector<choice_result>& choices, int64_t prompt_tokens,
                            int64_t completion_tokens, const tokenizer& tok,
                            int64_t cached_tokens = 0);

struct usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0; // of the prompt tokens, those whose KV the prefix cache gave
};

/// One SSE "data: {...}\n\n" chunk carrying new text (with its logprobs), the finish reason,
/// or both, for one choice. `u`: usage to attach (continuous usage stats), or null.
/// `reasoning`: new reasoning text (harmony, think blocks), sent as the delta's
/// reasoning_content.
/// Tool calls a chunk carries: `calls` are the choice's calls from number `first` on;
/// `called`: its finish reason reads "tool_calls".
struct chunk_calls {
  const std::vector<tool_call>& calls;
  size_t first = 0;
  bool called = false;
};
std::string stream_chunk(const parsed_request& r, const std::string& id, int64_t created, int index,
                         const std::string& text, finish_reason finish, bool first_for_choice,
                         const token_logprobs* lp, const tokenizer& tok, const usage* u,
                         const std::string& reasoning = {},
                         const std::optional<chunk_calls>& calls = std::nullopt);
/// The final usage chunk (stream_options.include_usage).
std::string usage_chunk(const parsed_request& r, const std::string& id, int64_t created,
                        const usage& u);
/// /v1/models: the model's id and each of its aliases.
std::string models_body(const serving_info& info, int64_t created);
std::string model_body(const std::string& model_name, int64_t created);
/// The OpenAI name of a finish reason ("stop", "length"); null for none.
std::string finish_name(finish_reason f);

} // namespace troupe::actors
