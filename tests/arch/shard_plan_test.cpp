// shard_plan_test.cpp: head / FFN / vocabulary slicing and placement parsing
// (arch/shard_plan.hpp).
#include <gtest/gtest.h>

#include "arch/shard_plan.hpp"

using namespace troupe;

namespace {
model_config stories() {
  model_config c;
  c.n_layer = 5, c.C = 64, c.F = 172, c.H = 8, c.Hkv = 4, c.D = 8, c.V = 512, c.ctx = 512;
  c.rope.rot_dim = 8;
  return c;
}
} // namespace

TEST(ShardPlan, SlicesCoverEverythingOnce) {
  const auto c = stories();
  for (int tp : {1, 2, 4, 8}) {
    int64_t heads = 0, ffn = 0, vocab = 0;
    for (int r = 0; r < tp; ++r) {
      shard_spec s;
      s.tp_rank = r;
      s.tp_size = tp;
      auto d = plan_shard(c, s);
      ASSERT_TRUE(d) << d.error().to_string();
      EXPECT_EQ(d->h0, heads);
      heads += d->Hs;
      EXPECT_EQ(d->f0, ffn);
      ffn += d->Fs;
      EXPECT_EQ(d->v0, vocab);
      vocab += d->Vs;
      // the query heads of this shard all read the KV heads it holds
      const int64_t group = c.H / c.Hkv;
      EXPECT_EQ(d->h0 / group, d->kv0);
      EXPECT_EQ((d->h0 + d->Hs - 1) / group, d->kv0 + d->Hkv_s - 1);
    }
    EXPECT_EQ(heads, c.H);
    EXPECT_EQ(ffn, c.F);
    EXPECT_EQ(vocab, c.V);
  }
}

TEST(ShardPlan, QuantBlocksAreNotSplit) {
  auto c = stories();
  c.F = 2080; // 65 blocks of 32: cannot split evenly over 4
  shard_spec s;
  s.tp_size = 4;
  s.ffn_block = 32;
  int64_t total = 0;
  for (int r = 0; r < 4; ++r) {
    s.tp_rank = r;
    auto d = plan_shard(c, s);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->f0 % 32, 0);
    EXPECT_EQ(d->Fs % 32, 0);
    total += d->Fs;
  }
  EXPECT_EQ(total, 2080);
}

TEST(ShardPlan, RejectsImpossibleSplits) {
  const auto c = stories();
  shard_spec s;
  s.tp_size = 3; // 8 heads over 3
  EXPECT_FALSE(plan_shard(c, s));
}

// Doge's dynamic mask sums dt_proj over the ranks' values: a KV head replicated on two ranks
// would count twice, so TP stops at its KV heads (a Llama of the same shape replicates them).
TEST(ShardPlan, DogeKeepsEachKvHeadOnOneRank) {
  auto c = stories(); // (8 heads over 4 KV heads)
  shard_spec s;
  s.tp_size = 8;
  s.tp_rank = 3;
  EXPECT_TRUE(plan_shard(c, s));
  c.doge = true;
  auto d = plan_shard(c, s);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().to_string().find("Doge"), std::string::npos) << d.error().to_string();
  s.tp_size = 4;
  EXPECT_TRUE(plan_shard(c, s));
}

// Query heads per layer (Laguna): every layer's count must divide by TP, not only H's.
TEST(ShardPlan, HeadsPerLayerEachDivideByTp) {
  auto c = stories();
  c.heads_by_layer = {8, 4, 8, 4, 8};
  shard_spec s;
  s.tp_size = 4;
  EXPECT_TRUE(plan_shard(c, s));
  c.heads_by_layer = {8, 4, 8, 12, 8}; // (more than H: validate() refuses it at load)
  EXPECT_FALSE(c.validate());
  c.heads_by_layer = {8, 4, 8, 6, 8};
  EXPECT_FALSE(c.validate()); // 6 is no multiple of the 4 KV heads
  c.Hkv = 2;
  EXPECT_TRUE(c.validate());
  auto d = plan_shard(c, s);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().to_string().find("layer 3's 6 attention heads"), std::string::npos)
      << d.error().to_string();
}

