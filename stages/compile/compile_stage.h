#pragma once
// Stages 5 and 6: partition the joint graph, then compile the forward and backward graphs
// (concurrently, on the job's scheduler) with the configured Compilers. Inference graphs go to
// the inference compiler. See docs/stages/compile.md.
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/stages/compile_state.h>

#include <functional>
#include <memory>
#include <string_view>

namespace aotpipe {

class CompileGroup;  // backend_notes.h

// The config with its empty members filled in (interpreter, min-cut partitioner).
AotConfig resolve_defaults(AotConfig config);

// The partition stage as a function: `partitioner` on the joint graph.
std::shared_ptr<const PartitionResult> partition_joint(const JointGraph& joint, const Partitioner& partitioner);

// Fills state.partition from state.traced.joint (inference: nothing to split).
struct PartitionStage {
  // Overrides the config's partition_fn when set (the pipeline text's `partition(default)`).
  Partitioner partitioner = {};
  // The override's name in the pipeline text ("default", "min_cut"); empty: none, or one the
  // text cannot name.
  std::string parameter = {};
  std::string_view name() const { return "partition"; }
  // "partition", "partition(default)"; an override the text cannot name shows as
  // "partition(<its identity or 'unnamed'>)", which no registry parses, so the compile cache
  // bypasses such a pipeline instead of keying it as the plain stage.
  std::string description() const;
  Task<void> run(CompileState& state, const JobEnv& env) const;
};

// The compile stage as a function: the config's compilers (defaults resolved) on the inference
// graph, or on the partition's forward and backward, those two concurrently on `scheduler`.
// A cold compile and a cache hit (runtime/post_compile.h) both compile through it.
Task<CompiledGraphs> compile_graphs(const TracedProgram& program, const PartitionResult* partition,
                                    const AotConfig& config, Scheduler& scheduler);

// A graph compiled by `compiler` when it is first called (a cache hit's graphs: decoded and
// compiled only when they first run, as PyTorch compiles a backward lazily). `graph` is called
// then, once; concurrent first calls compile once. The backend's notes are dropped: the
// compile that made the graph reported them. The graphs of one function pass one `group`
// (backend_notes.h; null: a group of its own).
CompiledGraph compile_on_first_call(Compiler compiler, std::function<const Graph&()> graph,
                                    std::shared_ptr<CompileGroup> group = nullptr);

// Fills state.compiled from state.traced and state.partition.
struct CompileGraphsStage {
  std::string_view name() const { return "compile"; }
  Task<void> run(CompileState& state, const JobEnv& env) const;
};

std::vector<TensorMeta> input_metas(const Graph& graph);

}  // namespace aotpipe
