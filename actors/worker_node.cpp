// worker_node.cpp: the worker process's join and node actor (worker_node.hpp).
#include "actors/worker_node.hpp"

#include <caf/io/all.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "actors/shard.hpp"
#include "actors/supervisor_interface.hpp"
#include "actors/worker_pool.hpp"
#include "core/log.hpp"
#include "exec/expert_load.hpp"
#include "transport/auth.hpp"

namespace troupe::actors {

status check_order(const shard_order& o, const model_config& c) {
  auto bad = [&](std::string_view what) {
    return make_error(errc::invalid_argument, "shard order for stage {} rank {}: {}", o.stage,
                      o.spec.tp_rank, what);
  };
  const shard_spec& spec = o.spec;
  const auto kv = static_cast<dtype>(o.kv_dtype);
  if (o.kv_dtype >= dtype_count || (kv != dtype::f32 && kv != dtype::f16 && kv != dtype::bf16))
    return bad(fmt::format("KV element type {}", o.kv_dtype));
  const auto q = static_cast<dtype>(o.quantize);
  if (o.quantize >= dtype_count || (q != dtype::f32 && q != dtype::q8_0 && q != dtype::q4_0))
    return bad(fmt::format("weights quantized to type {}", o.quantize));
  if (o.where > static_cast<uint8_t>(kernels::backend::cuda)) return bad("unknown backend");
  if (o.device < 0 || o.device > 1024) return bad(fmt::format("device index {}", o.device));
  if (o.nccl && (o.where != static_cast<uint8_t>(kernels::backend::cuda) || o.spec.tp_size < 2))
    return bad("NCCL sums for a shard that is not one of a stage's GPUs");
  if (o.cpus.size() > 4096) return bad(fmt::format("{} CPUs to pin", o.cpus.size()));
  for (int32_t cpu : o.cpus)
    if (cpu < 0 || cpu > 65535) return bad(fmt::format("CPU {}", cpu));
  if (spec.tp_size < 1 || spec.tp_size > 4096 || spec.tp_rank < 0 || spec.tp_rank >= spec.tp_size)
    return bad(fmt::format("TP rank {} of {}", spec.tp_rank, spec.tp_size));
  if (o.stage < 0 || o.hop < 0 || o.hop > 65536) return bad("stage or hop out of range");
  if (spec.layer_begin < 0 || spec.layer_end <= spec.layer_begin || spec.layer_end > c.n_layer)
    return bad(fmt::format("layers {}..{} of {}", spec.layer_begin, spec.layer_end, c.n_layer));
  if (o.threads < 1 || o.threads > 1024) return bad(fmt::format("{} threads", o.threads));
  if (o.block_size < 1 || o.block_size > 4096)
    return bad(fmt::format("block size {}", o.block_size));
  if (o.kv_blocks < 2 || o.kv_blocks > (int64_t{1} << 31))
    return bad(fmt::format("{} KV blocks", o.kv_blocks));
  if (o.state_slots < 0 || o.state_slots > (int64_t{1} << 20))
    return bad(fmt::format("{} recurrent state slots", o.state_slots));
  if (!(o.group_timeout_s > 0 && o.group_timeout_s < 1e6) ||
      !(o.hang_timeout_s > 0 && o.hang_timeout_s < 1e6))
    return bad("timeouts out of range");
  if (auto d = plan_shard(c, spec); !d) return bad(d.error().message);
  return {};
}

namespace {

struct placed_shard {
  shard_actor handle;
  double hang_timeout_s = 60;
  supervisor_actor supervisor;
  bool reported = false;
};

struct node_state {
  worker_options opt;
  pool_actor registry;
  std::shared_ptr<watchdog> watch = std::make_shared<watchdog>(); // its shards' step stamps
  std::map<std::string, std::shared_ptr<const model_source>> models;
  std::vector<placed_shard> shards;
  std::shared_ptr<std::atomic<int>> exit_code;
  static inline const char* name = "troupe.worker";
};

// The interface and what the node sends itself (its hang watch).
using node_impl = node_actor::extend<caf::reacts_to<tick_atom>>;
using node_ptr = node_impl::stateful_pointer<node_state>;

expected<std::shared_ptr<const model_source>> model_at(node_ptr self, const std::string& path) {
  auto& m = self->state.models[path];
  if (!m) {
    auto opened = open_model(path);
    if (!opened) {
      self->state.models.erase(path);
      return opened.error();
    }
    m = *opened;
  }
  return m;
}

// Orders come only from the coordinator's node (the registry's), never from another peer.
bool from_coordinator(node_ptr self) {
  const auto& from = self->current_sender();
  return from && self->state.registry && from->node() == self->state.registry.node();
}

// Checked against node_impl when built: a handler the interface lacks fails to compile.
node_impl::behavior_type node(node_ptr self, worker_options opt, pool_actor registry,
                              std::shared_ptr<std::atomic<int>> exit_code) {
  self->state.opt = opt;
  self->state.exit_code = exit_code;
  self->state.registry = registry;
  self->monitor(registry);
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& list = self->state.shards;
    list.erase(
        std::remove_if(list.begin(), list.end(),
                       [&](const placed_shard& p) { return p.handle.address() == dm.source; }),
        list.end());
    if (dm.source != self->state.registry.address()) return;
    TROUPE_LOG_INFO("worker", "rank {}: the coordinator is gone; exiting", self->state.opt.rank);
    for (auto& s : self->state.shards) self->send_exit(s.handle, caf::exit_reason::user_shutdown);
    self->quit();
  });
  self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
  // join: challenge, proof
  self->request(registry, std::chrono::seconds(30), hello_atom::value)
      .then(
          [=](const std::vector<uint8_t>& challenge) {
            const auto& o = self->state.opt;
            const auto proof = transport::hmac_sha256(
                o.secret, worker_proof_bytes(challenge, o.rank, worker_protocol_version));
            std::vector<uint8_t> p(proof.begin(), proof.end());
            self->request(self->state.registry, std::chrono::seconds(30), join_atom::value,
                          static_cast<int32_t>(o.rank), worker_protocol_version, p,
                          caf::actor_cast<caf::actor>(self))
                .then([=](bool) { TROUPE_LOG_INFO("worker", "rank {} joined", o.rank); },
                      [=](const caf::error& e) {
                        TROUPE_LOG_ERROR("worker", "rank {}: refused: {}", o.rank,
                                         self->system().render(e));
                        self->state.exit_code->store(2);
                        self->quit();
                      });
          },
          [=](const caf::error& e) {
            TROUPE_LOG_ERROR("worker", "no challenge from the coordinator: {}",
                             self->system().render(e));
            self->state.exit_code->store(1);
            self->quit();
          });
  return {
      [=](spawn_atom, const shard_order& o) -> caf::result<caf::actor> {
        if (!from_coordinator(self))
          return to_caf(error{errc::unavailable, "refused: not from the coordinator"});
        auto m = model_at(self, o.model_path);
        if (!m) return to_caf(m.error());
        if (auto st = check_order(o, (*m)->config); !st) {
          TROUPE_LOG_ERROR("worker", "rank {}: refused an order: {}", self->state.opt.rank,
                           st.error().message);
          return to_caf(st.error());
        }
        shard_setup sh;
        sh.model = *m;
        sh.spec = o.spec;
        sh.opt.threads = o.threads;
        sh.opt.kv_blocks = o.kv_blocks;
        sh.opt.state_slots = o.state_slots;
        sh.opt.block_size = o.block_size;
        sh.opt.kv_dtype = static_cast<dtype>(o.kv_dtype);
        sh.opt.quantize = static_cast<dtype>(o.quantize);
        sh.opt.where = static_cast<kernels::backend>(o.where);
        sh.opt.device = o.device;
        sh.opt.cpus.assign(o.cpus.begin(), o.cpus.end());
        sh.stage = o.stage;
        sh.hop = static_cast<size_t>(o.hop);
        sh.last = o.last;
        sh.watch = self->state.watch; // routes: the supervisor sends them to the shard
        sh.ucx = true;                // its TP group and stage boundaries go over UCX
        sh.nccl_across = o.nccl;      // and its sums over NCCL
        sh.group_timeout_s = o.group_timeout_s;
        sh.worker_rank = self->state.opt.rank;
        auto faults = std::make_shared<fault_plan>();
        for (const auto& f : o.faults)
          if (auto st = faults->add(f); !st) return to_caf(st.error());
        sh.faults = faults;
        auto s = spawn_shard(self->system(), std::move(sh), o.supervisor);
        self->monitor(s); // forgotten when it ends (down handler)
        self->state.shards.push_back(
            {s, o.hang_timeout_s, caf::actor_cast<supervisor_actor>(o.supervisor), false});
        TROUPE_LOG_INFO("worker", "rank {}: started {}", self->state.opt.rank,
                        shard_name(o.stage, o.spec.tp_rank));
        return caf::actor_cast<caf::actor>(s);
      },
      [=](ping_atom) -> bool { return true; },                 // the pool's heartbeat
      [=](experts_atom) -> caf::result<std::vector<int64_t>> { // for the coordinator's /metrics
        if (!from_coordinator(self))
          return to_caf(error{errc::unavailable, "refused: not from the coordinator"});
        return exec::flatten(exec::expert_counts());
      },
      [=](halt_atom, uint64_t epoch, const std::string& why) { // a shard was lost: free waiters
        if (from_coordinator(self)) self->state.watch->abort_all(epoch, why);
      },
      [=](tick_atom) { // a shard stuck in one step longer than its hang timeout is reported
        for (auto& p : self->state.shards) {
          const double busy = self->state.watch->stuck(p.handle.id(), p.hang_timeout_s);
          if (!p.reported && busy > 0) {
            p.reported = true;
            self->send(p.supervisor, hung_atom::value, caf::actor_cast<caf::actor>(p.handle), busy);
          }
        }
        self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
      },
  };
}

} // namespace

int run_worker(const worker_options& o) {
  caf::actor_system_config cfg;
  register_messages(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", o.caf_threads);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(o.join_timeout_s);
  pool_actor registry;
  for (;;) {
    // typed: a coordinator whose pool speaks another interface is refused here
    auto r = sys.middleman().remote_actor<pool_actor>(o.coordinator, o.port);
    if (r) {
      registry = *r;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      TROUPE_LOG_ERROR("worker", "rank {}: no coordinator at {}:{}: {}", o.rank, o.coordinator,
                       o.port, sys.render(r.error()));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto code = std::make_shared<std::atomic<int>>(0);
  auto n = sys.spawn(node, o, registry, code);
  {
    caf::scoped_actor self{sys};
    self->wait_for(n);
  }
  return code->load();
}

} // namespace troupe::actors
