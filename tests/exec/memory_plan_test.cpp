// memory_plan_test.cpp: `troupe plan`'s sizing (exec/memory_plan.hpp). What it says a shard
// holds is what the executor holds when it loads that shard (every family's fixture
// checkpoint, whole and cut TP 2 x PP 2, and quantized at load); a config.json alone sizes
// like its checkpoint; the parameters it counts from published configs are the published
// counts; the search takes the fewest devices, larger TP first, and says when nothing fits.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <unistd.h>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/family.hpp"
#include "exec/executor.hpp"
#include "exec/memory_plan.hpp"

using namespace troupe;

namespace {

std::vector<std::string> fixture_models() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(test::fixture_path("models")))
    if (std::filesystem::exists(e.path() / "config.json")) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string config_of(const std::string& name) {
  return test::fixture_path("configs/" + name);
}

// The executor's own account of a shard: weights it holds, KV bytes per token (and, in
// `state`, recurrent state bytes per sequence).
std::pair<int64_t, int64_t> executor_account(std::shared_ptr<const model_source> m,
                                             const shard_spec& spec, dtype quantize,
                                             int64_t* state = nullptr) {
  exec::exec_options opt;
  opt.kv_blocks = 4;
  opt.block_size = 16;
  opt.state_slots = 3;
  opt.quantize = quantize;
  opt.pack_budget = 0; // the CPU's packed copies of matrices are not what a plan sizes
  auto e = exec::executor::create(std::move(m), spec, opt, nullptr);
  EXPECT_TRUE(e) << e.error().to_string();
  if (!e) return {-1, -1};
  if (state) *state = (*e)->state_bytes() / opt.state_slots;
  return {(*e)->resident_bytes(), (*e)->kv_bytes() / (opt.kv_blocks * opt.block_size)};
}

} // namespace

