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

Task<void> CollectMetadataStage::run(CompileState& state, const JobEnv&) const {
  CollectMetadataOptions options;
  options.keep_input_mutations = state.config.keep_inference_input_mutations;
  options.allow_cpu_fallback = state.config.allow_cpu_fallback;
  options.cpu_fallbacks = &state.cpu_fallbacks;
  state.meta = collect_metadata(state.fn, state.args, options);
  state.needs_autograd = decide_needs_autograd(state.args, state.meta);
  if (state.needs_autograd && !state.meta.is_train) {
    // Called under no_grad by a function that turns grad mode on: a training compile, analysed
    // as one (PyTorch collects the metadata with is_train = needs_autograd).
    options.is_train = true;
    state.meta = collect_metadata(state.fn, state.args, options);
  } else if (!state.needs_autograd && state.meta.is_train) {
    state.meta.is_train = false;
    state.meta.finalize();
  }
  co_return;
}

}  // namespace aotpipe
