#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/when_all.h>
#include <aotpipe/stages/compile/backends.h>
#include <aotpipe/stages/compile/compile_stage.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <stdexcept>

namespace aotpipe {

AotConfig resolve_defaults(AotConfig config) {
  if (!config.fw_compiler) config.fw_compiler = backends::interpreter();
  if (!config.bw_compiler) config.bw_compiler = config.fw_compiler;
  if (!config.inference_compiler) config.inference_compiler = config.fw_compiler;
  if (!config.partition_fn) config.partition_fn = partitioners::min_cut_rematerialization_partition();
  return config;
}

std::vector<TensorMeta> input_metas(const Graph& graph) {
  std::vector<TensorMeta> metas;
  for (const Value* v : graph.inputs()) metas.push_back(v->meta() ? *v->meta() : TensorMeta{});
  return metas;
}

Task<void> PartitionStage::run(CompileState& state, const JobEnv&) const {
  if (!state.joint) co_return;  // inference: nothing to split
  const Partitioner& partition = partitioner ? partitioner : resolve_defaults(state.config).partition_fn;
  state.partition = partition(*state.joint);
  co_return;
}

namespace {
Task<CompiledGraph> compile_on_pool(Scheduler& scheduler, const Compiler& compiler, const Graph& graph) {
  co_await scheduler.schedule();
  co_return compiler(graph, input_metas(graph));
}
}  // namespace

Task<void> CompileGraphsStage::run(CompileState& state, const JobEnv& env) const {
  const AotConfig config = resolve_defaults(state.config);
  if (state.inference_graph) {
    state.compiled_forward = config.inference_compiler(*state.inference_graph, input_metas(*state.inference_graph));
    co_return;
  }
  if (!state.partition)
    throw std::logic_error("aotpipe compile: no partitioned graphs (run the partition stage first)");
  auto [forward, backward] =
      co_await when_all(compile_on_pool(env.scheduler, config.fw_compiler, state.partition->forward),
                        compile_on_pool(env.scheduler, config.bw_compiler, state.partition->backward));
  state.compiled_forward = std::move(forward);
  state.compiled_backward = std::move(backward);
}

}  // namespace aotpipe
