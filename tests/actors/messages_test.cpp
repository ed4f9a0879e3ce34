// messages_test.cpp: every message the actors exchange serialises to bytes and back with
// CAF's binary serializer, as a process boundary will need: a step (plan + activations),
// its answer, a request, a streamed event and the engine's statistics come back equal,
// both alone and wrapped in a caf::message with their atom. Activations come back
// bit-exact and the serialised step is the floats plus a small header; truncated or
// corrupted bytes give an error, never a crash or a half-filled message.
#include <cstring>

#include <gtest/gtest.h>

#include "actors/messages.hpp"
#include "actors/worker_node.hpp"
#include "core/dtype.hpp"
#include "kernels/op.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

struct Messages : ::testing::Test {
  Messages()
      : sys(init()) {}
  caf::actor_system_config& init() {
    register_messages(cfg);
    return cfg;
  }
  template <class T>
  std::vector<char> save(T& x) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    EXPECT_FALSE(sink(x));
    return buf;
  }
  template <class T>
  caf::error load(const std::vector<char>& buf, T& x) {
    caf::binary_deserializer source{sys, buf};
    return source(x);
  }
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

batch sample_plan() {
  batch b;
  b.tokens = {1, 15043, 29892, 7};
  batch_seq a;
  a.seq_id = 41;
  a.begin = 0;
  a.count = 3;
  a.pos0 = 0;
  a.logits = true;
  a.blocks = {3, 9};
  a.sampling.temperature = 0.7f;
  a.sampling.top_k = 40;
  a.sampling.seed = 1234;
  a.sample_step = 5;
  a.penalty_history = {15043, 15043};
  batch_seq c;
  c.seq_id = 42;
  c.begin = 3;
  c.count = 1;
  c.pos0 = 17;
  c.blocks = {4, 5};
  b.seqs = {a, c};
  b.copies = {{4, 11}};
  return b;
}

void expect_same(const batch& x, const batch& y) {
  EXPECT_EQ(x.tokens, y.tokens);
  EXPECT_EQ(x.copies, y.copies);
  ASSERT_EQ(x.seqs.size(), y.seqs.size());
  for (size_t i = 0; i < x.seqs.size(); ++i) {
    const auto &p = x.seqs[i], &q = y.seqs[i];
    EXPECT_EQ(p.seq_id, q.seq_id);
    EXPECT_EQ(p.begin, q.begin);
    EXPECT_EQ(p.count, q.count);
    EXPECT_EQ(p.pos0, q.pos0);
    EXPECT_EQ(p.logits, q.logits);
    EXPECT_EQ(p.blocks, q.blocks);
    EXPECT_EQ(p.sampling.temperature, q.sampling.temperature);
    EXPECT_EQ(p.sampling.top_k, q.sampling.top_k);
    EXPECT_EQ(p.sampling.seed, q.sampling.seed);
    EXPECT_EQ(p.sample_step, q.sample_step);
    EXPECT_EQ(p.penalty_history, q.penalty_history);
  }
}

step_msg sample_step_msg(size_t floats) {
  auto x = std::make_shared<std::vector<float>>(floats);
  for (size_t i = 0; i < floats; ++i) (*x)[i] = static_cast<float>(i) * 0.25f - 3.0f;
  (*x)[0] = -0.0f;
  return step_msg{77, 3, std::make_shared<const batch>(sample_plan()), x};
}

} // namespace

TEST_F(Messages, StepRoundTripsBitExact) {
  const size_t floats = 4 * 288;
  step_msg m = sample_step_msg(floats);
  const auto buf = save(m);
  // the activations dominate and go as bytes: the message is the floats plus a small header
  EXPECT_GE(buf.size(), floats * sizeof(float));
  EXPECT_LT(buf.size(), floats * sizeof(float) + 512);
  step_msg back;
  ASSERT_FALSE(load(buf, back));
  EXPECT_EQ(back.step_id, 77u);
  EXPECT_EQ(back.epoch, 3u);
  ASSERT_TRUE(back.plan && back.x);
  expect_same(*m.plan, *back.plan);
  ASSERT_EQ(back.x->size(), floats);
  EXPECT_EQ(std::memcmp(back.x->data(), m.x->data(), floats * sizeof(float)), 0); // bit-exact
}

TEST_F(Messages, FirstStageStepHasNoActivations) {
  step_msg m{5, 1, std::make_shared<const batch>(sample_plan()), nullptr};
  step_msg back;
  ASSERT_FALSE(load(save(m), back));
  EXPECT_EQ(back.x, nullptr);
  ASSERT_TRUE(back.plan);
  expect_same(*m.plan, *back.plan);
}

