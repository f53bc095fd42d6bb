#pragma once
// Calling a backend compiler on one graph, the one way the stages and the runtime do it: with the
// graph's input metadata, inside a compile group, collecting the backend's notes
// (backend_notes.h).
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/graph/graph.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace aotpipe {

class CompileGroup;     // backend_notes.h
struct GraphOutputUse;  // backend_notes.h

// The metadata of the graph's inputs, as a Compiler receives them (empty for an input without).
std::vector<TensorMeta> input_metas(const Graph& graph);

// A compiled graph and what its backend said while compiling it.
struct NotedGraph {
  CompiledGraph graph;
  std::vector<std::string> notes;
};

// `compiler` on `graph`, now, on this thread, in `group`; `use`: what the runtime does with the
// graph's outputs (backend_notes.h).
NotedGraph compile_with_notes(const Compiler& compiler, const Graph& graph, CompileGroup& group,
                              const GraphOutputUse& use);
NotedGraph compile_with_notes(const Compiler& compiler, const Graph& graph, CompileGroup& group);

// A graph compiled by `compiler` when it is first called (a cache hit's inference graph: decoded
// and compiled only when it first runs; a training function's two graphs go through
// compile_training_graphs_on_first_call below). `graph` is called
// then, once; concurrent first calls compile once. The backend's notes are dropped: the
// compile that made the graph reported them. The graphs of one function pass one `group`
// (null: a group of its own); `use`, asked then too, says what the runtime does with the outputs.
CompiledGraph compile_on_first_call(Compiler compiler, std::function<const Graph&()> graph,
                                    std::shared_ptr<CompileGroup> group = nullptr,
                                    std::function<GraphOutputUse()> use = nullptr);

// A training function's forward and backward compiled on first call, in one group: the forward's
// first call compiles both (the forward first, as a compile does), so the backend has seen the
// backward before the forward first runs, as after a compile (the CUDA-graph backend's forward
// lends its saved values only to a backward it runs, and decides so at its first replay).
// `forward_use` as `use` above.
struct CompiledTrainingGraphs {
  CompiledGraph forward;
  CompiledGraph backward;
};
CompiledTrainingGraphs compile_training_graphs_on_first_call(Compiler forward_compiler,
                                                             std::function<const Graph&()> forward_graph,
                                                             std::function<GraphOutputUse()> forward_use,
                                                             Compiler backward_compiler,
                                                             std::function<const Graph&()> backward_graph);

}  // namespace aotpipe
