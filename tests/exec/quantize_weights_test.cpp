// quantize_weights_test.cpp: matrices quantized as they load (`--quantize`,
// exec/quantize_weights.cpp) hold the bytes llama.cpp's own quantizer writes for them
// (llama-quantize --pure of the same f32 stories260K: tests/fixtures/quantize_load; the scales
// equal, a code off by one only where the two round a tie differently), and only matrices with
// whole blocks are quantized (stories260K's ffn_down, 172 columns, and the norms stay f32; the
// quantizer fell back to f16 for ffn_down). The model then computes what the llama-quantized
// file computes, from a GGUF and from a Hugging Face directory; a mixture's experts quantize,
// its router does not.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/family.hpp"
#include "arch/model_source.hpp"
#include "arch/synth.hpp"
#include "exec/weights.hpp"
#include "graph/passes.hpp"
#include "greedy_util.hpp"

using namespace troupe;

namespace {

std::shared_ptr<const model_source> open(const std::string& path) {
  auto m = open_model(path);
  EXPECT_TRUE(m) << path << ": " << (m ? "" : m.error().to_string());
  return m ? *m : nullptr;
}

// Code j of a block of `t` (q8_0: int8; q4_0: the nibble).
int code(dtype t, const uint8_t* blk, int j) {
  if (t == dtype::q8_0) return static_cast<int8_t>(blk[2 + j]);
  return j < 16 ? blk[2 + j] & 0x0f : blk[2 + j - 16] >> 4;
}

} // namespace

class QuantizeAtLoad : public ::testing::TestWithParam<dtype> {};

TEST_P(QuantizeAtLoad, MatricesHoldTheBytesLlamaQuantizeWrites) {
  const dtype t = GetParam();
  auto m = open(test::model_path("stories260K/stories260K.gguf"));
  auto ref =
      open(test::fixture_path("quantize_load/stories260K-" + std::string(name(t)) + ".gguf"));
  ASSERT_TRUE(m && ref);
  auto g = arch::build_graph(*m);
  ASSERT_TRUE(g) << g.error().to_string();
  ASSERT_TRUE(graph::infer_shapes(*g));
  auto w = exec::load_weights(*m, *g);
  ASSERT_TRUE(w) << w.error().to_string();
  const int64_t before = w->resident_bytes;
  auto q = exec::quantize_weights(*m, *g, *w, t);
  ASSERT_TRUE(q) << q.error().to_string();
  EXPECT_GT(q->matrices, 20);
  EXPECT_LT(w->resident_bytes, before);
  int compared = 0, kept = 0;
  int64_t codes = 0, off_by_one = 0;
  for (size_t i = 0; i < w->views.size(); ++i) {
    const tensor_view& v = w->views[i];
    if (!v.data) continue;
    const std::string& tensor = g->values[i].w.name;
    const tensor_info* r = ref->tensors->find(tensor);
    ASSERT_NE(r, nullptr) << tensor;
    if (v.type != t) { // left as published: not whole blocks, or not a matrix
      EXPECT_EQ(v.type, dtype::f32) << tensor;
      EXPECT_TRUE(v.dims.rank == 1 || v.cols() % 32 != 0) << tensor;
      ++kept;
      continue;
    }
    ASSERT_EQ(r->type, t) << tensor;
    ASSERT_EQ(static_cast<uint64_t>(v.nbytes()), r->nbytes) << tensor;
    const auto* a = static_cast<const uint8_t*>(v.data);
    const int64_t bb = info(t).block_bytes;
    for (int64_t b = 0; b < v.nbytes() / bb; ++b) {
      const uint8_t* x = a + b * bb;
      const uint8_t* y = r->data + b * bb;
      ASSERT_EQ(x[0], y[0]) << tensor << " block " << b; // the f16 scale
      ASSERT_EQ(x[1], y[1]) << tensor << " block " << b;
      for (int j = 0; j < 32; ++j) {
        const int d = std::abs(code(t, x, j) - code(t, y, j));
        ASSERT_LE(d, 1) << tensor << " block " << b << " value " << j;
        off_by_one += d;
        ++codes;
      }
    }
    ++compared;
  }
  EXPECT_GE(compared, 20);
  EXPECT_GE(kept, 5); // ffn_down of each layer, the norms
  EXPECT_LE(off_by_one * 1000, codes) << off_by_one << " of " << codes << " codes differ";
  std::printf("%s: %d matrices compared, %lld of %lld codes off by one\n", name(t).data(), compared,
              static_cast<long long>(off_by_one), static_cast<long long>(codes));
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeAtLoad, ::testing::Values(dtype::q8_0, dtype::q4_0),
                         [](const auto& info) { return std::string(name(info.param)); });

