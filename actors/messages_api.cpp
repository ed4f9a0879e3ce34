// messages_api.cpp: /v1/messages requests as chat requests, and their replies as Messages and
// events (messages_api.hpp).
#include "actors/messages_api.hpp"

#include <nlohmann/json.hpp>

#include "actors/request_json.hpp"
#include "actors/tool_reply.hpp"
#include "text/json_schema.hpp"
#include "text/unicode.hpp"

namespace troupe::actors {

namespace {

using request_json::bad;
using request_json::given;
using request_json::is_str;
using ojson = nlohmann::ordered_json;

// Fields passed to the chat request under another name, or the same.
// (max_tokens and stop_sequences are applied after it: Anthropic's limits are not chat's)
constexpr std::pair<const char*, const char*> as_chat[] = {
    {"model", "model"}, {"temperature", "temperature"}, {"top_p", "top_p"},
    {"top_k", "top_k"}, {"stream", "stream"},           {"seed", "seed"}};

// The text of text blocks (a string is one); other block types are refused, naming them.
std::variant<std::string, api_error> text_of(const ojson& content, const char* where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    return bad(fmt::format("{} must be a string or a list of text blocks", where), "messages");
  std::string out;
  bool first = true;
  for (const auto& b : content) {
    if (!b.is_object() || !is_str(b, "type"))
      return bad(fmt::format("{}: each block needs a string 'type'", where), "messages");
    if (b["type"] != "text")
      return bad(fmt::format("{}: block type '{}' is not supported (text is)", where,
                             b["type"].get<std::string>()),
                 "messages");
    if (!is_str(b, "text"))
      return bad(fmt::format("{}: a text block needs a string 'text'", where), "messages");
    if (!first) out += '\n'; // text blocks join as the chat endpoint joins its text parts
    first = false;
    out += b["text"].get<std::string>();
  }
  return out;
}

// One Anthropic message as chat messages: a user turn's tool_result blocks become tool
// messages (in order, before its text), an assistant turn's thinking, text and tool_use blocks
// one assistant message (reasoning_content, content, tool_calls).
std::optional<api_error> read_message(const ojson& m, ojson& msgs) {
  if (!m.is_object() || !is_str(m, "role"))
    return bad("each message needs a string 'role'", "messages");
  const std::string role = m["role"];
  if (role != "user" && role != "assistant")
    return bad(fmt::format("message role '{}' is not user or assistant (the system prompt is "
                           "'system')",
                           role),
               "messages");
  auto c = m.find("content");
  if (c == m.end()) return bad("each message needs 'content'", "messages");
  for (auto& [k, v] : m.items())
    if (k != "role" && k != "content")
      return bad(fmt::format("unknown message field '{}'", k), "messages");
  ojson blocks = c->is_string() ? ojson::array({{{"type", "text"}, {"text", *c}}}) : *c;
  if (!blocks.is_array())
    return bad("message 'content' must be a string or a list of blocks", "messages");
  std::string text, thinking;
  int texts = 0;
  ojson calls = ojson::array();
  bool thought = false;
  for (const auto& b : blocks) {
    if (!b.is_object() || !is_str(b, "type"))
      return bad("each content block needs a string 'type'", "messages");
    const std::string type = b["type"];
    if (type == "text") {
      if (!is_str(b, "text")) return bad("a text block needs a string 'text'", "messages");
      if (texts++) text += '\n';
      text += b["text"].get<std::string>();
    } else if (type == "tool_result" && role == "user") {
      if (!is_str(b, "tool_use_id"))
        return bad("a tool_result block needs a string 'tool_use_id'", "messages");
      std::string out;
      if (const ojson* rc = given(b, "content")) {
        auto t = text_of(*rc, "a tool_result's content");
        if (auto* e = std::get_if<api_error>(&t)) return *e;
        out = std::get<std::string>(t);
      }
      msgs.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", out}});
    } else if (type == "tool_use" && role == "assistant") {
      if (!is_str(b, "id") || !is_str(b, "name"))
        return bad("a tool_use block needs a string 'id' and 'name'", "messages");
      const ojson* input = given(b, "input");
      if (input && !input->is_object())
        return bad("a tool_use block's 'input' must be an object", "messages");
      calls.push_back(
          {{"id", b["id"]},
           {"type", "function"},
           {"function",
            {{"name", b["name"]}, {"arguments", input ? input->dump() : std::string("{}")}}}});
    } else if (type == "thinking" && role == "assistant") {
      if (!is_str(b, "thinking"))
        return bad("a thinking block needs a string 'thinking'", "messages");
      thinking += b["thinking"].get<std::string>();
      thought = true;
    } else if (type == "redacted_thinking" && role == "assistant") {
      // encrypted by another server: nothing here can read it
    } else if (type == "image" || type == "document" || type == "search_result") {
      return bad(
          fmt::format("content block type '{}' is not supported: this model reads text", type),
          "messages");
    } else {
      return bad(
          fmt::format("content block type '{}' is not supported in a {} message", type, role),
          "messages");
    }
  }
  // consecutive turns of one role are one turn (as Anthropic's API takes them)
  ojson* last = msgs.empty() ? nullptr : &msgs.back();
  const bool joins = last && (*last)["role"] == role && (*last)["content"].is_string();
  if (role == "assistant") {
    if (joins && !last->contains("tool_calls") && !thought) {
      std::string& c = (*last)["content"].get_ref<std::string&>();
      if (!c.empty() && !text.empty()) c += '\n';
      c += text;
      if (!calls.empty()) (*last)["tool_calls"] = std::move(calls);
      return std::nullopt;
    }
    ojson a = {{"role", "assistant"}, {"content", text}};
    if (thought) a["reasoning_content"] = thinking;
    if (!calls.empty()) a["tool_calls"] = std::move(calls);
    msgs.push_back(std::move(a));
  } else if (joins) {
    std::string& c = (*last)["content"].get_ref<std::string&>();
    if (!c.empty() && !text.empty()) c += '\n';
    c += text;
  } else if (!text.empty() || msgs.empty() || msgs.back()["role"] != "tool") {
    msgs.push_back({{"role", "user"}, {"content", text}});
  }
  return std::nullopt;
}

// The chat request a Messages request describes (tokenize: only what a prompt needs).
std::variant<ojson, api_error> to_chat(const ojson& j, const serving_info& info, bool tokenize) {
  ojson c = ojson::object();
  for (auto& [k, v] : j.items()) {
    bool known = false;
    for (const auto& f : messages_fields()) known = known || k == f.name;
    if (!known) return bad(fmt::format("unknown field '{}'", k), k);
    if (!tokenize)
      for (auto [from, to] : as_chat)
        if (k == from && !v.is_null()) c[to] = v;
  }
  if (tokenize && j.contains("model")) c["model"] = j["model"];
  if (!tokenize && !given(j, "max_tokens")) return bad("'max_tokens' is required", "max_tokens");
  for (const char* key : {"container", "mcp_servers"})
    if (given(j, key))
      return bad(fmt::format("'{}' is not supported (no hosted tools run here)", key), key);
  // the conversation
  ojson msgs = ojson::array();
  if (const ojson* sys = given(j, "system")) {
    auto t = text_of(*sys, "'system'");
    if (auto* e = std::get_if<api_error>(&t)) {
      e->param = "system";
      return *e;
    }
    msgs.push_back({{"role", "system"}, {"content", std::get<std::string>(t)}});
  }
  const ojson* ms = given(j, "messages");
  if (!ms || !ms->is_array()) return bad("'messages' is required and must be a list", "messages");
  for (const auto& m : *ms)
    if (auto e = read_message(m, msgs)) return *e;
  // an assistant turn last (and not a call) is a prefill the reply continues
  if (info.jinja && !msgs.empty() && msgs.back()["role"] == "assistant" &&
      !msgs.back().contains("tool_calls")) {
    c["add_generation_prompt"] = false;
    c["continue_final_message"] = true;
  }
  c["messages"] = std::move(msgs);
  // tools
  if (const ojson* tools = given(j, "tools")) {
    if (!tools->is_array()) return bad("'tools' must be a list", "tools");
    ojson out = ojson::array();
    for (const auto& t : *tools) {
      if (!t.is_object() || !is_str(t, "name"))
        return bad("each tool needs a string 'name'", "tools");
      if (const ojson* type = given(t, "type"); type && *type != "custom")
        return bad(fmt::format("tool type {} is not supported: this server runs client tools "
                               "(custom, with an input_schema)",
                               type->dump()),
                   "tools");
      ojson f = {{"name", t["name"]}};
      if (const ojson* d = given(t, "description")) f["description"] = *d;
      const ojson* schema = given(t, "input_schema");
      if (!schema) return bad("a tool needs an 'input_schema'", "tools");
      f["parameters"] = *schema;
      if (const ojson* s = given(t, "strict")) f["strict"] = *s;
      out.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    c["tools"] = std::move(out);
  }
  if (const ojson* tc = given(j, "tool_choice")) {
    if (!tc->is_object() || !is_str(*tc, "type"))
      return bad("'tool_choice' must be an object with a type", "tool_choice");
    const std::string type = (*tc)["type"];
    if (type == "auto" || type == "none")
      c["tool_choice"] = type;
    else if (type == "any")
      c["tool_choice"] = "required";
    else if (type == "tool" && is_str(*tc, "name"))
      c["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*tc)["name"]}}}};
    else
      return bad("'tool_choice' type must be auto, any, none or tool (with a name)", "tool_choice");
    if (const ojson* d = given(*tc, "disable_parallel_tool_use")) {
      if (!d->is_boolean())
        return bad("'tool_choice.disable_parallel_tool_use' must be a boolean", "tool_choice");
      c["parallel_tool_calls"] = !d->get<bool>();
    }
  }
  // thinking: on or off where the template has the switch; a budget is not something a
  // reply can be held to here
  const bool thinks = (info.chat == chat_format::harmony && info.harmony) || info.think;
  if (const ojson* th = given(j, "thinking")) {
    if (!th->is_object() || !is_str(*th, "type"))
      return bad("'thinking' must be an object with a type", "thinking");
    const std::string type = (*th)["type"];
    if (type != "enabled" && type != "adaptive" && type != "between_tools" && type != "disabled")
      return bad("'thinking' type must be enabled, adaptive, between_tools or disabled",
                 "thinking");
    if (const ojson* b = given(*th, "budget_tokens"); b && !b->is_number_integer())
      return bad("'thinking.budget_tokens' must be an integer", "thinking");
    const bool on = type != "disabled";
    if (info.thinking_switch)
      c["chat_template_kwargs"] = {{"enable_thinking", on}};
    else if (!on && thinks)
      return bad("this model always thinks: its chat template has no switch for it", "thinking");
  }
  if (tokenize) return c;
  if (const ojson* oc = given(j, "output_config")) {
    if (!oc->is_object()) return bad("'output_config' must be an object", "output_config");
    for (auto& [k, v] : oc->items())
      if (k != "format" && k != "effort")
        return bad(fmt::format("unknown field 'output_config.{}'", k), "output_config");
    if (const ojson* f = given(*oc, "format")) {
      if (!f->is_object() || !is_str(*f, "type") || (*f)["type"] != "json_schema" ||
          !given(*f, "schema"))
        return bad("'output_config.format' must be {\"type\": \"json_schema\", \"schema\": ...}",
                   "output_config");
      c["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "output"}, {"schema", (*f)["schema"]}}}};
    }
    if (const ojson* effort = given(*oc, "effort")) {
      // the harmony system block's level (xhigh and max are its highest); other models have
      // no such switch, and the hint changes nothing there
      if (!effort->is_string())
        return bad("'output_config.effort' must be a string", "output_config");
      const std::string e = *effort;
      if (info.chat == chat_format::harmony)
        c["reasoning_effort"] = e == "xhigh" || e == "max" ? std::string("high") : e;
    }
  }
  if (const ojson* md = given(j, "metadata")) {
    if (!md->is_object()) return bad("'metadata' must be an object", "metadata");
    for (auto& [k, v] : md->items()) {
      if (k != "user_id") return bad(fmt::format("unknown field 'metadata.{}'", k), "metadata");
      if (!v.is_null() && !v.is_string())
        return bad("'metadata.user_id' must be a string", "metadata");
      if (v.is_string()) c["user"] = v;
    }
  }
  return c;
}

// A chat request's error in the Messages request's words.
api_error in_messages_words(api_error e) {
  return request_json::reworded(std::move(e),
                                {{"response_format", "output_config"},
                                 {"reasoning_effort", "output_config"},
                                 {"chat_template_kwargs", "thinking"}},
                                {{"'response_format'", "'output_config.format'"},
                                 {"'reasoning_effort'", "'output_config.effort'"}});
}

std::string sse(const std::string& type, ojson payload) {
  return request_json::sse_event(type, std::move(payload));
}

const char* error_type(int status) {
  switch (status) {
  case 400:
  case 405:
  case 408:
  case 411:
  case 415:
  case 431:
    return "invalid_request_error";
  case 401:
    return "authentication_error";
  case 403:
    return "permission_error";
  case 404:
    return "not_found_error";
  case 413:
    return "request_too_large";
  case 429:
    return "rate_limit_error";
  case 503:
    return "overloaded_error";
  case 504:
    return "timeout_error";
  default:
    return "api_error";
  }
}

} // namespace

const std::vector<api_field>& messages_fields() {
  static const std::vector<api_field> fields = {
      {"model", false, true, "must be the served model's id (404 otherwise)"},
      {"max_tokens", false, true,
       "required; stop_reason max_tokens when reached; more than the context's room runs to its "
       "end (stop_reason model_context_window_exceeded)"},
      {"messages", false, true,
       "roles user and assistant (consecutive turns of one role are one); content a string or "
       "blocks: text (joined by newlines), tool_use (assistant), tool_result (user: tool "
       "messages before the turn's text; is_error is not shown to the model), thinking "
       "(assistant: its reasoning_content), redacted_thinking (skipped); cache_control on a "
       "block is accepted (the prefix cache is automatic); an assistant turn last is a prefill "
       "the reply continues (Jinja templates)"},
      {"system", false, true, "a string or text blocks: the system message"},
      {"stop_sequences", false, true,
       "up to 64 (4096 bytes in all); stop_reason stop_sequence and the one that matched"},
      {"temperature", false, true, "as chat's"},
      {"top_p", false, true, "as chat's"},
      {"top_k", false, true, "as chat's"},
      {"seed", false, true, "as chat's (an extension, as vLLM's)"},
      {"stream", false, true, "the event stream (message_start ... message_stop)"},
      {"tools", false, true,
       "client tools (name, description, input_schema; type custom or absent), as chat's "
       "function tools; other types (Anthropic's hosted and versioned tools) refused"},
      {"tool_choice", false, true,
       "auto, any (chat's required), none, tool (a named one); disable_parallel_tool_use"},
      {"thinking", false, true,
       "enabled, adaptive, between_tools (on) or disabled (off): the template's enable_thinking "
       "switch where it has one (off for a model that always thinks is refused); budget_tokens "
       "is not enforced: the model thinks as it does, max_tokens bounds the reply"},
      {"output_config", false, true,
       "format json_schema (as chat's response_format); effort: the harmony reasoning level "
       "(xhigh and max are high), a hint other models have no switch for"},
      {"metadata", false, true, "user_id: written to the log with the request"},
      {"service_tier", false, true, "accepted; there is one tier"},
      {"inference_geo", false, true, "accepted; nothing else"},
      {"speed", false, true, "accepted; nothing else"},
      {"container", false, true, "refused unless null"},
      {"mcp_servers", false, true, "refused unless null"},
      {"context_management", false, true,
       "accepted; no edits are made (the context is used as sent)"},
      {"cache_control", false, true, "accepted (the prefix cache is automatic)"},
      {"diagnostics", false, true, "accepted; nothing else"},
  };
  return fields;
}

std::variant<parsed_request, api_error> parse_messages_request(const std::string& body,
                                                               const serving_info& info) {
  auto j = request_json::read_object(body);
  if (auto* e = std::get_if<api_error>(&j)) return *e;
  auto c = to_chat(std::get<ojson>(j), info, false);
  if (auto* e = std::get_if<api_error>(&c)) return *e;
  const ojson& body_j = std::get<ojson>(j);
  // max_tokens: at most the context's room (the reply then ends with
  // model_context_window_exceeded, as Anthropic's does), never an error for asking much
  const ojson& mt = body_j["max_tokens"];
  if (!mt.is_number_integer() || mt.get<int64_t>() < 1)
    return bad("'max_tokens' must be a positive integer", "max_tokens");
  // stop_sequences: any number of non-empty strings
  std::vector<std::string> stops;
  if (const ojson* ss = given(body_j, "stop_sequences")) {
    // every token is matched against each of them: bounded
    if (!ss->is_array() || ss->size() > 64)
      return bad("'stop_sequences' must be a list of at most 64 strings", "stop_sequences");
    size_t bytes = 0;
    for (const auto& x : *ss) {
      if (!x.is_string() || x.get<std::string>().empty())
        return bad("'stop_sequences' must hold non-empty strings", "stop_sequences");
      bytes += x.get_ref<const std::string&>().size();
      stops.push_back(x);
    }
    if (bytes > 4096) return bad("'stop_sequences' may hold 4096 bytes in all", "stop_sequences");
  }
  auto parsed = parse_request(std::get<ojson>(c).dump(), true, info);
  if (auto* e = std::get_if<api_error>(&parsed)) return in_messages_words(std::move(*e));
  auto& r = std::get<parsed_request>(parsed);
  r.messages_api = true;
  const int64_t want = mt.get<int64_t>();
  r.context_capped = want > r.base.max_tokens; // chat's default: the context's room
  if (!r.context_capped) r.base.max_tokens = static_cast<int32_t>(want);
  r.base.stop.insert(r.base.stop.end(), stops.begin(), stops.end());
  return std::move(r);
}

std::variant<std::string, api_error> count_tokens_request(const std::string& body,
                                                          const serving_info& info) {
  auto j = request_json::read_object(body);
  if (auto* e = std::get_if<api_error>(&j)) return *e;
  auto c = to_chat(std::get<ojson>(j), info, true);
  if (auto* e = std::get_if<api_error>(&c)) return *e;
  auto counted = tokenize_request(std::get<ojson>(c).dump(), info);
  if (auto* e = std::get_if<api_error>(&counted)) return in_messages_words(std::move(*e));
  const auto t = nlohmann::json::parse(std::get<std::string>(counted));
  return nlohmann::json{{"input_tokens", t["count"]}}.dump();
}

std::string anthropic_error_body(const api_error& e) {
  return nlohmann::json{{"type", "error"},
                        {"error", {{"type", error_type(e.status)}, {"message", e.message}}}}
      .dump();
}

std::string anthropic_error_event(const api_error& e) {
  return "event: error\ndata: " + anthropic_error_body(e) + "\n\n";
}

// ---- the reply

struct message_builder::state {
  std::string id, model;
  int64_t prompt_tokens = 0;
  ojson content = ojson::array(); // blocks, the last one open when `open` is not none
  enum class kind { none, thinking, text } open = kind::none;
  bool called = false;
  bool context_capped = false; // max_tokens was more than the context's room
  std::string stop_reason, stop_sequence;
  int64_t output_tokens = 0;
  int64_t cached = 0; // prompt tokens read from the prefix cache

  ojson message() const {
    return {{"id", id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model},
            {"content", content},
            {"stop_reason", stop_reason.empty() ? ojson(nullptr) : ojson(stop_reason)},
            {"stop_sequence", stop_sequence.empty() ? ojson(nullptr) : ojson(stop_sequence)},
            {"usage",
             {{"input_tokens", prompt_tokens - cached},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", cached},
              {"output_tokens", output_tokens}}}};
  }
  size_t index() const { return content.size() - 1; }
  std::string close() {
    if (open == kind::none) return {};
    open = kind::none;
    return sse("content_block_stop", {{"index", index()}});
  }
  std::string open_block(kind k) {
    if (open == k) return {};
    std::string out = close();
    content.push_back(k == kind::text
                          ? ojson{{"type", "text"}, {"text", ""}}
                          : ojson{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    open = k;
    return out +
           sse("content_block_start", {{"index", index()}, {"content_block", content.back()}});
  }
};

message_builder::message_builder(const parsed_request& r, std::string id, int64_t prompt_tokens)
    : s_(std::make_unique<state>()) {
  s_->id = std::move(id);
  s_->model = r.model;
  s_->prompt_tokens = prompt_tokens;
  s_->context_capped = r.context_capped;
}

message_builder::~message_builder() = default;

std::string message_builder::start(int64_t cached) {
  s_->cached = cached;
  return sse("message_start", {{"message", s_->message()}}) + sse("ping", ojson::object());
}

std::string message_builder::step(const std::string& reasoning, const std::string& text,
                                  const std::vector<tool_call>& calls) {
  auto& s = *s_;
  std::string out;
  if (!reasoning.empty()) {
    out += s.open_block(state::kind::thinking);
    s.content.back()["thinking"].get_ref<std::string&>() += reasoning;
    out += sse(
        "content_block_delta",
        {{"index", s.index()}, {"delta", {{"type", "thinking_delta"}, {"thinking", reasoning}}}});
  }
  if (!text.empty()) {
    out += s.open_block(state::kind::text);
    s.content.back()["text"].get_ref<std::string&>() += text;
    out += sse("content_block_delta",
               {{"index", s.index()}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  for (const auto& call : calls) {
    out += s.close();
    s.called = true;
    ojson input = ojson::parse(call.arguments, nullptr, false);
    if (!input.is_object()) input = ojson::object(); // the parsers only pass objects
    s.content.push_back(
        {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", ojson::object()}});
    out += sse("content_block_start", {{"index", s.index()}, {"content_block", s.content.back()}});
    out += sse("content_block_delta",
               {{"index", s.index()},
                {"delta", {{"type", "input_json_delta"}, {"partial_json", input.dump()}}}});
    out += sse("content_block_stop", {{"index", s.index()}});
    s.content.back()["input"] = std::move(input);
  }
  return out;
}

std::string message_builder::finish(finish_reason f, const std::string& stop_string,
                                    int64_t output_tokens, int64_t cached) {
  auto& s = *s_;
  std::string out = s.close();
  s.output_tokens = output_tokens;
  s.cached = cached;
  if (f == finish_reason::length) {
    s.stop_reason = s.context_capped ? "model_context_window_exceeded" : "max_tokens";
  } else if (s.called) {
    s.stop_reason = "tool_use";
  } else if (!stop_string.empty()) {
    s.stop_reason = "stop_sequence";
    s.stop_sequence = stop_string;
  } else {
    s.stop_reason = "end_turn";
  }
  out +=
      sse("message_delta",
          {{"delta",
            {{"stop_reason", s.stop_reason},
             {"stop_sequence", s.stop_sequence.empty() ? ojson(nullptr) : ojson(s.stop_sequence)}}},
           {"usage",
            {{"input_tokens", s.prompt_tokens - cached},
             {"cache_read_input_tokens", cached},
             {"output_tokens", output_tokens}}}});
  out += sse("message_stop", ojson::object());
  return out;
}

std::string message_builder::body() const {
  return s_->message().dump();
}

} // namespace troupe::actors
