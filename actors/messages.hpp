// messages.hpp: every atom and message type the actors exchange, with `inspect` so each one
// serialises (the same plan can later run across processes). Bulk payloads (activations)
// travel in-process as shared_ptr (no copy) and serialise as raw bytes, never element by
// element (CAF 0.17 packs float vectors one IEEE value at a time). Runtime types (batch,
// sampling_params, sampled_token) get their inspect overloads here so core/ and engine/ stay free
// of CAF. register_messages() announces them all; call it on every actor_system_config. Included
// only by actors/*.cpp: keep this heavy header out of anything widely included.
#pragma once

#include <caf/all.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "actors/api.hpp"
#include "actors/routing.hpp"
#include "arch/shard_plan.hpp"
#include "core/batch.hpp"
#include "core/metrics.hpp"
#include "core/sampler.hpp"
#include "engine/scheduler.hpp"

namespace troupe {

// ---- runtime types ------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_params& x) {
  return f(caf::meta::type_name("sampling_params"), x.temperature, x.top_k, x.top_p, x.min_p,
           x.repetition_penalty, x.presence_penalty, x.frequency_penalty, x.seed, x.top_logprobs,
           x.logprobs, x.logit_bias);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batch_seq& x) {
  return f(caf::meta::type_name("batch_seq"), x.seq_id, x.begin, x.count, x.pos0, x.logits,
           x.blocks, x.state_slot, x.sampling, x.sample_step, x.penalty_history, x.suppress,
           x.allow, x.score_rows, x.score_next, x.score_top);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batch& x) {
  return f(caf::meta::type_name("batch"), x.tokens, x.seqs, x.copies);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampled_token& x) {
  return f(caf::meta::type_name("sampled_token"), x.seq_id, x.token, x.logprob, x.top);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_spec& x) {
  return f(caf::meta::type_name("shard_spec"), x.layer_begin, x.layer_end, x.tp_rank, x.tp_size,
           x.first_stage, x.last_stage, x.ffn_block, x.expert_parallel);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, histogram& x) {
  return f(caf::meta::type_name("histogram"), x.bounds, x.counts, x.sum, x.count);
}

