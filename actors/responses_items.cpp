// responses_items.cpp: a Responses request's input as the items GET
// /v1/responses/{id}/input_items lists (ids given where the client gave none), and their pages
// as the API returns them (responses_api.hpp).
#include <algorithm>
#include <cstdlib>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/responses_api.hpp"
#include "actors/tool_reply.hpp"

namespace troupe::actors {

using ojson = nlohmann::ordered_json;

// The input as the API lists it back (GET /v1/responses/{id}/input_items): a string is one user
// message; a message's string content becomes one input_text (output_text for an assistant)
// part; every item gets an id if it has none. The input was read (read_input) first.
ojson input_items_of(const ojson& input) {
  ojson items = ojson::array();
  auto text_part = [](const std::string& role, const ojson& text) {
    return ojson{{"type", role == "assistant" ? "output_text" : "input_text"}, {"text", text}};
  };
  if (input.is_string()) {
    items.push_back({{"id", new_random_id("msg_")},
                     {"type", "message"},
                     {"role", "user"},
                     {"content", ojson::array({text_part("user", input)})}});
    return items;
  }
  for (const auto& in : input) {
    ojson item = in;
    if (!item.contains("type")) item["type"] = "message";
    const std::string type = item["type"].get<std::string>();
    if (type == "message") {
      const std::string role = item.value("role", "user");
      if (item["content"].is_string())
        item["content"] = ojson::array({text_part(role, item["content"])});
    }
    if (!item.contains("id") || !item["id"].is_string()) {
      const char* prefix = type == "function_call"          ? "fc_"
                           : type == "function_call_output" ? "fco_"
                           : type == "reasoning"            ? "rs_"
                                                            : "msg_";
      item["id"] = new_random_id(prefix);
    }
    items.push_back(std::move(item));
  }
  return items;
}

std::optional<std::string> list_input_items(const std::string& items_json, const std::string& query,
                                            api_error& err) {
  const ojson items = ojson::parse(items_json, nullptr, false);
  if (!items.is_array()) {
    err = {500, "the stored input items are not a list", "server_error", "", ""};
    return std::nullopt;
  }
  int64_t limit = 20;
  bool asc = false; // the API's default order: newest (last) first
  std::string after, before;
  size_t at = 0;
  while (at < query.size()) {
    const size_t amp = query.find('&', at);
    const std::string kv =
        query.substr(at, amp == std::string::npos ? std::string::npos : amp - at);
    at = amp == std::string::npos ? query.size() : amp + 1;
    const size_t eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (k == "limit") {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 100) {
        err = {400, "'limit' must be an integer from 1 to 100", "invalid_request_error", "limit",
               ""};
        return std::nullopt;
      }
      limit = n;
    } else if (k == "order") {
      if (v != "asc" && v != "desc") {
        err = {400, "'order' must be asc or desc", "invalid_request_error", "order", ""};
        return std::nullopt;
      }
      asc = v == "asc";
    } else if (k == "after") {
      after = v;
    } else if (k == "before") {
      before = v;
    } else if (k == "include" || k == "include[]" || k.empty()) {
      // nothing the items hold is left out
    } else {
      err = {400, fmt::format("unknown query parameter '{}'", k), "invalid_request_error", k, ""};
      return std::nullopt;
    }
  }
  std::vector<const ojson*> order;
  for (const auto& it : items) order.push_back(&it);
  if (!asc) std::reverse(order.begin(), order.end());
  auto index_of = [&](const std::string& id) -> int64_t {
    for (size_t i = 0; i < order.size(); ++i)
      if ((*order[i]).value("id", "") == id) return static_cast<int64_t>(i);
    return -1;
  };
  int64_t first = 0, last = static_cast<int64_t>(order.size()); // [first, last)
  for (const auto& [cursor, name] : {std::pair{after, "after"}, std::pair{before, "before"}}) {
    if (cursor.empty()) continue;
    const int64_t i = index_of(cursor);
    if (i < 0) {
      err = {400, fmt::format("'{}' names no input item of this response", name),
             "invalid_request_error", name, ""};
      return std::nullopt;
    }
    if (std::string(name) == "after")
      first = std::max(first, i + 1);
    else
      last = std::min(last, i);
  }
  ojson data = ojson::array();
  for (int64_t i = first; i < last && static_cast<int64_t>(data.size()) < limit; ++i)
    data.push_back(*order[static_cast<size_t>(i)]);
  const bool more = first + static_cast<int64_t>(data.size()) < last;
  ojson out = {{"object", "list"}, {"data", data}};
  out["first_id"] = data.empty() ? ojson(nullptr) : data.front()["id"];
  out["last_id"] = data.empty() ? ojson(nullptr) : data.back()["id"];
  out["has_more"] = more;
  return out.dump();
}

} // namespace troupe::actors
