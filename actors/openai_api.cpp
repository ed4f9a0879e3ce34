// openai_api.cpp: request validation, the error table and response JSON (openai_api.hpp).
#include "actors/openai_api.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "text/json_schema.hpp"
#include "text/unicode.hpp"

namespace troupe::actors {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

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

std::optional<api_error> string(const json& j, const char* key, std::string& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad(fmt::format("'{}' must be a string", key), key);
  out = it->get<std::string>();
  return std::nullopt;
}

std::optional<api_error> token_list(const json& a, const serving_info& info, const char* key,
                                    std::vector<int32_t>& out) {
  for (const auto& t : a) {
    if (!t.is_number_integer())
      return bad(fmt::format("'{}' token ids must be integers", key), key);
    if (t.is_number_unsigned() && t.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return bad(fmt::format("'{}' token id {} is outside the vocabulary (0..{})", key, t.dump(),
                             info.tok->vocab_size() - 1),
                 key);
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v >= info.tok->vocab_size())
      return bad(fmt::format("'{}' token id {} is outside the vocabulary (0..{})", key, v,
                             info.tok->vocab_size() - 1),
                 key);
    out.push_back(static_cast<int32_t>(v));
  }
  return std::nullopt;
}

const api_field* find_field(const std::string& name) {
  for (const auto& f : api_fields())
    if (name == f.name) return &f;
  return nullptr;
}

// A piece of text as a token string: itself when valid UTF-8, else OpenAI's "bytes:\xNN".
std::string token_string(const std::string& piece) {
  if (unicode::valid(piece)) return piece;
  std::string out = "bytes:";
  for (unsigned char c : piece) out += fmt::format("\\x{:02x}", c);
  return out;
}

json bytes_of(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

} // namespace

const std::vector<api_field>& api_fields() {
  static const std::vector<api_field> fields = {
      {"model", true, true, "must be the served model's id (404 otherwise)"},
      {"prompt", true, false,
       "a string, a list of strings, a list of token ids, or a list of token-id lists"},
      {"messages", false, true,
       "roles system, developer (rendered as system), user, assistant; content a string or "
       "text parts"},
      {"max_tokens", true, true,
       "default 16 (completions) or the rest of the context (chat); 0 only with echo"},
      {"max_completion_tokens", false, true, "the same as max_tokens"},
      {"min_tokens", true, true,
       "EOS, stop ids and stop strings cannot end a completion before this many tokens (vLLM)"},
      {"temperature", true, true, "0 is greedy; default 1"},
      {"top_p", true, true, "nucleus sampling"},
      {"top_k", true, true, "keep the k most likely tokens (vLLM; 0 or -1: all)"},
      {"min_p", true, true, "drop tokens below min_p x the best one's probability (vLLM)"},
      {"n", true, true, "completions per prompt (1-16), sharing the prompt's KV blocks"},
      {"best_of", true, false, "accepted when equal to n"},
      {"stream", true, true, "server-sent events"},
      {"stream_options", true, true,
       "include_usage: a final usage chunk; continuous_usage_stats (vLLM): usage in every "
       "chunk"},
      {"logprobs", true, true,
       "completions: top-n logprobs (0-5); chat: true for the chosen tokens' logprobs"},
      {"top_logprobs", false, true, "chat: alternatives per token (0-20), with logprobs: true"},
      {"echo", true, false,
       "the prompt's text comes first in each choice; with logprobs, also the prompt tokens' "
       "logprobs (the first one null): prompt scoring, as lm-evaluation-harness uses it"},
      {"stop", true, true, "up to 4 strings; the text stops before them"},
      {"presence_penalty", true, true, "OpenAI's"},
      {"frequency_penalty", true, true, "OpenAI's"},
      {"repetition_penalty", true, true, "CTRL-style (vLLM)"},
      {"seed", true, true, "the same seed gives the same tokens"},
      {"logit_bias", true, true,
       "token id -> bias in [-100, 100] added to that logit before sampling (logprobs stay "
       "those of the model)"},
      {"ignore_eos", true, true, "keep generating past EOS (vLLM)"},
      {"stop_token_ids", true, true,
       "up to 64 token ids that end a completion (vLLM): a special token is not part of the "
       "text, another is its last token"},
      {"skip_special_tokens", true, true,
       "default true; false: special tokens' text is part of the reply (vLLM; not with the "
       "harmony chat format, whose channels are special tokens)"},
      {"include_stop_str_in_output", true, true,
       "default false; true: the stop string that ended a choice is the end of its text (vLLM)"},
      {"truncate_prompt_tokens", true, false, "keep only the prompt's last N tokens (vLLM)"},
      {"suffix", true, false, "refused unless null (no insertion mode)"},
      {"user", true, true, "written to the log with the request id; nothing else"},
      {"store", true, true, "accepted; Troupe stores nothing"},
      {"service_tier", true, true, "accepted; there is one tier"},
      {"metadata", true, true, "accepted (string values); not stored"},
      {"parallel_tool_calls", false, true,
       "true or false; false keeps the first call of a reply (auto) or one call (required)"},
      {"response_format", false, true,
       "text, json_object (any JSON object) or json_schema (type, properties, required, "
       "additionalProperties, items, min/maxItems, enum, const, anyOf, oneOf of branches that "
       "start differently, $ref, min/maxLength; other keywords refused by name): the reply is "
       "generated to fit it"},
      {"tools", false, true,
       "functions, rendered by the model's chat template; calls are read out of the reply in "
       "the template's format (those of Qwen, Llama 3, Mistral, DeepSeek, Kimi K2, GLM, "
       "MiniMax, Gemma 4, Granite, Nemotron, Command R and others: text/tool_calls.hpp; GPT-OSS "
       "harmony)"},
      {"tool_choice", false, true,
       "none, auto, required (the reply is held to a JSON list of calls), or a named "
       "function (held to its parameters)"},
      {"add_generation_prompt", false, true,
       "false: the prompt ends after the last message, without the assistant turn's opening "
       "(chat templates run as Jinja)"},
      {"continue_final_message", false, true,
       "true (with add_generation_prompt false): the reply continues the last message, "
       "as transformers cuts the rendered chat after its content"},
      {"chat_template_kwargs", false, true,
       "variables the model's chat template reads (enable_thinking: false makes Qwen3's "
       "template write its empty <think> block, so the reply is all answer); a name the "
       "template does not read is refused (natively rendered templates: only enable_thinking)"},
      {"reasoning_effort", false, true,
       "low, medium or high: the harmony (GPT-OSS) system block's reasoning level; refused for "
       "other chat formats"},
  };
  return fields;
}

api_error error_for(const error& e, std::string param) {
  switch (e.code) {
  case errc::invalid_argument:
  case errc::shape_mismatch:
  case errc::protocol_error:
  case errc::unsupported:
    return {400, e.message, "invalid_request_error", std::move(param), ""};
  case errc::out_of_range: // a prompt longer than the context, a token id outside the vocabulary
    return {400, e.message, "invalid_request_error", std::move(param),
            e.message.find("context") != std::string::npos ? "context_length_exceeded" : ""};
  case errc::out_of_memory: // can never fit this server's KV cache: retrying will not help
    return {400, e.message, "invalid_request_error", std::move(param), "kv_cache_too_small"};
  case errc::not_found:
    return {404, e.message, "invalid_request_error", std::move(param), "not_found"};
  case errc::busy:
    return {429, e.message, "rate_limit_error", "", "queue_full"};
  case errc::unavailable:
    return {503, e.message, "server_error", "", "unavailable"};
  case errc::timeout:
    return {504, e.message, "server_error", "", "timeout"};
  case errc::cancelled:
    return {499, e.message, "invalid_request_error", "", "cancelled"};
  case errc::io_error:
  case errc::corrupt_file:
  case errc::internal:
    break;
  }
  return {500, e.message, "server_error", "", "internal_error"};
}

std::string error_body(const api_error& e) {
  json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  return j.dump();
}

std::string error_event(const api_error& e) {
  return "data: " + error_body(e) + "\n\n";
}

std::string finish_name(finish_reason f) {
  return f == finish_reason::none ? "" : std::string(to_string(f));
}

std::variant<parsed_request, api_error> parse_request(const std::string& body, bool chat,
                                                      const serving_info& info) {
  if (size_t bad_at = unicode::first_invalid(body); bad_at != std::string::npos)
    return bad(fmt::format("request body is not valid UTF-8 (byte {})", bad_at), "");
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return bad("request body is not valid JSON", "");
  if (!j.is_object()) return bad("request body must be a JSON object", "");
  for (auto& [k, v] : j.items()) {
    const api_field* f = find_field(k);
    if (!f || !(chat ? f->chat : f->completions))
      return bad(fmt::format("unknown field '{}'", k), k);
  }
  parsed_request r;
  r.chat = chat;
  // model
  auto m = j.find("model");
  if (m == j.end() || !m->is_string())
    return bad("'model' is required and must be a string", "model");
  r.model = m->get<std::string>();
  if (!info.serves(r.model))
    return api_error{
        404,
        fmt::format("model '{}' does not exist; this server serves '{}'", r.model, info.model_name),
        "invalid_request_error", "model", "model_not_found"};
  // accepted for compatibility (api_fields says what each does)
  if (auto e = string(j, "user", r.user)) return *e;
  {
    bool store = false, ptc = false;
    std::string tier;
    if (auto e = boolean(j, "store", store)) return *e;
    if (auto e = string(j, "service_tier", tier)) return *e;
    if (auto e = boolean(j, "parallel_tool_calls", ptc)) return *e;
    if (auto it = j.find("metadata"); it != j.end() && !it->is_null()) {
      if (!it->is_object()) return bad("'metadata' must be an object", "metadata");
      for (auto& [k, v] : it->items())
        if (!v.is_string()) return bad("'metadata' values must be strings", "metadata");
    }
  }
  // sampling and limits
  auto& s = r.base.sampling;
  s.temperature = 1.0f; // OpenAI's default
  if (auto e = number(j, "temperature", s.temperature, 0.0, 2.0, false)) return *e;
  if (auto e = number(j, "top_p", s.top_p, 0.0, 1.0, false)) return *e;
  if (s.top_p <= 0.0f) return bad("'top_p' must be greater than 0", "top_p");
  if (auto e = number(j, "top_k", s.top_k, -1, 1 << 20, true)) return *e;
  if (s.top_k < 0) s.top_k = 0; // vLLM's "no top-k"
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
  if (auto it = j.find("stop_token_ids"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() > 64)
      return bad("'stop_token_ids' must be a list of at most 64 token ids", "stop_token_ids");
    for (const auto& v : *it) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
          v.get<int64_t>() >= info.tok->vocab_size())
        return bad(fmt::format("'stop_token_ids' must hold token ids of this model (0 .. {})",
                               info.tok->vocab_size() - 1),
                   "stop_token_ids");
      const auto id = static_cast<int32_t>(v.get<int64_t>());
      (info.tok->is_special(id) ? r.base.stop_ids : r.base.stop_ids_kept).push_back(id);
    }
  }
  if (auto e = boolean(j, "skip_special_tokens", r.skip_special)) return *e;
  if (auto e = boolean(j, "include_stop_str_in_output", r.include_stop)) return *e;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("'stream_options' must be an object", "stream_options");
    if (!r.stream)
      return bad("'stream_options' is only allowed with stream: true", "stream_options");
    for (auto& [k, v] : it->items())
      if (k != "include_usage" && k != "continuous_usage_stats")
        return bad(fmt::format("unknown field 'stream_options.{}'", k), "stream_options");
    if (auto e = boolean(*it, "include_usage", r.include_usage)) return *e;
    if (auto e = boolean(*it, "continuous_usage_stats", r.continuous_usage)) return *e;
  }
  if (auto it = j.find("logit_bias"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("'logit_bias' must map token ids to biases", "logit_bias");
    for (auto& [k, v] : it->items()) {
      // decimal digits only (stoll alone would take " 5" and "+5")
      size_t used = 0;
      long long id = -1;
      const bool digits =
          !k.empty() && k.size() <= 18 &&
          std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits) id = std::stoll(k, &used);
      if (!digits || used != k.size() || id < 0 || id >= info.tok->vocab_size())
        return bad(fmt::format("'logit_bias' key '{}' is not a token id (0..{})", k,
                               info.tok->vocab_size() - 1),
                   "logit_bias");
      if (!v.is_number() || !(v.get<double>() >= -100 && v.get<double>() <= 100))
        return bad("'logit_bias' values must be numbers between -100 and 100", "logit_bias");
      s.logit_bias.emplace_back(static_cast<int32_t>(id), v.get<float>());
    }
  }
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
  if (!chat)
    if (auto e = boolean(j, "echo", r.echo)) return *e;
  // max tokens: null/absent means the OpenAI default; 0 only to echo (score) the prompt
  int64_t max_tokens = -1;
  if (auto e = number(j, "max_tokens", max_tokens, r.echo ? 0 : 1, 1e9, true)) return *e;
  if (chat) {
    int64_t mct = -1;
    if (auto e = number(j, "max_completion_tokens", mct, 1, 1e9, true)) return *e;
    if (mct > 0) {
      if (max_tokens > 0 && max_tokens != mct)
        return bad("'max_tokens' and 'max_completion_tokens' disagree", "max_completion_tokens");
      max_tokens = mct;
    }
  }
  int64_t min_tokens = 0;
  if (auto e = number(j, "min_tokens", min_tokens, 0, 1e9, true)) return *e;
  // logprobs
  if (chat) {
    if (auto e = boolean(j, "logprobs", r.chat_logprobs)) return *e;
    if (auto e = number(j, "top_logprobs", r.top_logprobs, 0, 20, true)) return *e;
    if (r.top_logprobs > 0 && !r.chat_logprobs)
      return bad("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    s.logprobs = r.chat_logprobs;
    s.top_logprobs = r.top_logprobs;
    if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
      if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
        return bad("'response_format' must be an object with a type", "response_format");
      if ((*it)["type"] != "text") {
        if (info.chat == chat_format::harmony)
          return bad("'response_format' is not supported with the harmony chat format (its "
                     "replies carry channel tokens a grammar would refuse)",
                     "response_format");
        // nlohmann's dump() recurses: a value nested deeper than any schema is refused first
        if (json_nesting(*it) > 80)
          return bad("'response_format' is nested more than 80 deep", "response_format");
        // checked here so a schema we cannot hold to is a 400 before anything is queued
        if (auto rule = compile_response_format(it->dump()); !rule)
          return bad(rule.error().message, "response_format");
        r.base.response_format = it->dump();
      }
    }
  } else {
    if (auto e = number(j, "logprobs", r.completion_logprobs, 0, 5, true)) return *e;
    if (r.completion_logprobs >= 0) {
      s.logprobs = true;
      s.top_logprobs = r.completion_logprobs;
    }
    if (r.echo && r.completion_logprobs >= 0) r.base.prompt_logprobs = r.completion_logprobs;
    if (max_tokens == 0) r.base.prompt_logprobs = std::max(r.base.prompt_logprobs, 0);
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
    chat_prompt cp;
    if (auto e = build_chat_prompt(j, body, info, cp)) return *e;
    r.reasoning = cp.reasoning;
    if (r.reasoning && info.chat == chat_format::harmony && !r.skip_special)
      return bad("'skip_special_tokens': false is not supported with the harmony chat format "
                 "(its channels and headers are special tokens the reply is split by)",
                 "skip_special_tokens");
    r.tools = cp.tools;
    r.tool_fmt = cp.tool_fmt;
    r.tool_name = cp.tool_name;
    r.parallel_tools = cp.parallel;
    r.tool_names = cp.tool_names;
    r.tool_params = cp.tool_params;
    if (!cp.tool_rule.empty()) {
      if (!r.base.response_format.empty())
        return bad("'response_format' cannot be combined with a tool_choice that names a tool "
                   "or requires one (the reply is held to the tool's arguments)",
                   "response_format");
      if (auto rule = compile_response_format(cp.tool_rule); !rule) {
        std::string why = rule.error().message; // it names the schema it was given
        for (size_t at = why.find("response_format schema"); at != std::string::npos;
             at = why.find("response_format schema", at))
          why.replace(at, std::string_view("response_format schema").size(), "schema");
        return bad(fmt::format("the tools' parameters, as tool_choice {} holds the reply to "
                               "them: {}",
                               cp.tools == tool_mode::named ? "\"" + cp.tool_name + "\""
                                                            : std::string("\"required\""),
                               why),
                   "tools");
      }
      r.base.response_format = cp.tool_rule;
    }
    r.base.think = cp.think;
    r.base.stop_ids.insert(r.base.stop_ids.end(), cp.stop_ids.begin(), cp.stop_ids.end());
    r.prompts.push_back(std::move(cp.ids));
    r.prompt_texts.push_back(std::move(cp.text));
  } else {
    auto it = j.find("prompt");
    if (it == j.end() || it->is_null()) return bad("'prompt' is required", "prompt");
    auto add_text = [&](const std::string& text) -> std::optional<api_error> {
      auto ids = info.tok->encode(text, true, false);
      if (!ids) return bad(ids.error().message, "prompt");
      r.prompts.push_back(std::move(*ids));
      r.prompt_texts.push_back(text);
      return std::nullopt;
    };
    auto add_ids = [&](const json& a) -> std::optional<api_error> {
      std::vector<int32_t> ids;
      if (auto e = token_list(a, info, "prompt", ids)) return e;
      r.prompt_texts.push_back(info.tok->decode(ids, true));
      r.prompts.push_back(std::move(ids));
      return std::nullopt;
    };
    if (it->is_string()) {
      if (auto e = add_text(it->get<std::string>())) return *e;
    } else if (it->is_array()) {
      if (it->empty()) return bad("'prompt' must not be an empty list", "prompt");
      if ((*it)[0].is_number_integer()) {
        if (auto e = add_ids(*it)) return *e;
      } else {
        for (const auto& p : *it) {
          if (p.is_string()) {
            if (auto e = add_text(p.get<std::string>())) return *e;
          } else if (p.is_array()) {
            if (auto e = add_ids(p)) return *e;
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
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    auto& p = r.prompts[i];
    if (p.empty()) return bad("the prompt is empty", chat ? "messages" : "prompt");
    if (truncate > 0 && static_cast<int64_t>(p.size()) > truncate) {
      p.erase(p.begin(), p.end() - truncate);
      r.prompt_texts[i] = info.tok->decode(p, true);
    }
    const int64_t room = info.context - static_cast<int64_t>(p.size());
    if (room < 1)
      return bad(
          fmt::format("the prompt has {} tokens; the context holds {} ({})", p.size(), info.context,
                      chat ? "shorten the messages" : "set truncate_prompt_tokens to cut it"),
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
  r.base.max_tokens = static_cast<int32_t>(max_tokens >= 0 ? max_tokens
                                           : chat          ? shortest_room
                                                           : std::min<int64_t>(16, shortest_room));
  if (min_tokens > r.base.max_tokens)
    return bad(
        fmt::format("'min_tokens' ({}) exceeds max_tokens ({})", min_tokens, r.base.max_tokens),
        "min_tokens");
  r.base.min_tokens = static_cast<int32_t>(min_tokens);
  r.base.n = r.n;
  r.base.tag = r.user;
  return r;
}

void token_logprobs::append(const token_logprobs& o) {
  pieces.insert(pieces.end(), o.pieces.begin(), o.pieces.end());
  logprobs.insert(logprobs.end(), o.logprobs.begin(), o.logprobs.end());
  top.insert(top.end(), o.top.begin(), o.top.end());
  text_offset.insert(text_offset.end(), o.text_offset.begin(), o.text_offset.end());
}

namespace {

json num(const std::optional<float>& v) {
  return v ? json(*v) : json(nullptr);
}

} // namespace

json logprob_content(const token_logprobs& lp) {
  json content = json::array();
  for (size_t i = 0; i < lp.pieces.size(); ++i) {
    json alts = json::array();
    if (i < lp.top.size())
      for (const auto& [piece, v] : lp.top[i])
        alts.push_back(
            {{"token", token_string(piece)}, {"logprob", v}, {"bytes", bytes_of(piece)}});
    content.push_back({{"token", token_string(lp.pieces[i])},
                       {"logprob", num(lp.logprobs[i])},
                       {"bytes", bytes_of(lp.pieces[i])},
                       {"top_logprobs", alts}});
  }
  return content;
}

namespace {

json logprobs_json(const parsed_request& r, const token_logprobs& lp) {
  if (r.chat) return {{"content", logprob_content(lp)}};
  json toks = json::array(), tlp = json::array(), top = json::array(), off = json::array();
  for (size_t i = 0; i < lp.pieces.size(); ++i) {
    toks.push_back(token_string(lp.pieces[i]));
    tlp.push_back(num(lp.logprobs[i]));
    if (!lp.logprobs[i]) {
      top.push_back(nullptr); // a prompt's first token: nothing came before it
    } else {
      json alts = json::object();
      if (i < lp.top.size())
        for (const auto& [piece, v] : lp.top[i]) alts[token_string(piece)] = v;
      top.push_back(alts);
    }
    off.push_back(i < lp.text_offset.size() ? lp.text_offset[i] : 0);
  }
  return {{"tokens", toks}, {"token_logprobs", tlp}, {"top_logprobs", top}, {"text_offset", off}};
}

json usage_json(const usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

// A message's tool_calls; in a stream's delta each carries its index among the choice's calls.
json calls_json(const std::vector<tool_call>& calls, size_t first, bool indexed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) c["index"] = first + i;
    out.push_back(std::move(c));
  }
  return out;
}

json finish_json(finish_reason f) {
  return f == finish_reason::none ? json(nullptr) : json(finish_name(f));
}

} // namespace

std::string completion_body(const parsed_request& r, const std::string& id, int64_t created,
                            const std::vector<choice_result>& choices, int64_t prompt_tokens,
                            int64_t completion_tokens, const tokenizer&, int64_t cached_tokens) {
  json cs = json::array();
  for (const auto& c : choices) {
    json lp = r.logprobs() ? logprobs_json(r, c.lp) : json(nullptr);
    if (r.chat) {
      json message = {{"role", "assistant"}, {"content", c.text}};
      if (r.reasoning)
        message["reasoning_content"] = c.reasoning.empty() ? json(nullptr) : json(c.reasoning);
      if (!c.calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;
        message["tool_calls"] = calls_json(c.calls, 0, false);
      }
      cs.push_back(
          {{"index", c.index},
           {"message", message},
           {"logprobs", lp},
           {"finish_reason", c.called && c.finish == finish_reason::stop ? json("tool_calls")
                                                                         : finish_json(c.finish)}});
    } else {
      cs.push_back({{"index", c.index},
                    {"text", c.text},
                    {"logprobs", lp},
                    {"finish_reason", finish_json(c.finish)}});
    }
  }
  json j = {{"id", id},
            {"object", r.chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", r.model},
            {"choices", cs},
            {"usage", usage_json({prompt_tokens, completion_tokens, cached_tokens})}};
  return j.dump();
}

std::string stream_chunk(const parsed_request& r, const std::string& id, int64_t created, int index,
                         const std::string& text, finish_reason finish, bool first_for_choice,
                         const token_logprobs* lp, const tokenizer&, const usage* u,
                         const std::string& reasoning, const std::optional<chunk_calls>& calls) {
  json lpj = lp && r.logprobs() && !lp->pieces.empty() ? logprobs_json(r, *lp) : json(nullptr);
  json choice;
  if (r.chat) {
    json delta = json::object();
    if (first_for_choice) delta["role"] = "assistant";
    if (!text.empty() || (first_for_choice && finish == finish_reason::none))
      delta["content"] = text;
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (calls && calls->first < calls->calls.size()) {
      delta["tool_calls"] =
          calls_json(std::vector<tool_call>(calls->calls.begin() + static_cast<long>(calls->first),
                                            calls->calls.end()),
                     calls->first, true);
    }
    choice = {{"index", index},
              {"delta", delta},
              {"logprobs", lpj},
              {"finish_reason", calls && calls->called && finish == finish_reason::stop
                                    ? json("tool_calls")
                                    : finish_json(finish)}};
  } else {
    choice = {{"index", index},
              {"text", text},
              {"logprobs", lpj},
              {"finish_reason", finish_json(finish)}};
  }
  json j = {{"id", id},
            {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", r.model},
            {"choices", json::array({choice})}};
  if (u)
    j["usage"] = usage_json(*u);
  else if (r.include_usage)
    j["usage"] = nullptr;
  return "data: " + j.dump() + "\n\n";
}

std::string usage_chunk(const parsed_request& r, const std::string& id, int64_t created,
                        const usage& u) {
  json j = {{"id", id},
            {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", r.model},
            {"choices", json::array()},
            {"usage", usage_json(u)}};
  return "data: " + j.dump() + "\n\n";
}

std::string model_body(const std::string& model_name, int64_t created) {
  json j = {{"id", model_name}, {"object", "model"}, {"created", created}, {"owned_by", "troupe"}};
  return j.dump();
}

std::string models_body(const serving_info& info, int64_t created) {
  json data = json::array({json::parse(model_body(info.model_name, created))});
  for (const auto& a : info.model_aliases) data.push_back(json::parse(model_body(a, created)));
  json j = {{"object", "list"}, {"data", std::move(data)}};
  return j.dump();
}

namespace {

// The body of a /tokenize or /detokenize request: a JSON object with only `allowed` fields
// and, when present, this server's model.
std::variant<json, api_error> tool_body(const std::string& body, const serving_info& info,
                                        std::initializer_list<std::string_view> allowed) {
  if (size_t bad_at = unicode::first_invalid(body); bad_at != std::string::npos)
    return bad(fmt::format("request body is not valid UTF-8 (byte {})", bad_at), "");
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return bad("request body is not valid JSON", "");
  if (!j.is_object()) return bad("request body must be a JSON object", "");
  for (auto& [k, v] : j.items())
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
      return bad(fmt::format("unknown field '{}'", k), k);
  if (auto m = j.find("model"); m != j.end() && !m->is_null()) {
    if (!m->is_string()) return bad("'model' must be a string", "model");
    if (!info.serves(m->get<std::string>()))
      return api_error{404,
                       fmt::format("model '{}' does not exist; this server serves '{}'",
                                   m->get<std::string>(), info.model_name),
                       "invalid_request_error", "model", "model_not_found"};
  }
  return j;
}

std::optional<api_error> flag(const json& j, const char* key, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad(fmt::format("'{}' must be true or false", key), key);
  out = it->get<bool>();
  return std::nullopt;
}

} // namespace

std::variant<std::string, api_error> tokenize_request(const std::string& body,
                                                      const serving_info& info) {
  auto parsed =
      tool_body(body, info,
                {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt",
                 "continue_final_message", "chat_template_kwargs", "reasoning_effort",
                 "return_token_strs", "tools", "tool_choice", "parallel_tool_calls"});
  if (auto* e = std::get_if<api_error>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  bool strs = false, special = !j.contains("messages");
  if (auto e = flag(j, "return_token_strs", strs)) return *e;
  if (auto e = flag(j, "add_special_tokens", special)) return *e;
  std::vector<int32_t> ids;
  if (j.contains("messages")) {
    if (j.contains("prompt")) return bad("give 'prompt' or 'messages', not both", "prompt");
    if (special)
      return bad("'add_special_tokens' with 'messages' is not supported: the chat template "
                 "writes the special tokens",
                 "add_special_tokens");
    chat_prompt cp;
    if (auto e = build_chat_prompt(j, body, info, cp, true)) return *e;
    ids = std::move(cp.ids);
  } else {
    for (const char* k : {"add_generation_prompt", "continue_final_message", "chat_template_kwargs",
                          "reasoning_effort"})
      if (j.contains(k)) return bad(fmt::format("'{}' goes with 'messages'", k), k);
    auto p = j.find("prompt");
    if (p == j.end() || !p->is_string())
      return bad("'prompt' (a string) or 'messages' is required", "prompt");
    auto e = info.tok->encode(p->get<std::string>(), special, true);
    if (!e) return bad(e.error().message, "prompt");
    ids = std::move(*e);
  }
  json out = {{"count", ids.size()}, {"max_model_len", info.context}, {"tokens", ids}};
  if (strs) {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back(token_string(std::string(info.tok->piece(id))));
    out["token_strs"] = std::move(pieces);
  } else {
    out["token_strs"] = nullptr;
  }
  return out.dump();
}

std::variant<std::string, api_error> detokenize_request(const std::string& body,
                                                        const serving_info& info) {
  auto parsed = tool_body(body, info, {"model", "tokens"});
  if (auto* e = std::get_if<api_error>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  auto t = j.find("tokens");
  if (t == j.end() || !t->is_array()) return bad("'tokens' (a list of ids) is required", "tokens");
  std::vector<int32_t> ids;
  if (!t->empty())
    if (auto e = token_list(*t, info, "tokens", ids)) return *e;
  return json{{"prompt", info.tok->decode(ids, false)}}.dump();
}

} // namespace troupe::actors
