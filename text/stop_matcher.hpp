// stop_matcher.hpp: stop strings over streamed text. push() takes the next piece of decoded
// text and returns what may be shown now: text that cannot be the start of a stop string is
// released at once; a possible partial match is held back until it is decided. When a stop
// string completes, stopped() turns true and the text before it is released (the stop string
// itself is not, as in OpenAI's API, unless include_match: vLLM's include_stop_str_in_output).
// finish() releases the held-back tail at the end.
// Tests: tests/engine/scheduler_test.cpp
#pragma once

#include <string>
#include <vector>

namespace troupe {

class stop_matcher {
 public:
  explicit stop_matcher(std::vector<std::string> stops, bool include_match = false);
  std::string push(const std::string& text);
  std::string finish();
  bool stopped() const { return stopped_; }
  /// The stop string that stopped it ("" until one did).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool include_match_;
  bool stopped_ = false;
  std::string matched_;
};

} // namespace troupe
