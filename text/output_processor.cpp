// output_processor.cpp: detokenization, stop strings and token pieces (output_processor.hpp).
#include "text/output_processor.hpp"

#include <algorithm>
#include <cstddef>

#include <nlohmann/json.hpp>

#include "text/json_schema.hpp"

namespace troupe {

output_processor::output_processor(const tokenizer& tok, std::span<const int32_t> prompt,
                                   std::vector<std::string> stops, int min_tokens,
                                   std::optional<harmony_tokens> harmony,
                                   std::optional<think_tokens> think, bool include_stop)
    : dec_(tok)
    , stops_(std::move(stops), include_stop)
    , reasoning_dec_(tok)
    , tok_(tok)
    , min_tokens_(min_tokens) {
  dec_.prime(prompt);
  if (harmony) router_.emplace(tok, *harmony);
  if (think && !harmony) think_.emplace(*think, think->opened_by(prompt));
}

void output_processor::keep_tool_markers(tool_format f) {
  std::vector<int32_t> ids;
  for (std::string_view m : tool_markers(f))
    if (const int32_t id = tok_.find(m); id >= 0 && tok_.is_special(id)) ids.push_back(id);
  if (!ids.empty()) dec_.keep_special(std::move(ids));
}

namespace {
bool space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}
} // namespace

std::string output_processor::reasoning_text(int32_t id) {
  std::string piece = reasoning_dec_.push(id);
  if (!reasoning_started_) {
    const size_t b = std::find_if_not(piece.begin(), piece.end(), space) - piece.begin();
    piece.erase(0, b);
    if (piece.empty()) return {};
    reasoning_started_ = true;
  }
  const size_t e = std::find_if_not(piece.rbegin(), piece.rend(), space) - piece.rbegin();
  if (e == piece.size()) { // all whitespace: held
    reasoning_ws_ += piece;
    return {};
  }
  std::string out = std::move(reasoning_ws_);
  reasoning_ws_ = piece.substr(piece.size() - e);
  out += piece.substr(0, piece.size() - e);
  return out;
}

std::string output_processor::reasoning_text_finish() {
  std::string rest = reasoning_dec_.finish();
  std::string held = std::move(reasoning_ws_);
  reasoning_ws_.clear();
  if (!reasoning_started_)
    rest.erase(0, std::find_if_not(rest.begin(), rest.end(), space) - rest.begin());
  rest.erase(std::find_if_not(rest.rbegin(), rest.rend(), space).base(), rest.end());
  if (rest.empty()) return {};
  std::string out = reasoning_started_ ? held + rest : rest;
  reasoning_started_ = true;
  return out;
}

std::string output_processor::answer_text(std::string text) {
  if (!answer_ws_) return text;
  const size_t b = std::find_if_not(text.begin(), text.end(), space) - text.begin();
  text.erase(0, b);
  if (!text.empty()) answer_ws_ = false;
  return text;
}

output_processor::delta output_processor::push(std::span<const int32_t> ids) {
  delta d;
  for (int32_t id : ids) {
    if (stops_.stopped() || finished_) break;
    ++d.accepted;
    ++tokens_;
    if (router_) {
      auto part = router_->route(id);
      if (part == harmony_router::part::tool && !read_tools_) part = harmony_router::part::content;
      if (part == harmony_router::part::tool) {
        if (!tool_dec_) {
          tool_dec_.emplace(tok_);
          tool_name_ = router_->tool_name();
          tool_args_.clear();
        }
        tool_args_ += tool_dec_->push(id);
        continue;
      }
      if (tool_dec_) end_tool_call(d); // the body ended (<|call|>, <|end|>, <|start|>)
      if (part == harmony_router::part::reasoning) {
        d.reasoning += reasoning_dec_.push(id);
        ++d.reasoning_tokens;
      }
      if (part != harmony_router::part::content) continue;
    }
    if (think_) {
      const bool was_reasoning = think_->reasoning();
      const auto part = think_->route(id);
      if (part == think_router::part::reasoning || part == think_router::part::tag)
        ++d.reasoning_tokens;
      if (part == think_router::part::reasoning) d.reasoning += reasoning_text(id);
      if (part == think_router::part::tag && was_reasoning) { // </think>: the block's end
        d.reasoning += reasoning_text_finish();
        answer_ws_ = true;
      }
      if (part != think_router::part::content) continue;
    }
    std::string text = answer_text(dec_.push(id));
    // before min_tokens a stop string does not end the completion (vLLM's rule)
    d.text += tokens_ <= min_tokens_ ? text : stops_.push(text);
  }
  return d;
}

output_processor::delta output_processor::finish() {
  delta d;
  if (finished_ || stops_.stopped()) return d;
  finished_ = true;
  if (router_) {
    if (tool_dec_) end_tool_call(d); // generation stopped on <|call|> before it was pushed
    d.reasoning = reasoning_dec_.finish();
    std::string held;
    if (router_->unframed()) // no message body opened: what came is the text
      for (int32_t id : router_->held()) held += dec_.push(id);
    d.text = stops_.push(held);
    if (stops_.stopped()) return d;
  }
  if (think_ && think_->reasoning()) d.reasoning = reasoning_text_finish(); // cut inside
  d.text += stops_.push(answer_text(dec_.finish()));
  if (!stops_.stopped()) d.text += stops_.finish();
  return d;
}

void output_processor::end_tool_call(delta& d) {
  tool_args_ += tool_dec_->finish();
  tool_dec_.reset();
  // the arguments, if they are a JSON object (in the model's key order); else the body is text
  const auto args = nlohmann::ordered_json::parse(tool_args_, nullptr, false);
  // nested deeper than any schema, it is text (dump() recurses)
  if (!tool_name_.empty() && args.is_object() && json_nesting(args) <= 64)
    d.calls.push_back(
        {"", tool_name_,
         args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)});
  else
    d.text += stops_.push(tool_args_);
  tool_args_.clear();
}

std::vector<std::string> token_pieces(const tokenizer& tok, std::span<const int32_t> context,
                                      std::span<const int32_t> ids) {
  constexpr size_t window = 6; // ids of context each piece is decoded after (see stream_decoder)
  std::vector<int32_t> all(
      context.end() - static_cast<std::ptrdiff_t>(std::min(context.size(), window)), context.end());
  const size_t base = all.size();
  all.insert(all.end(), ids.begin(), ids.end());
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t end = base + i; // the id's index in `all`
    const size_t from = end > window ? end - window : 0;
    const std::span<const int32_t> s(all);
    const std::string before = tok.decode_bytes(s.subspan(from, end - from), true);
    const std::string with = tok.decode_bytes(s.subspan(from, end + 1 - from), true);
    out.push_back(with.size() >= before.size() && with.compare(0, before.size(), before) == 0
                      ? with.substr(before.size())
                      : with);
  }
  return out;
}

} // namespace troupe
