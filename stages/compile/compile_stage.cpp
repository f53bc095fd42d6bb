#include <aotpipe/pipeline/identified.h>
#include <aotpipe/pipeline/lazy.h>
#include <aotpipe/pipeline/when_all.h>
#include <aotpipe/stages/compile/backend_notes.h>
#include <aotpipe/stages/compile/backends.h>
#include <aotpipe/stages/compile/compile_stage.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <stdexcept>
#include <tuple>

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
  metas.reserve(graph.num_inputs());
  for (const Value* v : graph.inputs()) metas.push_back(v->meta() ? *v->meta() : TensorMeta{});
  return metas;
}

std::shared_ptr<const PartitionResult> partition_joint(const JointGraph& joint, const Partitioner& partitioner) {
  return std::make_shared<const PartitionResult>(partitioner(joint));
}

std::string PartitionStage::description() const {
  if (!parameter.empty()) return "partition(" + parameter + ")";
  if (!partitioner) return "partition";
  return "partition(" + identity_of(partitioner).value_or("unnamed") + ")";
}

Task<void> PartitionStage::run(CompileState& state, const JobEnv&) const {
  if (!state.traced.joint) co_return;  // inference: nothing to split
  state.partition =
      partition_joint(*state.traced.joint, partitioner ? partitioner : resolve_defaults(state.config).partition_fn);
  co_return;
}

namespace {
struct NotedGraph {
  CompiledGraph graph;
  std::vector<std::string> notes;
};

NotedGraph compile_noted(const Compiler& compiler, const Graph& graph, CompileGroup& group) {
  BackendNoteCollector notes;
  const CompileGroupScope in_group(&group);
  CompiledGraph compiled = compiler(graph, input_metas(graph));
  return {std::move(compiled), notes.take()};
}

Task<NotedGraph> compile_on_pool(Scheduler& scheduler, const Compiler& compiler, const Graph& graph,
                                 CompileGroup& group) {
  co_await scheduler.schedule();
  co_return compile_noted(compiler, graph, group);
}
}  // namespace

Task<CompiledGraphs> compile_graphs(const TracedProgram& program, const PartitionResult* partition,
                                    const AotConfig& config, Scheduler& scheduler) {
  const AotConfig resolved = resolve_defaults(config);
  CompileGroup group;  // what the compiled graphs share, they hold (the compiler calls end here)
  if (program.inference_graph) {
    NotedGraph inference = compile_noted(resolved.inference_compiler, *program.inference_graph, group);
    co_return CompiledGraphs{std::move(inference.graph), {}, std::move(inference.notes)};
  }
  if (!partition) throw std::logic_error("aotpipe compile: no partitioned graphs (run the partition stage first)");
  NotedGraph forward, backward;
  if (resolved.compile_fw_bw_concurrently) {
    std::tie(forward, backward) =
        co_await when_all(compile_on_pool(scheduler, resolved.fw_compiler, partition->forward, group),
                          compile_on_pool(scheduler, resolved.bw_compiler, partition->backward, group));
  } else {
    forward = compile_noted(resolved.fw_compiler, partition->forward, group);
    backward = compile_noted(resolved.bw_compiler, partition->backward, group);
  }
  std::vector<std::string> notes = std::move(forward.notes);
  notes.insert(notes.end(), std::make_move_iterator(backward.notes.begin()),
               std::make_move_iterator(backward.notes.end()));
  co_return CompiledGraphs{std::move(forward.graph), std::move(backward.graph), std::move(notes)};
}

CompiledGraph compile_on_first_call(Compiler compiler, std::function<const Graph&()> graph,
                                    std::shared_ptr<CompileGroup> group) {
  if (!group) group = std::make_shared<CompileGroup>();
  const auto compiled = Lazy<CompiledGraph>::deferred(
      [compiler = std::move(compiler), graph = std::move(graph), group = std::move(group)] {
        const Graph& g = graph();
        const CompileGroupScope in_group(group.get());
        return compiler(g, input_metas(g));
      });
  return [compiled](TensorList args) { return compiled.get()(std::move(args)); };
}

Task<void> CompileGraphsStage::run(CompileState& state, const JobEnv& env) const {
  state.compiled = co_await compile_graphs(state.traced, state.partition.get(), state.config, env.scheduler);
}

}  // namespace aotpipe
