// published_forms_test.cpp: checkpoints as their publishers release them, made from a family's
// transformers fixture by renaming, dropping or adding tensors (and rewriting config.json) the
// way the release differs from what transformers saves: the same model, the same logits
// (Kimi-Linear's dense layer under its published name, MiniMax without its decay buffers,
// Gemma 3n in its multimodal wrapper, A.X K1's dropped norm, BitNet's AutoBitLinear offline;
// Inkling's interleaved w13 rows, read strided).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include <gtest/gtest.h>

#include "../test_paths.hpp"
#include "arch/family.hpp"
#include "arch/model_source.hpp"
#include "exec/shard_graph.hpp"
#include "exec/weights.hpp"
#include "formats/checkpoint_writer.hpp"
#include "formats/safetensors.hpp"
#include "forward_util.hpp"

using namespace troupe;
using json = nlohmann::json;

using test::check_case;
using test::make;

namespace {
// A copy of fixture `src` in a new directory whose model.safetensors holds each tensor under the
// name `rename` gives it (empty: dropped), and `extra` f32 tensors of 0.5 each added; `changed`
// counts the tensors renamed or dropped.
std::filesystem::path
copy_fixture_renamed(const std::string& src, const std::string& tag,
                     const std::function<std::string(const std::string&)>& rename, int& changed,
                     const std::vector<std::pair<std::string, shape>>& extra = {}) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("troupe_{}_{}", tag, ::getpid());
  fs::remove_all(dir);
  fs::copy(src, dir);
  auto t = open_safetensors((fs::path(src) / "model.safetensors").string());
  EXPECT_TRUE(t) << (t ? "" : t.error().to_string());
  if (!t) return dir;
  safetensors_writer w;
  changed = 0;
  for (const std::string& name : (*t)->names()) {
    const tensor_info* info = (*t)->find(name);
    const std::string to = rename(name);
    changed += to != name;
    if (to.empty()) continue;
    w.add_tensor(to, info->type, info->dims, [info](uint8_t* dst, size_t bytes) {
      std::memcpy(dst, info->data, std::min<size_t>(bytes, info->nbytes));
    });
  }
  for (const auto& [name, dims] : extra)
    w.add_tensor(name, dtype::f32, dims, [](uint8_t* dst, size_t bytes) {
      for (size_t i = 0; i + 4 <= bytes; i += 4) {
        const float half = 0.5f;
        std::memcpy(dst + i, &half, 4);
      }
    });
  EXPECT_TRUE(w.write((dir / "model.safetensors").string()));
  return dir;
}
} // namespace

// Kimi-Linear as published names its dense layer's MLP mlp.* (the experts' layers
// block_sparse_moe.*); transformers saves both under block_sparse_moe. Either checkpoint is the
// same model.
TEST(KimiLinear, DenseLayerUnderItsPublishedName) {
  const std::string src = test::fixture_path("models/kimi_linear");
  int renamed = 0;
  const auto dir = copy_fixture_renamed(
      src, "kimi_mlp",
      [](const std::string& name) {
        return name.starts_with("model.layers.0.block_sparse_moe.")
                   ? "model.layers.0.mlp." + name.substr(32)
                   : name;
      },
      renamed);
  EXPECT_EQ(renamed, 3); // gate, up, down
  const json fx = test::load_json(src + "/expected.json");
  auto g = make(dir.string());
  ASSERT_TRUE(g);
  for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  std::filesystem::remove_all(dir);
}

// MiniMax's lightning decay is a buffer transformers saves (slope_rate, with its chunked forms);
// a checkpoint without them is the same model, transformers recomputing the decay from the layer
// index: Troupe derives it then (prepare_minimax_hf), and the logits match as with the buffers.
TEST(MiniMax, DecayDerivedWhereTheCheckpointLeavesItsBuffersOut) {
  const std::string src = test::fixture_path("models/minimax");
  int dropped = 0;
  const auto dir = copy_fixture_renamed(
      src, "minimax",
      [](const std::string& name) {
        return name.ends_with("slope_rate") || name.ends_with("_decay") ? std::string() : name;
      },
      dropped);
  EXPECT_EQ(dropped, 2 * 4); // two lightning layers, four buffers each
  const json fx = test::load_json(src + "/expected.json");
  auto g = make(dir.string());
  ASSERT_TRUE(g);
  for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  std::filesystem::remove_all(dir);
}

