// graph_test.cpp: the passes over a real family's graph (the Llama 3 transformers fixture,
// 2 layers, 4 heads / 2 KV heads, hidden 64, FFN 128, vocab 512): the pipeline cut keeps a
// stage's layers and turns the residual crossing the cut into the `hidden` input; the tensor
// cut slices every weight to a rank and inserts the collectives (an all-reduce after each
// row-parallel matmul, an all-gather of the vocabulary-parallel logits); dead-node removal;
// and each fusion, made only where the backend says it has the fused kernel and only where
// the values it swallows have no other reader.
#include <algorithm>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/family.hpp"
#include "graph/builder.hpp"
#include "graph/passes.hpp"

using namespace troupe;
using namespace troupe::graph;
using kernels::op;

namespace {

struct fixture_graph {
  std::shared_ptr<const model_source> m;
  graph::graph g;
};

fixture_graph family(const std::string& name) {
  auto m = open_model(test::fixture_path("models/" + name));
  EXPECT_TRUE(m) << (m ? "" : m.error().to_string());
  auto g = arch::build_graph(**m);
  EXPECT_TRUE(g) << (g ? "" : g.error().to_string());
  return {*m, std::move(*g)};
}
fixture_graph llama3() {
  return family("llama3");
}

int count(const graph::graph& g, op o) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const node& n) {
    return n.kind == node_kind::op && n.op == o;
  }));
}
int count(const graph::graph& g, node_kind k) {
  return static_cast<int>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [&](const node& n) { return n.kind == k; }));
}

shard_cut rank(int r, int tp) { // the fixture's dims split evenly
  shard_cut c;
  c.layer_begin = 0, c.layer_end = 2;
  c.tp_rank = r, c.tp_size = tp;
  c.of(axis::heads) = {r * 4 / tp, 4 / tp};
  c.of(axis::kv_heads) = {r * 2 / tp, 2 / tp};
  c.of(axis::ffn) = {r * 128 / tp, 128 / tp};
  c.of(axis::vocab) = {r * 512 / tp, 512 / tp};
  return c;
}

} // namespace

TEST(GraphPasses, PipelineCutKeepsOneStage) {
  auto [m, g] = llama3();
  ASSERT_TRUE(infer_shapes(g)); // the residual's width, for the stage's hidden input
  const int whole_matmuls = count(g, op::matmul);
  shard_cut c = rank(0, 1);
  c.layer_begin = 1, c.layer_end = 2, c.first_stage = false, c.last_stage = true;
  ASSERT_TRUE(cut_pipeline(g, c));
  for (const node& n : g.nodes) EXPECT_GE(n.layer, 1) << n.name;
  EXPECT_EQ(count(g, op::embedding), 1); // only the logit rows' selection; no token embedding
  EXPECT_LT(count(g, op::matmul), whole_matmuls);
  bool reads_hidden = false;
  for (const node& n : g.nodes)
    for (vid v : n.in)
      reads_hidden = reads_hidden || (v != none && g[v].kind == value_kind::input &&
                                      g[v].input == input_kind::hidden);
  EXPECT_TRUE(reads_hidden);
  EXPECT_TRUE(g[g.logits].output);
  ASSERT_TRUE(infer_shapes(g));
  EXPECT_TRUE(g.validate());
}

