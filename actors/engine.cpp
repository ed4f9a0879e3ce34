// engine.cpp: the engine actor (engine.hpp). A blocking CAF actor on its own thread, like
// the shards: between messages it polls its mailbox for up to 100 µs before sleeping, so the
// step-done / next-step exchange of decoding costs no thread wake-up (a futex wake-up on a
// virtual machine is tens of microseconds, a whole decode step of a small model).
#include "actors/engine.hpp"

#include <chrono>
#include <map>
#include <set>

#include "actors/engine_interface.hpp"
#include "actors/shard.hpp"
#include "actors/supervisor_interface.hpp"
#include "core/log.hpp"
#include "text/json_constraint.hpp"
#include "text/think.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define TROUPE_PAUSE() _mm_pause()
#else
#define TROUPE_PAUSE() ((void)0)
#endif

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

// The interface and what the engine sends itself.
using engine_impl = engine_actor::extend<caf::reacts_to<tick_atom>>;

struct completion_state {
  int64_t request_id = 0;
  int32_t index = 0;
  sink_actor sink;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0; // of the prompt, from the prefix cache
  clock::time_point arrival, first_step, first_token, last_token;
  bool scheduled = false; // a step has included it (queue time measured)
  bool logprobs = false;
};

struct inflight_step {
  std::shared_ptr<const batch> plan;
  clock::time_point sent;
};

struct engine_state {
  engine_setup setup;
  std::unique_ptr<kv_block_pool> pool;
  std::unique_ptr<scheduler> sched;
  std::map<int64_t, completion_state> seqs;
  std::map<uint64_t, inflight_step> inflight;
  int64_t next_id = 1;
  uint64_t epoch = 0;
  bool ready = false;
  bool failed = false;
  bool cannot_load = false; // a shard refused to load what it was given: no restart will help
  bool resyncing = false;
  std::string reason = "starting: loading shards";
  supervisor_actor supervisor;
  routing_table routes;                    // this actor's copy of the supervisor's routes
  std::set<caf::actor_addr> watched_sinks; // owners of KV leases, monitored
  engine_stats stats;
  std::shared_ptr<const token_vocab> vocab; // the tokens' bytes, made for the first grammar
};

// The blocking actor and its state: `self->state` reads as it did in an event-based actor.
struct engine_self {
  caf::blocking_actor* actor;
  engine_state state;
  bool running = true;
  template <class... Ts>
  void send(Ts&&... xs) {
    actor->send(std::forward<Ts>(xs)...);
  }
  template <class... Ts>
  void delayed_send(Ts&&... xs) {
    actor->delayed_send(std::forward<Ts>(xs)...);
  }
};

using state_ptr = engine_self*;

constexpr auto poll_window = std::chrono::microseconds(100);

