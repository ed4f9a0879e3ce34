// shard_graph.hpp: one shard's graph, the whole model's cut for a shard_spec: the FFN's split
// boundaries kept on the quantization blocks of the weights it cuts by columns, the slices of
// heads, KV heads, FFN rows, experts and vocabulary (arch/shard_plan.hpp), the pipeline cut,
// the tensor cut with its collectives, and dead nodes dropped (graph/passes.hpp). The
// executor runs what this returns; `troupe plan` (memory_plan.hpp) sizes it without loading
// a weight. Tests: tests/exec/memory_plan_test.cpp, tests/exec/forward_test.cpp
#pragma once

#include "arch/model_source.hpp"
#include "arch/shard_plan.hpp"
#include "graph/graph.hpp"

namespace troupe::exec {

struct shard_graph {
  graph::graph g;
  shard_spec spec; // as asked, with ffn_block set from the weights
  shard_dims dims;
};

/// `whole`: the model's graph as its family builds it (arch::build_graph).
expected<shard_graph> cut_for_shard(const model_config& c, graph::graph whole,
                                    const shard_spec& spec);

} // namespace troupe::exec