// DeciLM's KV heads by layer: each layer's cut by its own count, replicated where a layer has
// fewer KV heads than ranks (each rank the KV head its query heads read); a count TP can neither
// split nor replicate refuses the plan
TEST(ShardPlan, KvHeadsPerLayerCutEachByItsOwnCount) {
  auto c = stories();
  c.kv_heads_by_layer = {1, 8, 2, 4, 8};
  ASSERT_TRUE(c.validate());
  shard_spec s;
  s.tp_size = 4;
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> want = {
      {{0, 1}, {0, 2}, {0, 1}, {0, 1}, {0, 2}},
      {{0, 1}, {2, 2}, {0, 1}, {1, 1}, {2, 2}},
      {{0, 1}, {4, 2}, {1, 1}, {2, 1}, {4, 2}},
      {{0, 1}, {6, 2}, {1, 1}, {3, 1}, {6, 2}}};
  for (int r = 0; r < 4; ++r) {
    s.tp_rank = r;
    auto d = plan_shard(c, s);
    ASSERT_TRUE(d) << d.error().to_string();
    EXPECT_EQ(d->layer_kv, want[static_cast<size_t>(r)]) << "rank " << r;
  }
  c.H = 12, c.kv_heads_by_layer = {1, 12, 3, 4, 6}; // 3 KV heads over TP 4: neither
  ASSERT_TRUE(c.validate());
  s.tp_size = 4, s.tp_rank = 0;
  auto d = plan_shard(c, s);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().to_string().find("3 KV heads"), std::string::npos) << d.error().to_string();
  c.kv_heads_by_layer = {1, 12, 5, 4, 6}; // (not a divisor of the heads: refused at load)
  EXPECT_FALSE(c.validate());
}

// DiffLlama's differential attention takes each half of the heads and of the KV heads alike on
// every rank: TP must divide each half (8 heads, 4 KV heads: TP 2, not 4).
TEST(ShardPlan, DifferentialAttentionDividesEachHalf) {
  auto c = stories();
  c.diff_attn = true;
  shard_spec s;
  s.tp_size = 2;
  EXPECT_TRUE(plan_shard(c, s));
  s.tp_size = 4;
  auto d = plan_shard(c, s);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().to_string().find("--pp"), std::string::npos) << d.error().to_string();
}

TEST(Placement, EvenAndExplicit) {
  const auto c = stories();
  auto p = even_placement(c, 2, 2);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->stages.size(), 2u);
  EXPECT_EQ(p->stages[0].layer_end, 3);
  EXPECT_EQ(p->stages[1].layer_begin, 3);
  EXPECT_EQ(p->to_string(), "0-2:tp2,3-4:tp2");
  auto q = parse_placement(c, "0-2:tp2,3-4:tp1@cpu:1");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->stages[1].tp, 1);
  EXPECT_EQ(q->stages[1].devices, std::vector<std::string>{"cpu:1"});
  EXPECT_FALSE(parse_placement(c, "0-2:tp2"));         // layers 3-4 unplaced
  EXPECT_FALSE(parse_placement(c, "0-1:tp2,3-4:tp1")); // gap
  EXPECT_FALSE(parse_placement(c, "0-5:tp1"));         // past the end
  EXPECT_FALSE(parse_placement(c, "0-4:tpx"));
  EXPECT_FALSE(even_placement(c, 1, 6));
}

