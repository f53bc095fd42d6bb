#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/run_compiler.h>
#include <aotpipe/pipeline/when_all.h>
#include <aotpipe/stages/compile/compile_stage.h>

#include <stdexcept>
#include <tuple>

namespace aotpipe {

namespace {
Task<NotedGraph> compile_on_pool(Scheduler& scheduler, const Compiler& compiler, const Graph& graph,
                                 CompileGroup& group, GraphOutputUse use) {
  co_await scheduler.schedule();
  co_return compile_with_notes(compiler, graph, group, use);
}
}  // namespace

Task<CompiledGraphs> compile_graphs(const TracedProgram& program, const PartitionResult* partition,
                                    const AotConfig& config, Scheduler& scheduler) {
  const AotConfig resolved = resolve_defaults(config);
  CompileGroup group;  // what the compiled graphs share, they hold (the compiler calls end here)
  if (program.inference_graph) {
    NotedGraph inference = compile_with_notes(resolved.inference_compiler, *program.inference_graph, group,
                                              {.saved_outputs_from = std::nullopt, .inference = true});
    co_return CompiledGraphs{std::move(inference.graph), {}, std::move(inference.notes)};
  }
  if (!partition) throw std::logic_error("aotpipe compile: no partitioned graphs (run the partition stage first)");
  NotedGraph forward, backward;
  const GraphOutputUse forward_use{.saved_outputs_from = partition->num_fwd_outputs};
  if (resolved.compile_fw_bw_concurrently) {
    std::tie(forward, backward) =
        co_await when_all(compile_on_pool(scheduler, resolved.fw_compiler, partition->forward, group, forward_use),
                          compile_on_pool(scheduler, resolved.bw_compiler, partition->backward, group, {}));
  } else {
    forward = compile_with_notes(resolved.fw_compiler, partition->forward, group, forward_use);
    backward = compile_with_notes(resolved.bw_compiler, partition->backward, group);
  }
  std::vector<std::string> notes = std::move(forward.notes);
  notes.insert(notes.end(), std::make_move_iterator(backward.notes.begin()),
               std::make_move_iterator(backward.notes.end()));
  co_return CompiledGraphs{std::move(forward.graph), std::move(backward.graph), std::move(notes)};
}

Task<PreservedAnalyses> CompileGraphsStage::run(CompileState& state, const JobEnv& env) const {
  state.compiled = co_await compile_graphs(state.traced, state.partition.get(), state.config, env.scheduler);
  co_return PreservedAnalyses::all();  // the function is left as it is
}

}  // namespace aotpipe
