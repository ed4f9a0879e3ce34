// shard.cpp: the shard actor (shard.hpp). A blocking CAF actor on its own thread: after each
// step it polls its mailbox for up to 100 µs before sleeping, because during decoding the next
// step arrives within tens of microseconds and a sleep / wake-up pair costs about as much
// as the wait itself. Idle shards block and burn nothing.
#include "actors/shard.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "actors/engine_interface.hpp"
#include "actors/shard_interface.hpp"
#include "actors/supervisor_interface.hpp"
#include "core/log.hpp"
#include "transport/ucx_group.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define TROUPE_PAUSE() _mm_pause()
#else
#define TROUPE_PAUSE() ((void)0)
#endif

namespace troupe::actors {

std::string shard_name(int stage, int rank) {
  return fmt::format("stage{}.rank{}", stage, rank);
}

namespace {

constexpr auto poll_window = std::chrono::microseconds(100);
// forming a UCX group: members that do not all arrive this soon are asked again (a round
// after a replacement can meet a member still busy with its last step)
constexpr auto formation_timeout = std::chrono::milliseconds(2000);

} // namespace

uint8_t tp_group_id(int stage) {
  return static_cast<uint8_t>(1 + stage % 127);
}
uint8_t boundary_group_id(int stage) {
  return static_cast<uint8_t>(128 + stage % 127);
}

namespace {

// One UCX context per process, shared by its shards' workers.
expected<std::shared_ptr<transport::ucx_context>> process_ucx() {
  static std::mutex mu;
  static std::shared_ptr<transport::ucx_context> ctx;
  std::lock_guard<std::mutex> lk(mu);
  if (!ctx) {
    auto c = transport::ucx_context::create();
    if (!c) return c.error();
    ctx = *c;
  }
  return ctx;
}

// The UCX groups of a shard in a worker process: its stage's TP group (the executor's
// collective: this object) and the stage boundaries. The supervisor forms them (and forms
// them again after any replacement); the shard's thread swaps them under `mu` and uses them
// without it (it is their only writer); abort_all() may come from another thread (the
// worker's node, told by the supervisor that a shard was lost), so siblings blocked in a
// collective on a shard that is gone, in a process that lives on, fail at once instead of
// waiting out the group timeout (over shared memory UCX sees no peer process die).
//
// A stage whose ranks each own a GPU (`over_nccl`) sums over NCCL instead: the UCX group is
// then its host channel, which carries rank 0's NCCL id each time the group is formed
// (form_nccl), and the executor's collectives go to the NCCL member, on device memory.
class ucx_membership final : public collective {
 public:
  ucx_membership(int rank, int size, bool over_nccl)
      : rank_(rank)
      , size_(size)
      , over_nccl_(over_nccl) {}
  std::shared_ptr<transport::ucx_worker> worker;
  std::unique_ptr<transport::ucx_group> group, from_prev, to_next;
  std::mutex mu;
  std::map<const transport::ucx_group*, uint64_t> formed;         // the epoch each was formed in
  std::map<uint8_t, std::vector<std::vector<uint8_t>>> addresses; // each group's members (by id)
#ifdef TROUPE_HAVE_NCCL
  std::shared_ptr<transport::nccl_group> nccl; // over_nccl: the stage's sums, formed in nccl_epoch
  uint64_t nccl_epoch = 0;
#endif
  std::unique_ptr<collective> nccl_member;

