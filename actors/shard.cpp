// shard.cpp: the shard actor (shard.hpp).
#include "actors/shard.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "actors/messages.hpp"
#include "runtime/log.hpp"

namespace troupe::actors {

std::string shard_name(int stage, int rank) {
  return fmt::format("stage{}.rank{}", stage, rank);
}

namespace {

struct shard_state {
  shard_setup setup;
  std::unique_ptr<model::shard_runner> runner;
  std::unique_ptr<transport::inproc_group::handle> comm; // this instance's membership
  std::string label;
  std::vector<float> logits;
  static inline const char* name = "troupe.shard";
};

// Sends with the fault plan's delay / drop rules applied.
void send_step(caf::stateful_actor<shard_state>* self, const caf::actor& to,
               const std::string& to_name, const step_msg& m) {
  const auto& f = *self->state.setup.faults;
  if (f.drop(self->state.label, to_name, m.step_id)) {
    TROUPE_LOG_WARN("fault", "drop step={} {} -> {}", m.step_id, self->state.label, to_name);
    return;
  }
  if (int ms = f.delay_ms(self->state.label, to_name, m.step_id); ms > 0)
    self->delayed_send(to, std::chrono::milliseconds(ms), step_atom::value, m);
  else
    self->send(to, step_atom::value, m);
}

caf::behavior shard_behavior(caf::stateful_actor<shard_state>* self, shard_setup setup,
                             caf::actor notify) {
  auto& st = self->state;
  st.setup = std::move(setup);
  st.label = shard_name(st.setup.stage, st.setup.spec.tp_rank);
  if (st.setup.group) st.comm = st.setup.group->join(st.setup.spec.tp_rank);
  auto runner =
      model::shard_runner::create(st.setup.model, st.setup.spec, st.setup.opt, st.comm.get());
  if (!runner) {
    TROUPE_LOG_ERROR("shard", "{}: cannot load: {}", st.label, runner.error().to_string());
    self->quit(caf::make_error(caf::sec::runtime_error, runner.error().to_string()));
    return {};
  }
  st.runner = std::move(*runner);
  self->send(notify, ready_atom::value, st.setup.stage, st.setup.spec.tp_rank,
             st.runner->weights().resident_bytes, st.runner->kv_bytes());
  return {
      [=](step_atom, const step_msg& m) {
        auto& s = self->state;
        auto& routes = *s.setup.routes;
        TROUPE_LOG_DEBUG("shard", "{} step={} epoch={}/{} tokens={}", s.label, m.step_id, m.epoch,
                         routes.epoch(), m.plan->n_tokens());
        if (m.epoch != routes.epoch()) return; // a step from before a failure: nobody waits for it
        const int stage = s.setup.stage, rank = s.setup.spec.tp_rank;
        if (s.setup.faults->kill(stage, rank, m.step_id)) {
          TROUPE_LOG_WARN("fault", "kill {} at step={}", s.label, m.step_id);
          self->quit(caf::make_error(caf::sec::runtime_error,
                                     "injected kill at step " + std::to_string(m.step_id)));
          return;
        }
        routes.mark_busy(s.setup.hop, rank, true);
        if (s.comm) s.comm->arm(m.epoch, m.step_id);
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<float> x = m.x ? *m.x : std::vector<float>{};
        if (int ms = s.setup.faults->stall_ms(stage, rank, m.step_id); ms > 0) {
          TROUPE_LOG_WARN("fault", "stall {} for {} ms at step={}", s.label, ms, m.step_id);
          std::this_thread::sleep_for(
              std::chrono::milliseconds(ms)); // a hung device: nothing to interrupt
        }
        if (s.setup.faults->throw_in_kernel(stage, rank, m.step_id))
          throw std::runtime_error("injected kernel failure at step " + std::to_string(m.step_id));
        auto r = s.runner->forward(*m.plan, x, s.setup.last ? &s.logits : nullptr);
        routes.mark_busy(s.setup.hop, rank, false);
        if (!r) {
          if (m.epoch == routes.epoch())
            TROUPE_LOG_WARN("shard", "{} step={} failed: {}", s.label, m.step_id,
                            r.error().to_string());
          self->send(routes.engine, failed_atom::value,
                     step_failed{m.step_id, m.epoch, stage, rank, r.error().to_string(),
                                 r.error().code == errc::unavailable});
          return;
        }
        if (rank != 0) return;
        if (!s.setup.last) {
          auto out = std::make_shared<const std::vector<float>>(std::move(x));
          const size_t next = s.setup.hop + 1;
          const hop_info info = routes.info(next);
          for (size_t i = 0; i < info.actors.size(); ++i)
            send_step(self, info.actors[i],
                      info.stage >= 0 ? shard_name(info.stage, static_cast<int>(i)) : info.name,
                      step_msg{m.step_id, m.epoch, m.plan, out});
          return;
        }
        step_done done;
        done.step_id = m.step_id;
        done.epoch = m.epoch;
        const int64_t V = s.runner->config().V;
        int64_t row = 0;
        for (const auto& seq : m.plan->seqs) {
          if (!seq.logits) continue;
          std::span<const float> lg(s.logits.data() + row * V, V);
          const sample_result sr = sample(lg, seq.sampling, seq.penalty_history, seq.sample_step);
          done.tokens.push_back({seq.seq_id, sr.token, sr.logprob, sr.top});
          ++row;
        }
        done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        self->send(routes.engine, done_atom::value, std::move(done));
      },
  };
}

} // namespace

caf::actor spawn_shard(caf::actor_system& sys, shard_setup setup, const caf::actor& notify) {
  return sys.spawn<caf::detached>(shard_behavior, std::move(setup), notify);
}

} // namespace troupe::actors
