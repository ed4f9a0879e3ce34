// responses_api.cpp: /v1/responses requests as chat requests, and their replies as Response
// objects and events (responses_api.hpp).
#include "actors/responses_api.hpp"

#include <nlohmann/json.hpp>

#include "actors/request_json.hpp"
#include "actors/tool_reply.hpp"
#include "core/log.hpp"
#include "text/json_schema.hpp"
#include "text/unicode.hpp"

namespace troupe::actors {

using ojson = nlohmann::ordered_json;

// What a Responses request keeps beside the chat request it became: the fields its Response
// object repeats, and the conversation (for the store).
struct responses_meta {
  ojson echo;     // instructions, tools, tool_choice, text, reasoning, ... as the client sent them
  ojson messages; // chat messages: a previous response's conversation, then this input
  ojson input_items; // this request's input as items, each with an id (GET .../input_items)
  bool store = true;
  // include "reasoning.encrypted_content": reasoning items carry their text there too (not
  // encrypted: a stateless client sends it back, and read_input reads it)
  bool reasoning_blob = false;
};

// responses_items.cpp: the input as the API lists it back, each item with an id
ojson input_items_of(const ojson& input);

namespace {

using request_json::bad;
using request_json::given;
using request_json::is_str;

// Fields passed to the chat request unchanged: the same name, the same meaning.
constexpr const char* same_as_chat[] = {"model",
                                        "temperature",
                                        "top_p",
                                        "stream",
                                        "parallel_tool_calls",
                                        "user",
                                        "metadata",
                                        "service_tier",
                                        "seed",
                                        "top_k",
                                        "min_p",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "repetition_penalty",
                                        "stop",
                                        "logit_bias",
                                        "min_tokens",
                                        "ignore_eos",
                                        "chat_template_kwargs"};

// The API's includable values: logprobs are made; reasoning.encrypted_content puts a
// reasoning item's text in its encrypted_content too (plain: a stateless client sends it
// back); the others name outputs of hosted tools, which never occur here.
constexpr const char* includables[] = {"message.output_text.logprobs",
                                       "reasoning.encrypted_content",
                                       "file_search_call.results",
                                       "web_search_call.results",
                                       "web_search_call.action.sources",
                                       "message.input_image.image_url",
                                       "computer_call_output.output.image_url",
                                       "code_interpreter_call.outputs"};

// The text of a message's content: a string, or parts of text (input_text, output_text,
// text, refusal), which join as the chat endpoint joins its text parts.
std::variant<ojson, api_error> content_of(const ojson& content, const char* where) {
  if (content.is_string()) return content;
  if (!content.is_array())
    return bad(fmt::format("{} must be a string or a list of parts", where), "input");
  ojson parts = ojson::array();
  for (const auto& p : content) {
    if (!p.is_object() || !is_str(p, "type"))
      return bad(fmt::format("{}: each part must be an object with a 'type'", where), "input");
    const std::string type = p["type"];
    if (type == "input_text" || type == "output_text" || type == "text" || type == "refusal") {
      const char* key = type == "refusal" ? "refusal" : "text";
      if (!is_str(p, key))
        return bad(fmt::format("a '{}' content part needs a string '{}'", type, key), "input");
      parts.push_back({{"type", "text"}, {"text", p[key]}});
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      return bad(
          fmt::format("content part type '{}' is not supported: this model reads text", type),
          "input");
    } else {
      return bad(fmt::format("unknown content part type '{}'", type), "input");
    }
  }
  return parts;
}

// A reasoning item's text: its reasoning_text content, else its summary's text, else what
// this server wrote in its encrypted_content (plain text; another server's is unreadable).
std::string reasoning_of(const ojson& item) {
  std::string out;
  for (const char* key : {"content", "summary"}) {
    if (auto it = item.find(key); it != item.end() && it->is_array())
      for (const auto& p : *it)
        if (p.is_object() && is_str(p, "text")) out += p["text"].get<std::string>();
    if (!out.empty()) return out;
  }
  if (is_str(item, "encrypted_content") &&
      unicode::valid(item["encrypted_content"].get<std::string>()))
    out = item["encrypted_content"].get<std::string>();
  return out;
}

// The input (a string, or a list of items) appended to `msgs` as chat messages: an assistant
// turn's text, its calls (function_call items) and its reasoning (a reasoning item before it)
// become one assistant message, as the chat templates expect them.
std::optional<api_error> read_input(const ojson& input, ojson& msgs) {
  if (input.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", input}});
    return std::nullopt;
  }
  if (!input.is_array()) return bad("'input' must be a string or a list of items", "input");
  std::string reasoning;
  bool reasoned = false;
  bool open_turn = false; // msgs.back() is an assistant turn that calls may join
  auto assistant = [&](ojson content) {
    ojson m = {{"role", "assistant"}, {"content", std::move(content)}};
    if (reasoned) m["reasoning_content"] = reasoning;
    reasoning.clear(), reasoned = false;
    msgs.push_back(std::move(m));
    open_turn = true;
  };
  for (const auto& item : input) {
    if (!item.is_object()) return bad("each input item must be an object", "input");
    auto t = item.find("type");
    if (t != item.end() && !t->is_string())
      return bad("an input item's 'type' must be a string", "input");
    const std::string type = t == item.end() ? "message" : t->get<std::string>();
    if (type == "message") {
      if (!is_str(item, "role")) return bad("an input message needs a string 'role'", "input");
      const std::string role = item["role"];
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        return bad(fmt::format("input message role '{}' is not one of user, system, "
                               "developer, assistant",
                               role),
                   "input");
      auto c = item.find("content");
      if (c == item.end()) return bad("an input message needs 'content'", "input");
      auto content = content_of(*c, "an input message's 'content'");
      if (auto* e = std::get_if<api_error>(&content)) return *e;
      if (role == "assistant") {
        assistant(std::move(std::get<ojson>(content)));
      } else {
        msgs.push_back({{"role", role}, {"content", std::move(std::get<ojson>(content))}});
        open_turn = false;
        reasoning.clear(), reasoned = false; // reasoning belongs to the assistant turn after it
      }
    } else if (type == "function_call") {
      for (const char* key : {"call_id", "name", "arguments"})
        if (!is_str(item, key))
          return bad(fmt::format("a function_call item needs a string '{}'", key), "input");
      if (!open_turn || reasoned) assistant(nullptr);
      msgs.back()["tool_calls"].push_back(
          {{"id", item["call_id"]},
           {"type", "function"},
           {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    } else if (type == "function_call_output") {
      if (!is_str(item, "call_id"))
        return bad("a function_call_output item needs a string 'call_id'", "input");
      auto o = item.find("output");
      if (o == item.end()) return bad("a function_call_output item needs 'output'", "input");
      auto content = content_of(*o, "a function_call_output's 'output'");
      if (auto* e = std::get_if<api_error>(&content)) return *e;
      msgs.push_back({{"role", "tool"},
                      {"tool_call_id", item["call_id"]},
                      {"content", std::move(std::get<ojson>(content))}});
      open_turn = false;
      reasoning.clear(), reasoned = false;
    } else if (type == "reasoning") {
      const std::string text = reasoning_of(item);
      reasoning += text;
      reasoned = reasoned || !text.empty();
    } else if (type == "item_reference") {
      return bad("input items of type 'item_reference' are not supported; send the item itself "
                 "or use previous_response_id",
                 "input");
    } else {
      return bad(fmt::format("input items of type '{}' are not supported (messages, "
                             "function_call, function_call_output and reasoning are)",
                             type),
                 "input");
    }
  }
  return std::nullopt;
}

// Function tools in the chat endpoint's shape; other (hosted) tool types are refused.
std::variant<ojson, api_error> read_tools(const ojson& tools) {
  if (!tools.is_array()) return bad("'tools' must be a list", "tools");
  ojson out = ojson::array();
  for (const auto& t : tools) {
    if (!t.is_object() || !is_str(t, "type"))
      return bad("each tool needs a string 'type'", "tools");
    if (t["type"] != "function")
      return bad(fmt::format("tool type '{}' is not supported: this server runs function tools "
                             "(the client runs them and sends back their output)",
                             t["type"].get<std::string>()),
                 "tools");
    if (!is_str(t, "name")) return bad("a function tool needs a string 'name'", "tools");
    ojson f = ojson::object();
    for (auto& [k, v] : t.items()) {
      if (k == "type") continue;
      if (k != "name" && k != "description" && k != "parameters" && k != "strict")
        return bad(fmt::format("unknown function tool field '{}'", k), "tools");
      f[k] = v;
    }
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

std::variant<ojson, api_error> read_tool_choice(const ojson& c) {
  if (c.is_string()) return c;
  if (c.is_object() && is_str(c, "type") && c["type"] == "function" && is_str(c, "name"))
    return ojson{{"type", "function"}, {"function", {{"name", c["name"]}}}};
  return bad("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
             "\"function\", \"name\": ...}",
             "tool_choice");
}

// text.format as the chat endpoint's response_format (null: plain text).
std::variant<ojson, api_error> read_text(const ojson& text) {
  if (!text.is_object()) return bad("'text' must be an object", "text");
  for (auto& [k, v] : text.items())
    if (k != "format" && k != "verbosity")
      return bad(fmt::format("unknown field 'text.{}'", k), "text");
  if (const ojson* v = given(text, "verbosity"); v && *v != "medium")
    return bad("'text.verbosity' other than \"medium\" is not supported (the model writes as it "
               "writes)",
               "text");
  const ojson* f = given(text, "format");
  if (!f) return ojson(nullptr);
  if (!f->is_object() || !is_str(*f, "type"))
    return bad("'text.format' must be an object with a type", "text");
  const std::string type = (*f)["type"];
  if (type == "text") return ojson(nullptr);
  if (type == "json_object") return ojson{{"type", "json_object"}};
  if (type != "json_schema")
    return bad(
        fmt::format("'text.format' type '{}' is not one of text, json_object, json_schema", type),
        "text");
  ojson schema = ojson::object();
  for (auto& [k, v] : f->items()) {
    if (k == "type") continue;
    if (k != "name" && k != "schema" && k != "strict" && k != "description")
      return bad(fmt::format("unknown field 'text.format.{}'", k), "text");
    schema[k] = v;
  }
  return ojson{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

// A chat request's error in the Responses request's words.
api_error in_responses_words(api_error e) {
  return request_json::reworded(std::move(e),
                                {{"messages", "input"},
                                 {"max_tokens", "max_output_tokens"},
                                 {"response_format", "text"},
                                 {"reasoning_effort", "reasoning"},
                                 {"logprobs", "top_logprobs"}},
                                {{"'max_tokens'", "'max_output_tokens'"},
                                 {"max_tokens (", "max_output_tokens ("},
                                 {"'response_format'", "'text.format'"},
                                 {"'reasoning_effort'", "'reasoning.effort'"},
                                 {"shorten the messages", "shorten the input"},
                                 {"'messages'", "'input'"}});
}

std::string sse(const std::string& type, ojson payload, int64_t& seq) {
  return request_json::sse_event(type, std::move(payload), &seq);
}

} // namespace

const std::vector<api_field>& responses_fields() {
  static const std::vector<api_field> fields = {
      {"model", false, true, "must be the served model's id (404 otherwise)"},
      {"input", false, true,
       "a string (one user message) or a list of items: messages (roles user, system, "
       "developer, assistant; content a string or input_text / output_text parts), "
       "function_call, function_call_output, and reasoning (its text is the next assistant "
       "turn's reasoning_content)"},
      {"instructions", false, true,
       "a system message before the input (not carried over by previous_response_id)"},
      {"previous_response_id", false, true,
       "continues a stored response: its input and output come before this input"},
      {"store", false, true,
       "default true: the response is kept in memory (the last 1000, up to 64 MB; one larger "
       "is not kept) for "
       "previous_response_id and GET /v1/responses/{id}"},
      {"max_output_tokens", false, true,
       "as chat's max_tokens; status incomplete (max_output_tokens) when reached"},
      {"temperature", false, true, "as chat's"},
      {"top_p", false, true, "as chat's"},
      {"stream", false, true, "typed server-sent events (response.created ... completed)"},
      {"stream_options", false, true, "include_obfuscation accepted; nothing is added"},
      {"tools", false, true,
       "function tools, as chat's; hosted tool types (web_search, file_search, ...) refused"},
      {"tool_choice", false, true, "none, auto, required, or {\"type\": \"function\", \"name\"}"},
      {"parallel_tool_calls", false, true, "as chat's"},
      {"text", false, true,
       "format text, json_object or json_schema (as chat's response_format); verbosity "
       "medium or null"},
      {"reasoning", false, true,
       "effort: as chat's reasoning_effort (harmony); summary auto or null (no summaries are "
       "written: the reasoning is the reasoning item's reasoning_text)"},
      {"top_logprobs", false, true,
       "0-20 alternatives per output token; above 0 the logprobs come too"},
      {"include", false, true,
       "message.output_text.logprobs adds logprobs; reasoning.encrypted_content puts each "
       "reasoning item's text in its encrypted_content too (plain text, for stateless "
       "clients to send back); the API's other values are accepted (hosted tools' outputs "
       "never occur)"},
      {"truncation", false, true, "disabled (the default); auto refused: input is never dropped"},
      {"background", false, true, "false only"},
      {"metadata", false, true, "string values, echoed in the response"},
      {"user", false, true, "as chat's"},
      {"safety_identifier", false, true, "accepted; nothing else"},
      {"prompt_cache_key", false, true, "accepted (the prefix cache needs no key)"},
      {"prompt_cache_retention", false, true, "accepted (the prefix cache is in memory)"},
      {"service_tier", false, true, "accepted; there is one tier"},
      {"seed, top_k, min_p, presence_penalty, frequency_penalty, repetition_penalty, stop, "
       "logit_bias, min_tokens, ignore_eos, chat_template_kwargs",
       false, true, "as in chat (vLLM's extensions)"},
  };
  return fields;
}

void response_store::put(const std::string& id, entry e) {
  std::lock_guard<std::mutex> lk(mu_);
  const size_t n = e.body.size() + e.messages.size();
  if (n > max_bytes_) {
    TROUPE_LOG_WARN("gateway", "response {} ({} bytes) is larger than the response store: not kept",
                    id, n);
    return;
  }
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    bytes_ -= it->second.first.body.size() + it->second.first.messages.size();
    order_.erase(it->second.second);
    by_id_.erase(it);
  }
  while (!order_.empty() && (by_id_.size() >= max_responses_ || bytes_ + n > max_bytes_)) {
    auto old = by_id_.find(order_.front());
    bytes_ -= old->second.first.body.size() + old->second.first.messages.size();
    by_id_.erase(old);
    order_.pop_front();
  }
  bytes_ += n;
  order_.push_back(id);
  by_id_.emplace(id, std::make_pair(std::move(e), std::prev(order_.end())));
}

std::optional<response_store::entry> response_store::get(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second.first;
}

bool response_store::erase(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  bytes_ -= it->second.first.body.size() + it->second.first.messages.size();
  order_.erase(it->second.second);
  by_id_.erase(it);
  return true;
}

size_t response_store::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return by_id_.size();
}

std::string response_store::bounds() const {
  return fmt::format("responses are kept in memory, the most recent {}, {} MiB at most",
                     max_responses_, max_bytes_ >> 20);
}

namespace {

// The request's fields a Response object repeats, with the API's defaults for those not given.
ojson echoed(const ojson& j, bool store) {
  auto value = [&](const char* key, ojson dflt) {
    const ojson* v = given(j, key);
    return v ? *v : dflt;
  };
  ojson echo = ojson::object();
  echo["instructions"] = value("instructions", nullptr);
  echo["max_output_tokens"] = value("max_output_tokens", nullptr);
  echo["metadata"] = value("metadata", ojson::object());
  echo["parallel_tool_calls"] = value("parallel_tool_calls", true);
  echo["previous_response_id"] = value("previous_response_id", nullptr);
  echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  if (const ojson* re = given(j, "reasoning"))
    if (const ojson* effort = given(*re, "effort")) echo["reasoning"]["effort"] = *effort;
  echo["store"] = store;
  echo["temperature"] = value("temperature", 1.0);
  ojson text = {{"format", {{"type", "text"}}}, {"verbosity", "medium"}};
  if (const ojson* t = given(j, "text"))
    if (const ojson* f = given(*t, "format")) text["format"] = *f;
  echo["text"] = std::move(text);
  echo["tool_choice"] = value("tool_choice", "auto");
  echo["tools"] = value("tools", ojson::array());
  echo["top_logprobs"] = value("top_logprobs", 0);
  echo["top_p"] = value("top_p", 1.0);
  echo["truncation"] = "disabled";
  echo["user"] = value("user", nullptr);
  echo["background"] = false;
  echo["service_tier"] = "default";
  return echo;
}

} // namespace

std::variant<parsed_request, api_error> parse_responses_request(const std::string& body,
                                                                const serving_info& info,
                                                                const response_store* store) {
  auto read = request_json::read_object(body);
  if (auto* e = std::get_if<api_error>(&read)) return *e;
  const ojson& j = std::get<ojson>(read);
  ojson c = ojson::object(); // the chat request
  for (auto& [k, v] : j.items()) {
    bool known = false;
    for (const char* name : same_as_chat)
      if (k == name) {
        known = true;
        c[k] = v;
      }
    for (const auto& f : responses_fields()) known = known || k == f.name;
    if (!known) return bad(fmt::format("unknown field '{}'", k), k);
  }
  auto meta = std::make_shared<responses_meta>();
  // fields that must be off, or accepted as they change nothing here
  if (const ojson* b = given(j, "background"); b && *b != false)
    return bad("'background' responses are not supported (stream instead)", "background");
  if (const ojson* t = given(j, "truncation"); t && *t != "disabled")
    return bad("'truncation' must be \"disabled\": the input is never dropped", "truncation");
  for (const char* key :
       {"safety_identifier", "prompt_cache_key", "prompt_cache_retention", "previous_response_id"})
    if (const ojson* v = given(j, key); v && !v->is_string())
      return bad(fmt::format("'{}' must be a string", key), key);
  if (const ojson* s = given(j, "store")) {
    if (!s->is_boolean()) return bad("'store' must be a boolean", "store");
    meta->store = s->get<bool>();
  }
  if (const ojson* so = given(j, "stream_options")) {
    if (!so->is_object()) return bad("'stream_options' must be an object", "stream_options");
    for (auto& [k, v] : so->items())
      if (k != "include_obfuscation" || !v.is_boolean())
        return bad(fmt::format("'stream_options.{}' is not supported (include_obfuscation, a "
                               "boolean, is)",
                               k),
                   "stream_options");
  }
  bool logprobs = false;
  if (const ojson* inc = given(j, "include")) {
    if (!inc->is_array()) return bad("'include' must be a list", "include");
    for (const auto& v : *inc) {
      bool ok = false;
      for (const char* name : includables) ok = ok || v == name;
      if (!ok) return bad(fmt::format("unknown 'include' value {}", v.dump()), "include");
      logprobs = logprobs || v == "message.output_text.logprobs";
      meta->reasoning_blob = meta->reasoning_blob || v == "reasoning.encrypted_content";
    }
  }
  // the conversation
  ojson msgs = ojson::array();
  if (const ojson* prev = given(j, "previous_response_id")) {
    auto stored = store ? store->get(prev->get<std::string>()) : std::nullopt;
    if (!stored)
      return api_error{
          404,
          fmt::format("previous response '{}' is not stored here ({})", prev->get<std::string>(),
                      store ? store->bounds() : "nothing is stored"),
          "invalid_request_error", "previous_response_id", "previous_response_not_found"};
    msgs = ojson::parse(stored->messages);
  }
  const ojson* input = given(j, "input");
  if (!input) return bad("'input' is required", "input");
  if (auto e = read_input(*input, msgs)) return *e;
  meta->messages = msgs;
  meta->input_items = input_items_of(*input);
  ojson chat_msgs = ojson::array();
  if (const ojson* ins = given(j, "instructions")) {
    if (!ins->is_string()) return bad("'instructions' must be a string", "instructions");
    chat_msgs.push_back({{"role", "system"}, {"content", *ins}});
  }
  for (const auto& m : msgs) chat_msgs.push_back(m);
  c["messages"] = std::move(chat_msgs);
  // tools, output format, reasoning, limits
  if (const ojson* t = given(j, "tools")) {
    auto tools = read_tools(*t);
    if (auto* e = std::get_if<api_error>(&tools)) return *e;
    c["tools"] = std::move(std::get<ojson>(tools));
  }
  if (const ojson* tc = given(j, "tool_choice")) {
    auto choice = read_tool_choice(*tc);
    if (auto* e = std::get_if<api_error>(&choice)) return *e;
    c["tool_choice"] = std::move(std::get<ojson>(choice));
  }
  if (const ojson* t = given(j, "text")) {
    auto format = read_text(*t);
    if (auto* e = std::get_if<api_error>(&format)) return *e;
    if (!std::get<ojson>(format).is_null()) c["response_format"] = std::get<ojson>(format);
  }
  if (const ojson* r = given(j, "reasoning")) {
    if (!r->is_object()) return bad("'reasoning' must be an object", "reasoning");
    for (auto& [k, v] : r->items()) {
      if (k == "effort") continue;
      if (k != "summary" && k != "generate_summary")
        return bad(fmt::format("unknown field 'reasoning.{}'", k), "reasoning");
      if (!v.is_null() && v != "auto")
        return bad(fmt::format("'reasoning.{}' {} is not supported: no reasoning summaries "
                               "are written (auto or null; the reasoning itself is returned)",
                               k, v.dump()),
                   "reasoning");
    }
    if (const ojson* effort = given(*r, "effort")) c["reasoning_effort"] = *effort;
  }
  if (const ojson* m = given(j, "max_output_tokens")) c["max_tokens"] = *m;
  if (const ojson* tl = given(j, "top_logprobs")) {
    c["top_logprobs"] = *tl;
    logprobs = logprobs || !tl->is_number() || tl->get<double>() != 0; // a bad value: chat says
  }
  if (logprobs) c["logprobs"] = true;
  auto parsed = parse_request(c.dump(), true, info);
  if (auto* e = std::get_if<api_error>(&parsed)) return in_responses_words(std::move(*e));
  auto& r = std::get<parsed_request>(parsed);
  meta->echo = echoed(j, meta->store);
  r.responses = std::move(meta);
  return std::move(r);
}

// ---- the reply

struct response_builder::state {
  std::shared_ptr<const responses_meta> meta;
  std::string id, model;
  int64_t created = 0;
  bool logprobs = false;
  int64_t seq = 0;
  ojson output = ojson::array(); // items, the last one open when `open` is not none
  enum class kind { none, reasoning, message } open = kind::none;
  std::string text;               // the open item's text
  ojson lps = ojson::array();     // the open message's logprobs
  ojson pending = ojson::array(); // logprobs of tokens whose text has not come yet
  std::string status = "in_progress";
  ojson incomplete = nullptr, usage = nullptr, error = nullptr;
  std::string all_text, all_reasoning; // the reply, for the conversation
  std::vector<tool_call> calls;
  int64_t reasoning_tokens = 0;

  ojson response() const {
    ojson r = {{"id", id},         {"object", "response"}, {"created_at", created},
               {"status", status}, {"error", error},       {"incomplete_details", incomplete},
               {"model", model},   {"output", output}};
    for (auto& [k, v] : meta->echo.items()) r[k] = v;
    r["usage"] = usage;
    return r;
  }
  size_t index() const { return output.size() - 1; }
  // the open item's closing events; its status becomes `how` (completed, or incomplete when
  // max_output_tokens cut it)
  std::string close(const char* how = "completed") {
    if (open == kind::none) return {};
    ojson& item = output.back();
    const std::string item_id = item["id"];
    std::string out;
    if (open == kind::message) {
      // (logprobs: [] when none were asked for, as OpenAI writes it)
      ojson part = {{"type", "output_text"},
                    {"annotations", ojson::array()},
                    {"logprobs", lps},
                    {"text", text}};
      ojson done = {{"item_id", item_id},
                    {"output_index", index()},
                    {"content_index", 0},
                    {"logprobs", lps},
                    {"text", text}};
      out += sse("response.output_text.done", std::move(done), seq);
      out += sse(
          "response.content_part.done",
          {{"item_id", item_id}, {"output_index", index()}, {"content_index", 0}, {"part", part}},
          seq);
      item["content"] = ojson::array({part});
    } else {
      ojson part = {{"type", "reasoning_text"}, {"text", text}};
      out += sse(
          "response.reasoning_text.done",
          {{"item_id", item_id}, {"output_index", index()}, {"content_index", 0}, {"text", text}},
          seq);
      out += sse(
          "response.content_part.done",
          {{"item_id", item_id}, {"output_index", index()}, {"content_index", 0}, {"part", part}},
          seq);
      item["content"] = ojson::array({part});
      if (meta->reasoning_blob) item["encrypted_content"] = text;
    }
    item["status"] = how;
    out += sse("response.output_item.done", {{"output_index", index()}, {"item", item}}, seq);
    open = kind::none;
    text.clear();
    lps = ojson::array();
    return out;
  }
  // opens an item of kind k unless one is open
  std::string open_item(kind k) {
    if (open == k) return {};
    std::string out = close();
    const bool msg = k == kind::message;
    ojson item = msg ? ojson{{"id", new_random_id("msg_")},
                             {"type", "message"},
                             {"status", "in_progress"},
                             {"role", "assistant"},
                             {"content", ojson::array()}}
                     : ojson{{"id", new_random_id("rs_")},
                             {"type", "reasoning"},
                             {"status", "in_progress"},
                             {"summary", ojson::array()},
                             {"content", ojson::array()}};
    const std::string item_id = item["id"];
    output.push_back(item);
    open = k;
    out += sse("response.output_item.added", {{"output_index", index()}, {"item", item}}, seq);
    ojson part = msg ? ojson{{"type", "output_text"}, {"annotations", ojson::array()}, {"text", ""}}
                     : ojson{{"type", "reasoning_text"}, {"text", ""}};
    if (msg) part["logprobs"] = ojson::array();
    out +=
        sse("response.content_part.added",
            {{"item_id", item_id}, {"output_index", index()}, {"content_index", 0}, {"part", part}},
            seq);
    return out;
  }
};

response_builder::response_builder(const parsed_request& r, std::string id, int64_t created)
    : s_(std::make_unique<state>()) {
  s_->meta = r.responses;
  if (!s_->meta) s_->meta = std::make_shared<responses_meta>();
  s_->id = std::move(id);
  s_->model = r.model;
  s_->created = created;
  s_->logprobs = r.chat_logprobs;
}

response_builder::~response_builder() = default;

std::string response_builder::start() {
  auto& s = *s_;
  std::string out = sse("response.created", {{"response", s.response()}}, s.seq);
  out += sse("response.in_progress", {{"response", s.response()}}, s.seq);
  return out;
}

std::string response_builder::step(const std::string& reasoning, const std::string& text,
                                   const token_logprobs* lp, const std::vector<tool_call>& calls,
                                   int64_t reasoning_tokens) {
  auto& s = *s_;
  s.reasoning_tokens += reasoning_tokens;
  std::string out;
  // the tokens' logprobs go with the message's text (a step that wrote only reasoning, or
  // calls, keeps its own)
  if (s.logprobs && lp && !lp->pieces.empty() && (reasoning.empty() || !text.empty()))
    for (const auto& e : logprob_content(*lp)) s.pending.push_back(ojson(e));
  if (!reasoning.empty()) {
    out += s.open_item(state::kind::reasoning);
    s.text += reasoning;
    s.all_reasoning += reasoning;
    out += sse("response.reasoning_text.delta",
               {{"item_id", s.output.back()["id"]},
                {"output_index", s.index()},
                {"content_index", 0},
                {"delta", reasoning}},
               s.seq);
  }
  if (!text.empty()) {
    out += s.open_item(state::kind::message);
    s.text += text;
    s.all_text += text;
    ojson delta = {{"item_id", s.output.back()["id"]},
                   {"output_index", s.index()},
                   {"content_index", 0},
                   {"delta", text}};
    if (s.logprobs) {
      delta["logprobs"] = s.pending;
      for (auto& e : s.pending) s.lps.push_back(std::move(e));
      s.pending = ojson::array();
    } else {
      delta["logprobs"] = ojson::array();
    }
    out += sse("response.output_text.delta", std::move(delta), s.seq);
  }
  if (!calls.empty()) s.pending = ojson::array();
  for (const auto& call : calls) {
    out += s.close();
    s.calls.push_back(call);
    ojson item = {{"id", new_random_id("fc_")}, {"type", "function_call"},
                  {"status", "in_progress"},    {"arguments", ""},
                  {"call_id", call.id},         {"name", call.name}};
    const std::string item_id = item["id"];
    s.output.push_back(item);
    out += sse("response.output_item.added", {{"output_index", s.index()}, {"item", item}}, s.seq);
    out +=
        sse("response.function_call_arguments.delta",
            {{"item_id", item_id}, {"output_index", s.index()}, {"delta", call.arguments}}, s.seq);
    out += sse("response.function_call_arguments.done",
               {{"item_id", item_id},
                {"output_index", s.index()},
                {"name", call.name},
                {"arguments", call.arguments}},
               s.seq);
    ojson& done = s.output.back();
    done["status"] = "completed";
    done["arguments"] = call.arguments;
    out += sse("response.output_item.done", {{"output_index", s.index()}, {"item", done}}, s.seq);
  }
  return out;
}

std::string response_builder::finish(finish_reason f, const usage& u) {
  auto& s = *s_;
  const bool cut = f == finish_reason::length;
  std::string out = s.close(cut ? "incomplete" : "completed");
  s.status = cut ? "incomplete" : "completed";
  if (cut) s.incomplete = {{"reason", "max_output_tokens"}};
  s.usage = {{"input_tokens", u.prompt_tokens},
             {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
             {"output_tokens", u.completion_tokens},
             {"output_tokens_details", {{"reasoning_tokens", s.reasoning_tokens}}},
             {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  out +=
      sse(cut ? "response.incomplete" : "response.completed", {{"response", s.response()}}, s.seq);
  return out;
}

std::string response_builder::failed(const api_error& e) {
  auto& s = *s_;
  const ojson code = e.code.empty() ? ojson(nullptr) : ojson(e.code);
  std::string out = sse("error",
                        {{"code", code},
                         {"message", e.message},
                         {"param", e.param.empty() ? ojson(nullptr) : ojson(e.param)}},
                        s.seq);
  s.status = "failed";
  // the codes a Response's error may carry
  const char* what = e.status == 429  ? "rate_limit_exceeded"
                     : e.status < 500 ? "invalid_prompt"
                                      : "server_error";
  s.error = {{"code", what}, {"message", e.message}};
  out += sse("response.failed", {{"response", s.response()}}, s.seq);
  return out;
}

std::string response_builder::body() const {
  return s_->response().dump();
}

std::string response_builder::conversation() const {
  const auto& s = *s_;
  ojson msgs = s.meta->messages.is_array() ? s.meta->messages : ojson::array();
  if (!s.all_text.empty() || !s.all_reasoning.empty() || !s.calls.empty()) {
    ojson m = {{"role", "assistant"}, {"content", s.all_text}};
    if (!s.all_reasoning.empty()) m["reasoning_content"] = s.all_reasoning;
    for (const auto& c : s.calls)
      m["tool_calls"].push_back({{"id", c.id},
                                 {"type", "function"},
                                 {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    msgs.push_back(std::move(m));
  }
  return msgs.dump();
}

std::string response_builder::input_items() const {
  return s_->meta->input_items.is_array() ? s_->meta->input_items.dump() : "[]";
}

bool response_builder::stored() const {
  return s_->meta->store;
}

} // namespace troupe::actors
