// scheduler.cpp: continuous batching, preemption, prefix reuse and copy-on-write
// (scheduler.hpp).
#include "engine/scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <unordered_map>

namespace troupe {

std::string_view to_string(finish_reason r) {
  switch (r) {
  case finish_reason::none:
    return "none";
  case finish_reason::stop:
    return "stop";
  case finish_reason::length:
    return "length";
  case finish_reason::cancelled:
    return "cancelled";
  case finish_reason::error:
    return "error";
  }
  return "?";
}

scheduler::scheduler(kv_block_pool& pool, scheduler_config cfg)
    : pool_(pool)
    , cfg_(std::move(cfg))
    , leases_(cfg_.lease_ttl_s) {
  if (cfg_.state_slots > 0 || !cfg_.share_blocks)
    cfg_.prefix_caching = false; // a cached prefix has no state (or another's later rows)
  for (int32_t i = cfg_.state_slots - 1; i >= 0; --i) free_slots_.push_back(i);
}

double scheduler::now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int32_t scheduler::take_block(sequence& s) {
  const int32_t b = pool_.allocate();
  if (b >= 0) leases_.add(s.id, s.req.owner, b, now_seconds());
  return b;
}

void scheduler::lease_block(sequence& s, int32_t block) {
  leases_.add(s.id, s.req.owner, block, now_seconds());
}

status scheduler::add(request r) {
  const int32_t P = pool_.block_size();
  if (r.prompt.empty()) return make_error(errc::invalid_argument, "request {}: empty prompt", r.id);
  if (r.max_tokens < (r.prompt_logprobs >= 0 ? 0 : 1))
    return make_error(errc::invalid_argument, "request {}: max_tokens must be at least {}", r.id,
                      r.prompt_logprobs >= 0 ? 0 : 1);
  if (r.min_tokens < 0 || r.min_tokens > r.max_tokens)
    return make_error(errc::invalid_argument,
                      "request {}: min_tokens must be between 0 and max_tokens ({})", r.id,
                      r.max_tokens);
  if (r.n < 1 || r.n > 16)
    return make_error(errc::invalid_argument, "request {}: n must be between 1 and 16", r.id);
  if (static_cast<int64_t>(r.prompt.size()) >= cfg_.max_context)
    return make_error(errc::out_of_range,
                      "request {}: prompt of {} tokens leaves no room in the context of {}", r.id,
                      r.prompt.size(), cfg_.max_context);
  const int64_t need = (static_cast<int64_t>(r.prompt.size()) + 1 + P - 1) / P;
  if (need > pool_.total())
    return make_error(errc::out_of_memory, "request {}: prompt needs {} KV blocks, the pool has {}",
                      r.id, need, pool_.total());
  TROUPE_TRY(r.sampling.validate());
  for (int i = 0; i < r.n; ++i)
    if (seqs_.count(r.id + i))
      return make_error(errc::invalid_argument, "request id {} is already in use", r.id + i);
  for (int i = 0; i < r.n; ++i) {
    sequence s;
    s.id = r.id + i;
    s.req = r;
    s.tokens = r.prompt;
    s.prompt_len = static_cast<int32_t>(r.prompt.size());
    s.arrival = clock_++;
    s.leader = i == 0 || cfg_.state_slots > 0 || !cfg_.share_blocks ? -1 : r.id;
    s.index_in_group = i;
    s.seed = r.sampling.seed + static_cast<uint64_t>(i);
    if (r.constraint) s.constraint = r.constraint->clone();
    seqs_.emplace(s.id, std::move(s));
  }
  return {};
}

size_t scheduler::waiting() const {
  size_t n = 0;
  for (const auto& [id, s] : seqs_) n += s.st == state::waiting;
  return n;
}

size_t scheduler::running() const {
  size_t n = 0;
  for (const auto& [id, s] : seqs_) n += s.st == state::running;
  return n;
}

std::span<const int32_t> scheduler::generated(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {};
  return std::span<const int32_t>(it->second.tokens).subspan(it->second.prompt_len);
}

void scheduler::release_blocks(sequence& s) {
  // the lease and the block table hold the same references
  for (int32_t b : leases_.release(s.id)) pool_.release(b);
  s.blocks.clear();
  s.hashes.clear();
  if (s.slot >= 0) free_slots_.push_back(s.slot); // its state is rebuilt from position 0
  s.slot = -1;
}

void scheduler::remove(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  release_blocks(it->second);
  for (auto& [other, s] : seqs_)
    if (s.leader == id) s.leader = -1; // followers compute the prompt themselves
  seqs_.erase(it);
}

void scheduler::cancel(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  if (it->second.in_flight)
    it->second.cancel_pending = true;
  else
    remove(seq_id);
}

void scheduler::finish(int64_t seq_id, finish_reason why) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  if (it->second.in_flight)
    it->second.pending_finish = why;
  else
    remove(seq_id);
}

