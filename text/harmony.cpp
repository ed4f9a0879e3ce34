// harmony.cpp: the harmony reply router (harmony.hpp).
#include "text/harmony.hpp"

namespace troupe {

std::optional<harmony_tokens> harmony_tokens::of(const tokenizer& tok) {
  harmony_tokens t;
  t.start = tok.find("<|start|>");
  t.channel = tok.find("<|channel|>");
  t.message = tok.find("<|message|>");
  t.end = tok.find("<|end|>");
  t.ret = tok.find("<|return|>");
  t.call = tok.find("<|call|>");
  t.constrain = tok.find("<|constrain|>");
  if (t.start < 0 || t.channel < 0 || t.message < 0 || t.end < 0) return std::nullopt;
  return t;
}

harmony_router::part harmony_router::route(int32_t id) {
  // a message ends, or a new one starts (its role follows)
  if (id == ids_.start || id == ids_.end || id == ids_.ret || id == ids_.call) {
    state_ = state::header;
    header_.clear();
    tool_.clear();
    return part::header;
  }
  if (id == ids_.channel) {
    state_ = state::channel_name;
    channel_.clear();
    return part::header;
  }
  if (id == ids_.constrain) { // "<|constrain|>json": a format, after the channel
    if (state_ == state::channel_name) state_ = state::header;
    return part::header;
  }
  if (id == ids_.message) { // the body opens; its channel is the name's first word
    state_ = state::body;
    framed_ = true;
    held_.clear();
    const size_t b = channel_.find_first_not_of(' ');
    const std::string name =
        b == std::string::npos ? std::string() : channel_.substr(b, channel_.find(' ', b) - b);
    reasoning_ = name == "analysis";
    // the recipient, in the role part or after the channel: "to=functions.get_weather"
    tool_.clear();
    const std::string header = header_ + " " + channel_;
    if (size_t to = header.find("to=functions."); to != std::string::npos) {
      const size_t from = to + std::string_view("to=functions.").size();
      size_t end = from;
      while (end < header.size() && header[end] != ' ' && header[end] != '<') ++end;
      tool_ = header.substr(from, end - from);
    }
    return part::header;
  }
  switch (state_) {
  case state::body:
    if (!tool_.empty()) return part::tool;
    return reasoning_ ? part::reasoning : part::content;
  case state::channel_name:
    channel_ += tok_.decode(std::span<const int32_t>(&id, 1));
    break;
  case state::header:
    header_ += tok_.decode(std::span<const int32_t>(&id, 1));
    break;
  }
  if (!framed_) held_.push_back(id);
  return part::header;
}

} // namespace troupe
