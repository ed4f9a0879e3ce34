// openai_api.cpp: request validation and response JSON (openai_api.hpp).
#include "actors/openai_api.hpp"

#include <cmath>
#include <optional>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/unicode.hpp"

namespace troupe::actors {
namespace {

using json = nlohmann::json;

api_error bad(std::string message, std::string param, int status = 400, std::string code = "") {
  return api_error{status, std::move(message), "invalid_request_error", std::move(param),
                   std::move(code)};
}

// Optional numeric field in [lo, hi]; absent or null leaves `out` unchanged.
template <class T>
std::optional<api_error> number(const json& j, const char* key, T& out, double lo, double hi,
                                bool integer) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (integer ? !it->is_number_integer() : !it->is_number())
    return bad(fmt::format("'{}' must be {}", key, integer ? "an integer" : "a number"), key);
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return bad(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, it->dump()), key);
  if constexpr (std::is_integral_v<T>) {
    if (it->is_number_unsigned())
      out = static_cast<T>(it->get<uint64_t>());
    else
      out = static_cast<T>(it->get<int64_t>());
  } else {
    out = static_cast<T>(v);
  }
  return std::nullopt;
}

std::optional<api_error> boolean(const json& j, const char* key, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad(fmt::format("'{}' must be a boolean", key), key);
  out = it->get<bool>();
  return std::nullopt;
}

std::optional<api_error> token_list(const json& a, const serving_info& info, const char* key,
                                    std::vector<int32_t>& out) {
  for (const auto& t : a) {
    if (!t.is_number_integer())
      return bad(fmt::format("'{}' token ids must be integers", key), key);
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v >= info.tok->vocab_size())
      return bad(fmt::format("'{}' token id {} is outside the vocabulary (0..{})", key, v,
                             info.tok->vocab_size() - 1),
                 key);
    out.push_back(static_cast<int32_t>(v));
  }
  return std::nullopt;
}

const std::set<std::string> completion_fields = {"model",
                                                 "prompt",
                                                 "max_tokens",
                                                 "temperature",
                                                 "top_p",
                                                 "top_k",
                                                 "min_p",
                                                 "n",
                                                 "stream",
                                                 "stream_options",
                                                 "logprobs",
                                                 "echo",
                                                 "stop",
                                                 "presence_penalty",
                                                 "frequency_penalty",
                                                 "repetition_penalty",
                                                 "seed",
                                                 "user",
                                                 "best_of",
                                                 "suffix",
                                                 "logit_bias",
                                                 "ignore_eos",
                                                 "truncate_prompt_tokens"};
const std::set<std::string> chat_fields = {"model",
                                           "messages",
                                           "max_tokens",
                                           "max_completion_tokens",
                                           "temperature",
                                           "top_p",
                                           "top_k",
                                           "min_p",
                                           "n",
                                           "stream",
                                           "stream_options",
                                           "logprobs",
                                           "top_logprobs",
                                           "stop",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "repetition_penalty",
                                           "seed",
                                           "user",
                                           "logit_bias",
                                           "response_format",
                                           "tools",
                                           "tool_choice",
                                           "parallel_tool_calls",
                                           "ignore_eos"};

} // namespace

int http_status_for(errc code) {
  switch (code) {
  case errc::invalid_argument:
  case errc::out_of_range:
  case errc::shape_mismatch:
  case errc::protocol_error:
    return 400;
  case errc::not_found:
    return 404;
  case errc::out_of_memory:
    return 507;
  case errc::unsupported:
    return 400;
  case errc::timeout:
    return 504;
  case errc::cancelled:
    return 499;
  case errc::unavailable:
    return 503;
  case errc::io_error:
  case errc::corrupt_file:
  case errc::internal:
    return 500;
  }
  return 500;
}

std::string error_body(const api_error& e) {
  json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  return j.dump();
}

