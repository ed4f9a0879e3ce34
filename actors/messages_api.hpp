// messages_api.hpp: Anthropic's Messages API (POST /v1/messages and /v1/messages/count_tokens),
// what the anthropic SDKs and tools built on them (Claude Code's custom endpoints, agent
// frameworks) call, on top of the chat path, without CAF or sockets. A request's system
// prompt, messages of content blocks (text, tool_use, tool_result, thinking), tools,
// tool_choice, stop_sequences, thinking and output_config become a chat request that
// parse_request reads, so templates, tools, grammars and limits are the chat endpoint's; the
// reply becomes content blocks (thinking, text, tool_use) with a stop_reason, as one Message or
// as the event stream (message_start, content_block_start / delta / stop, message_delta,
// message_stop). Errors take Anthropic's shape: {"type": "error", "error": {"type", "message"}}.
// Tests: tests/actors/messages_api_test.cpp, tests/integration/openai_client_test.py
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "actors/openai_api.hpp"

namespace troupe::actors {

/// Every field /v1/messages accepts, and what Troupe does with it.
const std::vector<api_field>& messages_fields();

/// A /v1/messages body as the chat request it asks for (parsed_request.messages_api set).
std::variant<parsed_request, api_error> parse_messages_request(const std::string& body,
                                                               const serving_info& info);

/// /v1/messages/count_tokens: {"input_tokens": n}, the prompt a request with these messages,
/// system prompt and tools would have.
std::variant<std::string, api_error> count_tokens_request(const std::string& body,
                                                          const serving_info& info);

/// An error as Anthropic's API writes it (the HTTP status stays the same): the body, and the
/// same as a server-sent event.
std::string anthropic_error_body(const api_error& e);
std::string anthropic_error_event(const api_error& e);

/// One reply's content blocks, built as it comes; for a stream, each call returns the events
/// ("event: TYPE\ndata: {...}\n\n") that carry what changed. Owned by one session; not
/// thread-safe.
class message_builder {
 public:
  message_builder(const parsed_request& r, std::string id, int64_t prompt_tokens);
  ~message_builder();
  message_builder(const message_builder&) = delete;
  message_builder& operator=(const message_builder&) = delete;

  /// message_start and a ping. `cached`: the prompt's tokens the prefix cache gave (known once
  /// the engine's first event came: message_start's usage is final, as Anthropic's is).
  std::string start(int64_t cached = 0);
  /// New reasoning (a thinking block), then new text, then tool calls (tool_use blocks).
  std::string step(const std::string& reasoning, const std::string& text,
                   const std::vector<tool_call>& calls);
  /// The reply ended: the open block's stop, message_delta (stop_reason, output tokens) and
  /// message_stop. `stop_string`: the stop sequence that ended it ("" for none); `cached`: the
  /// prompt's tokens the prefix cache gave (cache_read_input_tokens; input_tokens the rest).
  std::string finish(finish_reason f, const std::string& stop_string, int64_t output_tokens,
                     int64_t cached = 0);
  /// The Message as it stands.
  std::string body() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

} // namespace troupe::actors