double seconds(clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// A completion ended: the per-request histograms and counters.
void record_finish(state_ptr self, const completion_state& cs, finish_reason why) {
  auto& st = self->state.stats;
  const auto now = clock::now();
  switch (why) {
  case finish_reason::stop:
    ++st.finished_stop;
    break;
  case finish_reason::length:
    ++st.finished_length;
    break;
  case finish_reason::cancelled:
    ++st.finished_cancelled;
    ++st.cancelled;
    break;
  case finish_reason::error:
  case finish_reason::none:
    ++st.finished_error;
    break;
  }
  st.e2e.observe(seconds(now - cs.arrival));
  if (cs.completion_tokens > 0) st.decode.observe(seconds(now - cs.first_token));
  st.prompt_len.observe(cs.prompt_tokens);
  st.generation_len.observe(cs.completion_tokens);
}

void send_final(state_ptr self, completion_state& cs, finish_reason why,
                error err = {errc::internal, ""}) {
  gen_event e;
  e.request_id = cs.request_id;
  e.index = cs.index;
  e.finish = why;
  if (why == finish_reason::error) {
    e.error_code = err.code;
    e.error_message = std::move(err.message);
  }
  e.prompt_tokens = cs.prompt_tokens;
  e.completion_tokens = cs.completion_tokens;
  e.cached_tokens = cs.cached_tokens;
  record_finish(self, cs, why);
  self->send(cs.sink, event_atom::value, std::move(e));
}

// Sampled tokens and endings from the scheduler, sent to each completion's sink as they
// are: no text work here (the sinks detokenize), so a step's results leave at once.
void handle_events(state_ptr self, const std::vector<seq_event>& events) {
  auto& st = self->state;
  const auto now = clock::now();
  for (const auto& ev : events) {
    auto it = st.seqs.find(ev.seq_id);
    if (it == st.seqs.end()) continue; // already ended (a stop string, a cancel)
    completion_state& cs = it->second;
    cs.cached_tokens = ev.cached_tokens;
    if (!ev.has_token) {
      if (ev.finished != finish_reason::none) {
        send_final(self, cs, ev.finished,
                   {errc::internal, ev.why.empty() ? "the step failed" : ev.why});
        st.seqs.erase(it);
      }
      continue;
    }
    ++cs.completion_tokens;
    ++st.stats.generated_tokens;
    if (cs.completion_tokens == 1) {
      cs.first_token = now;
      st.stats.ttft.observe(seconds(now - cs.arrival));
      st.stats.prefill.observe(seconds(now - cs.first_step));
    } else {
      st.stats.itl.observe(seconds(now - cs.last_token));
    }
    cs.last_token = now;
    gen_event e;
    e.request_id = cs.request_id;
    e.index = cs.index;
    e.tokens = {ev.token.token};
    if (cs.logprobs) {
      e.logprobs = {ev.token.logprob};
      e.top_logprobs = {ev.token.top};
    }
    e.finish = ev.finished;
    e.prompt_tokens = cs.prompt_tokens;
    e.completion_tokens = cs.completion_tokens;
    e.cached_tokens = cs.cached_tokens;
    if (ev.finished != finish_reason::none) record_finish(self, cs, ev.finished);
    self->send(cs.sink, event_atom::value, std::move(e));
    if (ev.finished != finish_reason::none) st.seqs.erase(it);
  }
}

// Scored prompt tokens go to completion 0 of their request, a sequence's scores in one event.
void send_scores(state_ptr self, const std::vector<prompt_score>& scores) {
  auto& st = self->state;
  std::map<int64_t, gen_event> out;
  for (const auto& sc : scores) {
    auto it = st.seqs.find(sc.seq_id);
    if (it == st.seqs.end()) continue;
    gen_event& e = out[sc.seq_id];
    e.request_id = it->second.request_id;
    e.index = it->second.index;
    e.prompt_tokens = it->second.prompt_tokens;
    e.prompt_logprobs.push_back(sc.lp);
  }
  for (auto& [id, e] : out) self->send(st.seqs.at(id).sink, event_atom::value, std::move(e));
}

// Said once when the engine starts failing, and again only when it has requests to fail: a
// second shard going down adds its own supervisor's line, not another of these.
void fail_all(state_ptr self, const std::string& why, bool first) {
  auto& st = self->state;
  const size_t open = st.seqs.size();
  for (auto& [id, cs] : st.seqs) {
    st.sched->cancel(id);
    send_final(self, cs, finish_reason::error, {errc::unavailable, why});
  }
  st.seqs.clear();
  if (first || open > 0)
    TROUPE_LOG_ERROR("engine", "failing all requests ({} open): {}", open, why);
}

void pump(state_ptr self) {
  auto& st = self->state;
  if (!st.ready || st.failed || st.resyncing || st.epoch != st.routes.epoch() ||
      st.routes.hops() == 0) {
    TROUPE_LOG_DEBUG("engine", "pump paused ready={} failed={} resyncing={} epoch={}/{}", st.ready,
                     st.failed, st.resyncing, st.epoch, st.routes.epoch());
    return;
  }
  while (static_cast<int>(st.inflight.size()) < st.setup.max_inflight) {
    auto plan = st.sched->next_step();
    if (!plan) break;
    if (int n = st.setup.faults->fail_allocs(plan->step_id + 1); n > 0) st.pool->fail_next(n);
    auto p = std::make_shared<const batch>(std::move(plan->b));
    const auto now = clock::now();
    st.inflight[plan->step_id] = {p, now};
    for (const auto& s : p->seqs)
      if (auto it = st.seqs.find(s.seq_id); it != st.seqs.end() && !it->second.scheduled) {
        it->second.scheduled = true;
        it->second.first_step = now;
        st.stats.queue.observe(seconds(now - it->second.arrival));
      }
    const auto& entry = st.routes.info(0);
    for (size_t i = 0; i < entry.actors.size(); ++i) {
      const std::string to =
          entry.stage >= 0 ? shard_name(entry.stage, static_cast<int>(i)) : entry.name;
      step_msg m{plan->step_id, st.epoch, p, nullptr};
      if (st.setup.faults->drop("engine", to, m.step_id)) continue;
      if (int ms = st.setup.faults->delay_ms("engine", to, m.step_id); ms > 0)
        self->delayed_send(entry.actors[i], std::chrono::milliseconds(ms), step_atom::value, m);
      else
        self->send(entry.actors[i], step_atom::value, m);
    }
  }
}

// Every step in flight is void (a shard died, or a step was lost): give their sequences back.
void abandon_inflight(state_ptr self) {
  auto& st = self->state;
  for (auto& [id, s] : st.inflight) st.sched->fail(id);
  st.inflight.clear();
}

// Steps in flight are void and the collectives must be freed: new epoch via the supervisor.
void request_resync(state_ptr self, const std::string& why) {
  auto& st = self->state;
  if (!st.ready || st.resyncing || !st.supervisor) return;
  TROUPE_LOG_WARN("engine", "resync: {}", why);
  st.resyncing = true;
  abandon_inflight(self);
  // the supervisor answers at once (it bumps the epoch and resets the groups)
  self->actor->request(st.supervisor, std::chrono::seconds(10), resync_atom::value)
      .receive(
          [&](uint64_t epoch) {
            st.resyncing = false;
            st.epoch = epoch;
            pump(self);
          },
          [&](const caf::error& e) {
            // no answer: stay paused; the supervisor's own recovery (up_atom) resumes us
            TROUPE_LOG_ERROR("engine", "resync failed: {}", caf::to_string(e));
          });
}

// What the blocking loop handles besides the interface: a sink that died, an exit.
caf::message_handler system_handlers(state_ptr self) {
  return {
      // a request's sink died (a client went away): its leases are revoked, its sequences end
      [=](caf::down_msg& dm) {
        auto& st = self->state;
        st.watched_sinks.erase(dm.source);
        const auto ended = st.sched->revoke_owner(dm.source.id());
        for (int64_t id : ended)
          if (auto it = st.seqs.find(id); it != st.seqs.end()) {
            record_finish(self, it->second, finish_reason::cancelled);
            st.seqs.erase(it);
          }
        if (!ended.empty())
          TROUPE_LOG_INFO("engine", "owner {} gone: revoked {} sequences", dm.source.id(),
                          ended.size());
        pump(self);
      },
      [=](caf::exit_msg& em) {
        self->actor->fail_state(std::move(em.reason));
        self->running = false;
      },
  };
}

// Checked against engine_impl when built: a handler the interface lacks fails to compile.
engine_impl::behavior_type engine_behavior(state_ptr self) {
  return {
      [=](attach_atom, const caf::actor& sup) {
        self->state.supervisor = caf::actor_cast<supervisor_actor>(sup);
      },
      [=](route_atom, const route_update& u) { // the supervisor's routes changed
        const auto& sup = self->state.supervisor;
        if (sup && self->actor->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(sup))
          return;
        self->state.routes.apply(u);
      },
      [=](generate_atom, gen_request& r, caf::actor sink) -> caf::result<int64_t> {
        auto& st = self->state;
        if (st.failed) return to_caf({errc::unavailable, "the model is unavailable: " + st.reason});
        if (static_cast<int64_t>(st.sched->waiting()) >= st.setup.max_waiting)
          return to_caf({errc::busy, fmt::format("the queue is full ({} requests waiting); retry "
                                                 "later",
                                                 st.sched->waiting())});
        const model_config& c = st.setup.model->config;
        for (int32_t t : r.prompt)
          if (t < 0 || t >= c.V)
            return to_caf(
                make_error(errc::invalid_argument, "token id {} outside the vocabulary", t));
        if (r.prompt_logprobs > 20)
          return to_caf({errc::invalid_argument, "prompt logprobs: at most 20 alternatives"});
        const int64_t id = st.next_id;
        st.next_id += std::max<int32_t>(r.n, 1) + 1;
        request q;
        q.id = id;
        q.prompt = r.prompt;
        q.sampling = r.sampling;
        q.max_tokens = r.max_tokens;
        q.min_tokens = r.min_tokens;
        q.stop_ids = r.stop_ids;
        q.stop_ids_kept = r.stop_ids_kept;
        q.ignore_eos = r.ignore_eos;
        q.priority = r.priority;
        q.n = r.n;
        q.prompt_logprobs = r.prompt_logprobs;
        if (!r.response_format.empty()) {
          if (!st.setup.model->tok)
            return to_caf({errc::unsupported, "response_format needs the model's tokenizer"});
          if (!st.vocab) st.vocab = token_vocab::from(*st.setup.model->tok);
          auto rule =
              response_format_constraint(r.response_format, st.vocab, st.setup.sched.eos_ids);
          if (!rule) return to_caf(rule.error());
          q.constraint = *rule;
          const tokenizer& tok = *st.setup.model->tok;
          if (const auto think = r.think ? think_tokens::of(tok) : std::nullopt)
            q.constraint = think_then((*rule)->clone(), *think, think->opened_by(r.prompt),
                                      tok.vocab_size(), st.setup.sched.eos_ids);
        }
        q.owner = sink ? sink.id() : 0; // the sink owns the KV leases of its sequences
        if (auto added = st.sched->add(q); !added) return to_caf(added.error());
        if (sink && st.watched_sinks.insert(sink.address()).second) self->actor->monitor(sink);
        const auto now = clock::now();
        for (int32_t i = 0; i < r.n; ++i) {
          completion_state cs;
          cs.request_id = id;
          cs.index = i;
          cs.sink = caf::actor_cast<sink_actor>(sink);
          cs.prompt_tokens = static_cast<int32_t>(r.prompt.size());
          cs.arrival = now;
          cs.logprobs = r.sampling.logprobs || r.sampling.top_logprobs > 0;
          st.seqs.emplace(id + i, std::move(cs));
        }
        ++st.stats.requests_total;
        st.stats.prompt_tokens += static_cast<int64_t>(r.prompt.size());
        TROUPE_LOG_DEBUG("engine", "req={} tag={} prompt={} max_tokens={} n={}", id, r.tag,
                         r.prompt.size(), r.max_tokens, r.n);
        pump(self);
        return id;
      },
      // a stop string matched on the output side: the completion ends quietly (its sink
      // already has everything it shows)
      [=](finish_atom, int64_t request_id, int32_t index) {
        auto& st = self->state;
        auto it = st.seqs.find(request_id + index);
        if (it == st.seqs.end() || it->second.request_id != request_id) return;
        st.sched->finish(it->first, finish_reason::stop);
        record_finish(self, it->second, finish_reason::stop);
        st.seqs.erase(it);
        pump(self);
      },
      [=](cancel_atom, int64_t request_id) {
        auto& st = self->state;
        for (auto it = st.seqs.begin(); it != st.seqs.end();) {
          if (it->second.request_id != request_id) {
            ++it;
            continue;
          }
          st.sched->cancel(it->first);
          send_final(self, it->second, finish_reason::cancelled);
          it = st.seqs.erase(it);
        }
        pump(self);
      },
      [=](done_atom, step_done& d) {
        auto& st = self->state;
        TROUPE_LOG_DEBUG("engine", "done step={} epoch={}/{} tokens={}", d.step_id, d.epoch,
                         st.epoch, d.tokens.size());
        auto it = st.inflight.find(d.step_id);
        if (d.epoch != st.epoch || it == st.inflight.end()) return;
        // the step's time from send to results teaches the scheduler's step-time model
        st.sched->observe_step(static_cast<int32_t>(it->second.plan->tokens.size()),
                               seconds(clock::now() - it->second.sent));
        st.inflight.erase(it);
        const auto events = st.sched->complete(d.step_id, d.tokens);
        pump(self); // the next step first: the sinks' work overlaps with it
        if (!d.scores.empty()) send_scores(self, d.scores);
        handle_events(self, events);
      },
      [=](failed_atom, step_failed& f) {
        auto& st = self->state;
        if (f.epoch != st.epoch || !st.inflight.count(f.step_id)) return;
        if (f.epoch != st.routes.epoch()) return; // a shard died: the supervisor is recovering
        if (f.transient) {
          // the shards of a stage met in different steps (a lost message): resync now
          request_resync(
              self, fmt::format("step={} stage{}.rank{}: {}", f.step_id, f.stage, f.rank, f.why));
          return;
        }
        // a real error inside a step (not a lost shard): the requests in it cannot proceed
        auto plan = st.inflight[f.step_id].plan;
        st.inflight.erase(f.step_id);
        st.sched->fail(f.step_id);
        for (const auto& s : plan->seqs) {
          auto it = st.seqs.find(s.seq_id);
          if (it == st.seqs.end()) continue;
          st.sched->cancel(s.seq_id);
          send_final(self, it->second, finish_reason::error,
                     {errc::internal, fmt::format("stage{}.rank{}: {}", f.stage, f.rank, f.why)});
          st.seqs.erase(it);
        }
        TROUPE_LOG_ERROR("engine", "step={} failed on stage{}.rank{}: {}", f.step_id, f.stage,
                         f.rank, f.why);
        pump(self);
      },
      [=](down_atom, int32_t stage, int32_t rank, std::string why, int32_t how) {
        auto& st = self->state;
        st.ready = false;
        if (!st.cannot_load) // a shard that cannot load keeps the engine's reason
          st.reason =
              fmt::format("shard stage{}.rank{} is down ({}); restarting", stage, rank, why);
        abandon_inflight(self);
        st.sched->reset_kv(); // its KV is gone, and with it every sequence's
        if (how != shard_down::restarting) {
          const bool first = !st.failed;
          st.failed = true;
          if (!st.cannot_load)
            st.reason = fmt::format("shard stage{}.rank{}: {}", stage, rank, why);
          st.cannot_load = st.cannot_load || how == shard_down::cannot_load;
          fail_all(self, st.reason, first);
        }
      },
      [=](up_atom, uint64_t epoch, int64_t restarts) {
        auto& st = self->state;
        st.failed = false; // a shard given up on came back (the supervisor's retry)
        st.cannot_load = false;
        st.epoch = epoch;
        st.ready = true;
        st.resyncing = false;
        st.reason.clear();
        st.stats.shard_restarts = restarts;
        pump(self);
      },
      [=](stats_atom) -> engine_stats {
        auto& st = self->state;
        engine_stats s = st.stats;
        s.requests_running = static_cast<int64_t>(st.sched->running());
        s.requests_waiting = static_cast<int64_t>(st.sched->waiting());
        s.kv_blocks_free = st.pool->free_count();
        s.preemptions = st.sched->stats().preemptions;
        s.prefix_hit_blocks = st.sched->stats().prefix_hit_blocks;
        s.prefix_hit_tokens = st.sched->stats().prefix_hit_tokens;
        s.prefix_query_tokens = st.sched->stats().prefix_query_tokens;
        s.steps = st.sched->stats().steps;
        s.recomputes = st.sched->stats().recomputes;
        s.kv_window_freed_blocks = st.sched->stats().window_freed_blocks;
        s.prefill_capped_steps = st.sched->stats().prefill_capped_steps;
        s.leases = static_cast<int64_t>(st.sched->leases().size());
        s.leased_blocks = st.sched->leases().blocks_leased();
        s.ready = st.ready && !st.failed;
        s.cannot_load = st.cannot_load;
        s.not_ready_reason = st.reason;
        s.restart_policy = st.setup.restart_policy;
        return s;
      },
      [=](tick_atom) {
        auto& st = self->state;
        const auto now = clock::now();
        if (!st.sched->reclaim_expired(scheduler::now_seconds()).empty()) pump(self);
        // nothing in flight but sequences left: a step could not be planned (the pool refused
        // a block, e.g. under fail-alloc injection) and no completion will pump again; retry
        if (st.inflight.empty() && !st.sched->idle()) pump(self);
        bool lost = false;
        for (const auto& [id, s] : st.inflight)
          if (std::chrono::duration<double>(now - s.sent).count() > st.setup.step_timeout_s)
            lost = true;
        if (lost)
          request_resync(self, fmt::format("a step outlived {} s", st.setup.step_timeout_s));
        self->delayed_send(self->actor, std::chrono::milliseconds(100), tick_atom::value);
      },
  };
}

void engine_main(caf::blocking_actor* actor, engine_setup setup) {
  engine_self self{actor, {}};
  auto& st = self.state;
  st.setup = std::move(setup);
  st.pool = std::make_unique<kv_block_pool>(st.setup.kv_blocks, st.setup.block_size);
  st.sched = std::make_unique<scheduler>(*st.pool, st.setup.sched);
  st.stats.kv_blocks_total = st.pool->total();
  actor->delayed_send(actor, std::chrono::milliseconds(100), tick_atom::value);
  caf::behavior bhvr{
      caf::message_handler{engine_behavior(&self).unbox().as_behavior_impl()}.or_else(
          system_handlers(&self))};
  while (self.running) {
    const auto until = std::chrono::steady_clock::now() + poll_window;
    for (int i = 0; actor->mailbox().empty(); ++i) {
      TROUPE_PAUSE();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
    }
    actor->receive(bhvr);
  }
}

} // namespace

engine_actor spawn_engine(caf::actor_system& sys, engine_setup setup) {
  return caf::actor_cast<engine_actor>(sys.spawn(engine_main, std::move(setup)));
}

} // namespace troupe::actors