  /// Over NCCL: rank 0 makes an id, the (just formed) UCX group carries it to every rank, and
  /// each joins the NCCL group on its GPU (the old one, if any, aborted first). The ranks then
  /// agree over UCX: if any could not join (NCCL missing from its build, two ranks on one GPU,
  /// a GPU NCCL refuses), all of them sum through host memory over UCX this epoch, and say
  /// why. Every formation tries again, so a replaced rank and the survivors always agree.
  status form_nccl(uint64_t epoch, int device, std::chrono::milliseconds timeout,
                   const std::string& label) {
    drop_nccl("formed again");
    // byte 0: whether rank 0 has an id; then the id (NCCL's 128 bytes)
    std::vector<uint8_t> msg(129, 0);
    status joined;
#ifdef TROUPE_HAVE_NCCL
    if (rank_ == 0) {
      auto id = transport::nccl_group::make_id();
      if (id && id->size() == 128) {
        msg[0] = 1;
        std::copy(id->begin(), id->end(), msg.begin() + 1);
      } else {
        joined = id ? make_error(errc::internal, "an NCCL id of {} bytes", id->size()) : id.error();
      }
    }
#else
    joined = make_error(errc::unsupported, "this build has no NCCL");
#endif
    TROUPE_TRY(group->broadcast(msg.data(), static_cast<int64_t>(msg.size()), dtype::i8, 0));
    if (joined && msg[0] != 1)
      joined = make_error(errc::unavailable, "rank 0 of the stage has no NCCL id");
#ifdef TROUPE_HAVE_NCCL
    std::shared_ptr<transport::nccl_group> g;
    if (joined) {
      auto made = transport::nccl_group::create_rank(device, rank_, size_,
                                                     std::span(msg).subspan(1), timeout);
      if (made)
        g = *made;
      else
        joined = made.error();
    }
#else
    (void)epoch, (void)device, (void)timeout;
#endif
    float failed = joined ? 0.0f : 1.0f;
    TROUPE_TRY(group->all_reduce_sum(&failed, 1));
    if (failed > 0) {
      over_nccl_ = false;
      TROUPE_LOG_WARN("shard",
                      "{}: the stage sums through host memory over UCX this epoch: {} "
                      "of its ranks could not join an NCCL group{}{}",
                      label, static_cast<int>(failed),
                      joined ? "" : "; this one: ", joined ? "" : joined.error().message);
      return {};
    }
#ifdef TROUPE_HAVE_NCCL
    auto m = g->join(rank_);
    m->set_stream(stream_);
    m->arm(epoch, 0);
    std::lock_guard<std::mutex> lk(mu);
    nccl = std::move(g);
    nccl_member = std::move(m);
    nccl_epoch = epoch;
    over_nccl_ = true;
#endif
    return {};
  }
  void drop_nccl(const std::string& why) {
#ifdef TROUPE_HAVE_NCCL
    std::shared_ptr<transport::nccl_group> old;
    std::unique_ptr<collective> old_member;
    {
      std::lock_guard<std::mutex> lk(mu);
      old = std::move(nccl);
      old_member = std::move(nccl_member);
    }
    if (old) old->abort(why);
#else
    (void)why;
#endif
  }

  void swap_in(std::unique_ptr<transport::ucx_group>& slot, std::unique_ptr<transport::ucx_group> g,
               uint64_t epoch = 0) {
    std::unique_ptr<transport::ucx_group> old;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (slot) formed.erase(slot.get());
      old = std::move(slot);
      slot = std::move(g);
      if (slot) formed[slot.get()] = epoch;
    }
  }
  void formed_in(const transport::ucx_group* g, uint64_t epoch) {
    std::lock_guard<std::mutex> lk(mu);
    formed[g] = epoch;
  }
  /// Whether one of its groups waits for peers (the shard is a victim, not the one hanging).
  bool waiting() {
    std::lock_guard<std::mutex> lk(mu);
    for (auto* g : {group.get(), from_prev.get(), to_next.get()})
      if (g && g->waiting()) return true;
    return false;
  }
  /// Aborts the groups formed before `epoch` (those formed for it already stay).
  void abort_all(const std::string& why, uint64_t epoch) {
    std::lock_guard<std::mutex> lk(mu);
    for (auto* g : {group.get(), from_prev.get(), to_next.get()})
      if (g && formed[g] < epoch) g->abort(why);
#ifdef TROUPE_HAVE_NCCL
    if (nccl && nccl_epoch < epoch) nccl->abort(why);
#endif
  }