std::variant<parsed_request, api_error> parse_request(const std::string& body, bool chat,
                                                      const serving_info& info) {
  if (size_t bad_at = unicode::first_invalid(body); bad_at != std::string::npos)
    return bad(fmt::format("request body is not valid UTF-8 (byte {})", bad_at), "");
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return bad("request body is not valid JSON", "");
  if (!j.is_object()) return bad("request body must be a JSON object", "");
  const auto& known = chat ? chat_fields : completion_fields;
  for (auto& [k, v] : j.items())
    if (!known.count(k)) return bad(fmt::format("unknown field '{}'", k), k);
  parsed_request r;
  r.chat = chat;
  // model
  auto m = j.find("model");
  if (m == j.end() || !m->is_string())
    return bad("'model' is required and must be a string", "model");
  r.model = m->get<std::string>();
  if (r.model != info.model_name)
    return api_error{
        404,
        fmt::format("model '{}' does not exist; this server serves '{}'", r.model, info.model_name),
        "invalid_request_error", "model", "model_not_found"};
  // sampling and limits
  auto& s = r.base.sampling;
  s.temperature = 1.0f; // OpenAI's default
  if (auto e = number(j, "temperature", s.temperature, 0.0, 2.0, false)) return *e;
  if (auto e = number(j, "top_p", s.top_p, 0.0, 1.0, false)) return *e;
  if (s.top_p <= 0.0f) return bad("'top_p' must be greater than 0", "top_p");
  if (auto e = number(j, "top_k", s.top_k, 0, 1 << 20, true)) return *e;
  if (auto e = number(j, "min_p", s.min_p, 0.0, 1.0, false)) return *e;
  if (auto e = number(j, "presence_penalty", s.presence_penalty, -2.0, 2.0, false)) return *e;
  if (auto e = number(j, "frequency_penalty", s.frequency_penalty, -2.0, 2.0, false)) return *e;
  if (auto e = number(j, "repetition_penalty", s.repetition_penalty, 0.01, 10.0, false)) return *e;
  uint64_t seed = 0;
  bool has_seed = j.contains("seed") && !j["seed"].is_null();
  if (auto e = number(j, "seed", seed, 0, 9.2e18, true)) return *e;
  s.seed = has_seed ? seed
                    : static_cast<uint64_t>(std::random_device{}()) << 32 ^ std::random_device{}();
  if (auto e = number(j, "n", r.n, 1, 16, true)) return *e;
  if (auto e = boolean(j, "stream", r.stream)) return *e;
  if (auto e = boolean(j, "ignore_eos", r.base.ignore_eos)) return *e;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("'stream_options' must be an object", "stream_options");
    if (!r.stream)
      return bad("'stream_options' is only allowed with stream: true", "stream_options");
    for (auto& [k, v] : it->items())
      if (k != "include_usage")
        return bad(fmt::format("unknown field 'stream_options.{}'", k), "stream_options");
    if (auto e = boolean(*it, "include_usage", r.include_usage)) return *e;
  }
  if (auto it = j.find("user"); it != j.end() && !it->is_null() && !it->is_string())
    return bad("'user' must be a string", "user");
  if (auto it = j.find("logit_bias");
      it != j.end() && !it->is_null() && !(it->is_object() && it->empty()))
    return bad("'logit_bias' is not supported", "logit_bias");
  // stop
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    if (it->is_string())
      r.base.stop = {it->get<std::string>()};
    else if (it->is_array()) {
      if (it->size() > 4) return bad("'stop' may hold at most 4 sequences", "stop");
      for (const auto& x : *it) {
        if (!x.is_string()) return bad("'stop' must be a string or a list of strings", "stop");
        r.base.stop.push_back(x.get<std::string>());
      }
    } else {
      return bad("'stop' must be a string or a list of strings", "stop");
    }
    for (const auto& st : r.base.stop)
      if (st.empty()) return bad("'stop' sequences must not be empty", "stop");
  }
  // max tokens: null/absent means the OpenAI default
  int64_t max_tokens = -1;
  if (auto e = number(j, "max_tokens", max_tokens, 1, 1e9, true)) return *e;
  if (chat) {
    int64_t mct = -1;
    if (auto e = number(j, "max_completion_tokens", mct, 1, 1e9, true)) return *e;
    if (mct > 0) {
      if (max_tokens > 0 && max_tokens != mct)
        return bad("'max_tokens' and 'max_completion_tokens' disagree", "max_completion_tokens");
      max_tokens = mct;
    }
  }
  // logprobs
  if (chat) {
    if (auto e = boolean(j, "logprobs", r.chat_logprobs)) return *e;
    if (auto e = number(j, "top_logprobs", r.top_logprobs, 0, 20, true)) return *e;
    if (r.top_logprobs > 0 && !r.chat_logprobs)
      return bad("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    s.logprobs = r.chat_logprobs;
    s.top_logprobs = r.top_logprobs;
    if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
      if (!it->is_object() || !it->contains("type") || (*it)["type"] != "text")
        return bad("'response_format' other than {\"type\": \"text\"} is not supported",
                   "response_format");
    }
    if (auto it = j.find("tools");
        it != j.end() && !it->is_null() && !(it->is_array() && it->empty()))
      return bad("'tools' are not supported", "tools");
    if (auto it = j.find("tool_choice"); it != j.end() && !it->is_null() && *it != "none")
      return bad("'tool_choice' is not supported", "tool_choice");
    bool ptc = false;
    if (auto e = boolean(j, "parallel_tool_calls", ptc)) return *e;
  } else {
    if (auto e = number(j, "logprobs", r.completion_logprobs, 0, 5, true)) return *e;
    if (r.completion_logprobs >= 0) {
      s.logprobs = true;
      s.top_logprobs = r.completion_logprobs;
    }
    bool echo = false;
    if (auto e = boolean(j, "echo", echo)) return *e;
    if (echo) return bad("'echo' is not supported", "echo");
    if (auto it = j.find("suffix"); it != j.end() && !it->is_null())
      return bad("'suffix' is not supported", "suffix");
    int best_of = r.n;
    if (auto e = number(j, "best_of", best_of, 1, 16, true)) return *e;
    if (best_of != r.n) return bad("'best_of' different from 'n' is not supported", "best_of");
  }
  // prompt(s)
  int64_t truncate = 0;
  if (!chat)
    if (auto e = number(j, "truncate_prompt_tokens", truncate, 1, 1e9, true)) return *e;
  if (chat) {
    auto it = j.find("messages");
    if (it == j.end() || !it->is_array())
      return bad("'messages' is required and must be a list", "messages");
    if (it->empty()) return bad("'messages' must not be empty", "messages");
    std::vector<chat_message> msgs;
    for (const auto& msg : *it) {
      if (!msg.is_object()) return bad("each message must be an object", "messages");
      auto role = msg.find("role");
      auto content = msg.find("content");
      if (role == msg.end() || !role->is_string())
        return bad("each message needs a string 'role'", "messages");
      chat_message cm;
      cm.role = role->get<std::string>();
      if (content == msg.end() || content->is_null())
        return bad("each message needs 'content'", "messages");
      if (content->is_string()) {
        cm.content = content->get<std::string>();
      } else if (content->is_array()) {
        for (const auto& part : *content) {
          if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
              !part.contains("text") || !part["text"].is_string())
            return bad("message content parts must be {\"type\": \"text\", \"text\": ...}",
                       "messages");
          cm.content += part["text"].get<std::string>();
        }
      } else {
        return bad("message 'content' must be a string or a list of text parts", "messages");
      }
      for (auto& [k, v] : msg.items())
        if (k != "role" && k != "content" && k != "name")
          return bad(fmt::format("unknown message field '{}'", k), "messages");
      msgs.push_back(std::move(cm));
    }
    auto text = render_chat(info.chat, msgs);
    if (!text) return bad(text.error().message, "messages");
    auto ids = info.tok->encode(*text, !chat_has_bos(info.chat), true);
    if (!ids) return bad(ids.error().message, "messages");
    r.prompts.push_back(std::move(*ids));
    if (auto end = chat_end_of_turn(info.chat); !end.empty())
      if (int32_t id = info.tok->find(end); id >= 0) r.base.stop_ids.push_back(id);
  } else {
    auto it = j.find("prompt");
    if (it == j.end() || it->is_null()) return bad("'prompt' is required", "prompt");
    auto add_text = [&](const std::string& text) -> std::optional<api_error> {
      auto ids = info.tok->encode(text, true, false);
      if (!ids) return bad(ids.error().message, "prompt");
      r.prompts.push_back(std::move(*ids));
      return std::nullopt;
    };
    if (it->is_string()) {
      if (auto e = add_text(it->get<std::string>())) return *e;
    } else if (it->is_array()) {
      if (it->empty()) return bad("'prompt' must not be an empty list", "prompt");
      if ((*it)[0].is_number_integer()) {
        std::vector<int32_t> ids;
        if (auto e = token_list(*it, info, "prompt", ids)) return *e;
        r.prompts.push_back(std::move(ids));
      } else {
        for (const auto& p : *it) {
          if (p.is_string()) {
            if (auto e = add_text(p.get<std::string>())) return *e;
          } else if (p.is_array()) {
            std::vector<int32_t> ids;
            if (auto e = token_list(p, info, "prompt", ids)) return *e;
            r.prompts.push_back(std::move(ids));
          } else {
            return bad("'prompt' must be a string, a list of strings, or token ids", "prompt");
          }
        }
      }
      if (r.prompts.size() * static_cast<size_t>(r.n) > 64)
        return bad("too many prompts x n (at most 64 choices)", "prompt");
    } else {
      return bad("'prompt' must be a string, a list of strings, or token ids", "prompt");
    }
  }
  for (auto& p : r.prompts) {
    if (p.empty()) return bad("the prompt is empty", chat ? "messages" : "prompt");
    if (truncate > 0 && static_cast<int64_t>(p.size()) > truncate)
      p.erase(p.begin(), p.end() - truncate);
    const int64_t room = info.context - static_cast<int64_t>(p.size());
    if (room < 1)
      return bad(fmt::format("the prompt has {} tokens; the context holds {} (set "
                             "truncate_prompt_tokens to cut it)",
                             p.size(), info.context),
                 chat ? "messages" : "prompt", 400, "context_length_exceeded");
    if (max_tokens > room)
      return bad(fmt::format("prompt ({} tokens) + max_tokens ({}) exceed the context of {}",
                             p.size(), max_tokens, info.context),
                 "max_tokens", 400, "context_length_exceeded");
  }
  const int64_t shortest_room = [&] {
    int64_t m = info.context;
    for (auto& p : r.prompts)
      m = std::min<int64_t>(m, info.context - static_cast<int64_t>(p.size()));
    return m;
  }();
  r.base.max_tokens = static_cast<int32_t>(max_tokens > 0 ? max_tokens
                                           : chat         ? shortest_room
                                                          : std::min<int64_t>(16, shortest_room));
  r.base.n = r.n;
  return r;
}

