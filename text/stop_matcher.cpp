// stop_matcher.cpp: hold back only what could still become a stop string (stop_matcher.hpp).
// Held-back text is cut at UTF-8 character boundaries by construction: it is a suffix of the
// decoded text whose start matches a stop string's prefix.
#include "text/stop_matcher.hpp"

#include <algorithm>
#include <utility>

namespace troupe {

stop_matcher::stop_matcher(std::vector<std::string> stops, bool include_match)
    : include_match_(include_match) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string stop_matcher::push(const std::string& text) {
  if (stopped_) return {};
  held_ += text;
  // a complete stop string: release what precedes the earliest one (and it, when included;
  // of two at one place, the first listed)
  size_t first = std::string::npos, len = 0;
  const std::string* which = nullptr;
  for (const auto& s : stops_)
    if (const size_t at = held_.find(s); at < first) first = at, len = s.size(), which = &s;
  if (first != std::string::npos) {
    stopped_ = true;
    matched_ = *which;
    std::string out = held_.substr(0, first + (include_match_ ? len : 0));
    held_.clear();
    return out;
  }
  // keep the longest suffix of held_ that is a proper prefix of some stop string
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string stop_matcher::finish() {
  if (stopped_) return {};
  std::string out;
  out.swap(held_);
  return out;
}

} // namespace troupe
