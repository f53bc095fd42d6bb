#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/run_compiler.h>
#include <aotpipe/pipeline/lazy.h>

namespace aotpipe {

std::vector<TensorMeta> input_metas(const Graph& graph) {
  std::vector<TensorMeta> metas;
  metas.reserve(graph.num_inputs());
  for (const Value* v : graph.inputs()) metas.push_back(v->meta() ? *v->meta() : TensorMeta{});
  return metas;
}

NotedGraph compile_with_notes(const Compiler& compiler, const Graph& graph, CompileGroup& group,
                              const GraphOutputUse& use) {
  BackendNoteCollector notes;
  const CompileGroupScope in_group(&group, use);
  CompiledGraph compiled = compiler(graph, input_metas(graph));
  return {std::move(compiled), notes.take()};
}

NotedGraph compile_with_notes(const Compiler& compiler, const Graph& graph, CompileGroup& group) {
  return compile_with_notes(compiler, graph, group, GraphOutputUse{});
}

namespace {

// The notes are collected and dropped: they must not reach a collector that happens to be alive
// on the calling thread.
Lazy<CompiledGraph> deferred_compile(Compiler compiler, std::function<const Graph&()> graph,
                                     std::shared_ptr<CompileGroup> group, std::function<GraphOutputUse()> use) {
  if (!group) group = std::make_shared<CompileGroup>();
  return Lazy<CompiledGraph>::deferred(
      [compiler = std::move(compiler), graph = std::move(graph), group = std::move(group), use = std::move(use)] {
        return compile_with_notes(compiler, graph(), *group, use ? use() : GraphOutputUse{}).graph;
      });
}

CompiledGraph calling(Lazy<CompiledGraph> compiled) {
  return [compiled = std::move(compiled)](TensorList args) { return compiled.get()(std::move(args)); };
}

}  // namespace

CompiledGraph compile_on_first_call(Compiler compiler, std::function<const Graph&()> graph,
                                    std::shared_ptr<CompileGroup> group, std::function<GraphOutputUse()> use) {
  return calling(deferred_compile(std::move(compiler), std::move(graph), std::move(group), std::move(use)));
}

CompiledTrainingGraphs compile_training_graphs_on_first_call(Compiler forward_compiler,
                                                             std::function<const Graph&()> forward_graph,
                                                             std::function<GraphOutputUse()> forward_use,
                                                             Compiler backward_compiler,
                                                             std::function<const Graph&()> backward_graph) {
  auto group = std::make_shared<CompileGroup>();
  Lazy<CompiledGraph> backward =
      deferred_compile(std::move(backward_compiler), std::move(backward_graph), group, nullptr);
  Lazy<CompiledGraph> forward_alone =
      deferred_compile(std::move(forward_compiler), std::move(forward_graph), group, std::move(forward_use));
  auto forward = Lazy<CompiledGraph>::deferred([forward_alone, backward] {
    CompiledGraph compiled = forward_alone.get();
    (void)backward.get();
    return compiled;
  });
  return {calling(std::move(forward)), calling(std::move(backward))};
}

}  // namespace aotpipe
