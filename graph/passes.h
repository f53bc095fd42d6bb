#pragma once
// Graph-to-graph transformations that later stages build on.
#include <aotpipe/graph/graph.h>

#include <span>
#include <string>
#include <vector>

namespace aotpipe {

// Removes nodes whose values are never used, unless the op has side effects (a mutable
// schema). Functionalization leaves dead view copies behind; the partitioner leaves dead
// forward nodes in the backward. Returns the number of nodes removed.
std::size_t eliminate_dead_code(Graph& graph);

// Replaces with None the arguments that a kernel reads only in a mode the node does not use,
// so that nothing keeps their values alive for it: native_batch_norm_backward's running mean
// and variance when `train` is true (the kernels and PyTorch's decomposition then read only the
// saved batch statistics). In a joint graph those values are the updated running statistics,
// which the partitioner would otherwise save for the backward, where eager autograd saves the
// buffers themselves. Returns the number of arguments dropped.
std::size_t drop_unread_arguments(Graph& graph);

// A new graph computing `outputs` from `inputs` (values of `graph`): its placeholders are
// `inputs` (same names and metadata) and its nodes the ones between them, in the original
// order. Throws GraphError naming the value when an output depends on a graph input that is
// not among `inputs`. Tensor constants used are carried over.
Graph extract_subgraph(const Graph& graph, std::span<Value* const> inputs, std::span<Value* const> outputs,
                       std::string name = "subgraph");

// Values of one graph (`source`) mapped to values of another: a flat table by Value::id, for
// passes that copy a graph node by node.
class ValueMap {
 public:
  explicit ValueMap(const Graph& source) : source_(&source), to_(source.value_id_limit(), nullptr) {}
  bool contains(const Value* v) const { return find(v) != nullptr; }
  // Null when `v` is not mapped (or not a value of the source graph).
  Value* find(const Value* v) const { return v->graph() == source_ && v->id() < to_.size() ? to_[v->id()] : nullptr; }
  // Throws std::out_of_range naming the value when it is not mapped.
  Value* at(const Value* v) const;
  // Maps `v` (a value of the source graph) to `to`, replacing any earlier mapping.
  void set(const Value* v, Value* to);

 private:
  const Graph* source_;
  std::vector<Value*> to_;
};

// Appends a copy of `node` (a call or a tensor constant of `source`) to `target`: arguments
// are read through `map`, which must hold every value the node reads; results keep their names
// unless `target` already has the name; attributes and the constant's bound tensor come along.
// Records the copy's results in `map` (a result already mapped stays as it is).
void copy_node(Graph& target, const Graph& source, const Node& node, ValueMap& map);

}  // namespace aotpipe
