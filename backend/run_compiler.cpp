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

CompiledGraph compile_on_first_call(Compiler compiler, std::function<const Graph&()> graph,
                                    std::shared_ptr<CompileGroup> group, std::function<GraphOutputUse()> use) {
  if (!group) group = std::make_shared<CompileGroup>();
  // The notes are collected and dropped: they must not reach a collector that happens to be
  // alive on the calling thread.
  const auto compiled = Lazy<CompiledGraph>::deferred(
      [compiler = std::move(compiler), graph = std::move(graph), group = std::move(group), use = std::move(use)] {
        return compile_with_notes(compiler, graph(), *group, use ? use() : GraphOutputUse{}).graph;
      });
  return [compiled](TensorList args) { return compiled.get()(std::move(args)); };
}

}  // namespace aotpipe
