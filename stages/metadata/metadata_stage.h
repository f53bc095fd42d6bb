#pragma once
// The metadata stage: collect_metadata on the function, then the training/inference decision of
// create_aot_state. Takes the user's function and example arguments; makes the first
// AnalyzedFunction.
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/stages/common/stage_entry.h>
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/joint/joint.h>
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <optional>
#include <string>
#include <string_view>

namespace aotpipe {

// Some input requires grad and the function is not "output and mutation safe" (an output that
// requires grad other than an alias of a grad-requiring input, or a data mutation of a
// grad-requiring input that autograd sees): the compile needs a backward. Under no_grad that
// happens only when the function turns grad mode on itself.
bool decide_needs_autograd(const TensorList& args, const ViewAndMutationMeta& meta);

struct MetadataResult {
  AnalyzedFunction function;
  CpuFallbackCounts cpu_fallbacks;  // the ops the analysis trace ran on the CPU fallback
  // The joint stage's program of `function` (trace_joint_or_inference's result, graphs named
  // after `name`), when the analysis trace went on into it (joint_repeats_analysis_trace).
  std::optional<JointResult> joint_program;
};
// Reads config.keep_inference_input_mutations and config.allow_cpu_fallback. Where the function
// allows, its trace goes on into the program the joint stage would trace (joint_program).
MetadataResult analyze_function(Function fn, TensorList args, const AotConfig& config,
                                const std::string& name = "compile");

// Fills state.function from state.function.fn and .args, and caches the joint's program
// (JointProgramAnalysis) when its trace made it.
struct CollectMetadataStage {
  static CompileStageEntry entry() {
    return entry_without_parameters<CollectMetadataStage>(
        "metadata", "trace the function on fake tensors: view and mutation metadata of inputs and outputs");
  }
  std::string_view name() const { return "metadata"; }
  Task<PreservedAnalyses> run(CompileState& state, const JobEnv& env) const;
};

}  // namespace aotpipe
