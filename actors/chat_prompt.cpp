// chat_prompt.cpp: a chat request's messages -> the prompt (openai_api.hpp's
// build_chat_prompt). The model's chat template runs as Jinja the way transformers'
// apply_chat_template runs it (messages, tools and documents null, add_generation_prompt,
// bos_token / eos_token, the request's chat_template_kwargs), and the text is encoded without
// adding special tokens, as transformers and vLLM encode it; where no template parses, the
// native renderer of the recognised family (text/chat_template.hpp) writes it.
// continue_final_message cuts the text after the last message's content, as transformers does,
// so the reply continues it. Tests: tests/actors/gateway_api_test.cpp,
// tests/integration/serving_test.py (published templates from tests/fixtures).
#include <algorithm>
#include <cctype>
#include <variant>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "actors/openai_api.hpp"
#include "text/json_schema.hpp"

namespace troupe::actors {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// what transformers appends to the content continue_final_message continues (and a space)
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG";

api_error bad(std::string message, std::string param) {
  return api_error::bad_request(std::move(message), std::move(param));
}

// One chat_template_kwargs entry for a template run as Jinja: a variable the template reads
// (its name appears in it as a word), not one the server sets.
std::optional<api_error> template_kwarg(const serving_info& info, const std::string& k,
                                        const json& v) {
  static const char* const reserved[] = {
      "messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"};
  for (const char* r : reserved)
    if (k == r)
      return bad(fmt::format("chat_template_kwargs '{}' is set by the server", k),
                 "chat_template_kwargs");
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  const std::string& t = info.chat_template;
  bool read = false;
  for (size_t i = t.find(k); !k.empty() && i != std::string::npos && !read; i = t.find(k, i + 1))
    read = (i == 0 || !word(t[i - 1])) && (i + k.size() >= t.size() || !word(t[i + k.size()]));
  if (!read)
    return bad(
        fmt::format("chat_template_kwargs '{}' is not read by this model's chat template", k),
        "chat_template_kwargs");
  if (k == "enable_thinking" && !v.is_boolean())
    return bad("chat_template_kwargs 'enable_thinking' must be true or false",
               "chat_template_kwargs");
  return std::nullopt;
}

// An assistant turn's earlier calls, as the templates read them (vLLM's way): each
// {id, type, function: {name, arguments}} with the arguments' JSON text parsed into an object.
std::variant<ojson, api_error> history_calls(const json& tc) {
  const char* shape = "message 'tool_calls' must be a list of {\"id\", \"type\": \"function\", "
                      "\"function\": {\"name\", \"arguments\"}}";
  if (!tc.is_array()) return bad(shape, "messages");
  ojson out = ojson::array();
  for (const auto& c : tc) {
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return bad(shape, "messages");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) return bad(shape, "messages");
    ojson call = ojson::object();
    if (c.contains("id")) {
      if (!c["id"].is_string()) return bad(shape, "messages");
      call["id"] = c["id"];
    }
    call["type"] = "function";
    ojson args = ojson::object();
    if (auto a = f.find("arguments"); a != f.end() && !a->is_null()) {
      if (a->is_string()) {
        args = ojson::parse(a->get<std::string>(), nullptr, false);
        if (args.is_discarded())
          return bad("a tool call's 'arguments' must be JSON text", "messages");
        if (json_nesting(args) > 64)
          return bad("a tool call's 'arguments' are nested more than 64 deep", "messages");
      } else if (a->is_object()) {
        args = ojson::parse(a->dump());
      } else {
        return bad(shape, "messages");
      }
    }
    call["function"] = {{"name", f["name"]}, {"arguments", std::move(args)}};
    out.push_back(std::move(call));
  }
  return out;
}