void scheduler::preempt(sequence& s) {
  release_blocks(s);
  s.computed = 0;
  s.st = state::waiting;
  ++stats_.preemptions;
}

bool scheduler::ensure_blocks(sequence& s, int32_t upto,
                              std::vector<std::pair<int32_t, int32_t>>& copies) {
  const int32_t P = pool_.block_size();
  // copy-on-write: blocks this step writes into that another sequence also holds
  const int32_t first = s.computed / P;
  const int32_t last = std::min<int32_t>((upto - 1) / P, static_cast<int32_t>(s.blocks.size()) - 1);
  for (int32_t i = first; i <= last; ++i) {
    if (pool_.refcount(s.blocks[i]) <= 1) continue;
    const int32_t fresh = take_block(s);
    if (fresh < 0) return false;
    copies.emplace_back(s.blocks[i], fresh);
    leases_.drop(s.id, s.blocks[i]);
    pool_.release(s.blocks[i]);
    s.blocks[i] = fresh;
    if (static_cast<int32_t>(s.hashes.size()) > i)
      s.hashes.resize(i); // the copy is not published yet
    ++stats_.cow_copies;
  }
  const int32_t need = (upto + P - 1) / P;
  while (static_cast<int32_t>(s.blocks.size()) < need) {
    const int32_t b = take_block(s);
    if (b < 0) return false;
    s.blocks.push_back(b);
  }
  return true;
}

void scheduler::admit_prefix(sequence& s) {
  // a scored prompt needs the logits of every position: nothing may come from the cache
  if (!cfg_.prefix_caching || !s.blocks.empty() || s.req.prompt_logprobs >= 0) return;
  const int32_t P = pool_.block_size();
  // leave at least one token to compute: its logits give the next token
  const int32_t full = (static_cast<int32_t>(s.tokens.size()) - 1) / P;
  stats_.prefix_query_tokens += static_cast<int64_t>(full) * P;
  uint64_t h = 0;
  for (int32_t i = 0; i < full; ++i) {
    h = kv_block_pool::chain_hash(h, std::span<const int32_t>(s.tokens).subspan(i * P, P));
    const int32_t b = pool_.lookup(h);
    if (b < 0) break;
    lease_block(s, b);
    s.blocks.push_back(b);
    s.hashes.push_back(h);
    ++stats_.prefix_hit_blocks;
    stats_.prefix_hit_tokens += P;
  }
  s.computed = static_cast<int32_t>(s.blocks.size()) * P;
}

void scheduler::join_leader(sequence& s) {
  const sequence& l = seqs_.at(s.leader);
  const int32_t P = pool_.block_size();
  const int32_t shared_tokens = s.prompt_len - 1;
  const int32_t count = (shared_tokens + P - 1) / P;
  for (int32_t i = 0; i < count; ++i) {
    const int32_t b = l.blocks[i];
    if (b > 0) {
      pool_.retain(b);
      lease_block(s, b);
    }
    s.blocks.push_back(b); // 0: freed by the leader's window, never read by s either
  }
  s.hashes.assign(l.hashes.begin(),
                  l.hashes.begin() + std::min<size_t>(l.hashes.size(), shared_tokens / P));
  s.computed = shared_tokens;
  s.leader = -1; // from now on an ordinary sequence
}

void scheduler::publish_full_blocks(sequence& s) {
  if (!cfg_.prefix_caching) return;
  const int32_t P = pool_.block_size();
  while (static_cast<int32_t>(s.hashes.size()) < s.computed / P) {
    const size_t i = s.hashes.size();
    const uint64_t h = kv_block_pool::chain_hash(
        i ? s.hashes.back() : 0, std::span<const int32_t>(s.tokens).subspan(i * P, P));
    pool_.publish(s.blocks[i], h);
    s.hashes.push_back(h);
  }
}

