#pragma once
// The partition stage: the joint graph split into forward and backward by a partitioner (the
// config's, or the one the pipeline text names). See docs/stages/partition.md.
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/stages/common/stage_entry.h>
#include <aotpipe/stages/compile_state.h>

#include <memory>
#include <string>
#include <string_view>

namespace aotpipe {

// A partitioner by its pipeline-text name: "min_cut" or "default". Throws std::invalid_argument
// naming the accepted ones.
Partitioner partitioner_named(std::string_view name);

// The partition stage as a function: `partitioner` on the joint graph.
std::shared_ptr<const PartitionResult> partition_joint(const JointGraph& joint, const Partitioner& partitioner);

// Fills state.partition from state.traced.joint (inference: nothing to split).
struct PartitionStage {
  // Its parameter names the partitioner: `partition(min_cut)`, `partition(default)`.
  static CompileStageEntry entry();
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
  Task<PreservedAnalyses> run(CompileState& state, const JobEnv& env) const;
};

}  // namespace aotpipe
