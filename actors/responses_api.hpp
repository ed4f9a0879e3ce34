// responses_api.hpp: OpenAI's Responses API (POST /v1/responses, GET and DELETE
// /v1/responses/{id}) on top of the chat path, without CAF or sockets. A request's input
// items (messages, function_call, function_call_output, reasoning), instructions, tools,
// tool_choice, text.format and reasoning.effort become a chat request that parse_request reads,
// so templates, tools, grammars and limits are the chat endpoint's; the reply's reasoning, text
// and calls become output items: one Response object, or the typed events the OpenAI SDK reads
// (response.created, output_item.added, output_text.delta, ..., response.completed). Responses
// are kept (store, the API's default) in a bounded in-memory store, so previous_response_id
// continues a conversation, GET returns one and GET .../input_items pages through its input; a
// server restart forgets them.
// Tests: tests/actors/responses_api_test.cpp, tests/integration/openai_client_test.py
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/openai_api.hpp"

namespace troupe::actors {

/// Every field /v1/responses accepts, and what Troupe does with it.
const std::vector<api_field>& responses_fields();

/// Stored responses, oldest dropped first past `max_responses` or `max_bytes`; one larger than
/// the whole store is not kept (logged). Thread-safe: parsing threads read it, sessions add.
class response_store {
 public:
  static constexpr size_t default_responses = 1000, default_bytes = size_t{64} << 20;
  struct entry {
    std::string body;        // the Response object (JSON)
    std::string messages;    // the conversation as chat messages (JSON list): input, then output
    std::string input_items; // the request's input as items with ids (JSON list)
  };
  explicit response_store(size_t max_responses = default_responses,
                          size_t max_bytes = default_bytes)
      : max_responses_(max_responses)
      , max_bytes_(max_bytes) {}
  void put(const std::string& id, entry e);
  std::optional<entry> get(const std::string& id) const;
  bool erase(const std::string& id);
  size_t size() const;
  /// Why an id may not be found: "responses are kept in memory, the most recent N".
  std::string bounds() const;

 private:
  mutable std::mutex mu_;
  size_t max_responses_, max_bytes_, bytes_ = 0;
  std::list<std::string> order_; // ids, oldest first
  std::map<std::string, std::pair<entry, std::list<std::string>::iterator>> by_id_;
};

/// A /v1/responses body as the chat request it asks for (parsed_request.responses set).
/// `store`: where previous_response_id is looked up (null: none is known).
std::variant<parsed_request, api_error> parse_responses_request(const std::string& body,
                                                                const serving_info& info,
                                                                const response_store* store);

/// One response's output items, built as the reply comes; for a stream, each call returns the
/// server-sent events ("event: TYPE\ndata: {...}\n\n") that carry what changed. Owned by one
/// session; not thread-safe.
class response_builder {
 public:
  response_builder(const parsed_request& r, std::string id, int64_t created);
  ~response_builder();
  response_builder(const response_builder&) = delete;
  response_builder& operator=(const response_builder&) = delete;

  /// response.created and response.in_progress.
  std::string start();
  /// New reasoning, then new text (with its tokens' logprobs, when asked for), then calls.
  /// `reasoning_tokens`: how many of the step's tokens were reasoning (usage).
  std::string step(const std::string& reasoning, const std::string& text, const token_logprobs* lp,
                   const std::vector<tool_call>& calls, int64_t reasoning_tokens = 0);
  /// The reply ended: the open item's done events, then response.completed (or
  /// response.incomplete when max_output_tokens cut it).
  std::string finish(finish_reason f, const usage& u);
  /// The request failed after the stream began: an error event and response.failed.
  std::string failed(const api_error& e);
  /// The Response object as it stands.
  std::string body() const;
  /// The conversation so far as chat messages (JSON list): the request's, then the reply as
  /// one assistant message (reasoning_content, content, tool_calls).
  std::string conversation() const;
  /// The request's input as items, each with an id (JSON list), as GET
  /// /v1/responses/{id}/input_items lists them.
  std::string input_items() const;
  /// Whether the request asked to keep it (store).
  bool stored() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// GET /v1/responses/{id}/input_items: a page of a stored response's input items (JSON list)
/// as the API's list object, for the query string `query` (limit 1-100, default 20; order
/// desc, the default, or asc; after / before: item ids); null with `err` set when the query is
/// wrong.
std::optional<std::string> list_input_items(const std::string& items_json, const std::string& query,
                                            api_error& err);

} // namespace troupe::actors
