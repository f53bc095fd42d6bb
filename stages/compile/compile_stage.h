#pragma once
// Stages 5 and 6: partition the joint graph, then compile the forward and backward graphs
// (concurrently, on the job's scheduler) with the configured Compilers. Inference graphs go to
// the inference compiler. See docs/stages/compile.md.
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/stages/compile_state.h>

#include <string_view>

namespace aotpipe {

// The config with its empty members filled in (interpreter, min-cut partitioner).
AotConfig resolve_defaults(AotConfig config);

struct PartitionStage {
  // Overrides the config's partition_fn when set (the pipeline text's `partition(default)`).
  Partitioner partitioner = {};
  std::string_view name() const { return "partition"; }
  Task<void> run(CompileState& state, const JobEnv& env) const;
};

struct CompileGraphsStage {
  std::string_view name() const { return "compile"; }
  Task<void> run(CompileState& state, const JobEnv& env) const;
};

std::vector<TensorMeta> input_metas(const Graph& graph);

}  // namespace aotpipe