bool function_name_ok(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

// tools and tool_choice: `tools` gets the list for the template (in the client's key order),
// `out` what the reply must be.
std::optional<api_error> read_tools(const json& j, const ojson& ordered, const serving_info& info,
                                    bool render_only, ojson& tools, chat_prompt& out) {
  auto t = j.find("tools");
  const bool given = t != j.end() && !t->is_null() && !(t->is_array() && t->empty());
  auto choice = j.find("tool_choice");
  const bool chosen = choice != j.end() && !choice->is_null();
  if (!given) {
    if (chosen && *choice != "none") return bad("'tool_choice' needs 'tools'", "tool_choice");
    if (t != j.end() && t->is_array()) tools = ojson::array(); // [] reaches the template as []
    return std::nullopt;
  }
  if (!t->is_array()) return bad("'tools' must be a list", "tools");
  if (json_nesting(*t) > 80) return bad("'tools' is nested more than 80 deep", "tools");
  if (t->size() > 256) return bad("at most 256 tools", "tools");

  std::vector<std::string> names;
  std::vector<const json*> params;
  for (const auto& tool : *t) {
    const char* shape = "each tool must be {\"type\": \"function\", \"function\": {\"name\", "
                        "\"description\", \"parameters\"}}";
    if (!tool.is_object() || tool.value("type", json()) != "function" ||
        !tool.contains("function") || !tool["function"].is_object())
      return bad(shape, "tools");
    for (auto& [k, v] : tool.items())
      if (k != "type" && k != "function")
        return bad(fmt::format("unknown tool field '{}'", k), "tools");
    const json& f = tool["function"];
    for (auto& [k, v] : f.items()) {
      if (k != "name" && k != "description" && k != "parameters" && k != "strict")
        return bad(fmt::format("unknown function field '{}'", k), "tools");
      if (k == "description" && !v.is_string()) return bad(shape, "tools");
      if (k == "parameters" && !v.is_object())
        return bad("a function's 'parameters' must be a JSON schema object", "tools");
      if (k == "strict" && !v.is_boolean()) return bad("'strict' must be true or false", "tools");
    }
    if (!f.contains("name") || !f["name"].is_string() || !function_name_ok(f["name"]))
      return bad("a function's 'name' must be 1-64 letters, digits, '_' or '-'", "tools");
    if (std::find(names.begin(), names.end(), f["name"].get<std::string>()) != names.end())
      return bad(fmt::format("two tools are named '{}'", f["name"].get<std::string>()), "tools");
    names.push_back(f["name"]);
    params.push_back(f.contains("parameters") ? &f["parameters"] : nullptr);
  }
  bool parallel = true;
  if (auto p = j.find("parallel_tool_calls"); p != j.end() && p->is_boolean()) parallel = *p;
  // the template reads the list as the client wrote it (the key order shows in tojson)
  tools = ordered["tools"];
  const bool takes = info.jinja && info.chat_template.find("tools") != std::string::npos;
  auto schema_of = [&](size_t i) {
    return params[i] ? json(*params[i]) : json{{"type", "object"}};
  };
  out.tool_names = names;
  for (const json* p : params) out.tool_params.push_back(p ? p->dump() : std::string());
  if (render_only) return std::nullopt; // /tokenize: the prompt, whatever the reply would be
  if (!chosen || *choice == "auto") {
    if (!takes)
      return bad("this model's chat template does not take tools (it is rendered natively, or "
                 "never reads 'tools'); name a function in tool_choice to hold the reply to it",
                 "tools");
    // harmony replies address calls to functions.NAME (read by the reply's router)
    out.tool_fmt = detect_tool_format(info.chat_template);
    if (out.tool_fmt == tool_format::none && info.chat != chat_format::harmony)
      return bad("this model's chat template writes tool calls in no format Troupe reads (" +
                     tool_format_names() +
                     ", harmony); set tool_choice to \"required\" or name a function, which "
                     "hold the reply to the call's JSON",
                 "tool_choice");
    out.tools = tool_mode::automatic;
  } else if (*choice == "none") {
    out.tools = tool_mode::none;
  } else if (info.chat == chat_format::harmony) {
    return bad("with the harmony chat format tool_choice may be \"auto\" or \"none\" (a grammar "
               "would refuse the reply's channel tokens)",
               "tool_choice");
  } else if (*choice == "required") {
    // each function's $defs move up to the list's root, where their "#/$defs/NAME" refs
    // resolve (vLLM carries them up the same way)
    json branches = json::array(), defs = json::object();
    for (size_t i = 0; i < names.size(); ++i) {
      json schema = schema_of(i);
      for (const char* key : {"$defs", "definitions"}) {
        if (!schema.contains(key)) continue;
        if (!schema[key].is_object())
          return bad(fmt::format("'{}' must be an object", key), "tools");
        for (auto& [n, d] : schema[key].items()) {
          if (defs.contains(n) && defs[n] != d)
            return bad(fmt::format("two tools define '{}' differently in their $defs; "
                                   "tool_choice \"required\" needs them alike",
                                   n),
                       "tools");
          defs[n] = d;
        }
        schema.erase(key);
      }
      branches.push_back(
          {{"type", "object"},
           {"properties", {{"name", {{"const", names[i]}}}, {"parameters", std::move(schema)}}},
           {"required", {"name", "parameters"}},
           {"additionalProperties", false}});
    }
    json list = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", branches}}}};
    if (!defs.empty()) list["$defs"] = std::move(defs);
    if (!parallel) list["maxItems"] = 1;
    out.tools = tool_mode::required;
    out.tool_rule =
        json{{"type", "json_schema"}, {"json_schema", {{"name", "tool_calls"}, {"schema", list}}}}
            .dump();
  } else if (choice->is_object() && choice->value("type", json()) == "function" &&
             choice->contains("function") && (*choice)["function"].is_object() &&
             (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
    const std::string name = (*choice)["function"]["name"];
    auto at = std::find(names.begin(), names.end(), name);
    if (at == names.end())
      return bad(fmt::format("tool_choice names '{}', which is not among the tools", name),
                 "tool_choice");
    out.tools = tool_mode::named;
    out.tool_name = name;
    out.tool_rule =
        json{{"type", "json_schema"},
             {"json_schema",
              {{"name", name}, {"schema", schema_of(static_cast<size_t>(at - names.begin()))}}}}
            .dump();
  } else {
    return bad("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
               "\"function\", \"function\": {\"name\": ...}}",
               "tool_choice");
  }
  out.parallel = parallel;
  return std::nullopt;
}

} // namespace

std::optional<api_error> build_chat_prompt(const json& j, const std::string& body,
                                           const serving_info& info, chat_prompt& out,
                                           bool render_only) {
  ojson tools; // null: none given
  // the body once more, keeping key order: tools and template variables reach the template
  // as the client wrote them (nlohmann::json sorts keys); only when there are any
  const ojson ordered = j.contains("tools") || j.contains("chat_template_kwargs")
                            ? ojson::parse(body, nullptr, false)
                            : ojson::object();
  if (auto e = read_tools(j, ordered, info, render_only, tools, out)) return *e;
  auto it = j.find("messages");
  if (it == j.end() || !it->is_array())
    return bad("'messages' is required and must be a list", "messages");
  if (it->empty()) return bad("'messages' must not be empty", "messages");
  std::vector<chat_message> msgs;
  ojson jmsgs = ojson::array(); // the same messages as the Jinja template reads them
  for (const auto& msg : *it) {
    if (!msg.is_object()) return bad("each message must be an object", "messages");
    auto role = msg.find("role");
    auto content = msg.find("content");
    if (role == msg.end() || !role->is_string())
      return bad("each message needs a string 'role'", "messages");
    chat_message cm;
    cm.role = role->get<std::string>();
    if (cm.role == "developer") cm.role = "system"; // OpenAI's newer name for it
    const bool calls = cm.role == "assistant" && msg.contains("tool_calls");
    if ((content == msg.end() && !calls) ||
        (content != msg.end() && content->is_null() && cm.role != "assistant"))
      return bad("each message needs 'content'", "messages");
    if (content == msg.end() || content->is_null()) { // an assistant's may be null or absent
                                                      // (OpenAI's): no text
    } else if (content->is_string()) {
      cm.content = content->get<std::string>();
    } else if (content->is_array()) {
      bool first_part = true;
      for (const auto& part : *content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
            !part.contains("text") || !part["text"].is_string())
          return bad("message content parts must be {\"type\": \"text\", \"text\": ...}",
                     "messages");
        if (!first_part) cm.content += '\n'; // text parts join as vLLM joins them
        first_part = false;
        cm.content += part["text"].get<std::string>();
      }
    } else {
      return bad("message 'content' must be a string or a list of text parts", "messages");
    }
    for (auto& [k, v] : msg.items()) {
      // an earlier reply's reasoning, sent back as vLLM's clients do: the templates drop
      // the reasoning of turns before the last user message, so it changes nothing
      if (k == "reasoning_content" && cm.role == "assistant") {
        if (!v.is_string() && !v.is_null())
          return bad("message 'reasoning_content' must be a string or null", "messages");
        continue;
      }
      if ((k == "tool_calls" && cm.role == "assistant") ||
          (k == "tool_call_id" && cm.role == "tool")) {
        if (!info.jinja)
          return bad(fmt::format("message '{}' needs the model's chat template run as Jinja", k),
                     "messages");
        continue;
      }
      if (k != "role" && k != "content" && k != "name")
        return bad(fmt::format("unknown message field '{}'", k), "messages");
    }
    if (info.jinja) {
      // a null content reads as "" (vLLM's rendering; the templates split and strip it)
      // an earlier turn's reasoning goes in as transformers aliases it: also as `thinking`
      // (gpt-oss's template reads that), first
      ojson jm = ojson::object();
      auto rc = msg.find("reasoning_content");
      const bool reasoned = rc != msg.end() && rc->is_string();
      if (reasoned) jm["thinking"] = *rc;
      jm["role"] = cm.role;
      jm["content"] = cm.content;
      if (auto n = msg.find("name"); n != msg.end() && n->is_string()) jm["name"] = *n;
      if (reasoned) jm["reasoning_content"] = *rc;
      if (auto tc = msg.find("tool_calls"); tc != msg.end() && !tc->is_null()) {
        auto calls = history_calls(*tc);
        if (auto* e = std::get_if<api_error>(&calls)) return *e;
        jm["tool_calls"] = std::move(std::get<ojson>(calls));
      }
      if (auto id = msg.find("tool_call_id"); id != msg.end()) {
        if (!id->is_string()) return bad("message 'tool_call_id' must be a string", "messages");
        jm["tool_call_id"] = *id;
      }
      jmsgs.push_back(std::move(jm));
    }
    msgs.push_back(std::move(cm));
  }
  harmony_settings harmony;
  if (auto it = j.find("reasoning_effort"); it != j.end() && !it->is_null()) {
    if (info.chat != chat_format::harmony)
      return bad(fmt::format("'reasoning_effort' is not supported by this model's chat format "
                             "({})",
                             to_string(info.chat)),
                 "reasoning_effort");
    if (!it->is_string() || !valid_reasoning_effort(it->get<std::string>()))
      return bad("'reasoning_effort' must be \"low\", \"medium\" or \"high\"", "reasoning_effort");
    harmony.reasoning_effort = it->get<std::string>();
  }
  out.reasoning = (info.chat == chat_format::harmony && info.harmony.has_value()) ||
                  (info.chat != chat_format::harmony && info.think.has_value());
  out.think = info.chat != chat_format::harmony && info.think.has_value();
  bool thinking = true;
  ojson kwargs = ojson::object();
  if (auto it = j.find("chat_template_kwargs"); it != j.end() && !it->is_null()) {
    if (!it->is_object())
      return bad("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (const auto& [k, v] : it->items()) {
      if (info.jinja) { // any variable the template reads, as vLLM passes them
        if (auto e = template_kwarg(info, k, v)) return *e;
        if (json_nesting(v) > 64)
          return bad(fmt::format("chat_template_kwargs '{}' is nested more than 64 deep", k),
                     "chat_template_kwargs");
        // in the client's key order, as the template would print it
        kwargs[k] = ordered["chat_template_kwargs"][k];
        continue;
      }
      if (k != "enable_thinking")
        return bad(fmt::format("chat_template_kwargs '{}' is not supported (enable_thinking)", k),
                   "chat_template_kwargs");
      if (!v.is_boolean())
        return bad("chat_template_kwargs 'enable_thinking' must be true or false",
                   "chat_template_kwargs");
      if (!info.thinking_switch)
        return bad("'enable_thinking' is not read by this model's chat template",
                   "chat_template_kwargs");
      thinking = v.get<bool>();
    }
  }
  bool generation_prompt = true, continue_final = false;
  for (auto [key, flag] : {std::pair{"add_generation_prompt", &generation_prompt},
                           std::pair{"continue_final_message", &continue_final}}) {
    auto f = j.find(key);
    if (f == j.end() || f->is_null()) continue;
    if (!f->is_boolean()) return bad(fmt::format("'{}' must be true or false", key), key);
    *flag = f->get<bool>();
  }
  if (generation_prompt && continue_final)
    return bad("'continue_final_message' continues the last message, which needs "
               "'add_generation_prompt': false",
               "continue_final_message");
  if ((!generation_prompt || continue_final) && !info.jinja)
    return bad(fmt::format("'{}' needs the model's chat template run as Jinja (this model's is "
                           "rendered natively: {})",
                           continue_final ? "continue_final_message" : "add_generation_prompt",
                           info.chat_template.empty() ? "it has none" : "serve --chat-renderer"),
               continue_final ? "continue_final_message" : "add_generation_prompt");
  expected<std::string> text = std::string();
  if (info.jinja) {
    // the variables transformers' apply_chat_template gives the template
    if (continue_final) {
      auto& last = jmsgs.back()["content"];
      last = last.get<std::string>() + std::string(kContinueTag) + " ";
    }
    ojson ctx =
        chat_template_variables(*info.tok, std::move(jmsgs), std::move(tools), generation_prompt);
    if (j.contains("reasoning_effort") && !j["reasoning_effort"].is_null())
      ctx["reasoning_effort"] = harmony.reasoning_effort;
    for (auto& [k, v] : kwargs.items()) ctx[k] = v;
    text = info.jinja->render(ctx);
    if (!text)
      return bad(
          fmt::format("the model's chat template refused the messages: {}", text.error().message),
          "messages");
    if (continue_final) {
      // transformers' way: the last content carried a tag; the text ends where the tag starts,
      // or before the whitespace in front of it where the template trimmed what followed
      // transformers: the last message's (stripped) content must be in the text unchanged
      std::string_view last = msgs.back().content;
      while (!last.empty() && std::isspace(static_cast<unsigned char>(last.front())))
        last.remove_prefix(1);
      while (!last.empty() && std::isspace(static_cast<unsigned char>(last.back())))
        last.remove_suffix(1);
      if (text->find(last) == std::string::npos)
        return bad("continue_final_message: the template changed the last message's content, "
                   "so the reply cannot continue it",
                   "continue_final_message");
      const size_t at = text->rfind(kContinueTag, std::string::npos);
      if (at == std::string::npos)
        return bad("continue_final_message: the last message's content does not appear in the "
                   "rendered chat (the template drops it)",
                   "continue_final_message");
      const bool spaced =
          text->compare(at, kContinueTag.size() + 1, std::string(kContinueTag) + " ") == 0;
      text->resize(at);
      if (!spaced)
        while (!text->empty() && std::isspace(static_cast<unsigned char>(text->back())))
          text->pop_back();
    }
  } else {
    text = render_chat(info.chat, msgs, info.chat_system, harmony);
    if (!text) return bad(text.error().message, "messages");
    // thinking off: the empty block Qwen3's template writes after the generation prompt; a
    // template whose generation prompt opens the block (QwQ) writes its opening
    if (!thinking) *text += "<think>\n\n</think>\n\n";
    if (info.think_opened) *text += "<think>\n";
  }
  // a rendered template carries its own BOS where the model wants one (transformers and
  // vLLM encode it without adding special tokens)
  auto ids = info.tok->encode(*text, !info.jinja && !chat_has_bos(info.chat), true);
  if (!ids) return bad(ids.error().message, "messages");
  out.ids = std::move(*ids);
  out.text = std::move(*text);
  for (std::string_view end : chat_end_of_turn(info.chat))
    if (int32_t id = info.tok->find(end); id >= 0) out.stop_ids.push_back(id);
  return std::nullopt;
}

} // namespace troupe::actors