  int rank() const override {
    return rank_;
  }
  int size() const override {
    return size_;
  }
  void arm(uint64_t epoch, uint64_t step) override {
    if (group) group->arm(epoch, step);
    if (nccl_member) nccl_member->arm(epoch, step);
  }
  void abort(std::string reason) override {
    if (nccl_member) nccl_member->abort(reason);
    if (group) group->abort(std::move(reason));
  }
  void reset(uint64_t epoch) override {
    if (group) group->reset(epoch);
    if (nccl_member) nccl_member->reset(epoch); // it stops: form_nccl makes the next one
  }
  bool device_memory() const override {
    return over_nccl_;
  }
  void set_stream(void* stream) override {
    stream_ = stream;
    if (nccl_member) nccl_member->set_stream(stream);
  }
  using collective::all_gather;
  using collective::all_reduce_sum;
  status all_reduce_sum(void* d, int64_t n, dtype t) override {
    auto* g = sums();
    return g ? g->all_reduce_sum(d, n, t) : none();
  }
  status all_gather(const void* in, void* out, std::span<const int64_t> c, dtype t) override {
    auto* g = sums();
    return g ? g->all_gather(in, out, c, t) : none();
  }
  status reduce_scatter(const void* in, void* out, std::span<const int64_t> c, dtype t) override {
    auto* g = sums();
    return g ? g->reduce_scatter(in, out, c, t) : none();
  }
  status all_to_all(const void* in, std::span<const int64_t> sc, void* out,
                    std::span<const int64_t> rc, dtype t) override {
    auto* g = sums();
    return g ? g->all_to_all(in, sc, out, rc, t) : none();
  }
  status broadcast(void* d, int64_t n, dtype t, int root) override {
    auto* g = sums();
    return g ? g->broadcast(d, n, t, root) : none();
  }
  status send(int peer, const void* d, int64_t b) override {
    auto* g = sums();
    return g ? g->send(peer, d, b) : none();
  }
  status recv(int peer, void* d, int64_t b) override {
    auto* g = sums();
    return g ? g->recv(peer, d, b) : none();
  }

 private:
  // The group the executor's collectives go to (the shard's thread, its only writer, reads it).
  collective* sums() const {
    return over_nccl_ ? nccl_member.get() : static_cast<collective*>(group.get());
  }
  status none() const {
    return make_error(errc::unavailable, "the stage's {} group is not formed yet",
                      over_nccl_ ? "NCCL" : "UCX");
  }
  int rank_, size_;
  bool over_nccl_;
  void* stream_ = nullptr;
};

struct shard {
  caf::blocking_actor* self;
  shard_setup setup;
  supervisor_actor notify; // the supervisor
  bool progressed = false; // told the supervisor this instance completed a step
  std::unique_ptr<exec::executor> runner;
  std::unique_ptr<collective> comm;    // in-process TP membership
  std::shared_ptr<ucx_membership> ucx; // in a worker process: its UCX groups (the watchdog's
                                       // probes hold them too)
  // the stage boundaries over UCX live in ucx: from the previous stage's rank 0 (this shard is
  // member 1 + tp_rank), and, on rank 0, to the next stage's ranks (members 1..)
  std::string label;
  std::vector<float> logits;
  routing_table routes; // this actor's copy of the supervisor's routes

  engine_actor engine() const { return caf::actor_cast<engine_actor>(routes.engine_actor()); }

  // An in-process or NCCL group's probes: this rank waiting in it, and an abort for an epoch
  // not reset already.
  template <class Group>
  void group_probes(watchdog::probes& p, std::shared_ptr<Group> g) {
    p.waiting = [g, r = setup.spec.tp_rank] { return g->waiting(r); };
    p.abort = [g](uint64_t epoch, const std::string& why) {
      if (g->epoch() < epoch) g->abort(why);
    };
  }

