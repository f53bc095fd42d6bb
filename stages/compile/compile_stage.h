#pragma once
// The compile stage: the forward and backward graphs (or the inference graph) handed to the
// configured backend compilers (backend/). See docs/stages/compile.md.
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/stages/common/stage_entry.h>
#include <aotpipe/stages/compile_state.h>

#include <string_view>

namespace aotpipe {

// The compile stage as a function: the config's compilers (defaults resolved) on the inference
// graph, or on the partition's forward and backward (those two concurrently on `scheduler`
// when config.compile_fw_bw_concurrently).
Task<CompiledGraphs> compile_graphs(const TracedProgram& program, const PartitionResult* partition,
                                    const AotConfig& config, Scheduler& scheduler);

// Fills state.compiled from state.traced and state.partition.
struct CompileGraphsStage {
  static CompileStageEntry entry() {
    return entry_without_parameters<CompileGraphsStage>("compile", "hand the graphs to the backend compilers");
  }
  std::string_view name() const { return "compile"; }
  Task<PreservedAnalyses> run(CompileState& state, const JobEnv& env) const;
};

}  // namespace aotpipe