TEST_F(Messages, TruncatedOrCorruptStepIsAnError) {
  step_msg m = sample_step_msg(64);
  const auto buf = save(m);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{8}, size_t{40}, buf.size() / 2, buf.size() - 1}) {
    step_msg back;
    EXPECT_TRUE(load(std::vector<char>(buf.begin(), buf.begin() + static_cast<long>(cut)), back))
        << "cut at " << cut;
  }
  // activation bytes that are not a whole number of floats: the step is refused
  std::vector<uint8_t> odd(7, 1);
  batch b = sample_plan();
  uint64_t id = 1, epoch = 1;
  std::vector<char> bad;
  {
    caf::binary_serializer sink{sys, bad};
    ASSERT_FALSE(sink(id, epoch, b, odd));
  }
  step_msg back;
  EXPECT_TRUE(load(bad, back));
  EXPECT_EQ(back.plan, nullptr);
}

TEST_F(Messages, AnswersRequestsEventsAndStatsRoundTrip) {
  step_done d;
  d.step_id = 9;
  d.epoch = 2;
  d.tokens = {{41, 263, -0.5f, {{263, -0.5f}, {278, -1.25f}}}, {42, 2, -3.0f, {}}};
  d.seconds = 0.004;
  step_done d2;
  ASSERT_FALSE(load(save(d), d2));
  EXPECT_EQ(d2.step_id, 9u);
  ASSERT_EQ(d2.tokens.size(), 2u);
  EXPECT_EQ(d2.tokens[0].top, d.tokens[0].top);
  EXPECT_EQ(d2.tokens[1].token, 2);
  EXPECT_EQ(d2.seconds, d.seconds);

  step_failed f{3, 4, 1, 0, "collective aborted", true};
  step_failed f2;
  ASSERT_FALSE(load(save(f), f2));
  EXPECT_EQ(f2.why, f.why);
  EXPECT_TRUE(f2.transient);
  EXPECT_EQ(f2.stage, 1);

  gen_request r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 17;
  r.stop = {"\n\n", "The end"};
  r.n = 2;
  r.tag = "client-7";
  r.sampling.top_p = 0.9f;
  gen_request r2;
  ASSERT_FALSE(load(save(r), r2));
  EXPECT_EQ(r2.prompt, r.prompt);
  EXPECT_EQ(r2.stop, r.stop);
  EXPECT_EQ(r2.n, 2);
  EXPECT_EQ(r2.tag, "client-7");
  EXPECT_EQ(r2.sampling.top_p, 0.9f);

  gen_event e;
  e.request_id = 12;
  e.tokens = {450};
  e.text = "é ü";
  e.logprobs = {-0.25f};
  e.top_logprobs = {{{450, -0.25f}, {9, -2.0f}}};
  e.finish = finish_reason::error;
  e.error_code = errc::busy;
  e.error_message = "queue full";
  e.prompt_logprobs = {{3, -1.5f, {{7, -0.5f}}}};
  gen_event e2;
  ASSERT_FALSE(load(save(e), e2));
  EXPECT_EQ(e2.text, e.text);
  EXPECT_EQ(e2.top_logprobs, e.top_logprobs);
  EXPECT_EQ(e2.finish, finish_reason::error);
  EXPECT_EQ(e2.error_code, errc::busy);
  EXPECT_EQ(e2.error_message, "queue full");
  ASSERT_EQ(e2.prompt_logprobs.size(), 1u);
  EXPECT_EQ(e2.prompt_logprobs[0].pos, 3);
  EXPECT_EQ(e2.prompt_logprobs[0].top, e.prompt_logprobs[0].top);

  engine_stats s;
  s.requests_total = 100;
  s.not_ready_reason = "shard stage0.rank1 is down";
  s.ttft.observe(0.05);
  s.ttft.observe(0.2);
  engine_stats s2;
  ASSERT_FALSE(load(save(s), s2));
  EXPECT_EQ(s2.requests_total, 100);
  EXPECT_EQ(s2.not_ready_reason, s.not_ready_reason);
  EXPECT_EQ(s2.ttft.count, 2);
  EXPECT_EQ(s2.ttft.counts, s.ttft.counts);
}

