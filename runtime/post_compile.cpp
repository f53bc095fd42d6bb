#include <aotpipe/runtime/aot_runtime.h>
#include <aotpipe/runtime/post_compile.h>
#include <aotpipe/stages/compile/compile_stage.h>

namespace aotpipe {

CompiledGraphs compile_artifact_graphs(const CompiledArtifact& artifact, const AotConfig& config) {
  const AotConfig resolved = resolve_defaults(config);
  if (!artifact.trace_joint)
    return {resolved.inference_compiler(*artifact.inference_graph, input_metas(*artifact.inference_graph)), {}};
  const PartitionResult& p = *artifact.partition;
  return {resolved.fw_compiler(p.forward, input_metas(p.forward)),
          resolved.bw_compiler(p.backward, input_metas(p.backward))};
}

RuntimeFn post_compile(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs,
                       const std::vector<RuntimeWrapper>& wrappers) {
  return apply_runtime_wrappers(wrappers, make_runtime(std::move(artifact), std::move(graphs)));
}

RuntimeFn post_compile(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs) {
  std::vector<RuntimeWrapper> wrappers;
  for (const RuntimePlan& plan : artifact->wrappers) wrappers.push_back(runtime_wrapper(plan));
  return post_compile(std::move(artifact), std::move(graphs), wrappers);
}

std::shared_ptr<const CompileState> state_of(const CompiledArtifact& artifact, const AotConfig& config,
                                             const CompiledGraphs& graphs) {
  auto state = std::make_shared<CompileState>();
  state->name = artifact.name;
  state->config = config;
  state->meta = artifact.meta;
  state->needs_autograd = artifact.trace_joint;
  state->cpu_fallbacks = artifact.cpu_fallbacks;
  for (const RuntimePlan& plan : artifact.wrappers) state->wrappers.push_back(runtime_wrapper(plan));
  state->joint = artifact.joint;
  state->undefined_grads = artifact.undefined_grads;
  state->grad_inputs = artifact.grad_inputs;
  state->inference_graph = artifact.inference_graph;
  state->partition = artifact.partition;
  state->compiled_forward = graphs.forward;
  state->compiled_backward = graphs.backward;
  return state;
}

}  // namespace aotpipe