// Gemma 3n as Google publishes it: Gemma3nForConditionalGeneration, the text model under
// model.language_model, the vision and audio towers beside it (never read for text), the
// KV-sharing layers' own k / v projections and norms stored though transformers ignores them, and
// the legacy RoPE keys (rope_theta, rope_local_base_freq, rope_scaling null): the same model as the
// text fixture, the same logits.
TEST(Gemma3n, AsPublishedInItsMultimodalWrapper) {
  const std::string src = test::fixture_path("models/gemma3n");
  int renamed = 0;
  std::vector<std::pair<std::string, shape>> extra = {
      {"model.vision_tower.timm_model.conv_stem.conv.weight", shape{8, 3, 3, 3}},
      {"model.embed_vision.embedding.weight", shape{16, 64}},
      {"model.embed_audio.embedding.weight", shape{16, 64}}};
  for (int l : {5, 6}) { // (the fixture's two sharing layers)
    for (const char* t : {"k_proj.weight", "v_proj.weight"})
      extra.emplace_back(fmt::format("model.language_model.layers.{}.self_attn.{}", l, t),
                         shape{32, 64});
    extra.emplace_back(fmt::format("model.language_model.layers.{}.self_attn.k_norm.weight", l),
                       shape{16});
  }
  const auto dir = copy_fixture_renamed(
      src, "gemma3n_published",
      [](const std::string& name) { return "model.language_model." + name.substr(6); }, renamed,
      extra);
  json text = test::load_json(src + "/config.json");
  EXPECT_EQ(text["rope_parameters"]["full_attention"]["rope_theta"], 1e6);
  EXPECT_EQ(text["rope_parameters"]["sliding_attention"]["rope_theta"], 1e4);
  text.erase("rope_parameters");
  text.erase("architectures");
  text.update({{"rope_theta", 1e6},
               {"rope_local_base_freq", 1e4},
               {"rope_scaling", nullptr},
               {"altup_lr_multiplier", 1.0}});
  const json wrapper = {{"architectures", {"Gemma3nForConditionalGeneration"}},
                        {"model_type", "gemma3n"},
                        {"text_config", text},
                        {"vision_config", {{"model_type", "gemma3n_vision"}}},
                        {"audio_config", {{"model_type", "gemma3n_audio"}}}};
  std::ofstream(dir / "config.json") << wrapper.dump(2);
  const json fx = test::load_json(src + "/expected.json");
  auto g = make(dir.string());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->source().config.family, "gemma3n");
  for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  // the sharing layers' stored k / v read as dropped: only the towers stay unread
  auto graph = arch::build_graph(g->source());
  ASSERT_TRUE(graph);
  std::vector<std::string> unread = unread_tensors(g->source(), *graph);
  std::sort(unread.begin(), unread.end());
  EXPECT_EQ(unread, (std::vector<std::string>{
                        "model.embed_audio.embedding.weight", "model.embed_vision.embedding.weight",
                        "model.vision_tower.timm_model.conv_stem.conv.weight"}));
  std::filesystem::remove_all(dir);
}

// A.X K1 as released also stores post_mlp_layernorm on its dense layer, which transformers drops
// (the norm belongs to its MoE block): such a checkpoint reads every tensor it uses, the dense
// layer's norm counts as read and dropped, and the logits are those of the fixture without it.
TEST(AXK1, TheDenseLayersNormAsReleasedIsDropped) {
  const std::string src = test::fixture_path("models/axk1");
  int changed = 0;
  const auto dir =
      copy_fixture_renamed(src, "axk1", [](const std::string& name) { return name; }, changed,
                           {{"model.layers.0.post_mlp_layernorm.weight", shape{64}}});
  EXPECT_EQ(changed, 0);
  const json fx = test::load_json(src + "/expected.json");
  auto g = make(dir.string());
  ASSERT_TRUE(g);
  auto graph = arch::build_graph(g->source());
  ASSERT_TRUE(graph);
  EXPECT_TRUE(unread_tensors(g->source(), *graph).empty());
  for (const auto& c : fx["cases"]) check_case(*g, c, 2e-3);
  std::filesystem::remove_all(dir);
}