TEST_F(Messages, WholeMessagesWithTheirAtomsRoundTrip) {
  // what a remote actor would put on the wire: the type-erased message, atom included
  caf::message msg = caf::make_message(step_atom::value, sample_step_msg(16));
  std::vector<char> buf;
  {
    caf::binary_serializer sink{sys, buf};
    ASSERT_FALSE(sink(msg));
  }
  caf::message back;
  ASSERT_FALSE(load(buf, back));
  ASSERT_TRUE((back.match_elements<step_atom, step_msg>()));
  const auto& m = back.get_as<step_msg>(1);
  EXPECT_EQ(m.step_id, 77u);
  ASSERT_TRUE(m.x);
  EXPECT_EQ(m.x->size(), 16u);
  EXPECT_EQ((*m.x)[3], 3 * 0.25f - 3.0f);
}

TEST_F(Messages, WorkerOrdersRoundTripAndAreChecked) {
  shard_order o;
  o.model_path = "/models/m.gguf";
  o.stage = 1;
  o.hop = 1;
  o.spec.layer_begin = 3;
  o.spec.layer_end = 5;
  o.spec.tp_rank = 1;
  o.spec.tp_size = 2;
  o.spec.first_stage = false;
  o.kv_blocks = 64;
  o.kv_dtype = static_cast<uint8_t>(troupe::dtype::bf16);
  o.group_timeout_s = 7;
  o.hang_timeout_s = 0.5;
  o.faults = {"kill-worker:rank=2,step=15"};
  o.where = static_cast<uint8_t>(kernels::backend::cuda);
  o.device = 1;
  o.nccl = true;
  auto buf = save(o);
  shard_order back;
  ASSERT_FALSE(load(buf, back));
  EXPECT_EQ(back.model_path, o.model_path);
  EXPECT_EQ(back.spec.layer_end, 5);
  EXPECT_EQ(back.spec.tp_rank, 1);
  EXPECT_EQ(back.kv_dtype, o.kv_dtype);
  EXPECT_EQ(back.hang_timeout_s, 0.5);
  EXPECT_EQ(back.faults, o.faults);
  EXPECT_EQ(back.device, 1);
  EXPECT_TRUE(back.nccl);
  // a step whose activations come over UCX carries only their size
  step_msg m{9, 2, std::make_shared<const batch>(sample_plan()), nullptr, 4096};
  auto sb = save(m);
  step_msg mb;
  ASSERT_FALSE(load(sb, mb));
  EXPECT_EQ(mb.x_ucx_bytes, 4096);
  EXPECT_FALSE(mb.x);

  // what a worker accepts from the wire, for a 5-layer model with 4 heads
  model_config c;
  c.n_layer = 5;
  c.C = 64;
  c.F = 128;
  c.H = 4;
  c.Hkv = 4;
  c.D = 16;
  c.V = 512;
  c.ctx = 256;
  EXPECT_TRUE(check_order(o, c));
  auto refused = [&](auto edit) {
    shard_order x = o;
    edit(x);
    return !check_order(x, c);
  };
  EXPECT_TRUE(refused([](shard_order& x) { x.kv_dtype = 200; }));
  EXPECT_TRUE(
      refused([](shard_order& x) { x.kv_dtype = static_cast<uint8_t>(troupe::dtype::q8_0); }));
  EXPECT_TRUE(refused([](shard_order& x) { x.where = 9; }));
  EXPECT_TRUE(refused([](shard_order& x) { x.spec.tp_rank = 2; }));
  EXPECT_TRUE(refused([](shard_order& x) { x.spec.tp_size = 0; }));
  EXPECT_TRUE(refused([](shard_order& x) { x.spec.layer_end = 6; }));
  EXPECT_TRUE(refused([](shard_order& x) { x.spec.layer_begin = 5; }));
  EXPECT_TRUE(refused([](shard_order& x) { x.kv_blocks = -1; }));
  EXPECT_TRUE(refused([](shard_order& x) { x.threads = 0; }));
  EXPECT_TRUE(refused([](shard_order& x) { x.hang_timeout_s = -1; }));
  EXPECT_TRUE(
      refused([](shard_order& x) { x.spec.tp_size = 3, x.spec.tp_rank = 2; })); // 4 heads by 3
  // NCCL sums only for a GPU shard of a TP stage
  EXPECT_TRUE(
      refused([](shard_order& x) { x.where = static_cast<uint8_t>(kernels::backend::cpu); }));
  EXPECT_TRUE(refused([](shard_order& x) { x.spec.tp_size = 1, x.spec.tp_rank = 0; }));
  EXPECT_FALSE(refused([](shard_order& x) {
    x.where = static_cast<uint8_t>(kernels::backend::cpu), x.nccl = false;
  }));
}
