// tensor_parallel_test.cpp: a shard's graph cut by TP computes the whole model's numbers, not
// only its greedy tokens, where a rank needs more than the others' sums: BitNet rounds each
// token's activations by the largest magnitude of the whole row, which o_proj's and down_proj's
// inputs hold split over the ranks (the graph's all_reduce with reduce_max); DiffLlama pairs
// heads h and h + H / 2, which each rank holds by its share of both halves. Two ranks in
// threads over an in-process group, against transformers' logits.
#include <gtest/gtest.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "core/batch.hpp"
#include "greedy_util.hpp"
#include "transport/inproc_group.hpp"

using namespace troupe;

namespace {

// the last prompt position's logits of one forward of `prompt` through `s`
std::vector<float> prompt_logits(exec::executor& s, const std::vector<int32_t>& prompt) {
  batch b = test::one_sequence(prompt);
  b.seqs[0].state_slot = 0; // (a model with recurrent states: its slot)
  std::vector<float> x, logits;
  auto st = s.forward(b, x, &logits);
  EXPECT_TRUE(st) << (st ? "" : st.error().to_string());
  return logits;
}

// Each case of fixture `name` through two ranks of one stage: the last prompt position's logits
// on both, within the case's tolerance of transformers'
void two_ranks_match(const std::string& name) {
  const std::string dir = test::fixture_path("models/" + name);
  const auto fx = test::load_json(dir + "/expected.json");
  auto m = open_model(dir);
  ASSERT_TRUE(m) << m.error().to_string();
  const int L = static_cast<int>((*m)->config.n_layer);
  auto group = transport::inproc_group::create(2);
  std::vector<std::unique_ptr<collective>> members;
  for (int r = 0; r < 2; ++r) members.push_back(group->join(r));
  for (const auto& c : fx["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<float>>();
    std::vector<std::vector<float>> got(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        exec::exec_options o;
        o.kv_blocks = 16;
        o.max_rows = 128;
        if ((*m)->config.has_recurrent_state()) o.state_slots = 1; // (Zamba2's mixers)
        auto s = test::shard_executor(*m, 0, L, o, r, 2, members[static_cast<size_t>(r)].get());
        if (s) got[static_cast<size_t>(r)] = prompt_logits(*s, prompt);
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < 2; ++r) {
      // (logits past the reference's never produced: Inkling's unpadded_vocab_size)
      const int64_t rows = (*m)->config.logit_rows;
      if (rows > 0 && got[static_cast<size_t>(r)].size() > static_cast<size_t>(rows))
        got[static_cast<size_t>(r)].resize(static_cast<size_t>(rows));
      ASSERT_EQ(got[static_cast<size_t>(r)].size(), want.size()) << name;
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(got[static_cast<size_t>(r)][i]) -
                                         static_cast<double>(want[i])));
      EXPECT_LE(worst, c.value("logit_tol", 2e-3)) << name << " rank " << r << ": " << c["text"];
    }
  }
}

} // namespace

TEST(TensorParallel, BitNetRoundsSplitRowsByTheWholeRowsMaximum) {
  for (const char* name : {"bitnet", "bitnet_online"}) two_ranks_match(name);
}

// DiffLlama: each rank holds its share of both halves of the heads (the pairs whole)
TEST(TensorParallel, DiffLlamaPairsHeadsOnEachRank) {
  two_ranks_match("diffllama");
}

// Dory: the attention's output and the MLP's product L2-normed over every rank's part of them,
// the logits' scale whole on every rank (applied after the vocabulary's gather)
TEST(TensorParallel, DoryNormsSplitRowsOverTheWholeRow) {
  for (const char* name : {"dory", "dory_last"}) two_ranks_match(name);
}

// Zamba2: the shared blocks' heads, their adapters' B rows and the MLP's gate and up rows cut
// with them, the mixers' heads (one group of B and C: whole on each rank; two: one a rank)
// Inkling: each rank its heads' relative biases (r_proj and the profiles cut by heads), its KV
// heads' convolutions (the sliding layers' one KV head on both ranks), the outputs' convolutions
// whole; the shared experts' weights from the whole router
// (inkling_vl: as published, the w13 tensors' alternating gate and up rows cut alike)
TEST(TensorParallel, InklingRelativeBiasesAndConvolutionsSplit) {
  for (const char* name : {"inkling", "inkling_vl"}) two_ranks_match(name);
}

// ZAYA1: q's and k's convolutions split with their heads (k's residual from the group mean of
// q_proj's rows, each rank its KV heads'), the values' rows of both halves by KV head, the router
// and its carried state whole on every rank, the experts' FFN rows cut
TEST(TensorParallel, ZayaConvolutionalAttentionAndRouterSplit) {
  two_ranks_match("zaya");
}

// Doge: each rank its heads' extra values (the keys' mask scores from dt_proj's all-reduced sum
// over the ranks' values), the selection of each head's first D outputs
TEST(TensorParallel, DogeDynamicMaskSplits) {
  two_ranks_match("doge");
}

// xLSTM: each rank its heads' q, k, v, gates, cells and norms (the fused tensors' row ranges cut
// alike), out_proj's partial sums all-reduced
TEST(TensorParallel, XlstmHeadsSplit) {
  for (const char* name : {"xlstm", "xlstm_fused"}) two_ranks_match(name);
}

TEST(TensorParallel, Zamba2SharedBlocksAndMixersSplit) {
  for (const char* name : {"zamba2", "zamba2_plain"}) two_ranks_match(name);
  two_ranks_match("zamba"); // (Zamba's mixers: a mamba head a rank, its x_proj and dt_proj whole)
}