// The f32 model quantized at load generates what the llama-quantized file generates (greedy
// tokens; last-position logits within f16's rounding of ffn_down, which that file holds in
// f16), on the fast CPU kernels; and a Hugging Face directory quantizes as it loads too.
TEST(QuantizeAtLoad, TheModelComputesWhatTheQuantizedFileComputes) {
  auto m = open(test::model_path("stories260K/stories260K.gguf"));
  auto ref = open(test::fixture_path("quantize_load/stories260K-q8_0.gguf"));
  ASSERT_TRUE(m && ref);
  exec::exec_options o;
  o.quantize = dtype::q8_0;
  auto a = test::generator_of(m, o);
  auto b = test::generator_of(ref, exec::exec_options{});
  ASSERT_TRUE(a && b);
  const std::vector<int32_t> prompt = *m->tok->encode("Once upon a time", true, false);
  const auto x = test::greedy(*a, prompt, 24), y = test::greedy(*b, prompt, 24);
  EXPECT_EQ(x.tokens, y.tokens);
  double scale = 0, diff = 0;
  for (size_t i = 0; i < y.prompt_logits.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(y.prompt_logits[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(x.prompt_logits[i] - y.prompt_logits[i])));
  }
  EXPECT_LE(diff, 1e-2 * scale);
  auto hf = open(test::model_path("stories260K-hf"));
  ASSERT_TRUE(hf);
  auto h = test::generator_of(hf, o);
  ASSERT_TRUE(h);
  EXPECT_EQ(test::greedy(*h, prompt, 24).tokens, x.tokens);
}

// Anything but q8_0 / q4_0 is refused, naming the option.
TEST(QuantizeAtLoad, OtherTypesAreRefused) {
  auto m = open(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_TRUE(m);
  exec::exec_options o;
  o.quantize = dtype::q4_k;
  auto g = exec::generator::create(m, o);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("--quantize"), std::string::npos) << g.error().message;
}

// A mixture of experts: the stacked experts are quantized, the router stays f32 (as
// llama-quantize keeps ffn_gate_inp), and the CPU kernels compute what the reference backend
// computes on the same quantized weights.
TEST(QuantizeAtLoad, ExpertsQuantizeRoutersDoNot) {
  synth_options so;
  so.preset = "tiny-moe";
  so.type = dtype::f32;
  so.out = ::testing::TempDir() + "qmoe_" + std::to_string(::getpid()) + ".gguf";
  so.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
  ASSERT_TRUE(synthesize(so));
  auto m = open(so.out);
  ASSERT_TRUE(m);
  auto g = arch::build_graph(*m);
  ASSERT_TRUE(g && graph::infer_shapes(*g));
  auto w = exec::load_weights(*m, *g);
  ASSERT_TRUE(w);
  ASSERT_TRUE(exec::quantize_weights(*m, *g, *w, dtype::q8_0));
  int experts = 0, routers = 0;
  for (size_t i = 0; i < w->views.size(); ++i) {
    const std::string& tensor = g->values[i].w.name;
    if (!w->views[i].data) continue;
    if (tensor.find("_exps") != std::string::npos) {
      EXPECT_EQ(w->views[i].type, dtype::q8_0) << tensor;
      ++experts;
    }
    if (tensor.find("ffn_gate_inp") != std::string::npos) {
      EXPECT_EQ(w->views[i].type, dtype::f32) << tensor;
      ++routers;
    }
  }
  EXPECT_EQ(experts, 6);
  EXPECT_EQ(routers, 2);
  exec::exec_options o;
  o.quantize = dtype::q8_0;
  auto cpu = test::generator_of(m, o);
  o.where = kernels::backend::ref;
  auto ref = test::generator_of(m, o);
  ASSERT_TRUE(cpu && ref);
  const std::vector<int32_t> prompt = {1, 403, 407, 261};
  EXPECT_EQ(test::greedy(*cpu, prompt, 12).tokens, test::greedy(*ref, prompt, 12).tokens);
  std::remove(so.out.c_str());
}

