#pragma once
// Stage 4, joint trace (PyTorch's fn_prepped_for_autograd + create_joint, and the inference
// path of aot_dispatch_base). Training: one functional graph over (primals, tangents) returning
// (mutated inputs, user outputs, intermediate bases, gradients). Inference: the forward only.
// See docs/stages/joint.md.
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/stages/common/stage_entry.h>
#include <aotpipe/stages/compile_state.h>

#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

// The function the joint is traced from: mutated inputs that require grad are cloned first (so
// gradients are taken with respect to the pre-mutation values) and inputs with metadata
// mutations are aliased by a fresh view; it returns the runtime-applied mutated inputs, then the
// user outputs, then (training) the intermediate bases.
Function prepare_forward(Function fn, const ViewAndMutationMeta& meta, bool training);

// What prepare_forward returns, from the inputs as the function received them (after its
// mutations) and the function's outputs: the runtime-applied mutated inputs, the outputs, then
// (training) the intermediate bases. Throws when the outputs do not match the metadata.
TensorList forward_returns(const ViewAndMutationMeta& meta, const TensorList& inputs, const TensorList& outs,
                           bool training);

// Per forward return of prepare_forward: whether it gets a tangent (the data-mutated inputs
// that require grad, the non-aliased outputs that require grad, the intermediate bases).
std::vector<bool> forward_tangent_mask(const ViewAndMutationMeta& meta);

struct JointResult {
  TracedProgram program;
  CpuFallbackCounts cpu_fallbacks;  // the ops the trace ran on the CPU fallback
};
// The joint stage's result from its trace: a trace_joint of prepare_forward(function.fn)
// (function.needs_autograd) or a trace_program of it. Checks the forward's returns against the
// metadata.
JointResult program_of_trace(TraceResult traced, const AnalyzedFunction& function);

// Traces the joint graph (function.needs_autograd) or the inference graph of the analysed
// function; `name` prefixes the graph's name (NAME.joint, NAME.inference).
JointResult trace_joint_or_inference(const AnalyzedFunction& function, const std::string& name, bool allow_cpu_fallback,
                                     const std::map<std::string, Decomposition>& decompositions = {});

// Whether the joint's trace of a function analysed as `meta` records what the analysis trace of
// the function itself did, up to the forward's returns: prepare_forward clones no input (none
// that requires grad is data-mutated) and views none (no metadata mutation), no mutation stays
// in the graph as a copy_, and grad mode is left alone. The metadata stage then carries its
// trace on into the program (JointProgramAnalysis) instead of leaving the joint to trace again.
bool joint_repeats_analysis_trace(const ViewAndMutationMeta& meta);

// The analysis of the joint stage's program of state.function: trace_joint_or_inference, unless
// the metadata stage cached it already (its trace carried on into the joint; stages in between
// that rewrite the function drop it, pipeline/analysis_manager.h).
struct JointProgramAnalysis {
  using Result = JointResult;
  static constexpr std::string_view name = "joint-program";
  JointResult run(const CompileState& state) const;
};

struct JointStage {
  static CompileStageEntry entry() {
    return entry_without_parameters<JointStage>(
        "joint", "trace the functional joint forward+backward graph (inference: the forward graph)");
  }
  std::string_view name() const { return "joint"; }
  Task<PreservedAnalyses> run(CompileState& state, const JobEnv& env) const;
};

}  // namespace aotpipe
