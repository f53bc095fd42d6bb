#pragma once
// Internal to the partitioners: building the forward and backward graphs out of the joint
// graph (PyTorch's _extract_graph_with_inputs_outputs and reordering_to_mimic_autograd_engine).
#include <aotpipe/graph/graph.h>
#include <aotpipe/stages/partition/internal/joint_view.h>
#include <aotpipe/stages/partition/partition_error.h>
#include <aotpipe/stages/partition/partitioner.h>

#include <span>
#include <string>
#include <vector>

namespace aotpipe::partitioners::detail {

enum class Subgraph { Forward, Backward };

// The nodes of `graph`, in its order, that a graph with these inputs (values of `graph`) and
// outputs contains: a node is there when every value it reads is an input or comes from a node
// that is there (constants always are), and something an output needs reads it (dead code is
// left out). An op with side effects stays in the forward unless tagged phase=backward, and
// only there (PyTorch's _must_be_in_forward/_must_be_in_backward). Throws PartitionError when
// an output cannot be computed from the inputs.
std::vector<const Node*> select_nodes(const Graph& graph, std::span<Value* const> inputs,
                                      std::span<Value* const> outputs, Subgraph which);

// PyTorch's reordering_to_mimic_autograd_engine: starting at the first node that reads a
// tangent, each node is preceded by exactly those of its (transitive) producers not placed
// yet, in their original order, so recomputed forward nodes land just before their first use.
// `nodes` is in graph order; the result is a permutation of it.
std::vector<const Node*> autograd_engine_order(std::span<const Node* const> nodes, std::span<Value* const> inputs,
                                               std::span<Value* const> tangents, std::span<Value* const> outputs);

// A new graph named `name`: placeholders for `inputs` (names and TensorMeta kept), copies of
// `nodes` in the given order (attributes kept, constants carried over), outputs `outputs`.
// `copies`, when given, receives the new node of each of `nodes` (null for a constant that an
// input already stands for).
Graph build_graph(const Graph& graph, std::span<Value* const> inputs, std::span<const Node* const> nodes,
                  std::span<Value* const> outputs, std::string name, std::vector<const Node*>* copies = nullptr);

// The forward and backward graphs for a choice of saved values (PyTorch's
// _extract_fwd_bwd_modules): saved values the backward does not read are dropped, tensors come
// before numbers; the forward returns its outputs then the saved values, the backward takes the
// saved values then the tangents. `autograd_order`: reorder the backward with
// autograd_engine_order (the min-cut partitioner does, the default one does not).
// `reorder_for_peak_memory`: last, each graph is ordered for peak memory
// (graph/memory_schedule.h) when that lowers its estimate by 5% or more.
PartitionResult assemble_partition(const Graph& joint, const JointView& view, std::vector<Value*> saved,
                                   bool autograd_order, bool reorder_for_peak_memory);

}  // namespace aotpipe::partitioners::detail
