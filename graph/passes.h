#pragma once
// Graph-to-graph transformations that later stages build on.
#include <aotpipe/graph/graph.h>

#include <span>
#include <string>
#include <unordered_map>

namespace aotpipe {

// Removes nodes whose values are never used, unless the op has side effects (a mutable
// schema). Functionalization leaves dead view copies behind; the partitioner leaves dead
// forward nodes in the backward. Returns the number of nodes removed.
std::size_t eliminate_dead_code(Graph& graph);

// A new graph computing `outputs` from `inputs` (values of `graph`): its placeholders are
// `inputs` (same names and metadata) and its nodes the ones between them, in the original
// order. Throws GraphError naming the value when an output depends on a graph input that is
// not among `inputs`. Tensor constants used are carried over.
Graph extract_subgraph(const Graph& graph, std::span<Value* const> inputs, std::span<Value* const> outputs,
                       std::string name = "subgraph");

// Appends a copy of `node` (a call or a tensor constant of `source`) to `target`: arguments
// are read through `map`, which must hold every value the node reads; results keep their names
// unless `target` already has the name; attributes and the constant's bound tensor come along.
// Records the copy's results in `map` (a result already mapped stays as it is).
void copy_node(Graph& target, const Graph& source, const Node& node, std::unordered_map<const Value*, Value*>& map);

}  // namespace aotpipe