void scheduler::free_outside_window(sequence& s) {
  if (cfg_.window <= 0) return;
  const int32_t P = pool_.block_size();
  // the next query sits at position `computed` and sees keys from computed - window + 1 on
  const int32_t first = std::max(0, s.computed - cfg_.window + 1) / P;
  for (int32_t i = 0; i < first && i < static_cast<int32_t>(s.blocks.size()); ++i) {
    const int32_t b = s.blocks[i];
    if (b <= 0) continue;
    leases_.drop(s.id, b);
    pool_.release(b); // stays cached for prefix reuse when it was published
    s.blocks[i] = 0;
    ++stats_.window_freed_blocks;
  }
}

std::vector<int64_t> scheduler::waiting_order() const {
  std::vector<const sequence*> w;
  for (const auto& [id, s] : seqs_)
    if (s.st == state::waiting && !s.in_flight) w.push_back(&s);
  std::sort(w.begin(), w.end(), [](const sequence* a, const sequence* b) {
    if (a->req.priority != b->req.priority) return a->req.priority > b->req.priority;
    return a->arrival < b->arrival;
  });
  std::vector<int64_t> ids;
  for (auto* s : w) ids.push_back(s->id);
  return ids;
}

std::optional<step_plan> scheduler::next_step() {
  step_plan plan;
  std::vector<chunk> chunks;
  int32_t budget = cfg_.max_batch_tokens;
  // stall-free batching: with sequences decoding, prefill (and recompute) chunks share what the
  // step-time model says fits the target beside the decodes
  int32_t decoders = 0;
  for (const auto& [id, s] : seqs_)
    if (s.st == state::running && !s.in_flight &&
        static_cast<int32_t>(s.tokens.size()) - s.computed == 1)
      ++decoders;
  int32_t prefill_left = std::numeric_limits<int32_t>::max();
  if (cfg_.step_target_s > 0 && decoders > 0)
    // until the model has learnt the step time, small chunks (which also teach it the slope)
    prefill_left = cost_.fitted() ? std::max(cfg_.min_prefill_tokens,
                                             cost_.tokens_within(cfg_.step_target_s) - decoders)
                                  : 4 * cfg_.min_prefill_tokens;
  bool capped = false;
  auto followers_waiting = [&](int64_t leader) {
    for (const auto& [id, o] : seqs_)
      if (o.leader == leader) return true;
    return false;
  };
  auto add_chunk = [&](sequence& s, int32_t n) {
    // the prompt tokens its first step did not compute came from the cache (a prefix hit, or
    // a leader's blocks): what the request reports as cached
    if (s.cached < 0) s.cached = s.computed;
    batch_seq bs;
    bs.seq_id = s.id;
    bs.begin = static_cast<int32_t>(plan.b.tokens.size());
    bs.count = n;
    bs.pos0 = s.computed;
    bs.logits = s.computed + n == static_cast<int32_t>(s.tokens.size());
    bs.blocks = s.blocks;
    bs.state_slot = s.slot;
    bs.sampling = s.req.sampling;
    bs.sampling.seed = s.seed;
    bs.sample_step = s.tokens.size() - s.prompt_len;
    if (s.req.sampling.has_penalties()) bs.penalty_history = s.tokens;
    if (bs.logits && s.constraint) s.constraint->allowed(bs.allow);
    if (bs.logits && static_cast<int32_t>(bs.sample_step) < s.req.min_tokens) {
      if (!s.req.ignore_eos) bs.suppress = cfg_.eos_ids;
      bs.suppress.insert(bs.suppress.end(), s.req.stop_ids.begin(), s.req.stop_ids.end());
      bs.suppress.insert(bs.suppress.end(), s.req.stop_ids_kept.begin(), s.req.stop_ids_kept.end());
    }
    if (s.req.prompt_logprobs >= 0 && s.computed < s.prompt_len - 1) {
      // positions computed .. prompt_len - 2 predict prompt tokens 1 .. prompt_len - 1
      bs.score_rows = std::min(n, s.prompt_len - 1 - s.computed);
      bs.score_next = s.computed + n < s.prompt_len ? s.tokens[s.computed + n] : -1;
      bs.score_top = s.req.prompt_logprobs;
    }
    plan.b.tokens.insert(plan.b.tokens.end(), s.tokens.begin() + s.computed,
                         s.tokens.begin() + s.computed + n);
    plan.b.seqs.push_back(std::move(bs));
    chunks.push_back({s.id, n, plan.b.seqs.back().logits});
    leases_.renew(s.id, now_seconds()); // renewed by use
    s.in_flight = true;
    budget -= n;
    if (n > 1 || !chunks.back().logits) prefill_left -= n; // a prefill (or recompute) chunk
  };
  bool deferred = false; // (fixed_chunks: a piece waits for a step with room)
  auto chunk_size = [&](sequence& s) {
    const int32_t left = static_cast<int32_t>(s.tokens.size()) - s.computed;
    if (const int32_t G = cfg_.fixed_chunks; G > 0) {
      const int32_t n = s.computed < s.prompt_len
                            ? std::min<int32_t>(s.prompt_len - s.computed, G - s.computed % G)
                            : std::min<int32_t>(left, 1);
      if (n > budget) {
        deferred = true;
        return 0;
      }
      return n;
    }
    int32_t n = std::min<int32_t>(left, budget);
    if (left > 1 && n > prefill_left) {
      n = prefill_left;
      capped = true;
    }
    if (s.req.n > 1 && s.computed < s.prompt_len - 1 && followers_waiting(s.id))
      n = std::min(n, s.prompt_len - 1 - s.computed); // let the followers share the prompt first
    return n;
  };

  // 0. followers of an n > 1 request share the leader's prompt blocks once it has computed
  // all but the last prompt token (those positions are complete even if the leader is in
  // flight again: computed only advances when a step completes)
  for (auto& [id, s] : seqs_) {
    if (s.leader < 0 || s.st != state::waiting || s.in_flight) continue;
    const sequence& l = seqs_.at(s.leader);
    if (l.st == state::running && l.computed >= s.prompt_len - 1 && !l.blocks.empty())
      join_leader(s);
  }

  // 1. running sequences, oldest admission first
  std::vector<sequence*> running;
  for (auto& [id, s] : seqs_)
    if (s.st == state::running) running.push_back(&s);
  std::sort(running.begin(), running.end(),
            [](auto* a, auto* b) { return a->admitted < b->admitted; });
  for (sequence* s : running) {
    if (budget <= 0 || static_cast<int32_t>(chunks.size()) >= cfg_.max_seqs) break;
    if (s->in_flight || s->st != state::running || s->cancel_pending ||
        s->pending_finish != finish_reason::none)
      continue;
    const int32_t n = chunk_size(*s);
    if (n <= 0) continue;
    while (!ensure_blocks(*s, s->computed + n, plan.b.copies)) {
      // preempt the newest running sequence that is not in flight (possibly s itself)
      sequence* victim = nullptr;
      for (auto it = running.rbegin(); it != running.rend(); ++it)
        if ((*it)->st == state::running && !(*it)->in_flight) {
          victim = *it;
          break;
        }
      if (!victim) break;
      preempt(*victim);
      if (victim == s) break;
    }
    if (s->st != state::running ||
        s->blocks.size() * pool_.block_size() < static_cast<size_t>(s->computed + n))
      continue;
    add_chunk(*s, n);
  }

  // 2. waiting sequences, by priority then arrival
  for (int64_t id : waiting_order()) {
    if (budget <= 0 || static_cast<int32_t>(chunks.size()) >= cfg_.max_seqs || deferred) break;
    sequence& s = seqs_.at(id);
    if (s.leader >= 0) continue; // waits for its leader (step 0 above)
    admit_prefix(s);
    const int32_t n = chunk_size(s);
    if (n <= 0) continue; // (a deferred piece: the loop ends above)
    if (cfg_.state_slots > 0 && s.slot < 0) {
      if (free_slots_.empty()) break; // as many running as there are states
      s.slot = free_slots_.back();
      free_slots_.pop_back();
    }
    if (!ensure_blocks(s, s.computed + n, plan.b.copies)) {
      release_blocks(s); // do not hoard blocks while waiting
      s.computed = 0;
      break; // first come, first served: do not let later requests overtake
    }
    s.st = state::running;
    s.admitted = clock_++;
    add_chunk(s, n);
  }
  if (chunks.empty()) return std::nullopt;
  if (capped) ++stats_.prefill_capped_steps;
  plan.step_id = next_step_id_++;
  steps_.emplace(plan.step_id, std::move(chunks));
  ++stats_.steps;
  return plan;
}