// BitNet with AutoBitLinear offline: ternary weights stored as floats, each matrix times its
// weight_scale (BitLinear divides by its own; the fixtures cover it packed). Made from the online
// fixture's master weights as transformers' WeightQuant rounds them every step (s = 1 / mean
// |W|, round(W s) clamped to +-1, weight_scale 1 / s): the same model, the same logits.
TEST(BitNet, AutoBitLinearOfflineIsItsOnlineForm) {
  namespace fs = std::filesystem;
  const std::string src = test::fixture_path("models/bitnet_online");
  const fs::path dir = fs::temp_directory_path() / fmt::format("troupe_bitnet_auto_{}", ::getpid());
  fs::remove_all(dir);
  fs::copy(src, dir);
  auto t = open_safetensors(src + "/model.safetensors");
  ASSERT_TRUE(t) << t.error().to_string();
  safetensors_writer w;
  int rounded = 0;
  for (const std::string& name : (*t)->names()) {
    const tensor_info* info = (*t)->find(name);
    ASSERT_EQ(info->type, dtype::f32) << name;
    const auto* v = reinterpret_cast<const float*>(info->data);
    const int64_t n = info->dims.numel();
    if (!name.ends_with("_proj.weight")) {
      w.add_tensor(name, info->type, info->dims, [info](uint8_t* dst, size_t bytes) {
        std::memcpy(dst, info->data, std::min<size_t>(bytes, info->nbytes));
      });
      continue;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::fabs(v[i]);
    const float s = 1.0f / std::max(static_cast<float>(sum / static_cast<double>(n)), 1e-5f);
    w.add_tensor(name, dtype::f32, info->dims, [v, n, s](uint8_t* dst, size_t) {
      for (int64_t i = 0; i < n; ++i) {
        const float q = std::clamp(std::nearbyint(v[i] * s), -1.0f, 1.0f);
        std::memcpy(dst + 4 * i, &q, 4);
      }
    });
    w.add_tensor(name + "_scale", dtype::f32, shape{1}, [s](uint8_t* dst, size_t) {
      const float inv = 1.0f / s;
      std::memcpy(dst, &inv, 4);
    });
    ++rounded;
  }
  EXPECT_EQ(rounded, 2 * 7);
  ASSERT_TRUE(w.write((dir / "model.safetensors").string()));
  json cfg = test::load_json((dir / "config.json").string());
  cfg["quantization_config"]["quantization_mode"] = "offline";
  std::ofstream((dir / "config.json").string()) << cfg.dump(2);
  const json fx = test::load_json(src + "/expected.json");
  auto g = make(dir.string());
  ASSERT_TRUE(g);
  for (const auto& c : fx["cases"]) check_case(*g, c, c.value("logit_tol", 2e-3));
  fs::remove_all(dir);
}

// Inkling as published keeps each gate / up pair of rows together in its w13 tensors (the dense
// MLP's [2 F, C], the experts' and the shared experts' [E, 2 F, C]): the loader reads the gate
// rows (even) and the up rows (odd) through strided views, and a tensor-parallel or
// expert-parallel cut takes its rows of those. Each loaded row is the stored row it must be.
TEST(Inkling, PublishedW13GateAndUpRowsReadStrided) {
  auto m = open_model(test::fixture_path("models/inkling_vl"));
  ASSERT_TRUE(m) << m.error().to_string();
  const model_config& c = (*m)->config;
  const int64_t C = c.C, F = c.F, Fe = c.F_expert, E = c.n_expert;
  struct want {
    std::string tensor;
    int64_t group, first, count; // of each group [g, 2 F, C]: gate rows first .. first + count
  };
  auto check = [&](const shard_spec& spec, const std::vector<want>& gate_rows) {
    auto whole = arch::build_graph(**m);
    ASSERT_TRUE(whole) << whole.error().to_string();
    auto s = exec::cut_for_shard(c, std::move(*whole), spec);
    ASSERT_TRUE(s) << s.error().to_string();
    auto w = exec::load_weights(**m, s->g);
    ASSERT_TRUE(w) << w.error().to_string();
    int seen = 0;
    for (const want& x : gate_rows) {
      const tensor_info* t = (*m)->tensors->find(x.tensor);
      ASSERT_NE(t, nullptr) << x.tensor;
      const int64_t per = t->dims.rank == 3 ? t->dims.dims[1] : t->dims.dims[0]; // 2 F
      const auto* stored = reinterpret_cast<const float*>(t->data);
      for (int up = 0; up < 2; ++up) { // the value holding these rows, as gate or up
        bool found = false;
        for (size_t i = 0; i < s->g.values.size() && !found; ++i) {
          const graph::value& v = s->g.values[i];
          if (v.w.name != x.tensor || v.w.row_phase != up || !w->views[i].data) continue;
          if (v.w.segments.empty() || v.w.segments[0].first != x.group * per / 2 + x.first)
            continue; // (another shared expert's)
          found = true;
          const auto* got = static_cast<const float*>(w->views[i].data);
          ASSERT_EQ(w->views[i].type, dtype::f32);
          const int64_t groups = w->views[i].dims.dims[0] / x.count;
          for (int64_t gi = 0; gi < groups; ++gi)
            for (int64_t r = 0; r < x.count; ++r) {
              const int64_t row = (x.group + gi) * per + 2 * (x.first + r) + up;
              for (int64_t k = 0; k < C; ++k)
                ASSERT_EQ(got[(gi * x.count + r) * C + k], stored[row * C + k])
                    << x.tensor << (up ? " up" : " gate") << " row " << r << " of group "
                    << x.group + gi;
            }
        }
        EXPECT_TRUE(found) << x.tensor << (up ? " up" : " gate");
        seen += found;
      }
    }
    EXPECT_EQ(seen, 2 * static_cast<int>(gate_rows.size()));
  };
  const std::string l0 = "model.llm.layers.0.mlp.", l1 = "model.llm.layers.1.mlp.";
  const int L = static_cast<int>(c.n_layer);
  check(shard_spec{0, L, 0, 1}, {{l0 + "w13_dn.weight", 0, 0, F},
                                 {l1 + "experts.w13_weight", 0, 0, Fe},
                                 {l1 + "shared_experts.shared_w13_weight", 1, 0, Fe}});
  // TP 2, rank 1: the second half of every gate and up (each expert's)
  check(shard_spec{0, L, 1, 2}, {{l0 + "w13_dn.weight", 0, F / 2, F / 2},
                                 {l1 + "experts.w13_weight", 0, Fe / 2, Fe / 2},
                                 {l1 + "shared_experts.shared_w13_weight", 1, Fe / 2, Fe / 2}});
  // expert parallelism, rank 1 of 2: the last half of the experts, whole
  shard_spec ep{0, L, 1, 2};
  ep.expert_parallel = true;
  check(ep, {{l1 + "experts.w13_weight", E / 2, 0, Fe}});
}