TEST(GraphPasses, TensorCutSlicesWeightsAndInsertsCollectives) {
  auto [m, g] = llama3();
  EXPECT_EQ(count(g, node_kind::all_reduce), 0);
  ASSERT_TRUE(cut_tensor(g, rank(1, 2)));
  ASSERT_TRUE(infer_shapes(g));
  ASSERT_TRUE(g.validate());
  // per layer: after o_proj and after down_proj; the vocabulary-parallel embedding's sum
  EXPECT_EQ(count(g, node_kind::all_reduce), 2 * 2 + 1);
  EXPECT_EQ(count(g, node_kind::all_gather), 1);
  for (const value& v : g.values) {
    if (v.kind != value_kind::weight || v.empty) continue;
    if (v.name == "model.layers.0.self_attn.q_proj.weight") {
      EXPECT_EQ(v.dims, (std::vector<int64_t>{32, 64})); // 2 of 4 heads x 16
      ASSERT_EQ(v.w.segments.size(), 1u);
      EXPECT_EQ(v.w.segments[0], (std::pair<int64_t, int64_t>{32, 32})); // rank 1's rows
    }
    if (v.name == "model.layers.0.self_attn.o_proj.weight") {
      EXPECT_EQ(v.dims, (std::vector<int64_t>{64, 32})); // columns of rank 1's heads
      EXPECT_EQ(v.w.col0, 32);
    }
    if (v.name == "lm_head.weight") {
      EXPECT_EQ(v.dims, (std::vector<int64_t>{256, 64}));
    }
  }
}

TEST(GraphPasses, FusesWhereTheBackendHasTheKernel) {
  auto [m, g] = llama3();
  ASSERT_TRUE(infer_shapes(g));
  const int matmuls = count(g, op::matmul), rms = count(g, op::rmsnorm);
  fuse_options all;
  graph::graph fused = g;
  const int made = fuse(fused, all);
  ASSERT_TRUE(infer_shapes(fused));
  ASSERT_TRUE(fused.validate());
  EXPECT_EQ(count(fused, op::matmul_qkv), 2);
  EXPECT_EQ(count(fused, op::matmul_swiglu), 2);
  EXPECT_EQ(count(fused, op::rope_kv_store), 2);
  // every norm right after a residual add (the output norm reads the selected logit rows)
  EXPECT_EQ(count(fused, op::add_rmsnorm), 2 * 2 - 1);
  EXPECT_EQ(count(fused, op::swiglu), 0);
  EXPECT_EQ(count(fused, op::matmul), matmuls - 2 * 3 - 2 * 2); // o, down, lm_head remain
  EXPECT_EQ(count(fused, op::rmsnorm), rms - 3); // layer 0's input norm, the output norm
  // each layer's attention prologue in one node: k roped and stored, v stored, q roped
  EXPECT_EQ(count(fused, op::rope), 0);
  EXPECT_EQ(count(fused, op::kv_store), 0);
  for (const node& n : fused.nodes)
    if (n.kind == node_kind::op && n.op == op::rope_kv_store) {
      EXPECT_EQ(n.in.size(), 5u);
      ASSERT_EQ(n.out.size(), 3u);
      EXPECT_EQ(fused[n.out[1]].state, state_kind::v_cache);
      EXPECT_EQ(fused[n.out[2]].dims, (std::vector<int64_t>{4, 16})); // q [H, D]
    }
  EXPECT_EQ(made, 2 + 2 + 2 + 3 + 2 * 2);
  // without the prologue fusion: rope(q) and the v store stay nodes of their own
  fuse_options no_prologue;
  no_prologue.prologue = false;
  graph::graph apart = g;
  EXPECT_EQ(fuse(apart, no_prologue), 2 + 2 + 2 + 3);
  EXPECT_EQ(count(apart, op::rope), 2);
  EXPECT_EQ(count(apart, op::kv_store), 2);
  // a backend without matmul_qkv keeps three matmuls
  fuse_options no_qkv;
  no_qkv.supported = [](const node& n, const graph::graph&) { return n.op != op::matmul_qkv; };
  graph::graph partial = g;
  fuse(partial, no_qkv);
  EXPECT_EQ(count(partial, op::matmul_qkv), 0);
  EXPECT_EQ(count(partial, op::matmul_swiglu), 2);
  // switched off one by one
  fuse_options none_on;
  none_on.add_norm = none_on.norm_quant = none_on.gate_up = none_on.rope_store = none_on.qkv =
      false;
  graph::graph plain = g;
  EXPECT_EQ(fuse(plain, none_on), 0);
  EXPECT_EQ(plain.nodes.size(), g.nodes.size());
}

