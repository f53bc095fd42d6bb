#include <aotpipe/runtime/aot_runtime.h>
#include <aotpipe/runtime/post_compile.h>
#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/compiler_defaults.h>
#include <aotpipe/backend/run_compiler.h>

namespace aotpipe {

RuntimeFn post_compile(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs,
                       const std::vector<RuntimeWrapper>& wrappers) {
  return apply_runtime_wrappers(wrappers, make_runtime(std::move(artifact), std::move(graphs)));
}

RuntimeFn post_compile(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs) {
  std::vector<RuntimeWrapper> wrappers;
  for (const RuntimePlan& plan : artifact->wrappers) wrappers.push_back(runtime_wrapper(plan));
  return post_compile(std::move(artifact), std::move(graphs), wrappers);
}

CompiledGraphs compile_on_first_call(const std::shared_ptr<const CompiledArtifact>& artifact, const AotConfig& config) {
  // Only the compilers: resolve_defaults would name the partitioner too, and link it.
  const DefaultedCompilers compilers =
      default_compilers(config.fw_compiler, config.bw_compiler, config.inference_compiler);
  CompiledGraphs graphs;
  graphs.notes = artifact->backend_notes;
  if (!artifact->training) {
    graphs.forward = compile_on_first_call(
        compilers.inference, [artifact]() -> const Graph& { return *artifact->traced().inference_graph; }, nullptr,
        [] { return GraphOutputUse{.saved_outputs_from = std::nullopt, .inference = true}; });
    return graphs;
  }
  CompiledTrainingGraphs training = compile_training_graphs_on_first_call(
      compilers.forward, [artifact]() -> const Graph& { return artifact->partition()->forward; },
      [artifact] { return GraphOutputUse{.saved_outputs_from = artifact->partition()->num_fwd_outputs}; },
      compilers.backward, [artifact]() -> const Graph& { return artifact->partition()->backward; });
  graphs.forward = std::move(training.forward);
  graphs.backward = std::move(training.backward);
  return graphs;
}

std::shared_ptr<const CompileState> state_of(const CompiledArtifact& artifact, const AotConfig& config,
                                             const CompiledGraphs& graphs) {
  auto state = std::make_shared<CompileState>();
  state->name = artifact.name;
  state->config = config;
  state->function.meta = artifact.meta;
  state->function.needs_autograd = artifact.training;
  state->cpu_fallbacks = artifact.cpu_fallbacks;
  for (const RuntimePlan& plan : artifact.wrappers) state->wrappers.push_back(runtime_wrapper(plan));
  state->traced = artifact.traced();
  state->partition = artifact.partition();
  state->compiled = graphs;
  return state;
}

}  // namespace aotpipe
