// api.hpp: the requests, events and counters that cross the engine's boundary, as plain
// structs with no CAF in sight, so the CLI, the gateway and tests can use them cheaply.
// messages.hpp gives them `inspect` and announces them to CAF.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/metrics.hpp"
#include "runtime/sampler.hpp"

namespace troupe::actors {

/// A generation request, already tokenized by the caller.
struct gen_request {
  std::vector<int32_t> prompt;
  sampling_params sampling;
  int32_t max_tokens = 16;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_ids;
  bool ignore_eos = false;
  int32_t n = 1;
  int32_t priority = 0;
  std::string tag; // for logs: the HTTP request id
};

/// What a request's sink receives: events with new text as it is made (complete UTF-8
/// characters only), then one final event per completion with `finish` set ("stop",
/// "length", "cancelled", "error").
struct gen_event {
  int64_t request_id = 0;
  int32_t index = 0;           // completion index (n > 1)
  std::vector<int32_t> tokens; // new tokens
  std::string text;            // new text
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
  std::string finish;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

/// Engine and supervisor counters for /metrics and /health.
struct engine_stats {
  int64_t requests_total = 0, requests_running = 0, requests_waiting = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  int64_t kv_blocks_total = 0, kv_blocks_free = 0;
  int64_t preemptions = 0, prefix_hit_blocks = 0, steps = 0, recomputes = 0;
  int64_t kv_window_freed_blocks = 0; // blocks freed behind a sliding window
  int64_t shard_restarts = 0;
  int64_t cancelled = 0;
  int64_t leases = 0, leased_blocks = 0; // per-sequence KV leases held now
  bool ready = false;
  std::string not_ready_reason;
  histogram ttft = histogram::latency_seconds(); // time to first token
  histogram itl = histogram::latency_seconds();  // inter-token latency
};

} // namespace troupe::actors
