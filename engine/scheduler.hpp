// scheduler.hpp: continuous batching as a plain synchronous class (the engine actor owns one).
// Each step mixes the decodes of running sequences and new or chunked prefills within a
// token budget, first come first served by (priority, arrival). KV blocks come from a
// kv_block_pool: prompts reuse cached prefix blocks; when blocks run out the newest running
// sequence is preempted (its blocks freed) and later recomputed from prompt + generated
// tokens, so its output does not change. A sequence is in at most one step in flight, so the
// engine may keep several steps (pipeline micro-batches) in flight at once. Stop conditions:
// EOS and stop ids, max tokens, the context limit; stop strings are the engine's (it owns the
// detokenizer) through finish(). n > 1 completions share the prompt's blocks; a shared block
// is copied before it is written (batch::copies). With a sliding-window model, blocks no
// future query of a sequence can see go back to the pool as it advances. Stall-free batching
// (step_target_s): while sequences are decoding, a step's prefill share is cut to what the
// learnt step time (step_cost, fed by observe_step) says keeps the step near the target, so
// a long prompt is prefilled over several steps instead of stalling every stream for one
// long step; without decoders a prompt takes the whole budget. A model whose output depends on
// where its input is cut gets the same pieces for a sequence whatever the load (fixed_chunks).
// Not thread-safe.
// Tests: tests/engine/scheduler_test.cpp
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "core/batch.hpp"
#include "core/expected.hpp"
#include "core/sampler.hpp"
#include "core/token_constraint.hpp"
#include "engine/kv_block_pool.hpp"
#include "engine/lease_table.hpp"
#include "engine/step_cost.hpp"

namespace troupe {

enum class finish_reason : uint8_t { none, stop, length, cancelled, error };
std::string_view to_string(finish_reason r);

struct request {
  int64_t id = 0; // caller's id; completions of an n > 1 request get id, id+1, ...
  std::vector<int32_t> prompt;
  sampling_params sampling;
  int max_tokens = 16;
  std::vector<int32_t> stop_ids;      // besides the model's EOS: end it, not part of it
  std::vector<int32_t> stop_ids_kept; // end it as its last token
  bool ignore_eos = false;
  int priority = 0;   // higher first
  int n = 1;          // completions sharing the prompt
  uint64_t owner = 0; // who holds the KV leases (the request's sink)
  int min_tokens = 0; // EOS and stop ids cannot end the completion before this many tokens
  // >= 0: score every prompt token after the first (its logprob and this many alternatives;
  // prompt prefixes are then computed, never taken from the cache). max_tokens may be 0.
  int prompt_logprobs = -1;
  // a rule over the generated tokens (a response_format's grammar): each completion keeps a
  // copy, its steps carry the tokens the rule allows next, and it ends ("stop") once the
  // rule says the output is complete
  std::shared_ptr<const token_constraint> constraint;
};

struct sampled_token {
  int64_t seq_id = 0;
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

struct seq_event {
  int64_t seq_id = 0;
  bool has_token = false;
  sampled_token token;
  finish_reason finished = finish_reason::none;
  std::string why;           // finished with error: what went wrong, when the scheduler knows
  int32_t cached_tokens = 0; // prompt tokens whose KV came from the prefix cache at admission
};

struct scheduler_config {
  int32_t max_batch_tokens = 512; // token budget per step
  int32_t max_seqs = 256;         // sequences per step
  int32_t max_context = 2048;     // model context
  bool prefix_caching = true;
  std::vector<int32_t> eos_ids;
  double lease_ttl_s = 300; // a sequence's blocks are reclaimed when unused this long
  int32_t window = 0;       // the model's KV horizon (model_config::kv_horizon): when every layer
                            // attends over the last `window` positions only, blocks wholly before
  // a sequence's window are freed as it advances (its table holds 0 there)
  // stall-free batching: > 0, a step with decoding sequences carries only the prefill tokens
  // predicted to keep it within this many seconds (at least min_prefill_tokens); 0: off
  double step_target_s = 0;
  int32_t min_prefill_tokens = 16;
  // > 0: the model keeps a recurrent state per sequence (linear attention) in this many slots:
  // a sequence holds one from admission until its blocks are released, so at most this many
  // run at once; a state cannot be shared or rewound, so prefixes are never taken from the
  // cache or from an n > 1 leader, and a sequence of a failed step is recomputed from its start
  int32_t state_slots = 0;
  // false: the model writes cache rows at the slots of a sequence's earlier positions (DeepSeek-
  // V4's compressed entries, each at the slot of its index, written when its window closes), so
  // a block holds what its sequence wrote later: no prefix caching, no n > 1 prompt sharing
  bool share_blocks = true;
  // > 0: a sequence's positions are computed in the same pieces whatever else runs (a model whose
  // output depends on where its input is cut: Dory's last_loop): the prompt in chunks ending at
  // multiples of this many positions (or at its end), then a token a step, a recompute (after a
  // preemption or a failed step) too; a piece that does not fit the step's budget waits (and no
  // later sequence is admitted before it), none is cut for stall-free batching
  int32_t fixed_chunks = 0;
};

struct step_plan {
  uint64_t step_id = 0;
  batch b;
};

struct scheduler_stats {
  int64_t preemptions = 0;
  int64_t prefix_hit_blocks = 0; // blocks reused from the prefix cache
  int64_t prefix_hit_tokens = 0;
  int64_t prefix_query_tokens = 0; // prompt tokens looked up in the prefix cache
  int64_t cow_copies = 0;
  int64_t window_freed_blocks = 0; // blocks returned early: wholly before a sliding window
  int64_t steps = 0;
  int64_t recomputes = 0;           // sequences whose KV was rebuilt after a failure
  int64_t prefill_capped_steps = 0; // steps whose prefill share the step target cut
};

class scheduler {
 public:
  scheduler(kv_block_pool& pool, scheduler_config cfg);

