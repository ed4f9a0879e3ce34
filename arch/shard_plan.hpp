// shard_plan.hpp: how a model is cut. A pipeline stage holds layers [layer_begin, layer_end);
// each of its `tp_size` tensor shards holds a slice of every weight: query heads
// [h0, h0 + Hs), KV heads [kv0, kv0 + Hkv_s) (replicated when tp_size exceeds Hkv), FFN rows
// [f0, f0 + Fs) (boundaries kept on quantization blocks of the down projection), and the
// vocabulary rows [v0, v0 + Vs) of the embedding and lm_head. `placement` describes a whole
// pipeline (`--tp N --pp M`, or an explicit per-stage spec). Pure arithmetic, unit-tested.
// Tests: tests/arch/shard_plan_test.cpp
#pragma once

#include <string>
#include <vector>

#include "arch/model_config.hpp"

namespace troupe {

struct shard_spec {
  int layer_begin = 0, layer_end = 0; // layers of the stage
  int tp_rank = 0, tp_size = 1;
  bool first_stage = true, last_stage = true;
  int64_t ffn_block = 1; // FFN split boundaries are multiples of this (quant block of w_down)
  bool expert_parallel = false; // MoE layers: each shard holds whole experts [e0, e0 + Es)
                                // instead of a slice of every expert's FFN
};

struct shard_dims {
  int64_t h0 = 0, Hs = 0;       // query heads
  int64_t kv0 = 0, Hkv_s = 0;   // KV heads
  int64_t kvf0 = 0, Hkvf_s = 0; // the full-attention layers' KV heads (Gemma 4; else as kv)
  int64_t f0 = 0, Fs = 0;       // FFN rows
  int64_t v0 = 0, Vs = 0;       // vocabulary rows
  int64_t e0 = 0, Es = 0;       // experts (expert parallelism; else all of them)
  int64_t lk0 = 0, Hlk_s = 0;   // a linear attention's key heads (gated DeltaNet)
  int64_t lv0 = 0, Hlv_s = 0;   // and its value heads
  // KV heads by layer, where the count varies by layer (DeciLM's kv_heads_by_layer): this
  // rank's first and count on each (empty: kv0, Hkv_s on every layer)
  std::vector<std::pair<int64_t, int64_t>> layer_kv;
};

/// The slices of shard `s` of a model; errors when the heads cannot be split that way.
expected<shard_dims> plan_shard(const model_config& c, const shard_spec& s);

struct stage_spec {
  int layer_begin = 0, layer_end = 0;
  int tp = 1;
  bool expert_parallel = false;     // "tp2ep": the MoE layers' experts spread over the shards
  std::vector<std::string> devices; // "cpu" (default), "cpu:0-3", "cuda", "cuda:1"; one for
                                    // every shard, or one per TP rank
};

/// Where one shard runs.
struct shard_device {
  bool cuda = false;     // a GPU (else the CPU)
  int index = 0;         // which GPU
  std::vector<int> cpus; // cpu:A-B: the shard's threads pinned to these CPUs
  std::string text;      // as written ("cpu" when the stage names none)
};

/// Reads one device of a placement: "cpu", "cpu:A-B", "cpu:A", "cuda", "cuda:N".
expected<shard_device> parse_device(std::string_view text);
/// The device of TP rank `rank` of `s`: its only device, or its rank-th; the CPU when it
/// names none.
expected<shard_device> device_of(const stage_spec& s, int rank);

struct placement {
  std::vector<stage_spec> stages;
  int total_shards() const;
  std::string to_string() const; // "0-2:tp2,3-4:tp1"
  /// The spec of TP rank `rank` of stage `stage` (layers, ranks, first / last stage, EP).
  shard_spec shard(size_t stage, int rank) const;
};

/// --tp N --pp M: M stages with layers split as evenly as possible (earlier stages take the
/// remainder), each with TP N.
expected<placement> even_placement(const model_config& c, int tp, int pp);
/// --ep N: 1 (experts cut by FFN rows like a dense FFN) or each stage's TP (every shard holds
/// whole experts); the model must have experts, as many as a multiple of N.
status set_expert_parallel(const model_config& c, placement& p, int ep);
/// "0-2:tp2,3-4:tp1" (layer ranges inclusive, covering every layer exactly once, in order),
/// each stage optionally followed by "@dev;dev" (one device, or one per TP rank; checked here
/// for form, by the shard that opens it for presence); "tp2ep": expert parallelism in that
/// stage.
expected<placement> parse_placement(const model_config& c, const std::string& text);

} // namespace troupe
