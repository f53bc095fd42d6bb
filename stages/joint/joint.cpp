#include <aotpipe/stages/joint/joint.h>

#include <aotpipe/graph/passes.h>

#include <aotpipe/tracer/tracer.h>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <stdexcept>

namespace aotpipe {

Function prepare_forward(Function fn, const ViewAndMutationMeta& meta, bool training) {
  return [fn = std::move(fn), meta, training](const TensorList& args) {
    TensorList fresh = args;
    for (std::size_t i : meta.mutated_inp_runtime_indices) {
      const auto& info = meta.input_info[i];
      if (info.mutates_data && info.requires_grad)
        fresh[i] = args[i].clone();  // autograd must see the input before its mutation
      else if (info.mutates_metadata)
        fresh[i] = args[i].view(args[i].sizes());  // the metadata mutation must not reach the primal
    }
    return forward_returns(meta, fresh, fn(fresh), training);
  };
}

TensorList forward_returns(const ViewAndMutationMeta& meta, const TensorList& inputs, const TensorList& outs,
                           bool training) {
  if (outs.size() != meta.output_info.size())
    throw std::runtime_error(fmt::format("aotpipe joint: the function returned {} outputs, metadata says {}",
                                         outs.size(), meta.output_info.size()));
  TensorList result;
  for (std::size_t i : meta.mutated_inp_runtime_indices) result.push_back(inputs[i]);
  result.insert(result.end(), outs.begin(), outs.end());
  if (training) {
    for (std::size_t i = 0; i < outs.size(); ++i)
      if (meta.output_info[i].output_type == OutputType::alias_of_intermediate_save_as_output)
        result.push_back(at::Tensor(outs[i]._base()));
  }
  return result;
}

bool joint_repeats_analysis_trace(const ViewAndMutationMeta& meta) {
  if (meta.grad_enabled_mutation || !meta.mutated_graph_handled_indices.empty()) return false;
  for (const InputAliasInfo& in : meta.input_info)
    if (in.mutates_metadata || in.mutates_storage_metadata || (in.mutates_data && in.requires_grad)) return false;
  return true;
}

JointResult program_of_trace(TraceResult traced, const AnalyzedFunction& function) {
  JointResult result;
  if (function.needs_autograd) {
    auto joint = std::make_shared<JointGraph>();
    joint->graph = std::move(traced.graph);
    drop_unread_arguments(joint->graph);  // before the partitioner decides what to save
    joint->num_primals = function.args.size();
    joint->num_fwd_outputs = traced.num_user_outputs;
    if (joint->num_fwd_outputs != function.meta.num_forward_returns)
      throw std::logic_error(fmt::format("aotpipe joint: traced {} forward outputs, metadata expects {}",
                                         joint->num_fwd_outputs, function.meta.num_forward_returns));
    result.program.joint = std::move(joint);
    result.program.undefined_grads = std::move(traced.undefined_grads);
    result.program.grad_inputs = std::move(traced.grad_inputs);
  } else {
    result.program.inference_graph = std::make_shared<const Graph>(std::move(traced.graph));
  }
  result.cpu_fallbacks = std::move(traced.cpu_fallbacks);
  return result;
}

JointResult trace_joint_or_inference(const AnalyzedFunction& function, const std::string& name, bool allow_cpu_fallback,
                                     const std::map<std::string, Decomposition>& decompositions) {
  const auto& meta = function.meta;
  TraceOptions options;
  options.decompositions = decompositions;
  options.functionalize = true;
  options.return_mutated_inputs = false;
  options.allow_cpu_fallback = allow_cpu_fallback;
  options.keep_input_mutations_in_graph.resize(meta.input_info.size());
  for (std::size_t i : meta.mutated_graph_handled_indices) options.keep_input_mutations_in_graph[i] = true;
  Function forward = prepare_forward(function.fn, meta, function.needs_autograd);
  if (function.needs_autograd) {
    options.graph_name = name + ".joint";
    options.tangent_mask = forward_tangent_mask(meta);
    return program_of_trace(trace_joint(forward, function.args, std::move(options)), function);
  }
  options.graph_name = name + ".inference";
  return program_of_trace(trace_program(forward, function.args, std::move(options)), function);
}

JointResult JointProgramAnalysis::run(const CompileState& state) const {
  return trace_joint_or_inference(state.function, state.name, state.config.allow_cpu_fallback,
                                  state.config.decompositions);
}

Task<PreservedAnalyses> JointStage::run(CompileState& state, const JobEnv&) const {
  const JointResult& result = state.analyses.get<JointProgramAnalysis>(state);
  state.traced = result.program;
  merge_cpu_fallbacks(state.cpu_fallbacks, result.cpu_fallbacks);
  // The program now lives in state.traced, where the stages after this one rewrite it.
  co_return PreservedAnalyses::all().abandon<JointProgramAnalysis>();
}

}  // namespace aotpipe