// Where the CPU kernels lay the quantized matrices out at load, the rows they were made from
// are dropped (they have no file to fault back from) and the model computes what it computes
// without the layout (within the int8 kernels' differences), prefill and decode.
TEST(QuantizeAtLoad, RowsLaidOutAreDroppedAndNotRead) {
  auto m = open(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_TRUE(m);
  exec::exec_options o;
  o.quantize = dtype::q8_0;
  auto laid = test::generator_of(m, o);
  o.pack_budget = 0; // no layout: the quantized rows are what the kernels read
  auto rows = test::generator_of(m, o);
  ASSERT_TRUE(laid && rows);
  if (laid->runner().layout_bytes() == 0) GTEST_SKIP() << "no load-time layout on this CPU";
  EXPECT_GT(laid->runner().released_bytes(), 0);
  EXPECT_EQ(rows->runner().released_bytes(), 0);
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 20; ++i) prompt.push_back(3 + (i * 37) % 500);
  const auto a = test::greedy(*laid, prompt, 12), b = test::greedy(*rows, prompt, 12);
  double scale = 0, diff = 0;
  for (size_t i = 0; i < b.prompt_logits.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b.prompt_logits[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(a.prompt_logits[i] - b.prompt_logits[i])));
  }
  EXPECT_LE(diff, 2e-2 * scale);
  EXPECT_EQ(a.tokens, b.tokens);
}

// Two values that take the same bytes of one tensor (a weight-shared block read by two layers)
// share one load: one owned copy of a column slice, counted once, and a quantized copy made
// once for both.
TEST(LoadWeights, ValuesOfOneTensorShareOneCopy) {
  auto m = open(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto g = arch::build_graph(*m);
  ASSERT_TRUE(g) << g.error().to_string();
  ASSERT_TRUE(graph::infer_shapes(*g));
  graph::vid up = graph::none;
  for (size_t i = 0; i < g->values.size(); ++i)
    if (g->values[i].w.name == "blk.0.ffn_up.weight") up = static_cast<graph::vid>(i);
  ASSERT_NE(up, graph::none);
  // columns [0, 32) of it: a copy the loader owns (a row-parallel TP cut takes such slices)
  graph::value& v = g->values[static_cast<size_t>(up)];
  ASSERT_EQ(v.dims.size(), 2u);
  v.w.cols = 32;
  v.dims[1] = 32;
  graph::graph g0 = *g; // (as it is, to quantize apart)
  auto alone = exec::load_weights(*m, g0);
  ASSERT_TRUE(alone) << alone.error().to_string();
  graph::value again = v;
  again.name += ".again";
  const graph::vid twin = g->add_value(std::move(again));
  graph::node n = g->nodes.back(); // (a reader of the twin: load_weights loads what is read)
  n.in = {twin};
  g->nodes.push_back(n);
  auto both = exec::load_weights(*m, *g);
  ASSERT_TRUE(both) << both.error().to_string();
  const auto& a = both->views[static_cast<size_t>(up)];
  const auto& b = both->views[static_cast<size_t>(twin)];
  ASSERT_NE(a.data, nullptr);
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.nbytes(), v.dims[0] * 32 * 4);
  EXPECT_EQ(both->owned.size(), alone->owned.size());
  EXPECT_EQ(both->resident_bytes, alone->resident_bytes);
  // quantized once, for both
  auto qa = exec::quantize_weights(*m, g0, *alone, dtype::q8_0);
  auto qb = exec::quantize_weights(*m, *g, *both, dtype::q8_0);
  ASSERT_TRUE(qa && qb);
  EXPECT_EQ(both->views[static_cast<size_t>(up)].data, both->views[static_cast<size_t>(twin)].data);
  EXPECT_EQ(both->views[static_cast<size_t>(twin)].type, dtype::q8_0);
  EXPECT_EQ(qb->matrices, qa->matrices);
  EXPECT_EQ(both->resident_bytes, alone->resident_bytes);
}

// A moe quantizes its expert matrices only: Ergo's per-expert output norms [E, C] (a matrix the
// moe reads beside them) stay f32, as the op requires.
TEST(QuantizeAtLoad, ExpertNormsStayF32) {
  auto m = open(test::fixture_path("models/ergo"));
  ASSERT_TRUE(m);
  auto g = arch::build_graph(*m);
  ASSERT_TRUE(g) << g.error().to_string();
  ASSERT_TRUE(graph::infer_shapes(*g));
  auto w = exec::load_weights(*m, *g);
  ASSERT_TRUE(w) << w.error().to_string();
  auto q = exec::quantize_weights(*m, *g, *w, dtype::q8_0);
  ASSERT_TRUE(q) << q.error().to_string();
  int norms = 0, experts = 0;
  for (size_t i = 0; i < w->views.size(); ++i) {
    if (!w->views[i].data) continue;
    const std::string& t = g->values[i].w.name;
    if (t.ends_with(".feed_forward.expert_output_norm.scale")) {
      EXPECT_EQ(w->views[i].type, dtype::f32) << t;
      ++norms;
    } else if (t.ends_with("experts_up") || t.ends_with("experts_down")) {
      EXPECT_EQ(w->views[i].type, dtype::q8_0) << t;
      ++experts;
    }
  }
  EXPECT_EQ(norms, 3);
  EXPECT_EQ(experts, 6);
}
