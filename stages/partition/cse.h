#pragma once
// Common-subexpression elimination as the min-cut partitioner runs it first (PyTorch's
// fx_graph_cse, torch._functorch.config.cse = True).
#include <aotpipe/graph/graph.h>

#include <optional>

namespace aotpipe::partitioners {

// A copy of `graph` without dead nodes (nodes whose values nothing reads, unless the op has side
// effects) in which a call that repeats an earlier call (same overload, same arguments after
// replacement) is dropped and its values replaced by the earlier ones. Never merged, as in
// PyTorch: random ops (rand_ops), aten::empty, ops with side effects, constants, and nodes
// defining a value that shares storage with a graph output (followed through the schemas'
// alias annotations: views of outputs, outputs themselves). Values keep their names; graph
// inputs and outputs keep their order. `merged`, when given, receives the number of dropped calls.
Graph eliminate_common_subexpressions(const Graph& graph, std::size_t* merged = nullptr);

// The same, but nullopt where that copy would equal `graph` (nothing dead, nothing merged: most
// joint graphs), so that a caller that only reads the result can use `graph` and copy nothing.
std::optional<Graph> eliminate_common_subexpressions_if_any(const Graph& graph, std::size_t* merged = nullptr);

}  // namespace aotpipe::partitioners