namespace {

json logprobs_json(const parsed_request& r, const std::vector<int32_t>& tokens,
                   const std::vector<float>& lps,
                   const std::vector<std::vector<std::pair<int32_t, float>>>& tops,
                   const tokenizer& tok) {
  if (r.chat) {
    json content = json::array();
    for (size_t i = 0; i < tokens.size() && i < lps.size(); ++i) {
      json alts = json::array();
      if (i < tops.size())
        for (auto [id, lp] : tops[i])
          alts.push_back({{"token", tok.decode({&id, 1})}, {"logprob", lp}, {"bytes", nullptr}});
      content.push_back({{"token", tok.decode({&tokens[i], 1})},
                         {"logprob", lps[i]},
                         {"bytes", nullptr},
                         {"top_logprobs", alts}});
    }
    return {{"content", content}};
  }
  json toks = json::array(), tlp = json::array(), top = json::array();
  for (size_t i = 0; i < tokens.size() && i < lps.size(); ++i) {
    toks.push_back(tok.decode({&tokens[i], 1}));
    tlp.push_back(lps[i]);
    json alts = json::object();
    if (i < tops.size())
      for (auto [id, lp] : tops[i]) alts[tok.decode({&id, 1})] = lp;
    top.push_back(alts);
  }
  return {{"tokens", toks},
          {"token_logprobs", tlp},
          {"top_logprobs", top},
          {"text_offset", json::array()}};
}

bool wants_logprobs(const parsed_request& r) {
  return r.chat ? r.chat_logprobs : r.completion_logprobs >= 0;
}

} // namespace