  // Its groups' probes for the process's watchdog (its node's halt, the hang watch).
  void enlist() {
    if (!setup.watch) return;
    watchdog::probes p;
    if (ucx) {
      p.waiting = [m = ucx] { return m->waiting(); };
      p.abort = [m = ucx](uint64_t epoch, const std::string& why) { m->abort_all(why, epoch); };
    } else if (setup.group) {
      group_probes(p, setup.group);
    } else if (setup.nccl) {
#ifdef TROUPE_HAVE_NCCL
      group_probes(p, setup.nccl); // NCCL enqueues: never waiting; a hung peer is a stuck step
#endif
    }
    setup.watch->enlist(self->id(), std::move(p));
  }
  ~shard() {
    if (setup.watch) setup.watch->leave(self->id());
  }

  void busy(bool on) {
    if (setup.watch) setup.watch->busy(self->id(), on);
  }

  // Sends with the fault plan's delay / drop rules applied.
  void send_step(const caf::actor& next, const std::string& to_name, const step_msg& m) {
    const auto to = caf::actor_cast<hop_actor>(next);
    const auto& f = *setup.faults;
    if (f.drop(label, to_name, m.step_id)) {
      TROUPE_LOG_WARN("fault", "drop step={} {} -> {}", m.step_id, label, to_name);
      return;
    }
    if (int ms = f.delay_ms(label, to_name, m.step_id); ms > 0)
      self->delayed_send(to, std::chrono::milliseconds(ms), step_atom::value, m);
    else
      self->send(to, step_atom::value, m);
  }

  // Injected faults of the whole worker process (kill-worker, partition, slow-link).
  void worker_faults(uint64_t step) {
    const auto& f = *setup.faults;
    const int w = setup.worker_rank;
    if (f.kill_worker(w, step)) {
      TROUPE_LOG_WARN("fault", "kill worker {} at step={}", w, step);
      ::kill(::getpid(), SIGKILL);
    }
    static std::atomic<uint64_t> frozen_at{~uint64_t{0}}; // one freeze per step per process
    if (const int ms = f.partition_ms(w, step); ms > 0 && frozen_at.exchange(step) != step) {
      TROUPE_LOG_WARN("fault", "partition: worker {} stops answering for {} ms at step={}", w, ms,
                      step);
      const pid_t me = ::getpid();
      if (::fork() == 0) { // wakes the frozen process; only async-signal-safe calls here
        timespec t{ms / 1000, (ms % 1000) * 1000000L};
        ::nanosleep(&t, nullptr);
        ::kill(me, SIGCONT);
        ::_exit(0);
      }
      ::kill(me, SIGSTOP);
    }
    if (const int ms = f.slow_link_ms(w); ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(ms)); // all it sends is late
  }