std::vector<seq_event> scheduler::complete(uint64_t step_id,
                                           std::span<const sampled_token> results) {
  std::vector<seq_event> events;
  auto it = steps_.find(step_id);
  if (it == steps_.end()) return events;
  const std::vector<chunk> chunks = std::move(it->second);
  steps_.erase(it);
  std::unordered_map<int64_t, const sampled_token*> by_seq;
  for (const auto& r : results) by_seq[r.seq_id] = &r;
  for (const chunk& c : chunks) {
    auto sit = seqs_.find(c.seq_id);
    if (sit == seqs_.end()) continue;
    sequence& s = sit->second;
    s.in_flight = false;
    s.computed += c.count;
    publish_full_blocks(s);
    free_outside_window(s);
    seq_event ev;
    ev.seq_id = s.id;
    ev.cached_tokens = s.cached > 0 ? s.cached : 0;
    if (s.cancel_pending || s.pending_finish != finish_reason::none) {
      ev.finished = s.cancel_pending ? finish_reason::cancelled : s.pending_finish;
      events.push_back(ev);
      remove(s.id);
      continue;
    }
    if (!c.logits) continue;
    if (s.req.max_tokens == 0) { // prompt scoring only: the sampled token is not wanted
      ev.finished = finish_reason::length;
      events.push_back(ev);
      remove(s.id);
      continue;
    }
    auto r = by_seq.find(s.id);
    if (r == by_seq.end()) {
      ev.finished = finish_reason::error;
      events.push_back(ev);
      remove(s.id);
      continue;
    }
    const int32_t t = r->second->token;
    const bool eos = !s.req.ignore_eos &&
                     std::find(cfg_.eos_ids.begin(), cfg_.eos_ids.end(), t) != cfg_.eos_ids.end();
    const bool stop =
        std::find(s.req.stop_ids.begin(), s.req.stop_ids.end(), t) != s.req.stop_ids.end();
    if (eos || stop) {
      ev.finished = finish_reason::stop;
      events.push_back(ev);
      remove(s.id);
      continue;
    }
    if (s.constraint && !s.constraint->advance(t)) { // no token fitted, or a sampler ignored it
      ev.finished = finish_reason::error;
      ev.why = fmt::format("token {} does not fit the completion's response_format (the "
                           "vocabulary may have no token that continues it here)",
                           t);
      events.push_back(ev);
      remove(s.id);
      continue;
    }
    s.tokens.push_back(t);
    ev.has_token = true;
    ev.token = *r->second;
    const int32_t gen = static_cast<int32_t>(s.tokens.size()) - s.prompt_len;
    const bool kept_stop = std::find(s.req.stop_ids_kept.begin(), s.req.stop_ids_kept.end(), t) !=
                           s.req.stop_ids_kept.end();
    if ((s.constraint && s.constraint->done()) || kept_stop)
      ev.finished = finish_reason::stop; // the document is complete, or a kept stop token came
    else if (gen >= s.req.max_tokens || static_cast<int32_t>(s.tokens.size()) >= cfg_.max_context)
      ev.finished = finish_reason::length;
    events.push_back(ev);
    if (ev.finished != finish_reason::none) remove(s.id);
  }
  return events;
}

