#include <aotpipe/stages/metadata/metadata_stage.h>

#include <aotpipe/stages/joint/joint.h>

#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

bool decide_needs_autograd(const TensorList& args, const ViewAndMutationMeta& meta) {
  bool any_requires_grad = false;
  for (const auto& a : args) any_requires_grad |= a.defined() && a.requires_grad();
  // Grad mode is not consulted, as in PyTorch's create_aot_state: under no_grad the outputs do
  // not require grad and the mutations are under no_grad, so the rules below give inference,
  // unless the function turns grad mode on itself.
  if (!any_requires_grad) return false;
  for (const auto& out : meta.output_info) {
    const bool aliases_grad_input =
        (out.output_type == OutputType::alias_of_input || out.output_type == OutputType::is_input) && out.base_idx &&
        meta.input_info[*out.base_idx].requires_grad;
    if (out.requires_grad && !aliases_grad_input) return true;
  }
  for (const auto& in : meta.input_info)
    if (in.requires_grad && in.mutates_data && !in.mutations_under_no_grad_or_inference_mode &&
        !in.mutations_hidden_from_autograd)
      return true;
  return false;  // "output and mutation safe": nothing the backward would need
}

namespace {

// collect_metadata's trace, carried on into the joint stage's program where the function allows
// (joint_repeats_analysis_trace) and `may_carry` (not where the program is traced with
// decompositions, which the analysis runs without). Once the function has returned, the analysis
// decides; when the program repeats it, the forward's returns become prepare_forward's
// (forward_returns) and a training trace goes on into the backward. Sets `program` when carried.
ViewAndMutationMeta trace_analysis_and_program(const Function& fn, const TensorList& args,
                                               const CollectMetadataOptions& options, const std::string& name,
                                               bool may_carry, std::optional<TraceResult>& program) {
  MetadataCollector collector(args, options);
  TraceOptions trace_options = collector.trace_options();
  const bool training = collector.meta().is_train;
  // Named as the joint stage names its graphs and inputs; no input's final value among the
  // outputs (the analysis reads only the function's own outputs).
  trace_options.graph_name = name + (training ? ".joint" : ".inference");
  if (!training)
    for (std::size_t i = 0; i < args.size(); ++i) trace_options.input_names.push_back("arg" + std::to_string(i));
  trace_options.return_mutated_inputs = false;
  bool carried = false;
  std::size_t first_user_output = 0;
  trace_options.plan_backward = [&](const TraceInspection& t, TensorList& outputs) -> std::optional<std::vector<bool>> {
    collector.inspect(t);
    if (!collector.finalized()) return std::nullopt;
    const ViewAndMutationMeta& meta = collector.meta();
    const bool needs_autograd = decide_needs_autograd(args, meta);
    if (!may_carry || needs_autograd != training || !joint_repeats_analysis_trace(meta)) return std::nullopt;
    carried = true;
    first_user_output = meta.mutated_inp_runtime_indices.size();
    outputs = forward_returns(meta, t.inputs, outputs, training);
    if (!training) return std::nullopt;
    return forward_tangent_mask(meta);
  };
  TraceResult traced;
  try {
    traced = trace_joint(fn, args, std::move(trace_options));
  } catch (const std::exception&) {
    // The backward failed: analyse alone, and let the joint stage's own trace report the error.
    if (!carried) throw;
    return collect_metadata(fn, args, options);
  }
  ViewAndMutationMeta meta = collector.finish(traced, first_user_output, /*trace_went_on=*/carried && training);
  if (carried) program = std::move(traced);
  return meta;
}

}  // namespace

MetadataResult analyze_function(Function fn, TensorList args, const AotConfig& config, const std::string& name) {
  MetadataResult result;
  CollectMetadataOptions options;
  options.keep_input_mutations = config.keep_inference_input_mutations;
  options.allow_cpu_fallback = config.allow_cpu_fallback;
  options.cpu_fallbacks = &result.cpu_fallbacks;
  std::optional<TraceResult> program;
  ViewAndMutationMeta meta =
      trace_analysis_and_program(fn, args, options, name, /*may_carry=*/config.decompositions.empty(), program);
  const bool needs_autograd = decide_needs_autograd(args, meta);
  if (needs_autograd && !meta.is_train) {
    // Called under no_grad by a function that turns grad mode on: a training compile, analysed
    // as one (PyTorch collects the metadata with is_train = needs_autograd).
    options.is_train = true;
    meta = collect_metadata(fn, args, options);
    program.reset();
  } else if (!needs_autograd && meta.is_train) {
    meta.is_train = false;
    meta.finalize();
  }
  result.function = {std::move(fn), std::move(args), std::move(meta), needs_autograd};
  if (program) result.joint_program = program_of_trace(std::move(*program), result.function);
  return result;
}

Task<PreservedAnalyses> CollectMetadataStage::run(CompileState& state, const JobEnv&) const {
  MetadataResult result =
      analyze_function(std::move(state.function.fn), std::move(state.function.args), state.config, state.name);
  state.function = std::move(result.function);
  merge_cpu_fallbacks(state.cpu_fallbacks, result.cpu_fallbacks);
  // Every analysis of the function as it was is stale; the program its trace made is not.
  PreservedAnalyses preserved = PreservedAnalyses::none();
  if (result.joint_program) {
    state.analyses.store<JointProgramAnalysis>(std::move(*result.joint_program));
    preserved.preserve<JointProgramAnalysis>();
  }
  co_return preserved;
}

}  // namespace aotpipe