// Every family's fixture, whole and as TP 2 x PP 2 where its heads split that way: the plan's
// weights and KV per token are the executor's.
TEST(MemoryPlan, ShardsHoldWhatTheExecutorLoads) {
  int compared = 0;
  for (const auto& path : fixture_models()) {
    auto m = open_model(path);
    if (!m && m.error().message.find("--arch-spec") != std::string::npos) continue; // a spec's
    ASSERT_TRUE(m) << m.error().to_string();
    const model_config& c = (*m)->config;
    for (auto [tp, pp] : {std::pair{1, 1}, std::pair{2, 2}}) {
      if (pp > c.n_layer) continue;
      auto place = even_placement(c, tp, pp);
      if (!place) continue;
      bool cuts = true;
      for (size_t s = 0; s < place->stages.size(); ++s)
        for (int r = 0; r < tp; ++r) cuts = cuts && plan_shard(c, place->shard(s, r)).has_value();
      if (!cuts) continue;
      exec::memory_options mo;
      auto shards = exec::measure_placement(**m, *place, mo);
      ASSERT_TRUE(shards) << path << ": " << shards.error().to_string();
      ASSERT_EQ(shards->size(), static_cast<size_t>(tp * pp));
      for (const auto& s : *shards) {
        int64_t state = -1;
        const auto [weights, kv] = executor_account(
            *m, place->shard(static_cast<size_t>(s.stage), s.rank), dtype::f32, &state);
        EXPECT_EQ(s.kv_bytes_per_token, kv) << path << " stage " << s.stage << " rank " << s.rank;
        EXPECT_EQ(s.state_bytes_per_seq, state)
            << path << " stage " << s.stage << " rank " << s.rank;
        if (c.has_recurrent_state()) { // what the host sizes the state slots by
          EXPECT_EQ(s.state_bytes_per_seq, c.state_values_per_seq(s.layer_begin, s.layer_end, tp) *
                                               static_cast<int64_t>(sizeof(float)));
        }
        EXPECT_EQ(s.weight_bytes, weights)
            << path << " tp" << tp << " pp" << pp << " stage " << s.stage << " rank " << s.rank;
        EXPECT_GT(s.arena_bytes, 0);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);
}

// --quantize q8_0: the matrices the executor quantizes at load, sized as it sizes them.
TEST(MemoryPlan, QuantizedAtLoadAsTheExecutorQuantizes) {
  for (const char* name : {"llama3", "mixtral", "qwen3_moe"}) {
    auto m = open_model(test::fixture_path(std::string("models/") + name));
    ASSERT_TRUE(m) << m.error().to_string();
    auto place = even_placement((*m)->config, 1, 1);
    ASSERT_TRUE(place);
    exec::memory_options mo;
    mo.quantize = dtype::q8_0;
    auto shards = exec::measure_placement(**m, *place, mo);
    ASSERT_TRUE(shards);
    exec::memory_options plain;
    auto f32 = exec::measure_placement(**m, *place, plain);
    ASSERT_TRUE(f32);
    EXPECT_LT((*shards)[0].weight_bytes, (*f32)[0].weight_bytes / 2) << name;
    EXPECT_EQ((*shards)[0].weight_bytes,
              executor_account(*m, place->shard(0, 0), dtype::q8_0).first)
        << name;
  }
}

// A config.json alone sizes as the checkpoint beside it: the same KV per token, and the same
// weights but for the optional 1-D tensors (biases) it cannot know are there.
TEST(MemoryPlan, ConfigAloneSizesLikeItsCheckpoint) {
  int exact = 0;
  for (const auto& path : fixture_models()) {
    auto full = open_model(path);
    if (!full && full.error().message.find("--arch-spec") != std::string::npos) continue;
    auto bare = open_model_config(path + "/config.json");
    ASSERT_TRUE(full) << full.error().to_string();
    ASSERT_TRUE(bare) << path << ": " << bare.error().to_string();
    auto place = even_placement((*full)->config, 1, 1);
    ASSERT_TRUE(place);
    exec::memory_options mo;
    auto a = exec::measure_placement(**full, *place, mo);
    auto b = exec::measure_placement(**bare, *place, mo);
    ASSERT_TRUE(a && b) << path;
    EXPECT_EQ((*a)[0].kv_bytes_per_token, (*b)[0].kv_bytes_per_token) << path;
    // what the checkpoint holds beyond the config's shapes: 1-D optional tensors only
    int64_t optional = 0;
    auto g = arch::build_graph(**full);
    ASSERT_TRUE(g);
    for (const auto& v : g->values)
      if (v.kind == graph::value_kind::weight && !v.empty && v.dims.size() == 1 && v.w.optional)
        optional += v.dims[0] * 4;
    const int64_t diff = (*a)[0].weight_bytes - (*b)[0].weight_bytes;
    EXPECT_GE(diff, 0) << path;
    EXPECT_LE(diff, optional) << path;
    exact += diff == 0;
  }
  EXPECT_GT(exact, 20);
}

// The config's own count (what the loader prints, `troupe plan` shows and FLOP estimates use)
// against the weights the graph reads, for every family fixture: a family added later is checked
// without being listed. The two left out say why.
TEST(MemoryPlan, FixtureParameterCounts) {
  const std::map<std::string, std::string> aside = {
      {"apertus1p5", "its pruned head is padded to the vocabulary at load (a derived [V, C] table "
                     "and a -1e30 bias): the graph holds more than the checkpoint stores"},
      {"llama_relu6", "it opens with its spec file only (ForwardTest.SpecFileActivation)"}};
  int counted = 0;
  for (const auto& path : fixture_models()) {
    const std::string name = std::filesystem::path(path).filename().string();
    if (aside.count(name)) continue;
    auto m = open_model(path);
    ASSERT_TRUE(m) << name << ": " << m.error().to_string();
    auto n = exec::count_parameters(**m);
    ASSERT_TRUE(n) << name;
    EXPECT_EQ((*m)->config.parameters(), *n) << name;
    ++counted;
  }
  EXPECT_GE(counted, 190); // (every fixture directory, not an empty listing)
}

// The parameters of published configs, counted from the graph their family builds, are the
// counts their publishers give: Llama 3.1 8B 8,030,261,248 and 405B 405,853,388,800; Mixtral
// 8x7B 46,702,792,704; DeepSeek-V3 671 B (without its multi-token-prediction layer, which
// inference does not run); DBRX 132 B.
TEST(MemoryPlan, PublishedParameterCounts) {
  auto count = [](const std::string& name) -> int64_t {
    auto m = open_model_config(config_of(name));
    EXPECT_TRUE(m) << name << ": " << m.error().to_string();
    if (!m) return -1;
    auto n = exec::count_parameters(**m);
    EXPECT_TRUE(n);
    return n ? *n : -1;
  };
  EXPECT_EQ(count("llama-3.1-8b"), 8'030'261'248);
  EXPECT_EQ(count("llama-3.1-405b"), 405'853'388'800);
  EXPECT_EQ(count("mixtral-8x7b"), 46'702'792'704);
  EXPECT_NEAR(static_cast<double>(count("deepseek-v3")), 671e9, 0.005 * 671e9);
  EXPECT_NEAR(static_cast<double>(count("dbrx-instruct")), 132e9, 0.005 * 132e9);
}

// DeepSeek-V3's FP8 checkpoint: its linear layers in E4M3 tiles (132 bytes per 128 values),
// the embedding, lm_head and routers in bf16, a latent KV cache of 576 values a layer.
TEST(MemoryPlan, DeepSeekFp8FromItsConfig) {
  auto m = open_model_config(config_of("deepseek-v3"));
  ASSERT_TRUE(m) << m.error().to_string();
  auto place = even_placement((*m)->config, 1, 1);
  ASSERT_TRUE(place);
  exec::memory_options mo;
  mo.kv_dtype = dtype::bf16;
  auto s = exec::measure_placement(**m, *place, mo);
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)[0].kv_bytes_per_token, 61 * 576 * 2);
  const double bytes = static_cast<double>((*s)[0].weight_bytes);
  // 671 B parameters at ~1.03 bytes (plus 1.85 B of bf16 tables): 690-700 GB
  EXPECT_GT(bytes, 680e9);
  EXPECT_LT(bytes, 710e9);
}

// A recurrent state is kept per sequence running: the plan counts every target sequence's beside
// the weights and the step's arena (xLSTM keeps no KV at all: nothing bounds its KV room)
TEST(MemoryPlan, RecurrentStatesCountForEverySequence) {
  auto m = open_model(test::fixture_path("models/xlstm"));
  ASSERT_TRUE(m) << m.error().to_string();
  exec::memory_options mo;
  exec::device_pool pool;
  pool.usable = 1.0;
  pool.bytes = int64_t{1} << 30;
  auto roomy = exec::plan_memory(**m, pool, exec::plan_target{64, 1}, mo, 1, 1);
  ASSERT_TRUE(roomy && roomy->chosen >= 0);
  const exec::shard_memory s = roomy->tried[static_cast<size_t>(roomy->chosen)].shards.at(0);
  EXPECT_EQ(s.kv_bytes_per_token, 0);
  // 3 layers of 4 heads, each [16 + 1, 32 + 1] f32
  EXPECT_EQ(s.state_bytes_per_seq, 3 * 4 * 17 * 33 * 4);
  EXPECT_EQ(roomy->tried[static_cast<size_t>(roomy->chosen)].kv_tokens,
            std::numeric_limits<int64_t>::max());
  pool.bytes = s.fixed_bytes() + 10 * s.state_bytes_per_seq; // room for 10 sequences' states
  auto ten = exec::plan_memory(**m, pool, exec::plan_target{64, 10}, mo, 1, 1);
  ASSERT_TRUE(ten);
  EXPECT_EQ(ten->chosen, 0);
  auto eleven = exec::plan_memory(**m, pool, exec::plan_target{64, 11}, mo, 1, 1);
  ASSERT_TRUE(eleven);
  EXPECT_EQ(eleven->chosen, -1);
  ASSERT_EQ(eleven->tried.size(), 1u);
  EXPECT_EQ(eleven->tried[0].most_bytes, s.fixed_bytes() + 11 * s.state_bytes_per_seq);
}

// The search: the fewest devices that hold the model and its KV target, larger TP first;
// stages never span machines; nothing fits: no choice, what was tried kept.
TEST(MemoryPlan, SearchTakesTheFewestDevices) {
  auto m = open_model_config(config_of("llama-3.1-8b"));
  ASSERT_TRUE(m) << m.error().to_string();
  exec::memory_options mo;
  mo.kv_dtype = dtype::bf16;
  exec::plan_target t{8192, 1};
  exec::device_pool pool;
  pool.per_machine = 8;
  pool.bytes = int64_t{80} << 30;
  auto one = exec::plan_memory(**m, pool, t, mo);
  ASSERT_TRUE(one) << one.error().to_string();
  ASSERT_GE(one->chosen, 0);
  EXPECT_EQ(one->tried[static_cast<size_t>(one->chosen)].place.to_string(), "0-31:tp1");
  pool.bytes = int64_t{12} << 30; // 16 GB of bf16 weights: two devices, as TP 2
  auto two = exec::plan_memory(**m, pool, t, mo);
  ASSERT_TRUE(two && two->chosen >= 0);
  EXPECT_EQ(two->tried[static_cast<size_t>(two->chosen)].place.to_string(), "0-31:tp2");
  pool.per_machine = 1; // one device a machine: stages instead
  pool.machines = 4;
  auto pp = exec::plan_memory(**m, pool, t, mo);
  ASSERT_TRUE(pp && pp->chosen >= 0);
  EXPECT_EQ(pp->tried[static_cast<size_t>(pp->chosen)].place.to_string(), "0-15:tp1,16-31:tp1");
  for (const auto& k : pp->tried) EXPECT_EQ(k.place.stages[0].tp, 1);
  pool.machines = 1; // 12 GiB for 16 GB of weights: said without trying a placement
  auto none = exec::plan_memory(**m, pool, t, mo);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->chosen, -1);
  EXPECT_TRUE(none->tried.empty());
  EXPECT_NE(none->why_none.find("at least 2 devices"), std::string::npos) << none->why_none;
  pool.machines = 2; // two hold the weights, not 64 sequences of 128 K tokens
  auto full = exec::plan_memory(**m, pool, exec::plan_target{131072, 64}, mo);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->chosen, -1);
  ASSERT_FALSE(full->tried.empty());
  for (const auto& k : full->tried) EXPECT_FALSE(k.fits);
  // and a target past any memory saturates instead of wrapping round to "fits"
  auto absurd = exec::plan_memory(**m, pool, exec::plan_target{int64_t{1} << 40, 1 << 30}, mo);
  ASSERT_TRUE(absurd);
  EXPECT_EQ(absurd->chosen, -1);
  for (const auto& k : absurd->tried) EXPECT_EQ(k.most_bytes, INT64_MAX);
  // a longer target needs room for its KV: 8 sequences of 128 K tokens at 128 KiB a token
  pool.machines = 2;
  pool.per_machine = 8;
  pool.bytes = int64_t{80} << 30;
  auto big = exec::plan_memory(**m, pool, exec::plan_target{131072, 8}, mo);
  ASSERT_TRUE(big && big->chosen >= 0);
  const auto& k = big->tried[static_cast<size_t>(big->chosen)];
  EXPECT_GE(k.devices, 2);
  EXPECT_GE(k.kv_tokens, int64_t{131072} * 8);
  // and a placement asked for is the only one tried
  auto asked = exec::plan_memory(**m, pool, t, mo, 4, 2);
  ASSERT_TRUE(asked && asked->tried.size() == 1);
  EXPECT_EQ(asked->tried[0].place.to_string(), "0-15:tp4,16-31:tp4");
  EXPECT_FALSE(exec::plan_memory(**m, pool, t, mo, 16, 1)); // TP past a machine
}

// Llama 3.1 405B in bf16 on machines of 8 x 141 GiB: seven single-device stages are the
// fewest devices; one machine's TP 8 is the placement with fewer stages, also found.
TEST(MemoryPlan, FewerStagesWhenTheChoiceIsAPipeline) {
  auto m = open_model_config(config_of("llama-3.1-405b"));
  ASSERT_TRUE(m) << m.error().to_string();
  exec::memory_options mo;
  mo.kv_dtype = dtype::bf16;
  exec::device_pool pool;
  pool.machines = 2;
  pool.per_machine = 8;
  pool.bytes = int64_t{141} << 30;
  auto p = exec::plan_memory(**m, pool, exec::plan_target{32768, 1}, mo);
  ASSERT_TRUE(p && p->chosen >= 0 && p->fewer_stages >= 0);
  const auto& k = p->tried[static_cast<size_t>(p->chosen)];
  EXPECT_EQ(k.devices, 7);
  EXPECT_EQ(k.place.stages.size(), 7u);
  EXPECT_EQ(p->tried[static_cast<size_t>(p->fewer_stages)].place.to_string(), "0-125:tp8");
  // 810 GB of weights over 8: about 101 GB each, under the 127 GiB a device may fill
  EXPECT_LT(p->tried[static_cast<size_t>(p->fewer_stages)].most_bytes, pool.budget());
}

// Llama 3.1 405B in bf16 on machines of 8 x 80 GiB at its 128 K context: an even split needs
// 14 devices (7 stages of TP 2), but the first stage's embedding and the last's lm_head and
// logits leave room in the others: 13 stages of packed layers fit, and each of their shards,
// sized again on its own, is within a device.
TEST(MemoryPlan, PackedStagesWhenAnEvenSplitWastesRoom) {
  auto m = open_model_config(config_of("llama-3.1-405b"));
  ASSERT_TRUE(m) << m.error().to_string();
  exec::memory_options mo;
  exec::device_pool pool;
  pool.machines = 16;
  pool.per_machine = 8;
  pool.bytes = int64_t{80} << 30;
  auto p = exec::plan_memory(**m, pool, exec::plan_target{}, mo);
  ASSERT_TRUE(p && p->chosen >= 0) << (p ? "" : p.error().to_string());
  const auto& k = p->tried[static_cast<size_t>(p->chosen)];
  EXPECT_TRUE(k.packed);
  EXPECT_EQ(k.devices, 13);
  for (const auto& other : p->tried) { // no even split on 13 or fewer fits
    if (!other.packed && other.devices <= 13) {
      EXPECT_FALSE(other.fits) << other.place.to_string();
    }
  }
  std::set<int> sizes;
  for (const auto& st : k.place.stages) sizes.insert(st.layer_end - st.layer_begin);
  EXPECT_GT(sizes.size(), 1u); // uneven
  auto again = exec::measure_placement(**m, k.place, mo);
  ASSERT_TRUE(again);
  for (const auto& s : *again)
    EXPECT_LE(s.fixed_bytes() + s.kv_bytes_per_token * 131072, pool.budget()) << s.stage;
}

// A config whose weights are quantized by a method Troupe does not implement is refused by
// name, as its checkpoint would be: no plan for a model it cannot run.
TEST(MemoryPlan, RefusesWhatCannotLoad) {
  const std::string dir = ::testing::TempDir() + "plan_gptq_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ifstream in(config_of("llama-3.1-8b") + "/config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.insert(text.rfind('}'),
                ", \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}");
    std::ofstream(dir + "/config.json") << text;
  }
  auto m = open_model_config(dir);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("quantization_config"), std::string::npos) << m.error().message;
  EXPECT_FALSE(open_model_config(dir + "/nothing.json"));
  // a KV head count of 0 is no model (it was read as full multi-head attention)
  for (const char* key : {"num_key_value_heads", "head_dim"}) {
    auto cfg = test::load_json(config_of("llama-3.1-8b") + "/config.json");
    cfg[key] = 0;
    std::ofstream(dir + "/config.json") << cfg.dump();
    auto zero = open_model_config(dir);
    ASSERT_FALSE(zero) << key;
    EXPECT_NE(zero.error().message.find(key), std::string::npos) << zero.error().message;
  }
  std::filesystem::remove_all(dir);
}
