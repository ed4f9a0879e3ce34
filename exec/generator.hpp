// generator.hpp: single-shard generation without actors (TP 1, PP 1): prefill the prompt in
// one step, then decode one token per step, sampling with core/sampler and stopping on
// EOS, stop strings, max tokens or the context limit. Used by `troupe generate` on one device
// and by tests as the reference the sharded paths must reproduce. Not thread-safe.
// Tests: tests/exec/forward_test.cpp
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/sampler.hpp"
#include "exec/executor.hpp"

namespace troupe::exec {

struct generate_options {
  int max_tokens = 32;
  sampling_params sampling;
  bool stop_at_eos = true;
  std::vector<std::string> stop; // stop strings (not included in the text)
  std::vector<int32_t> stop_ids; // tokens that end it as EOS does (a chat turn's end)
};

struct generation {
  std::vector<int32_t> prompt_tokens; // as fed, BOS included
  std::vector<int32_t> tokens;        // generated
  std::string text;                   // decoded generated text
  std::string finish_reason;          // "stop" or "length"
  std::vector<float> prompt_logits;   // [V] at the last prompt position
  double prefill_seconds = 0, decode_seconds = 0;
  std::vector<double> step_seconds; // each decode step's forward pass (the per-token tail)
};

class generator {
 public:
  /// One shard holding the whole model on `opt.where`; KV for `ctx` positions.
  static expected<std::unique_ptr<generator>> create(std::shared_ptr<const model_source> m,
                                                     exec_options opt);
  /// Generates from prompt ids. on_text, when set, receives decoded text as it is made.
  expected<generation> run(const std::vector<int32_t>& prompt, const generate_options& o,
                           const std::function<void(const std::string&)>& on_text = {});
  executor& runner() { return *runner_; }
  const model_source& source() const { return *source_; }

 private:
  std::shared_ptr<const model_source> source_;
  std::unique_ptr<executor> runner_;
};

} // namespace troupe::exec
