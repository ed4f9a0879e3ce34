// openai_api.hpp: the OpenAI-compatible request and response shapes, without CAF or sockets:
// strict parsing and validation of /v1/completions and /v1/chat/completions bodies (every
// field checked for type and range; an unknown field or an unsupported option is an error
// naming it, never silently ignored), prompt construction (tokenizing, chat templates, the
// context limit), and the JSON of responses, stream chunks and errors. The error table
// mapping troupe error codes to HTTP statuses lives here too.
// Tests: tests/actors/openai_api_test.cpp
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "actors/api.hpp"
#include "runtime/chat_template.hpp"
#include "runtime/tokenizer.hpp"

namespace troupe::actors {

struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param; // the offending field, when there is one
  std::string code;  // "model_not_found", "context_length_exceeded", ...
};

/// The HTTP status for a troupe error (the one table).
int http_status_for(errc code);
std::string error_body(const api_error& e);

struct serving_info {
  std::string model_name;
  const tokenizer* tok = nullptr;
  int64_t context = 0;
  chat_format chat = chat_format::plain;
};

struct parsed_request {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  int n = 1;
  int completion_logprobs = -1; // completions: top-n logprobs (-1: none)
  bool chat_logprobs = false;
  int top_logprobs = 0;
  std::string model;
  std::vector<std::vector<int32_t>> prompts; // completions may carry several
  gen_request base;                          // everything but the prompt
};

std::variant<parsed_request, api_error> parse_request(const std::string& body, bool chat,
                                                      const serving_info& info);

struct choice_result {
  int index = 0;
  std::string text;
  std::string finish;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
};

std::string completion_body(const parsed_request& r, const std::string& id, int64_t created,
                            const std::vector<choice_result>& choices, int64_t prompt_tokens,
                            int64_t completion_tokens, const tokenizer& tok);
/// One SSE "data: {...}\n\n" chunk carrying new text (or the finish reason) for a choice.
std::string stream_chunk(const parsed_request& r, const std::string& id, int64_t created, int index,
                         const std::string& text, const std::string& finish, bool first_for_choice,
                         const gen_event* logprob_source, const tokenizer& tok);
/// The final usage chunk (stream_options.include_usage).
std::string usage_chunk(const parsed_request& r, const std::string& id, int64_t created,
                        int64_t prompt_tokens, int64_t completion_tokens);
std::string models_body(const std::string& model_name, int64_t created);

} // namespace troupe::actors