  /// Queues a request (n sequences). invalid_argument / out_of_range when it can never run.
  status add(request r);
  /// Cancels a sequence: its blocks are freed now, or when its step in flight completes.
  void cancel(int64_t seq_id);
  /// Ends a sequence for a reason the engine found (a stop string).
  void finish(int64_t seq_id, finish_reason why);
  /// The next step over sequences not in flight; nullopt when there is nothing to run.
  std::optional<step_plan> next_step();
  /// A step of `tokens` tokens took `seconds` (from send to results): feeds the step-time model.
  void observe_step(int32_t tokens, double seconds) { cost_.observe(tokens, seconds); }
  const step_cost& cost() const { return cost_; }
  /// Applies a step's sampled tokens; returns what happened to each sequence.
  std::vector<seq_event> complete(uint64_t step_id, std::span<const sampled_token> results);
  /// A step failed (a shard died): its sequences go back to be run again.
  void fail(uint64_t step_id);
  /// The owner died: its sequences end and their leases return to the pool now (those in
  /// flight when their step completes). Returns the sequences ended.
  std::vector<int64_t> revoke_owner(uint64_t owner);
  /// Sequences whose lease was not renewed for the lease TTL lose their blocks (they are
  /// recomputed when scheduled again). `now` in seconds. Returns the sequences affected.
  std::vector<int64_t> reclaim_expired(double now);
  const lease_table& leases() const { return leases_; }
  /// Seconds on the scheduler's clock (steady), for renewals.
  static double now_seconds();
  /// Every shard's KV is suspect (a shard restarted): drop all cached KV; every sequence is
  /// recomputed from prompt + generated tokens.
  void reset_kv();

  bool idle() const { return seqs_.empty(); }
  size_t waiting() const;
  size_t running() const;
  size_t in_flight() const { return steps_.size(); }
  const scheduler_stats& stats() const { return stats_; }
  const kv_block_pool& pool() const { return pool_; }
  /// Tokens generated so far by a live sequence (empty when unknown).
  std::span<const int32_t> generated(int64_t seq_id) const;

 private:
  enum class state : uint8_t { waiting, running };
  struct sequence {
    int64_t id;
    request req;
    std::vector<int32_t> tokens; // prompt + generated
    int32_t prompt_len = 0;
    int32_t computed = 0; // tokens whose KV is written
    int32_t cached = -1;  // prompt tokens the prefix cache gave at first admission (-1: not yet)
    std::vector<int32_t> blocks;
    std::vector<uint64_t> hashes; // chained hashes of the full blocks already published
    state st = state::waiting;
    bool in_flight = false;
    bool cancel_pending = false;
    finish_reason pending_finish = finish_reason::none;
    int64_t arrival = 0;
    int64_t admitted = 0;
    int64_t leader = -1; // n > 1: followers wait for the leader's prompt
    int32_t slot = -1;   // its recurrent state's slot (state_slots > 0), from admission
    int32_t index_in_group = 0;
    uint64_t seed = 0;
    std::unique_ptr<token_constraint> constraint; // this completion's copy of req.constraint
  };
  struct chunk {
    int64_t seq_id;
    int32_t count;
    bool logits;
  };

  bool ensure_blocks(sequence& s, int32_t upto, std::vector<std::pair<int32_t, int32_t>>& copies);
  void release_blocks(sequence& s);
  void preempt(sequence& s);
  void admit_prefix(sequence& s);
  void join_leader(sequence& s);
  void publish_full_blocks(sequence& s);
  void free_outside_window(sequence& s);
  bool schedulable(const sequence& s) const;
  std::vector<int64_t> waiting_order() const;
  void remove(int64_t id);

  int32_t take_block(sequence& s);              // allocate + lease
  void lease_block(sequence& s, int32_t block); // an extra reference (prefix hit, join)

  kv_block_pool& pool_;
  scheduler_config cfg_;
  std::vector<int32_t> free_slots_; // recurrent state slots no sequence holds
  lease_table leases_;
  std::map<int64_t, sequence> seqs_;
  std::map<uint64_t, std::vector<chunk>> steps_;
  uint64_t next_step_id_ = 1;
  int64_t clock_ = 0;
  scheduler_stats stats_;
  step_cost cost_;
};

} // namespace troupe