namespace actors {

using step_atom = caf::atom_constant<caf::atom("step")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using failed_atom = caf::atom_constant<caf::atom("failed")>;
using generate_atom = caf::atom_constant<caf::atom("generate")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using event_atom = caf::atom_constant<caf::atom("event")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using down_atom = caf::atom_constant<caf::atom("shdown")>;
/// How a shard went down (down_atom's last element).
namespace shard_down {
constexpr int32_t restarting = 0;  // a restart is scheduled
constexpr int32_t given_up = 1;    // failing requests; a retry may come (--on-give-up retry)
constexpr int32_t cannot_load = 2; // it refused to load what it was given: for good
} // namespace shard_down
using up_atom = caf::atom_constant<caf::atom("shup")>;
using ready_atom = caf::atom_constant<caf::atom("ready")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using resync_atom = caf::atom_constant<caf::atom("resync")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;     // a stop string ended a completion
using progress_atom = caf::atom_constant<caf::atom("progress")>; // a new shard ran a step
using close_atom = caf::atom_constant<caf::atom("close")>;       // the server shuts down
// worker processes (worker_pool.hpp, worker_node.hpp)
using hello_atom = caf::atom_constant<caf::atom("hello")>;     // a worker asks for a challenge
using join_atom = caf::atom_constant<caf::atom("join")>;       // ... and answers it
using spawn_atom = caf::atom_constant<caf::atom("spawn")>;     // start a shard there
using route_atom = caf::atom_constant<caf::atom("route")>;     // the routes changed
using group_atom = caf::atom_constant<caf::atom("group")>;     // form the stage's UCX group
using grouped_atom = caf::atom_constant<caf::atom("grouped")>; // ... formed
using worker_atom = caf::atom_constant<caf::atom("worker")>;   // a worker joined / left
using ping_atom = caf::atom_constant<caf::atom("ping")>;       // a worker's heartbeat
using hung_atom = caf::atom_constant<caf::atom("hung")>;       // a worker's shard is stuck
using halt_atom = caf::atom_constant<caf::atom("halt")>; // abort a worker's UCX groups (epoch)
using experts_atom = caf::atom_constant<caf::atom("experts")>; // a process's expert counts
using device_atom = caf::atom_constant<caf::atom("device")>;   // where a shard runs, its memory
using shards_atom = caf::atom_constant<caf::atom("shards")>;   // every shard's report

/// Errors between actors carry troupe's code (category "troupe"): the gateway maps the code,
/// never the text, to an HTTP status.
caf::error to_caf(const error& e);
/// Back from CAF: troupe's own code and message, or a CAF system error turned into one
/// (a request timeout is errc::timeout, a dead actor errc::unavailable).
error from_caf(const caf::error& e);

/// One forward step travelling down the pipeline. `x` is null for stage 0.
struct step_msg {
  uint64_t step_id = 0;
  uint64_t epoch = 0;
  std::shared_ptr<const batch> plan;
  std::shared_ptr<const std::vector<float>> x; // [T, C] activations
  int64_t x_ucx_bytes = 0; // > 0: x comes over UCX from the previous stage's rank 0 instead
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_msg& m) {
  if constexpr (Inspector::reads_state) {
    batch b = m.plan ? *m.plan : batch{};
    std::vector<uint8_t> bytes;
    if (m.x) {
      bytes.resize(m.x->size() * sizeof(float));
      std::memcpy(bytes.data(), m.x->data(), bytes.size());
    }
    return f(caf::meta::type_name("step_msg"), m.step_id, m.epoch, b, bytes, m.x_ucx_bytes);
  } else {
    batch b;
    std::vector<uint8_t> bytes;
    auto done = caf::meta::load_callback([&]() -> caf::error {
      if (bytes.size() % sizeof(float))
        return caf::make_error(caf::sec::invalid_argument, "activation bytes");
      m.plan = std::make_shared<const batch>(std::move(b));
      if (!bytes.empty()) {
        auto v = std::make_shared<std::vector<float>>(bytes.size() / sizeof(float));
        std::memcpy(v->data(), bytes.data(), bytes.size());
        m.x = std::move(v);
      }
      return caf::none;
    });
    return f(caf::meta::type_name("step_msg"), m.step_id, m.epoch, b, bytes, m.x_ucx_bytes, done);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prompt_logprob& x) {
  return f(caf::meta::type_name("prompt_logprob"), x.pos, x.logprob, x.top);
}

/// A scored prompt token of one sequence.
struct prompt_score {
  int64_t seq_id = 0;
  prompt_logprob lp;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prompt_score& x) {
  return f(caf::meta::type_name("prompt_score"), x.seq_id, x.lp);
}

/// The last stage's answer: one sampled token per sequence that asked for logits, and the
/// scores of prompt tokens where a sequence asked for them.
struct step_done {
  uint64_t step_id = 0;
  uint64_t epoch = 0;
  std::vector<sampled_token> tokens;
  std::vector<prompt_score> scores;
  double seconds = 0; // wall time of the last stage
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_done& x) {
  return f(caf::meta::type_name("step_done"), x.step_id, x.epoch, x.tokens, x.scores, x.seconds);
}

/// A shard could not run a step (its collective was aborted, a kernel failed).
struct step_failed {
  uint64_t step_id = 0;
  uint64_t epoch = 0;
  int32_t stage = 0, rank = 0;
  std::string why;
  bool transient = false; // the shard's group was aborted or reset: retry after recovery
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_failed& x) {
  return f(caf::meta::type_name("step_failed"), x.step_id, x.epoch, x.stage, x.rank, x.why,
           x.transient);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_request& x) {
  return f(caf::meta::type_name("gen_request"), x.prompt, x.sampling, x.max_tokens, x.min_tokens,
           x.stop, x.stop_ids, x.stop_ids_kept, x.ignore_eos, x.n, x.priority, x.prompt_logprobs,
           x.tag, x.response_format, x.think);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_event& x) {
  return f(caf::meta::type_name("gen_event"), x.request_id, x.index, x.tokens, x.text, x.logprobs,
           x.top_logprobs, x.prompt_logprobs, x.finish, x.error_code, x.error_message,
           x.prompt_tokens, x.completion_tokens, x.cached_tokens);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, engine_stats& x) {
  return f(caf::meta::type_name("engine_stats"), x.requests_total, x.requests_running,
           x.requests_waiting, x.prompt_tokens, x.generated_tokens, x.kv_blocks_total,
           x.kv_blocks_free, x.preemptions, x.prefix_hit_blocks, x.steps, x.recomputes,
           x.kv_window_freed_blocks, x.prefill_capped_steps, x.shard_restarts, x.cancelled,
           x.leases, x.leased_blocks, x.ready, x.cannot_load, x.not_ready_reason, x.ttft, x.itl,
           x.finished_stop, x.finished_length, x.finished_cancelled, x.finished_error,
           x.prefix_query_tokens, x.prefix_hit_tokens, x.e2e, x.queue, x.prefill, x.decode,
           x.prompt_len, x.generation_len, x.restart_policy);
}

/// One shard as /metrics shows it: where it runs and that device's memory when it loaded.
struct shard_report {
  std::string name;   // "stage0.rank1"
  std::string device; // "host (cpu)", "cuda:0 (NVIDIA H200, sm_90)"
  int64_t resident_bytes = 0, device_total = 0, device_free = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_report& x) {
  return f(caf::meta::type_name("shard_report"), x.name, x.device, x.resident_bytes, x.device_total,
           x.device_free);
}

/// What a worker process needs to start one shard: the model (opened there from the same path),
/// the shard's place and options, the --inject rules, and whom to report to.
struct shard_order {
  std::string model_path;
  int32_t stage = 0, hop = 0;
  bool last = true;
  shard_spec spec;
  int32_t threads = 1;
  int64_t kv_blocks = 0;
  int64_t state_slots = 0; // recurrent state rows (linear attention layers)
  int32_t block_size = 16;
  uint8_t kv_dtype = 0, where = 0;
  uint8_t quantize = 0;      // dtype matrices are quantized to at load (f32: none)
  int32_t device = 0;        // which GPU (where == cuda)
  bool nccl = false;         // every rank of its stage on a GPU: the stage sums over NCCL
  std::vector<int32_t> cpus; // pin the shard's threads (empty: anywhere)
  double group_timeout_s = 60;
  double hang_timeout_s = 60; // a step running longer: the worker reports the shard hung
  std::vector<std::string> faults;
  caf::actor supervisor;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_order& x) {
  return f(caf::meta::type_name("shard_order"), x.model_path, x.stage, x.hop, x.last, x.spec,
           x.threads, x.kv_blocks, x.state_slots, x.block_size, x.kv_dtype, x.quantize, x.where,
           x.device, x.nccl, x.cpus, x.group_timeout_s, x.hang_timeout_s, x.faults, x.supervisor);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, route_update& x) {
  return f(caf::meta::type_name("route_update"), x.epoch, x.hops, x.stages, x.names, x.engine);
}

/// Announces every message type above; call before constructing the actor_system.
void register_messages(caf::actor_system_config& cfg);

} // namespace actors
} // namespace troupe