  // Returns an error to end the actor with (an injected kill), or none.
  caf::error step(const step_msg& m) {
    TROUPE_LOG_DEBUG("shard", "{} step={} epoch={}/{} tokens={}", label, m.step_id, m.epoch,
                     routes.epoch(), m.plan->n_tokens());
    if (m.epoch < routes.epoch()) return caf::none; // from before a failure: nobody waits for it
    routes.raise_epoch(m.epoch); // the step may come before the supervisor's update
    const int stage = setup.stage, rank = setup.spec.tp_rank;
    if (setup.worker_rank >= 0) worker_faults(m.step_id);
    if (setup.faults->kill(stage, rank, m.step_id)) {
      TROUPE_LOG_WARN("fault", "kill {} at step={}", label, m.step_id);
      return caf::make_error(caf::sec::runtime_error,
                             "injected kill at step " + std::to_string(m.step_id));
    }
    busy(true);
    if (comm) comm->arm(m.epoch, m.step_id);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> x = m.x ? *m.x : std::vector<float>{};
    if (m.x_ucx_bytes > 0) { // the previous stage sends them over UCX, not in the message
      status got = ucx && ucx->from_prev
                       ? status{}
                       : make_error(errc::unavailable, "no group from the previous stage");
      if (got && (m.x_ucx_bytes % 4 != 0 || m.x_ucx_bytes > (int64_t{1} << 34)))
        got = make_error(errc::protocol_error, "activations of {} bytes", m.x_ucx_bytes);
      if (got) {
        x.resize(static_cast<size_t>(m.x_ucx_bytes / 4));
        ucx->from_prev->arm(m.epoch, m.step_id);
        got = ucx->from_prev->recv(0, x.data(), m.x_ucx_bytes);
      }
      if (!got) {
        busy(false);
        self->send(engine(), failed_atom::value,
                   step_failed{m.step_id, m.epoch, setup.stage, setup.spec.tp_rank,
                               got.error().to_string(), true});
        return caf::none;
      }
    }
    if (int ms = setup.faults->stall_ms(stage, rank, m.step_id); ms > 0) {
      TROUPE_LOG_WARN("fault", "stall {} for {} ms at step={}", label, ms, m.step_id);
      std::this_thread::sleep_for(
          std::chrono::milliseconds(ms)); // a hung device: nothing to interrupt
    }
    if (setup.faults->throw_in_kernel(stage, rank, m.step_id))
      throw std::runtime_error("injected kernel failure at step " + std::to_string(m.step_id));
    auto r = runner->forward(*m.plan, x, setup.last ? &logits : nullptr);
    busy(false);
    if (r && !progressed) { // once per instance: this shard works (resets its restart count)
      progressed = true;
      self->send(notify, progress_atom::value, static_cast<int32_t>(stage),
                 static_cast<int32_t>(rank));
    }
    if (!r) {
      if (m.epoch == routes.epoch())
        TROUPE_LOG_WARN("shard", "{} step={} failed: {}", label, m.step_id, r.error().to_string());
      self->send(engine(), failed_atom::value,
                 step_failed{m.step_id, m.epoch, stage, rank, r.error().to_string(),
                             r.error().code == errc::unavailable});
      return caf::none;
    }
    if (rank != 0) return caf::none;
    if (!setup.last && ucx && ucx->to_next) { // worker processes: control over CAF, data over UCX
      auto& to_next = ucx->to_next;
      const hop_info& info = routes.info(setup.hop + 1);
      const auto bytes = static_cast<int64_t>(x.size() * sizeof(float));
      for (size_t i = 0; i < info.actors.size(); ++i)
        send_step(info.actors[i], shard_name(info.stage, static_cast<int>(i)),
                  step_msg{m.step_id, m.epoch, m.plan, nullptr, bytes});
      to_next->arm(m.epoch, m.step_id);
      auto out = std::make_shared<const std::vector<float>>(std::move(x)); // UCX's until sent
      for (int k = 1; k < to_next->size(); ++k)
        if (auto st = to_next->send_async(k, out, out->data(), bytes); !st) {
          TROUPE_LOG_WARN("shard", "{} step={}: activations to {} lost: {}", label, m.step_id,
                          shard_name(info.stage, k - 1), st.error().to_string());
          self->send(engine(), failed_atom::value,
                     step_failed{m.step_id, m.epoch, setup.stage, setup.spec.tp_rank,
                                 st.error().to_string(), true});
          break;
        }
      return caf::none;
    }
    if (!setup.last) {
      auto out = std::make_shared<const std::vector<float>>(std::move(x));
      const hop_info& info = routes.info(setup.hop + 1);
      for (size_t i = 0; i < info.actors.size(); ++i)
        send_step(info.actors[i],
                  info.stage >= 0 ? shard_name(info.stage, static_cast<int>(i)) : info.name,
                  step_msg{m.step_id, m.epoch, m.plan, out, 0});
      return caf::none;
    }
    step_done done;
    done.step_id = m.step_id;
    done.epoch = m.epoch;
    const int64_t V = runner->config().V;
    int64_t row = 0;
    const auto& toks = m.plan->tokens;
    for (const auto& seq : m.plan->seqs) {
      // prompt scoring: row i predicts the token after the chunk's i-th
      for (int32_t i = 0; i < seq.score_rows; ++i, ++row) {
        const int32_t target = i + 1 < seq.count ? toks[seq.begin + i + 1] : seq.score_next;
        if (target < 0) continue;
        const sample_result sr =
            score(std::span<const float>(logits.data() + row * V, V), target, seq.score_top);
        done.scores.push_back({seq.seq_id, {seq.pos0 + i + 1, sr.logprob, sr.top}});
      }
      if (!seq.logits) continue;
      std::span<const float> lg(logits.data() + row * V, V);
      const sample_result sr =
          sample(lg, seq.sampling, seq.penalty_history, seq.sample_step, seq.suppress, seq.allow);
      done.tokens.push_back({seq.seq_id, sr.token, sr.logprob, sr.top});
      ++row;
    }
    done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    self->send(engine(), done_atom::value, std::move(done));
    return caf::none;
  }
};

void shard_main(caf::blocking_actor* self, shard_setup setup, caf::actor notify) {
  shard s{self,
          std::move(setup),
          caf::actor_cast<supervisor_actor>(notify),
          false,
          nullptr,
          nullptr,
          nullptr,
          {},
          {},
          {}};
  s.routes = s.setup.routes;
  s.label = shard_name(s.setup.stage, s.setup.spec.tp_rank);
  if (s.setup.group) s.comm = s.setup.group->join(s.setup.spec.tp_rank);
#ifdef TROUPE_HAVE_NCCL
  if (s.setup.nccl) s.comm = s.setup.nccl->join(s.setup.spec.tp_rank);
#endif
  if (s.setup.ucx) {
    auto ctx = process_ucx();
    auto w = ctx ? transport::ucx_worker::create(*ctx)
                 : expected<std::unique_ptr<transport::ucx_worker>>(ctx.error());
    if (!w) {
      TROUPE_LOG_ERROR("shard", "{}: no UCX worker: {}", s.label, w.error().to_string());
      self->fail_state(caf::make_error(caf::sec::runtime_error, w.error().to_string()));
      return;
    }
    s.ucx = std::make_shared<ucx_membership>(s.setup.spec.tp_rank, s.setup.spec.tp_size,
                                             s.setup.nccl_across);
    s.ucx->worker = std::move(*w);
  }
  s.enlist();
  auto runner = exec::executor::create(s.setup.model, s.setup.spec, s.setup.opt,
                                       s.setup.spec.tp_size <= 1 ? nullptr
                                       : s.ucx ? static_cast<collective*>(s.ucx.get())
                                               : s.comm.get());
  if (!runner) {
    TROUPE_LOG_ERROR("shard", "{}: cannot load: {}", s.label, runner.error().to_string());
    // with its code: the supervisor tells a refusal no restart can change (a shape, a dtype,
    // a missing tensor) from a failure worth another attempt
    self->fail_state(to_caf(runner.error()));
    return;
  }
  s.runner = std::move(*runner);
  if (s.ucx)
    self->send(s.notify, group_atom::value, s.setup.stage, s.setup.spec.tp_rank,
               s.ucx->worker->address());
  const auto mem = s.runner->device_memory();
  self->send(s.notify, device_atom::value, s.setup.stage, s.setup.spec.tp_rank,
             s.runner->device_name(), mem.total, mem.free);
  self->send(s.notify, ready_atom::value, s.setup.stage, s.setup.spec.tp_rank,
             s.runner->resident_bytes(), s.runner->kv_bytes());
  bool running = true;
  // checked against shard_actor when built: a handler the interface lacks fails to compile
  shard_actor::behavior_type typed{
      [&](step_atom, const step_msg& m) {
        caf::error end;
        try {
          end = s.step(m);
        } catch (const std::exception& e) { // a crash inside the step: the actor dies with it
          TROUPE_LOG_ERROR("shard", "{} step={} threw: {}", s.label, m.step_id, e.what());
          end = caf::make_error(caf::sec::runtime_error, e.what());
        }
        if (end) {
          self->fail_state(std::move(end));
          running = false;
        }
      },
      [&](route_atom, const route_update& u) { // the supervisor's routes changed
        if (self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(s.notify))
          s.routes.apply(u);
      },
      [&](group_atom, uint64_t epoch, uint8_t id, int32_t member,
          const std::vector<std::vector<uint8_t>>& addrs) {
        // decode graphs recorded with an NCCL communicator that is about to be replaced
        if (s.setup.nccl || s.setup.nccl_across) s.runner->drop_graphs();
        if (!s.ucx) { // in one process: start the stage's group over in the new epoch
          if (s.comm) s.comm->reset(epoch);
          self->send(s.notify, grouped_atom::value, s.setup.stage, s.setup.spec.tp_rank, true,
                     std::string(), epoch);
          return;
        }
        // (re)form one of its groups: the old one's endpoints go, the worker stays
        auto& slot = id == tp_group_id(s.setup.stage) ? s.ucx->group
                     : member == 0                    ? s.ucx->to_next
                                                      : s.ucx->from_prev;
        status st;
        auto& known = s.ucx->addresses[id];
        if (slot && known == addrs && !slot->lost_peer()) {
          // the same members (a resync, or a replacement elsewhere): start the group over in
          // the new epoch; leftovers of the old one are dropped by their epoch
          s.ucx->formed_in(slot.get(), epoch); // before the reset: a halt for it must spare it
          slot->reset(epoch);
          st = slot->barrier(formation_timeout);
        } else {
          s.ucx->swap_in(slot, nullptr); // its endpoints go; the worker stays
          transport::ucx_group_options go;
          go.id = id;
          go.timeout =
              std::chrono::milliseconds(static_cast<int64_t>(s.setup.group_timeout_s * 1000));
          auto g = transport::ucx_group::connect(s.ucx->worker, member, addrs, go);
          st = g ? status{} : status{g.error()};
          if (g) {
            (*g)->reset(epoch);
            st = (*g)->barrier(formation_timeout);
            if (st) {
              s.ucx->swap_in(slot, std::move(*g), epoch);
              known = addrs;
            }
          }
        }
        if (st && s.setup.nccl_across && id == tp_group_id(s.setup.stage))
          st = s.ucx->form_nccl(
              epoch, s.setup.opt.device,
              std::chrono::milliseconds(static_cast<int64_t>(s.setup.group_timeout_s * 1000)),
              s.label);
        if (!st)
          TROUPE_LOG_WARN("shard", "{}: cannot form group {}: {}", s.label, id,
                          st.error().to_string());
        self->send(s.notify, grouped_atom::value, s.setup.stage, s.setup.spec.tp_rank,
                   static_cast<bool>(st), st ? std::string() : st.error().to_string(), epoch);
      }};
  caf::behavior bhvr{
      caf::message_handler{typed.unbox().as_behavior_impl()}.or_else([&](caf::exit_msg& em) {
        self->fail_state(std::move(em.reason));
        running = false;
      })};
  while (running) {
    // a short poll before blocking: the next decode step is usually microseconds away
    const auto until = std::chrono::steady_clock::now() + poll_window;
    for (int i = 0; self->mailbox().empty(); ++i) {
      TROUPE_PAUSE();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
    }
    // activations still on their way to the next stage move only while this thread drives its
    // UCX worker: then wait for messages in short slices instead of blocking
    auto sending = [&] { return s.ucx && s.ucx->to_next && s.ucx->to_next->sending(); };
    while (sending() && self->mailbox().empty()) {
      s.ucx->to_next->progress();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    self->receive(bhvr);
  }
}

} // namespace

shard_actor spawn_shard(caf::actor_system& sys, shard_setup setup, const caf::actor& notify) {
  return caf::actor_cast<shard_actor>(sys.spawn(shard_main, std::move(setup), notify));
}

} // namespace troupe::actors
