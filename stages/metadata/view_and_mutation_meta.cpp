#include <aotpipe/stages/metadata/view_and_mutation_meta.h>

#include <stdexcept>

namespace aotpipe {

std::string_view to_string(MutationType type) {
  switch (type) {
    case MutationType::NotMutated: return "NOT_MUTATED";
    case MutationType::MutatedInGraph: return "MUTATED_IN_GRAPH";
    case MutationType::MutatedOutGraph: return "MUTATED_OUT_GRAPH";
  }
  return "?";
}

std::string_view to_string(OutputType type) {
  switch (type) {
    case OutputType::non_alias: return "non_alias";
    case OutputType::alias_of_input: return "alias_of_input";
    case OutputType::is_input: return "is_input";
    case OutputType::alias_of_intermediate_save_as_output: return "alias_of_intermediate_save_as_output";
    case OutputType::alias_of_intermediate: return "alias_of_intermediate";
    case OutputType::alias_of_intermediate_base_is_user_output: return "alias_of_intermediate_base_is_user_output";
    case OutputType::unsafe_view_alias: return "unsafe_view_alias";
    case OutputType::custom_function_view: return "custom_function_view";
  }
  return "?";
}

MutationType InputAliasInfo::mutation_type() const {
  if (!mutates_data && !mutates_metadata) return MutationType::NotMutated;
  // functional_utils.py _check_if_mutation_can_be_in_graph: only data mutations that autograd
  // does not need to see (no grad required, or hidden from it) can stay in the graph as copy_.
  const bool in_graph = keep_input_mutations && (mutates_data || mutates_storage_metadata) &&
                        ((!mutates_metadata && !requires_grad) || mutations_hidden_from_autograd ||
                         mutations_under_no_grad_or_inference_mode);
  if (mutates_storage_metadata && !in_graph)
    throw std::runtime_error(
        "an input received set_() (a storage mutation) together with other mutations that cannot be kept in "
        "the graph; this is not supported (as in PyTorch)");
  return in_graph ? MutationType::MutatedInGraph : MutationType::MutatedOutGraph;
}

bool is_plain_output(OutputType t) {
  return t == OutputType::non_alias || t == OutputType::unsafe_view_alias || t == OutputType::custom_function_view;
}

namespace {
bool is_alias_of_intermediate(OutputType t) {
  return t == OutputType::alias_of_intermediate || t == OutputType::alias_of_intermediate_save_as_output ||
         t == OutputType::alias_of_intermediate_base_is_user_output;
}
}  // namespace

void ViewAndMutationMeta::finalize() {
  mutated_inp_runtime_indices.clear();
  mutated_graph_handled_indices.clear();
  mutated_graph_handled_indices_seen_by_autograd.clear();
  for (std::size_t i = 0; i < input_info.size(); ++i) {
    const MutationType type = input_info[i].mutation_type();
    if (type == MutationType::MutatedOutGraph) mutated_inp_runtime_indices.push_back(i);
    if (type == MutationType::MutatedInGraph) {
      mutated_graph_handled_indices.push_back(i);
      if (!input_info[i].mutations_hidden_from_autograd) mutated_graph_handled_indices_seen_by_autograd.push_back(i);
    }
  }
  aliased_out_indices.clear();
  unsafe_view_out_indices.clear();
  num_outputs_non_aliased = num_outputs_aliased_to_inputs = num_outputs_aliased_to_intermediates = 0;
  for (std::size_t i = 0; i < output_info.size(); ++i) {
    const OutputType t = output_info[i].output_type;
    if (!is_plain_output(t)) aliased_out_indices.push_back(i);
    if (t == OutputType::unsafe_view_alias) unsafe_view_out_indices.push_back(i);
    if (is_plain_output(t)) ++num_outputs_non_aliased;
    if (t == OutputType::alias_of_input || t == OutputType::is_input) ++num_outputs_aliased_to_inputs;
    if (is_alias_of_intermediate(t)) ++num_outputs_aliased_to_intermediates;
  }
  num_outputs = output_info.size();
  num_unsafe_view_outputs = unsafe_view_out_indices.size();
  num_outputs_aliased = num_outputs_aliased_to_inputs + num_outputs_aliased_to_intermediates;
  num_forward_returns = mutated_inp_runtime_indices.size() + num_outputs + num_intermediate_bases;
  num_forward = num_forward_returns;  // no functionalized RNG offset output
}

}  // namespace aotpipe