std::string completion_body(const parsed_request& r, const std::string& id, int64_t created,
                            const std::vector<choice_result>& choices, int64_t prompt_tokens,
                            int64_t completion_tokens, const tokenizer& tok) {
  json cs = json::array();
  for (const auto& c : choices) {
    json lp = wants_logprobs(r) ? logprobs_json(r, c.tokens, c.logprobs, c.top_logprobs, tok)
                                : json(nullptr);
    if (r.chat)
      cs.push_back({{"index", c.index},
                    {"message", {{"role", "assistant"}, {"content", c.text}}},
                    {"logprobs", lp},
                    {"finish_reason", c.finish}});
    else
      cs.push_back(
          {{"index", c.index}, {"text", c.text}, {"logprobs", lp}, {"finish_reason", c.finish}});
  }
  json j = {{"id", id},
            {"object", r.chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", r.model},
            {"choices", cs},
            {"usage",
             {{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}}}};
  return j.dump();
}

std::string stream_chunk(const parsed_request& r, const std::string& id, int64_t created, int index,
                         const std::string& text, const std::string& finish, bool first_for_choice,
                         const gen_event* src, const tokenizer& tok) {
  json lp = src && wants_logprobs(r) && !src->tokens.empty()
                ? logprobs_json(r, src->tokens, src->logprobs, src->top_logprobs, tok)
                : json(nullptr);
  json choice;
  if (r.chat) {
    json delta = json::object();
    if (first_for_choice) delta["role"] = "assistant";
    if (!text.empty() || (first_for_choice && finish.empty())) delta["content"] = text;
    choice = {{"index", index},
              {"delta", delta},
              {"logprobs", lp},
              {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  } else {
    choice = {{"index", index},
              {"text", text},
              {"logprobs", lp},
              {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  }
  json j = {{"id", id},
            {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", r.model},
            {"choices", json::array({choice})}};
  if (r.include_usage) j["usage"] = nullptr;
  return "data: " + j.dump() + "\n\n";
}

std::string usage_chunk(const parsed_request& r, const std::string& id, int64_t created,
                        int64_t prompt_tokens, int64_t completion_tokens) {
  json j = {{"id", id},
            {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", r.model},
            {"choices", json::array()},
            {"usage",
             {{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}}}};
  return "data: " + j.dump() + "\n\n";
}

std::string models_body(const std::string& model_name, int64_t created) {
  json j = {{"object", "list"},
            {"data", json::array({{{"id", model_name},
                                   {"object", "model"},
                                   {"created", created},
                                   {"owned_by", "troupe"}}})}};
  return j.dump();
}

} // namespace troupe::actors
