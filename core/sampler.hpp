// sampler.hpp: picks the next token from a row of logits. Greedy (temperature 0: argmax,
// lowest id on ties) or sampled: penalties (repetition as in CTRL / HF, presence and
// frequency as in OpenAI), temperature, top-k, top-p, min-p, then one draw. The draw's
// random number is a pure function of (seed, step), so a seeded request is repeatable even
// when its sequence is preempted or a shard restarts and the step is computed again.
// Tests: tests/core/sampler_test.cpp
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/expected.hpp"

namespace troupe {

struct sampling_params {
  float temperature = 0.0f; // 0: greedy
  int top_k = 0;            // 0: off
  float top_p = 1.0f;       // 1: off
  float min_p = 0.0f;       // 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  int top_logprobs = 0;  // also return this many (id, logprob) alternatives
  bool logprobs = false; // return the chosen token's logprob
  std::vector<std::pair<int32_t, float>> logit_bias; // added to those logits before anything else

  bool greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  /// Checks ranges (OpenAI's): temperature [0, 2], top_p (0, 1], min_p [0, 1], penalties.
  status validate() const;
};

struct sample_result {
  int32_t token = -1;
  float logprob = 0.0f;                       // of `token`, from the unprocessed logits
  std::vector<std::pair<int32_t, float>> top; // top_logprobs alternatives, best first
};

/// `history`: tokens the penalties count (prompt and generated); `step`: index of the token
/// being generated (0 for the first), which with the seed fixes the random draw;
/// `suppress`: tokens that may not be picked now (EOS before min_tokens); `allow`, when not
/// empty: a bit per token id, and only tokens whose bit is set may be picked (a grammar's
/// next tokens; ids past its end are not allowed). Logprobs are those of the raw logits
/// (before bias, penalties, suppression and the grammar), as OpenAI reports them.
sample_result sample(std::span<const float> logits, const sampling_params& p,
                     std::span<const int32_t> history, uint64_t step,
                     std::span<const int32_t> suppress = {}, std::span<const uint64_t> allow = {});

/// The log-probability of `target` under `logits` and the `top` most likely alternatives
/// (prompt scoring: echo with logprobs).
sample_result score(std::span<const float> logits, int32_t target, int top);

/// Uniform [0, 1) from (seed, step): splitmix64 of both, 53 random bits.
double sample_uniform(uint64_t seed, uint64_t step);

} // namespace troupe
