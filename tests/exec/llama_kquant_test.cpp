// llama_kquant_test.cpp: K-quant files as llama-quantize writes them (Q4_K_M, Q5_K_M, Q2_K, and
// the non-linear IQ4_XS / IQ4_NL with a Q6_K output, of a random Llama whose rows are whole
// 256-value blocks; llama.cpp chose each tensor's type) run in Troupe and compared with what
// llama.cpp computed on the same files (tests/fixtures/make_llama_kquant_fixtures.py): the logits
// at the last prompt position, and the greedy tokens. Both engines quantize activations to int8
// (llama.cpp per 256 values, we per 32), so logits agree to a tolerance (5% of the largest logit
// here: random weights with peaked logits; on the f32 file they were made from, llama.cpp and
// Troupe agree to 1e-7 and in all twelve greedy tokens, checked once). Each greedy step is replayed
// on llama.cpp's own continuation so far, and Troupe's next token must be llama.cpp's wherever
// llama.cpp's best token led its second by at least twice that tolerance (elsewhere a near tie may
// go either way).
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/model_source.hpp"
#include "exec/generator.hpp"

using namespace troupe;
using json = nlohmann::json;

TEST(LlamaQuantizedKQuants, MatchLlamaCppLogitsAndGreedyTokens) {
  const json refs = test::load_json(test::fixture_path("llama_kquant/refs.json"));
  for (const char* name : {"q4_k_m", "q5_k_m", "q2_k", "iq4_xs", "iq4_nl"}) {
    const json& f = refs[name];
    auto m = open_model(test::fixture_path("llama_kquant/" + f["file"].get<std::string>()));
    ASSERT_TRUE(m) << name << ": " << m.error().to_string();
    auto g = exec::generator::create(*m, exec::exec_options{});
    ASSERT_TRUE(g) << name << ": " << g.error().to_string();
    int clear = 0, agree = 0, cases = 0;
    for (const json& c : f["cases"]) {
      const auto prompt = c["prompt"].get<std::vector<int32_t>>();
      const auto want = c["greedy_tokens"].get<std::vector<int32_t>>();
      const auto margins = c["margins"].get<std::vector<double>>();
      const auto last = c["last_logits"].get<std::vector<float>>();
      exec::generate_options o;
      o.max_tokens = 1;
      o.stop_at_eos = false;
      double tol = 0;
      // each step on llama.cpp's own continuation so far (teacher forcing): one parting at a
      // near tie does not decide the steps after it
      for (size_t i = 0; i < want.size(); ++i) {
        std::vector<int32_t> ids = prompt;
        ids.insert(ids.end(), want.begin(), want.begin() + static_cast<std::ptrdiff_t>(i));
        auto r = (*g)->run(ids, o);
        ASSERT_TRUE(r) << r.error().to_string();
        ASSERT_EQ(r->tokens.size(), 1u);
        if (i == 0) {
          ASSERT_EQ(r->prompt_logits.size(), last.size());
          double scale = 0, diff = 0;
          for (size_t v = 0; v < last.size(); ++v) {
            scale = std::max(scale, std::fabs(static_cast<double>(last[v])));
            diff = std::max(diff, std::fabs(static_cast<double>(r->prompt_logits[v]) - last[v]));
          }
          std::printf("%-6s case %d: max |troupe - llama.cpp| / max |llama.cpp| = %.2e\n", name,
                      cases, diff / scale);
          tol = 5e-2 * scale;
          EXPECT_LE(diff, tol) << name << " case " << cases;
        }
        agree += r->tokens[0] == want[i];
        if (margins[i] < 2 * tol) continue; // a near tie for llama.cpp: either token may win
        ++clear;
        EXPECT_EQ(r->tokens[0], want[i]) << name << " case " << cases << " step " << i;
      }
      ++cases;
    }
    std::printf("%-6s %d of %d next tokens as llama.cpp's; %d steps clear of ties\n", name, agree,
                cases * 12, clear);
    EXPECT_GE(clear, 10) << name << ": too few steps clear of ties to compare";
  }
}

// The CPU kernels' load-time layout (a copy of the Q4_K / Q6_K matrices) is made within
// exec_options::pack_budget: with none allowed, or less than it adds at its peak, the shard
// reads only the published rows, and computes the same logits. Where the kernels then read only
// the layout (Q4_K: decode and prefill), the published rows are released, and the shard's
// resident bytes count the layout instead of them.
TEST(LlamaQuantizedKQuants, TheLoadTimeLayoutKeepsWithinItsBudget) {
  const json refs = test::load_json(test::fixture_path("llama_kquant/refs.json"));
  const json& f = refs["q4_k_m"];
  auto m = open_model(test::fixture_path("llama_kquant/" + f["file"].get<std::string>()));
  ASSERT_TRUE(m) << m.error().to_string();
  const auto prompt = f["cases"][0]["prompt"].get<std::vector<int32_t>>();
  struct run_t {
    int64_t resident = 0, layout = 0, released = 0, need = 0;
    std::vector<float> logits;
  };
  auto run = [&](int64_t budget) {
    exec::exec_options opt;
    opt.pack_budget = budget;
    auto g = exec::generator::create(*m, opt);
    EXPECT_TRUE(g) << g.error().to_string();
    if (!g) return run_t{};
    exec::generate_options o;
    o.max_tokens = 1;
    auto r = (*g)->run(prompt, o);
    EXPECT_TRUE(r) << r.error().to_string();
    if (!r) return run_t{};
    const auto& x = (*g)->runner();
    return run_t{x.resident_bytes(), x.layout_bytes(), x.released_bytes(), x.layout_need(),
                 r->prompt_logits};
  };
  const run_t packed = run(-1), none = run(0);
  if (packed.layout == 0)
    GTEST_SKIP() << "this CPU's kernels read every matrix as published (no packed layout)";
  EXPECT_EQ(none.layout, 0);
  EXPECT_EQ(none.released, 0);
  EXPECT_LE(packed.released, packed.layout);
  EXPECT_EQ(packed.resident, none.resident + packed.layout - packed.released);
  // the budget bounds what the layout adds at its peak: less than the layout itself where rows
  // are released (then the copies kept, and the largest released matrix while it is made)
  EXPECT_LE(packed.need, packed.layout);
  EXPECT_GT(packed.need, 0);
  if (packed.released > 0) {
    EXPECT_LT(packed.need, packed.layout);
  }
  const run_t within = run(packed.need), past = run(packed.need - 1);
  EXPECT_EQ(within.layout, packed.layout) << "a layout within its budget is made";
  EXPECT_EQ(within.resident, packed.resident);
  EXPECT_EQ(past.layout, 0) << "a layout past its budget is not made";
  EXPECT_EQ(past.resident, none.resident);
  for (const run_t* r : {&packed, &within}) { // the second reads the released rows' layout too
    ASSERT_EQ(r->logits.size(), none.logits.size());
    double scale = 0, diff = 0;
    for (size_t v = 0; v < none.logits.size(); ++v) {
      scale = std::max(scale, std::fabs(static_cast<double>(none.logits[v])));
      diff = std::max(diff, std::fabs(static_cast<double>(r->logits[v]) - none.logits[v]));
    }
    EXPECT_LE(diff, 1e-4 * scale) << "the packed kernels compute what the published rows give";
  }
}
