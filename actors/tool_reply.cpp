// tool_reply.cpp: a chat choice's text under its tools (tool_reply.hpp).
#include "actors/tool_reply.hpp"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

namespace troupe::actors {

std::string new_random_id(std::string prefix) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  // the operating system's randomness: a stored response's id is all that reads it back
  thread_local std::random_device rng;
  for (int i = 0; i < 24; ++i) prefix += alphabet[rng() % (sizeof alphabet - 1)];
  return prefix;
}

std::string new_tool_call_id() {
  return new_random_id("call_");
}

tool_reply::tool_reply(const parsed_request& r)
    : mode_(r.tools)
    , name_(r.tool_name)
    , parallel_(r.parallel_tools)
    , names_(r.tool_names)
    , params_(r.tool_params)
    , parser_(r.tools == tool_mode::automatic ? r.tool_fmt : tool_format::none) {}

tool_reply::out tool_reply::take(tool_call_parser::delta d) {
  out o;
  auto offered = [&](const tool_call& c) {
    return std::find(names_.begin(), names_.end(), c.name) != names_.end();
  };
  // The calls read from one block (or one llama3 reply) are a group: the first carries the
  // group's text, the others none. A call to a function not offered makes the whole group the
  // model's text, as content, where it stood. (Harmony's calls carry no text: each is its own
  // group.)
  size_t text_done = 0; // d.text up to here is in o.text
  for (size_t g = 0; g < d.calls.size();) {
    size_t e = g + 1;
    if (!d.calls[g].raw.empty())
      while (e < d.calls.size() && d.calls[e].raw.empty()) ++e;
    if (!std::all_of(d.calls.begin() + g, d.calls.begin() + e, offered)) {
      const size_t at = std::clamp(d.calls[g].text_at, text_done, d.text.size());
      o.text += d.text.substr(text_done, at - text_done);
      o.text += d.calls[g].raw;
      text_done = at;
      g = e;
      continue;
    }
    for (; g < e; ++g) {
      tool_call& c = d.calls[g];
      if (!parallel_ && calls_ > 0) continue; // one call only: the first
      if (c.untyped) { // values written as text: read by the function's schema
        const size_t i =
            static_cast<size_t>(std::find(names_.begin(), names_.end(), c.name) - names_.begin());
        c.arguments = typed_arguments(c.arguments, i < params_.size() ? params_[i] : "");
        c.untyped = false;
      }
      c.id = new_tool_call_id();
      o.calls.push_back(std::move(c));
      ++calls_;
    }
  }
  o.text += d.text.substr(text_done);
  return o;
}

tool_reply::out tool_reply::take_calls(std::vector<tool_call> calls) {
  tool_call_parser::delta d;
  d.calls = std::move(calls);
  return take(std::move(d));
}

tool_reply::out tool_reply::step(std::string text, std::vector<tool_call> read, bool ended,
                                 bool cut) {
  out o;
  auto add = [&o](out more) {
    o.text += more.text;
    for (auto& c : more.calls) o.calls.push_back(std::move(c));
  };
  if (!read.empty()) { // harmony's calls, and the text of any refused, after the new text
    auto taken = take_calls(std::move(read));
    o.calls = std::move(taken.calls);
    text += taken.text;
  }
  add(push(text));
  if (ended) add(finish(cut));
  return o;
}

tool_reply::out tool_reply::push(const std::string& text) {
  if (mode_ == tool_mode::automatic) return take(parser_.push(text));
  if (mode_ == tool_mode::named || mode_ == tool_mode::required) {
    held_ += text;
    return {};
  }
  return {text, {}};
}

tool_reply::out tool_reply::finish(bool cut) {
  if (mode_ == tool_mode::automatic) {
    auto d = parser_.finish();
    return take(std::move(d));
  }
  if (mode_ != tool_mode::named && mode_ != tool_mode::required) return {};
  out o;
  if (cut) { // unfinished JSON is not a call
    o.text = std::move(held_);
    return o;
  }
  tool_call_parser::delta d;
  if (mode_ == tool_mode::named) {
    auto j = nlohmann::ordered_json::parse(held_, nullptr, false);
    if (j.is_object()) d.calls.push_back({"", name_, j.dump()});
  } else {
    auto j = nlohmann::ordered_json::parse(held_, nullptr, false);
    if (j.is_array())
      for (const auto& e : j)
        if (e.is_object() && e.contains("name") && e["name"].is_string())
          d.calls.push_back(
              {"", e["name"], e.value("parameters", nlohmann::ordered_json::object()).dump()});
  }
  if (d.calls.empty()) d.text = std::move(held_);
  held_.clear();
  return take(std::move(d));
}

} // namespace troupe::actors