void scheduler::fail(uint64_t step_id) {
  auto it = steps_.find(step_id);
  if (it == steps_.end()) return;
  const std::vector<chunk> chunks = std::move(it->second);
  steps_.erase(it);
  for (const chunk& c : chunks) {
    auto sit = seqs_.find(c.seq_id);
    if (sit == seqs_.end()) continue;
    sequence& s = sit->second;
    s.in_flight = false;
    if (s.cancel_pending) {
      remove(c.seq_id);
    } else if (cfg_.state_slots > 0 && (s.computed > 0 || !s.blocks.empty())) {
      // the stages before the failure advanced its recurrent state past `computed`, and a
      // state cannot be rewound: recompute from the start
      release_blocks(s);
      s.computed = 0;
      s.st = state::waiting;
      ++stats_.recomputes;
    }
  }
}

std::vector<int64_t> scheduler::revoke_owner(uint64_t owner) {
  std::vector<int64_t> ended;
  for (auto& [id, s] : seqs_)
    if (s.req.owner == owner) ended.push_back(id);
  for (int64_t id : ended) cancel(id);
  return ended;
}

std::vector<int64_t> scheduler::reclaim_expired(double now) {
  std::vector<int64_t> hit;
  for (int64_t id : leases_.expired(now)) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) {
      for (int32_t b : leases_.release(id)) pool_.release(b); // a lease without a sequence: a leak
      continue;
    }
    if (it->second.in_flight) continue;
    preempt(it->second); // frees the blocks; the sequence is recomputed when it runs again
    hit.push_back(id);
  }
  return hit;
}

void scheduler::reset_kv() {
  for (auto& [id, s] : seqs_) {
    if (s.in_flight) continue; // its step will fail or complete first
    if (s.st == state::running || !s.blocks.empty()) {
      release_blocks(s);
      s.computed = 0;
      s.st = state::waiting;
      ++stats_.recomputes;
    }
  }
  pool_.clear_cache();
}

} // namespace troupe
