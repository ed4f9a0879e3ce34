// request_json.hpp: what the Responses and Messages APIs share while they turn their requests
// into chat requests: the body read as JSON with its key order kept (nlohmann's ordered_json),
// small field readers, a 400 naming the field, and a chat request's error put back in the
// words of the API that was asked.
// Tests: tests/actors/responses_api_test.cpp, tests/actors/messages_api_test.cpp
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "actors/openai_api.hpp"
#include "text/json_schema.hpp"
#include "text/unicode.hpp"

namespace troupe::actors::request_json {

using ojson = nlohmann::ordered_json;

inline api_error bad(std::string message, std::string param) {
  return api_error::bad_request(std::move(message), std::move(param));
}

/// j[key] exists and is a string.
inline bool is_str(const ojson& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string();
}

/// j[key] when given and not null, else null.
inline const ojson* given(const ojson& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

/// A request body: valid UTF-8, a JSON object, nested no deeper than a real request is (the
/// conversions copy and dump() it, which recurse).
inline std::variant<ojson, api_error> read_object(const std::string& body) {
  if (size_t bad_at = unicode::first_invalid(body); bad_at != std::string::npos)
    return bad(fmt::format("request body is not valid UTF-8 (byte {})", bad_at), "");
  ojson j = ojson::parse(body, nullptr, false);
  if (j.is_discarded()) return bad("request body is not valid JSON", "");
  if (!j.is_object()) return bad("request body must be a JSON object", "");
  if (json_nesting(j) > 96) return bad("the request is nested more than 96 deep", "");
  return j;
}

/// One server-sent event: "event: TYPE" and the payload with its "type" first (and, given
/// `seq`, the Responses API's sequence_number, counted on).
inline std::string sse_event(const std::string& type, ojson payload, int64_t* seq = nullptr) {
  ojson e = {{"type", type}};
  if (seq) e["sequence_number"] = (*seq)++;
  for (auto& [k, v] : payload.items()) e[k] = std::move(v);
  return "event: " + type + "\ndata: " + e.dump() + "\n\n";
}

using renames = std::initializer_list<std::pair<const char*, const char*>>;

/// A chat request's error in another API's words: its param renamed by `params`, and each
/// phrase of `words` replaced in its message.
inline api_error reworded(api_error e, renames params, renames words) {
  for (auto [from, to] : params)
    if (e.param == from) e.param = to;
  for (auto [from, to] : words)
    for (size_t at = e.message.find(from); at != std::string::npos;
         at = e.message.find(from, at + std::string_view(to).size()))
      e.message.replace(at, std::string_view(from).size(), to);
  return e;
}

} // namespace troupe::actors::request_json
