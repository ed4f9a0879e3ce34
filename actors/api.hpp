// api.hpp: the requests, events and counters that cross the engine's boundary, as plain
// structs with no CAF in sight, so the CLI, the gateway and tests can use them cheaply.
// messages.hpp gives them `inspect` and announces them to CAF.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/sampler.hpp"
#include "engine/scheduler.hpp"

namespace troupe::actors {

/// A generation request, already tokenized by the caller.
struct gen_request {
  std::vector<int32_t> prompt;
  sampling_params sampling;
  int32_t max_tokens = 16; // 0 only with prompt_logprobs (scoring a prompt)
  int32_t min_tokens = 0;  // EOS / stop ids / stop strings cannot end it earlier
  // stop strings: applied on the output side (output_processor in the gateway's session or
  // in host::generate), never by the engine, which only hears "finish" when one matched
  std::vector<std::string> stop;
  std::vector<int32_t> stop_ids;      // end it, not part of it (a chat turn's end, EOS-like)
  std::vector<int32_t> stop_ids_kept; // end it as its last token (vLLM's stop_token_ids that
                                      // are not special tokens)
  bool ignore_eos = false;
  int32_t n = 1;
  int32_t priority = 0;
  int32_t prompt_logprobs = -1; // >= 0: score the prompt tokens, with this many alternatives
  std::string tag;              // for logs: the HTTP request id
  // a response_format object's JSON text (json_object / json_schema; empty: free text), which
  // the engine compiles into the completions' token rule (text/json_constraint.hpp)
  std::string response_format;
  // a chat of a model that thinks in <think> blocks (text/think.hpp): the response_format
  // holds from the token after </think>, the reasoning before it runs free
  bool think = false;
};

/// One scored prompt token: its position in the prompt (1 ..), its logprob given the
/// tokens before it, and the most likely alternatives there.
struct prompt_logprob {
  int32_t pos = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

/// What a request's sink receives from the engine: the new tokens of a completion (with
/// logprobs when asked) as they are sampled, then one final event with `finish` set. The
/// engine does no text work: `text` is empty from the engine and filled by the output side
/// (host::generate) for its callers. Scored prompt tokens come with completion 0's events.
struct gen_event {
  int64_t request_id = 0;
  int32_t index = 0;           // completion index (n > 1)
  std::vector<int32_t> tokens; // new tokens
  std::string text;            // new text (output side only)
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
  std::vector<prompt_logprob> prompt_logprobs;
  finish_reason finish = finish_reason::none;
  errc error_code = errc::internal; // finish == error: what went wrong
  std::string error_message;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0; // of the prompt, from the prefix cache (usage's cached tokens)
};

/// Engine and supervisor counters for /metrics and /health.
struct engine_stats {
  int64_t requests_total = 0, requests_running = 0, requests_waiting = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  int64_t kv_blocks_total = 0, kv_blocks_free = 0;
  int64_t preemptions = 0, prefix_hit_blocks = 0, steps = 0, recomputes = 0;
  int64_t kv_window_freed_blocks = 0; // blocks freed behind a sliding window
  int64_t prefill_capped_steps = 0;   // steps whose prefill share the step target cut
  int64_t shard_restarts = 0;
  int64_t cancelled = 0;
  int64_t leases = 0, leased_blocks = 0; // per-sequence KV leases held now
  bool ready = false;
  bool cannot_load = false; // a shard refused to load (a shape, a dtype): it will not become ready
  std::string not_ready_reason;
  std::string restart_policy; // what the supervisor does when a shard keeps failing
  histogram ttft = histogram::latency_seconds(); // time to first token
  histogram itl = histogram::latency_seconds();  // inter-token latency
  // per request (the dashboards built for vLLM read these)
  int64_t finished_stop = 0, finished_length = 0, finished_cancelled = 0, finished_error = 0;
  int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0; // prompt tokens looked up / found
  histogram e2e = histogram::long_seconds();              // arrival to last token
  histogram queue = histogram::long_seconds();            // arrival to first step
  histogram prefill = histogram::long_seconds();          // first step to first token
  histogram decode = histogram::long_seconds();           // first token to last
  histogram prompt_len = histogram::token_counts();
  histogram generation_len = histogram::token_counts();
};

} // namespace troupe::actors
