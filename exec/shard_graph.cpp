// shard_graph.cpp: a whole model's graph cut for one shard (shard_graph.hpp).
#include "exec/shard_graph.hpp"

#include <algorithm>

#include "graph/passes.hpp"

namespace troupe::exec {

expected<shard_graph> cut_for_shard(const model_config& c, graph::graph whole,
                                    const shard_spec& spec) {
  using graph::value_kind;
  shard_graph out;
  out.spec = spec;
  // FFN boundaries must not split a quantization block of a weight cut by FFN columns
  for (const auto& v : whole.values)
    if (v.kind == value_kind::weight && v.split == graph::cut::in && v.along == graph::axis::ffn &&
        !v.empty)
      out.spec.ffn_block = std::max<int64_t>(out.spec.ffn_block, block_elems(v.type));
  TROUPE_TRY_ASSIGN(d, plan_shard(c, out.spec));
  for (int l = spec.layer_begin; l < spec.layer_end; ++l) // shared work stays on its stage
    if (const int64_t src = c.layer_reads_from(l); src < spec.layer_begin)
      return make_error(errc::invalid_argument,
                        "layer {} reads the KV cache or sparse-attention selection of layer {}, "
                        "which another stage holds: cut the pipeline before layer {}",
                        l, src, src);
  out.dims = d;
  graph::shard_cut cut;
  cut.layer_begin = spec.layer_begin;
  cut.layer_end = spec.layer_end;
  cut.first_stage = spec.first_stage;
  cut.last_stage = spec.last_stage;
  cut.tp_rank = spec.tp_rank;
  cut.tp_size = spec.tp_size;
  cut.of(graph::axis::heads) = {d.h0, d.Hs};
  for (int64_t heads : c.heads_by_layer) // (plan_shard checked each divides by TP)
    cut.layer_heads.emplace_back(spec.tp_rank * heads / spec.tp_size, heads / spec.tp_size);
  cut.of(graph::axis::kv_heads) = {d.kv0, d.Hkv_s};
  cut.layer_kv_heads = d.layer_kv;
  cut.of(graph::axis::kv_heads_full) = {d.kvf0, d.Hkvf_s};
  // (each half alike: plan_shard checked that TP divides the halves, where a model cuts so)
  cut.of(graph::axis::heads_half) = {d.h0 / 2, d.Hs / 2};
  cut.of(graph::axis::kv_heads_half) = {d.kv0 / 2, d.Hkv_s / 2};
  cut.of(graph::axis::ffn) = {d.f0, d.Fs};
  cut.ffn_block = out.spec.ffn_block;
  cut.expert_parallel = spec.expert_parallel;
  cut.expert0 = d.e0;
  cut.experts = d.Es;
  cut.of(graph::axis::vocab) = {d.v0, d.Vs};
  cut.of(graph::axis::lin_k_heads) = {d.lk0, d.Hlk_s};
  cut.of(graph::axis::lin_v_heads) = {d.lv0, d.Hlv_s};
  TROUPE_TRY(graph::infer_shapes(whole)); // the residual's width, for a stage's hidden input
  TROUPE_TRY(graph::cut_pipeline(whole, cut));
  TROUPE_TRY(graph::cut_tensor(whole, cut));
  graph::remove_dead(whole);
  out.g = std::move(whole);
  return out;
}

} // namespace troupe::exec
