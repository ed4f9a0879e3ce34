// order_test.cpp (label actor): the supervisor's order-sensitive protocol, run under CAF's
// deterministic test coordinator: every message is delivered when the test says so and
// timers fire only when the test advances the clock, so each interleaving below happens
// exactly as written, every run. The supervisor is the real one (pool mode: shards in worker
// processes); the engine, the worker pool, the nodes and the shards around it are small
// stand-ins that record what the supervisor tells them and answer as the test asks.
// What must hold: UCX groups are formed in rounds, one at a time, each in an epoch of its
// own; the engine hears "up" only once every group of the round is formed; an answer from an
// older round, or one that arrives twice, does not count; a shard lost mid-round frees the
// other workers (halt) with the new epoch and a new round follows its replacement; a resync
// is answered only after the groups are formed again, with that round's epoch. The worker
// pool's join: a worker answers a challenge issued to it, once, with the secret and the
// protocol version; any other order is refused with the reason.
#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <map>

#include "actors/supervisor.hpp"
#include "actors/worker_node.hpp"
#include "actors/worker_pool.hpp"
#include "transport/auth.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

using answer_atom = caf::atom_constant<caf::atom("answer")>; // the test tells a stand-in shard

struct group_order {
  caf::actor shard;
  int stage = 0, rank = 0;
  uint64_t epoch = 0;
  uint8_t id = 0;
  int32_t member = 0;
  size_t members = 0;
};

// What the stand-ins heard, in order (the test coordinator runs every actor on this thread).
struct journal {
  std::vector<uint64_t> ups, engine_routes;
  std::vector<std::pair<int, int>> downs;
  std::vector<uint64_t> halts;
  std::vector<group_order> groups;
  std::vector<caf::actor> shards; // every stand-in shard spawned, in order
  std::vector<int32_t> down_how;  // how each shard went down (shard_down)
  bool refuse = false;            // the pool answers every spawn with a refusal of the order
  int spawn_requests = 0;
};

engine_actor::behavior_type fake_engine(engine_actor::pointer, journal* j) {
  return {
      [](generate_atom, const gen_request&, const caf::actor&) -> int64_t { return 0; },
      [](cancel_atom, int64_t) {},
      [](finish_atom, int64_t, int32_t) {},
      [](stats_atom) { return engine_stats{}; },
      [](done_atom, const step_done&) {},
      [](failed_atom, const step_failed&) {},
      [=](down_atom, int32_t stage, int32_t rank, const std::string&, int32_t how) {
        j->downs.emplace_back(stage, rank);
        j->down_how.push_back(how);
      },
      [=](up_atom, uint64_t epoch, int64_t) { j->ups.push_back(epoch); },
      [=](route_atom, const route_update& u) { j->engine_routes.push_back(u.epoch); },
      [](attach_atom, const caf::actor&) {},
  };
}

node_actor::behavior_type fake_node(node_actor::pointer, journal* j) {
  return {
      [](spawn_atom, const shard_order&) -> caf::result<caf::actor> {
        return caf::make_error(caf::sec::runtime_error, "not here");
      },
      [](ping_atom) { return true; },
      [=](halt_atom, uint64_t epoch, const std::string&) { j->halts.push_back(epoch); },
      [](experts_atom) { return std::vector<int64_t>{}; },
  };
}

// A shard as a worker would start it: says where its UCX worker is and that it is loaded,
// records the groups it is asked to form, and answers when the test says.
caf::behavior fake_shard(caf::event_based_actor* self, shard_order o, journal* j) {
  const auto sup = caf::actor_cast<supervisor_actor>(o.supervisor);
  const int stage = o.stage, rank = o.spec.tp_rank;
  self->send(sup, group_atom::value, stage, rank,
             std::vector<uint8_t>{7, static_cast<uint8_t>(stage), static_cast<uint8_t>(rank)});
  self->send(sup, ready_atom::value, stage, rank, int64_t{100}, int64_t{10});
  return {
      [](step_atom, const step_msg&) {},
      [](route_atom, const route_update&) {},
      [=](group_atom, uint64_t epoch, uint8_t id, int32_t member,
          const std::vector<std::vector<uint8_t>>& addrs) {
        j->groups.push_back(
            {caf::actor_cast<caf::actor>(self), stage, rank, epoch, id, member, addrs.size()});
      },
      [=](answer_atom, bool ok, uint64_t epoch) {
        self->send(sup, grouped_atom::value, stage, rank, ok, std::string(ok ? "" : "no"), epoch);
      },
  };
}

