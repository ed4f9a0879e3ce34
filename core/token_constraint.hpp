// token_constraint.hpp: a rule over the tokens a completion may generate, kept per sequence
// by the scheduler (engine/), built by whoever knows the vocabulary (text/json_constraint for
// a response_format): after each generated token the rule says which tokens may come next
// (a bit per vocabulary id, which the step carries to the sampler as batch_seq::allow) and
// whether the output is complete, when the scheduler ends the completion with "stop".
// core/ holds only the interface, so the engine needs neither text/ nor a tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace troupe {

class token_constraint {
 public:
  virtual ~token_constraint() = default;
  /// A copy in the same state (each completion of a request gets one of the prototype).
  virtual std::unique_ptr<token_constraint> clone() const = 0;
  /// Takes a generated token; false when the rule does not allow it (the state is then
  /// unspecified).
  virtual bool advance(int32_t token) = 0;
  /// The tokens that may come next, a bit per id (bits sized to the vocabulary).
  virtual void allowed(std::vector<uint64_t>& bits) const = 0;
  /// The output is complete: nothing may follow.
  virtual bool done() const = 0;
};

} // namespace troupe
