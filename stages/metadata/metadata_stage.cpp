#include <aotpipe/stages/metadata/metadata_stage.h>

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

MetadataResult analyze_function(Function fn, TensorList args, const AotConfig& config) {
  MetadataResult result;
  CollectMetadataOptions options;
  options.keep_input_mutations = config.keep_inference_input_mutations;
  options.allow_cpu_fallback = config.allow_cpu_fallback;
  options.cpu_fallbacks = &result.cpu_fallbacks;
  ViewAndMutationMeta meta = collect_metadata(fn, args, options);
  const bool needs_autograd = decide_needs_autograd(args, meta);
  if (needs_autograd && !meta.is_train) {
    // Called under no_grad by a function that turns grad mode on: a training compile, analysed
    // as one (PyTorch collects the metadata with is_train = needs_autograd).
    options.is_train = true;
    meta = collect_metadata(fn, args, options);
  } else if (!needs_autograd && meta.is_train) {
    meta.is_train = false;
    meta.finalize();
  }
  result.function = {std::move(fn), std::move(args), std::move(meta), needs_autograd};
  return result;
}

Task<void> CollectMetadataStage::run(CompileState& state, const JobEnv&) const {
  MetadataResult result = analyze_function(std::move(state.function.fn), std::move(state.function.args), state.config);
  state.function = std::move(result.function);
  merge_cpu_fallbacks(state.cpu_fallbacks, result.cpu_fallbacks);
  co_return;
}

}  // namespace aotpipe