pool_actor::behavior_type fake_pool(pool_actor::pointer self, journal* j) {
  return {
      [](attach_atom, const caf::actor&) {},
      [](hello_atom) { return std::vector<uint8_t>{}; },
      [](join_atom, int32_t, uint32_t, const std::vector<uint8_t>&, const caf::actor&) {
        return false;
      },
      [=](spawn_atom, int32_t, const shard_order& o) -> caf::result<caf::actor> {
        ++j->spawn_requests;
        if (j->refuse) // as a worker refuses an order it cannot carry out (check_order)
          return to_caf(error{errc::invalid_argument, "shard order: weights quantized to type 99"});
        auto s = self->spawn(fake_shard, o, j);
        j->shards.push_back(s);
        return s;
      },
      [](experts_atom) { return std::vector<int64_t>{}; },
      [](stop_atom) {},
  };
}

struct SupervisorOrder : ::testing::Test {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  journal j;
  supervisor_actor sup;
  std::vector<node_actor> nodes;

  void SetUp() override {
    register_messages(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    // TP 2 x PP 2: stage 0 on worker 0, stage 1 on worker 1
    supervisor_setup ss;
    auto faults = std::make_shared<const fault_plan>();
    std::vector<hop_info> hops;
    for (int stage = 0; stage < 2; ++stage) {
      hops.push_back({std::vector<caf::actor>(2), stage, shard_name(stage, 0)});
      for (int rank = 0; rank < 2; ++rank) {
        shard_setup sh;
        sh.stage = stage;
        sh.hop = static_cast<size_t>(stage);
        sh.last = stage == 1;
        sh.spec.tp_rank = rank;
        sh.spec.tp_size = 2;
        sh.faults = faults;
        ss.shards.push_back(sh);
        ss.worker_of.push_back(stage);
      }
    }
    ss.routes.set_hops(hops);
    ss.engine = sys->spawn(fake_engine, &j);
    ss.routes.set_engine(caf::actor_cast<caf::actor>(ss.engine));
    ss.pool = sys->spawn(fake_pool, &j);
    ss.model_path = "model";
    sup = spawn_supervisor(*sys, std::move(ss));
    for (int w = 0; w < 2; ++w) nodes.push_back(sys->spawn(fake_node, &j));
    sched->run();
  }
  void TearDown() override {
    caf::anon_send(sup, stop_atom::value);
    sched->run();
  }

  void join_workers() {
    for (int w = 0; w < 2; ++w)
      caf::anon_send(sup, worker_atom::value, w, caf::actor_cast<caf::actor>(nodes[w]), true);
    sched->run();
  }
  // The group orders of the round in `epoch`.
  std::vector<group_order> round(uint64_t epoch) const {
    std::vector<group_order> out;
    for (const auto& g : j.groups)
      if (g.epoch == epoch) out.push_back(g);
    return out;
  }
  uint64_t last_round() const { return j.groups.empty() ? 0 : j.groups.back().epoch; }
  void answer(const group_order& g, bool ok, uint64_t epoch) {
    caf::anon_send(g.shard, answer_atom::value, ok, epoch);
    sched->run();
  }
};

TEST_F(SupervisorOrder, GroupsFormInOneRoundBeforeTheEngineHearsUp) {
  EXPECT_TRUE(j.shards.empty()); // no worker has joined: nothing can be placed yet
  join_workers();
  ASSERT_EQ(j.shards.size(), 4u);
  const uint64_t e1 = last_round();
  const auto orders = round(e1);
  // each stage's TP group (2 members each) and the boundary: stage 0's rank 0, then stage 1
  ASSERT_EQ(orders.size(), 7u);
  std::map<uint8_t, std::vector<std::pair<int, int>>> by_id; // id -> (stage, rank) by member
  for (const auto& g : orders) {
    auto& m = by_id[g.id];
    if (m.size() <= static_cast<size_t>(g.member)) m.resize(g.member + 1, {-1, -1});
    m[g.member] = {g.stage, g.rank};
  }
  using sr = std::vector<std::pair<int, int>>;
  EXPECT_EQ(by_id[tp_group_id(0)], (sr{{0, 0}, {0, 1}}));
  EXPECT_EQ(by_id[tp_group_id(1)], (sr{{1, 0}, {1, 1}}));
  EXPECT_EQ(by_id[boundary_group_id(0)], (sr{{0, 0}, {1, 0}, {1, 1}}));
  ASSERT_FALSE(j.engine_routes.empty());
  EXPECT_EQ(j.engine_routes.back(), e1); // the routes of the round's epoch, before any up
  EXPECT_TRUE(j.ups.empty());
  for (size_t k = 0; k + 1 < orders.size(); ++k) answer(orders[k], true, e1);
  EXPECT_TRUE(j.ups.empty());  // one group member has not answered
  answer(orders[0], true, e1); // an answer twice does not stand in for the missing one
  EXPECT_TRUE(j.ups.empty());
  answer(orders.back(), true, e1 - 1); // from an older round: does not count either
  EXPECT_TRUE(j.ups.empty());
  answer(orders.back(), true, e1);
  EXPECT_EQ(j.ups, (std::vector<uint64_t>{e1}));
}

TEST_F(SupervisorOrder, AShardLostMidRoundHaltsTheWorkersAndANewRoundFollows) {
  join_workers();
  const uint64_t e1 = last_round();
  const auto first = round(e1);
  answer(first[0], true, e1);
  // stage 1 rank 1 dies before the round completes
  caf::actor victim = j.shards[3];
  caf::anon_send_exit(victim, caf::exit_reason::kill);
  sched->run();
  ASSERT_EQ(j.downs.size(), 1u);
  EXPECT_EQ(j.downs[0], (std::pair<int, int>{1, 1}));
  ASSERT_EQ(j.halts.size(), 2u); // both workers, in the epoch after the lost round's
  EXPECT_GT(j.halts[0], e1);
  EXPECT_EQ(j.halts[0], j.halts[1]);
  EXPECT_EQ(j.engine_routes.back(), j.halts[0]); // the engine's steps of e1 are void now
  // the survivors' answers for the old round change nothing
  for (size_t k = 1; k < first.size(); ++k)
    if (first[k].shard != victim) answer(first[k], true, e1);
  EXPECT_TRUE(j.ups.empty());
  EXPECT_EQ(j.shards.size(), 4u); // the replacement waits for its backoff
  sched->advance_time(std::chrono::milliseconds(100));
  sched->run();
  ASSERT_EQ(j.shards.size(), 5u); // replaced, through the pool
  const uint64_t e2 = last_round();
  EXPECT_GT(e2, e1);
  EXPECT_GE(e2, j.halts[0]); // a late halt of that epoch spares the groups formed for it
  const auto second = round(e2);
  ASSERT_EQ(second.size(), 7u);
  for (const auto& g : second) EXPECT_NE(g.shard, victim);
  for (const auto& g : second) answer(g, true, e2);
  EXPECT_EQ(j.ups, (std::vector<uint64_t>{e2}));
}

TEST_F(SupervisorOrder, AFailedFormationIsRetriedInANewEpoch) {
  join_workers();
  const uint64_t e1 = last_round();
  const auto first = round(e1);
  answer(first[0], false, e1); // could not form (a peer not there in time)
  for (size_t k = 1; k < first.size(); ++k) answer(first[k], true, e1);
  EXPECT_TRUE(j.ups.empty());
  EXPECT_EQ(last_round(), e1); // the next round waits a moment
  sched->advance_time(std::chrono::milliseconds(300));
  sched->run();
  const uint64_t e2 = last_round();
  EXPECT_GT(e2, e1);
  for (const auto& g : round(e2)) answer(g, true, e2);
  EXPECT_EQ(j.ups, (std::vector<uint64_t>{e2}));
}

TEST_F(SupervisorOrder, AResyncIsAnsweredOnceTheGroupsAreFormedAgain) {
  join_workers();
  const uint64_t e1 = last_round();
  for (const auto& g : round(e1)) answer(g, true, e1);
  ASSERT_EQ(j.ups.size(), 1u);
  caf::scoped_actor self{*sys};
  uint64_t got = 0;
  bool answered = false;
  auto rh = self->request(sup, caf::infinite, resync_atom::value);
  sched->run();
  const uint64_t e2 = last_round();
  EXPECT_GT(e2, e1);                    // a new round was started for it
  EXPECT_TRUE(self->mailbox().empty()); // and the engine waits for it
  for (const auto& g : round(e2)) answer(g, true, e2);
  EXPECT_FALSE(self->mailbox().empty());
  std::move(rh).receive(
      [&](uint64_t e) {
        got = e;
        answered = true;
      },
      [&](const caf::error&) {});
  EXPECT_TRUE(answered);
  EXPECT_EQ(got, e2);
  EXPECT_EQ(j.ups.back(), e2);
}

struct WorkerPoolOrder : ::testing::Test {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::unique_ptr<caf::scoped_actor> self; // the coordinator's side: attaches as supervisor
  pool_actor pool;
  journal j;
  const std::string secret = "a secret of this run";

