// request_json.hpp: small readers of a request's JSON (key order kept: nlohmann's
// ordered_json) that the Responses and Messages APIs share while they turn their requests into
// chat requests: a string field, a field given and not null, a 400 naming the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "actors/openai_api.hpp"

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

} // namespace troupe::actors::request_json