TEST(Placement, DevicesPerStageAndRank) {
  const auto c = stories();
  auto p = parse_placement(c, "0-1:tp1@cuda:0,2-4:tp2@cpu:0-1;cpu:2-3");
  ASSERT_TRUE(p) << p.error().to_string();
  EXPECT_EQ(p->to_string(), "0-1:tp1@cuda:0,2-4:tp2@cpu:0-1;cpu:2-3");
  auto g = device_of(p->stages[0], 0);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->cuda);
  EXPECT_EQ(g->index, 0);
  auto r1 = device_of(p->stages[1], 1);
  ASSERT_TRUE(r1);
  EXPECT_FALSE(r1->cuda);
  EXPECT_EQ(r1->cpus, (std::vector<int>{2, 3}));
  auto none = device_of(even_placement(c, 1, 1)->stages[0], 0);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->cuda);
  EXPECT_EQ(none->text, "cpu");
  // one device serves every rank of a stage
  auto shared = parse_placement(c, "0-4:tp2@cuda:1");
  ASSERT_TRUE(shared);
  EXPECT_EQ(device_of(shared->stages[0], 1)->index, 1);
  // refused with the reason: unknown kinds, bad numbers, a device count that is neither 1 nor TP
  for (const char* bad : {"0-4:tp1@gpu", "0-4:tp1@cuda:x", "0-4:tp1@cuda:-1", "0-4:tp1@cpu:3-1",
                          "0-4:tp2@cuda:0;cuda:1;cuda:2"}) {
    auto r = parse_placement(c, bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("device"), std::string::npos) << r.error().message;
  }
}

// Gemma 4 E2B's shape: the last layers attend over the KV caches of earlier layers, so an even
// placement keeps every layer from the first one they read on the last stage; the full-attention
// layers' own KV heads are split (or replicated) by TP like the others'.
TEST(Placement, SharedKvLayersStayWithTheirSource) {
  auto c = stories();
  c.n_layer = 8;
  c.kv_source = {0, 1, 2, 3, 4, 5, 4, 5}; // layers 6, 7 read 4 and 5
  auto p = even_placement(c, 1, 3);
  ASSERT_TRUE(p) << p.error().to_string();
  ASSERT_EQ(p->stages.size(), 3u);
  EXPECT_EQ(p->stages[0].layer_begin, 0);
  EXPECT_EQ(p->stages[1].layer_begin, 3); // the even cut
  EXPECT_EQ(p->stages[2].layer_begin, 4); // 5 moved down: layer 6 reads layer 4
  EXPECT_EQ(p->stages[2].layer_end, 8);
  EXPECT_FALSE(even_placement(c, 1, 6)); // 4 places to cut before the shared ones for 5 stages
  c.kv_source.clear(); // GLM-5's shared selections: a stage starts at a layer running its own
  c.dsa_source = {0, 0, 2, 2, 2, 5, 5, 7};
  p = even_placement(c, 1, 4);
  ASSERT_TRUE(p) << p.error().to_string();
  ASSERT_EQ(p->stages.size(), 4u);
  for (const auto& st : p->stages)
    EXPECT_EQ(c.dsa_source[static_cast<size_t>(st.layer_begin)], st.layer_begin);
  c.dsa_source.clear();
  c.kv_source = {0, 1, 2, 3, 4, 5, 4, 5};
  c.Hkv_full = 1;
  c.D_full = 16;
  c.sliding_window = 4;
  c.windowed = {1, 1, 1, 1, 1, 0, 1, 0};
  for (int r = 0; r < 2; ++r) {
    shard_spec s;
    s.tp_rank = r, s.tp_size = 2;
    auto d = plan_shard(c, s);
    ASSERT_TRUE(d) << d.error().to_string();
    EXPECT_EQ(d->Hkv_s, 2);
    EXPECT_EQ(d->kv0, 2 * r);
    EXPECT_EQ(d->Hkvf_s, 1); // one KV head, on both ranks
    EXPECT_EQ(d->kvf0, 0);
  }
  EXPECT_EQ(c.kv_values_per_token(1, 5), 2 * 16);
  EXPECT_EQ(c.kv_values_per_token(1, 4), 2 * 4 * 8);
  EXPECT_FALSE(c.layer_has_kv(6)); // it keeps none of its own
}