// LFM2's short convolutions take B, C and x from one in_proj: its three matmuls become one
// matmul_qkv as an attention's q, k and v do. Qwen3.5's DeltaNet projections (q, k, v of one
// tensor but cut along other axes, then z, a, b) stay as they are.
TEST(GraphPasses, MergesTheMatmulsOfOneInputProjection) {
  auto [m, g] = family("lfm2"); // conv, attention, conv
  ASSERT_TRUE(infer_shapes(g));
  graph::graph fused = g;
  fuse(fused, fuse_options{});
  ASSERT_TRUE(infer_shapes(fused));
  ASSERT_TRUE(fused.validate());
  EXPECT_EQ(count(fused, op::matmul_qkv), 3);
  for (const node& n : fused.nodes) {
    if (n.kind != node_kind::op || n.op != op::matmul_qkv || n.layer == 1) continue;
    for (size_t i = 1; i < 4; ++i) {
      EXPECT_EQ(fused[n.in[i]].w.name, fmt::format("model.layers.{}.conv.in_proj.weight", n.layer));
    }
  }
  auto [mq, q] = family("qwen3_5"); // linear, attention, linear
  ASSERT_TRUE(infer_shapes(q));
  fuse(q, fuse_options{});
  EXPECT_EQ(count(q, op::matmul_qkv), 1);
}

TEST(GraphPasses, DoesNotFuseAValueAnotherNodeReads) {
  auto [m, g] = llama3();
  ASSERT_TRUE(infer_shapes(g));
  // make layer 0's gate product a graph output: matmul_swiglu would swallow it
  vid gate = none;
  for (const node& n : g.nodes)
    if (n.kind == node_kind::op && n.op == op::swiglu && n.layer == 0) gate = n.in[0];
  ASSERT_NE(gate, none);
  g[gate].output = true;
  fuse_options all;
  fuse(g, all);
  EXPECT_EQ(count(g, op::matmul_swiglu), 1); // layer 1 only
  ASSERT_TRUE(g.validate());
}

TEST(GraphPasses, ThePrologueTakesOnlyTheLayersOwnRopeAndStore) {
  auto [m, g] = llama3();
  ASSERT_TRUE(infer_shapes(g));
  // layer 0's q rotated at another base: not the k rope's angles, so q stays apart
  for (node& n : g.nodes)
    if (n.kind == node_kind::op && n.op == op::rope && n.layer == 0 &&
        n.name.find("q") != n.name.npos)
      n.p.rope.theta *= 2;
  // layer 1's rotated q read by a node before the store: the fused node could not come first
  vid q1 = none;
  size_t store1 = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const node& n = g.nodes[i];
    if (n.kind != node_kind::op || n.layer != 1) continue;
    if (n.op == op::rope && n.name.find("q") != n.name.npos) q1 = n.out[0];
    if (n.op == op::kv_store && store1 == 0) store1 = i;
  }
  ASSERT_NE(q1, none);
  builder b(g, 1);
  const vid early = b.scale(q1, 1.0f, "reads_q_early");
  g[early].output = true;
  std::rotate(g.nodes.begin() + static_cast<std::ptrdiff_t>(store1), g.nodes.end() - 1,
              g.nodes.end()); // the reader goes just before layer 1's first store
  ASSERT_TRUE(infer_shapes(g));
  ASSERT_TRUE(g.validate());
  fuse_options all;
  graph::graph fused = g;
  fuse(fused, all);
  ASSERT_TRUE(infer_shapes(fused));
  ASSERT_TRUE(fused.validate());
  EXPECT_EQ(count(fused, op::rope), 2); // layer 0's q (other angles), layer 1's q (read early)
  EXPECT_EQ(count(fused, op::kv_store), 0);
}

TEST(GraphPasses, RemoveDeadDropsWhatNothingNeeds) {
  auto [m, g] = llama3();
  const size_t before = g.nodes.size();
  builder b(g, 0);
  const vid unused = b.scale(g.residual[1], 2.0f, "never_read");
  (void)unused;
  EXPECT_EQ(g.nodes.size(), before + 1);
  remove_dead(g);
  EXPECT_EQ(g.nodes.size(), before);
}