  void SetUp() override {
    register_messages(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    worker_pool_options o;
    o.workers = 2;
    o.secret = secret;
    pool = spawn_worker_pool(*sys, o);
    self = std::make_unique<caf::scoped_actor>(*sys);
    (*self)->send(pool, attach_atom::value, caf::actor_cast<caf::actor>(*self));
    sched->run();
  }
  void TearDown() override {
    (*self)->send(pool, stop_atom::value);
    sched->run();
    self.reset();
  }
  std::vector<uint8_t> challenge() {
    auto rh = (*self)->request(pool, caf::infinite, hello_atom::value);
    sched->run();
    std::vector<uint8_t> c;
    std::move(rh).receive([&](const std::vector<uint8_t>& x) { c = x; }, [](const caf::error&) {});
    return c;
  }
  std::vector<uint8_t> proof(const std::vector<uint8_t>& c, int32_t rank, uint32_t version,
                             const std::string& key) {
    const auto d = transport::hmac_sha256(key, worker_proof_bytes(c, rank, version));
    return {d.begin(), d.end()};
  }
  // Joins as `node`: "" when admitted, else the refusal.
  std::string join(int32_t rank, uint32_t version, const std::vector<uint8_t>& p,
                   const node_actor& node) {
    auto rh = (*self)->request(pool, caf::infinite, join_atom::value, rank, version, p,
                               caf::actor_cast<caf::actor>(node));
    sched->run();
    std::string out = "no answer";
    std::move(rh).receive([&](bool) { out.clear(); },
                          [&](const caf::error& e) { out = from_caf(e).message; });
    return out;
  }
  // The next (worker_atom, rank, node, up) the pool told its supervisor.
  std::tuple<int32_t, caf::actor, bool> told() {
    std::tuple<int32_t, caf::actor, bool> out{-1, caf::actor{}, false};
    (*self)->receive(
        [&](worker_atom, int32_t r, const caf::actor& n, bool up) {
          out = {r, n, up};
        },
        caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }
};

TEST_F(WorkerPoolOrder, AWorkerJoinsOnlyWithAnAnswerToItsOwnChallenge) {
  const uint32_t v = worker_protocol_version;
  auto node = sys->spawn(fake_node, &j);
  auto other = sys->spawn(fake_node, &j);
  EXPECT_NE(join(0, v, proof({1, 2, 3}, 0, v, secret), node).find("no challenge"),
            std::string::npos); // no hello first
  auto c = challenge();
  ASSERT_FALSE(c.empty());
  EXPECT_NE(join(0, v, proof(c, 0, v, "another secret"), node).find("wrong secret"),
            std::string::npos);
  // that challenge is spent: even the right proof for it is refused now
  EXPECT_NE(join(0, v, proof(c, 0, v, secret), node).find("no challenge"), std::string::npos);
  c = challenge();
  EXPECT_NE(join(0, v + 1, proof(c, 0, v + 1, secret), node).find("protocol version"),
            std::string::npos);
  c = challenge();
  EXPECT_NE(join(1, v, proof(c, 0, v, secret), node).find("wrong secret"),
            std::string::npos); // a proof for rank 0 does not admit rank 1
  c = challenge();
  EXPECT_NE(join(2, v, proof(c, 2, v, secret), node).find("out of range"), std::string::npos);
  EXPECT_EQ(std::get<0>(told()), -1); // nobody admitted so far
  c = challenge();
  EXPECT_EQ(join(0, v, proof(c, 0, v, secret), node), "");
  auto [rank, who, up] = told();
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(who, caf::actor_cast<caf::actor>(node));
  EXPECT_TRUE(up);
  c = challenge();
  EXPECT_NE(join(0, v, proof(c, 0, v, secret), other).find("joined already"), std::string::npos);
  // the admitted worker goes away: the supervisor hears it, and the rank is free again
  caf::anon_send_exit(node, caf::exit_reason::kill);
  sched->run();
  auto [rank2, who2, up2] = told();
  EXPECT_EQ(rank2, 0);
  EXPECT_FALSE(up2);
  c = challenge();
  EXPECT_EQ(join(0, v, proof(c, 0, v, secret), other), "");
}

} // namespace

// A worker that refuses an order (it would refuse it again: a bad order, no model) is not
// asked again every 500 ms: the shard is given up on at once, and the engine hears that it
// cannot load.
TEST_F(SupervisorOrder, AnOrderAWorkerRefusesIsGivenUpAtOnce) {
  j.refuse = true;
  join_workers();
  EXPECT_EQ(j.spawn_requests, 4);
  ASSERT_EQ(j.down_how.size(), 4u);
  for (int32_t how : j.down_how) EXPECT_EQ(how, shard_down::cannot_load);
  for (int i = 0; i < 20; ++i) { // 20 s of timers: no placement is retried
    sched->advance_time(std::chrono::seconds(1));
    sched->run();
  }
  EXPECT_EQ(j.spawn_requests, 4);
  EXPECT_TRUE(j.ups.empty());
}
