// family.hpp: an architecture family turned into a graph. build_graph() picks the family of
// a model source (by its config's family name) and asks it for the whole model's graph:
// every weight with its checkpoint name, shape and tensor-parallel cut, every layer built
// from the named helpers of graph/builder.hpp, the residual streams between layers, and the
// logits. One file per family in arch/families/. The passes of graph/passes.hpp then cut it
// for one shard. Tests: tests/exec/forward_test.cpp (every family's fixtures)
#pragma once

#include "arch/model_source.hpp"
#include "graph/graph.hpp"

namespace troupe::arch {

/// Derived tensors a family adds to an HF checkpoint's index at load (tensors the
/// checkpoint splits that the graph reads as one); nothing for most families.
status prepare_tensors(const model_config& c, tensor_index& t);

/// The whole model's graph (all layers, embedding and head).
expected<graph::graph> build_graph(const model_source& m);

/// The families this build knows, by name.
std::vector<std::string> family_names();

} // namespace troupe::arch
