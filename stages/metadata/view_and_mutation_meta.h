#pragma once
// ViewAndMutationMeta: what the metadata-collection stage learns about a function's inputs and
// outputs, as data. The C++ counterpart of schemas.py (InputAliasInfo, OutputAliasInfo,
// ViewAndMutationMeta); field names and derived lists follow PyTorch so that to_json() can be
// compared with Python's run_functionalized_fw_and_collect_metadata. See docs/stages/metadata.md.
#include <aotpipe/graph/tensor_meta.h>
#include <aotpipe/stages/common/view_replay.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

enum class MutationType {
  NotMutated,       // "NOT_MUTATED"
  MutatedInGraph,   // "MUTATED_IN_GRAPH": kept in the graph as copy_ (keep_input_mutations)
  MutatedOutGraph,  // "MUTATED_OUT_GRAPH": returned by the graph, applied by the runtime epilogue
};

// Note [Intermediate Bases Optimization] and the aliasing cases of collect_metadata_analysis.py.
enum class OutputType {
  non_alias,
  alias_of_input,
  is_input,
  alias_of_intermediate_save_as_output,
  alias_of_intermediate,
  alias_of_intermediate_base_is_user_output,
  unsafe_view_alias,
  custom_function_view,
};

std::string_view to_string(MutationType type);
std::string_view to_string(OutputType type);

// non_alias, unsafe_view_alias and custom_function_view: returned as they are, never regenerated
// from a base (the other types are "aliased outputs").
bool is_plain_output(OutputType type);

struct InputAliasInfo {
  bool is_leaf = true;
  bool mutates_data = false;
  bool mutates_metadata = false;
  bool mutations_hidden_from_autograd = true;
  bool mutations_under_no_grad_or_inference_mode = false;
  bool mutates_storage_metadata = false;
  bool requires_grad = false;
  bool keep_input_mutations = false;

  // PyTorch's _check_if_mutation_can_be_in_graph; throws when a set_() cannot stay in the graph.
  MutationType mutation_type() const;
  // The backward receives a tangent for the input's updated value: a data mutation the runtime
  // applies (MUTATED_OUT_GRAPH) to an input that requires grad.
  bool gets_tangent() const {
    return mutates_data && requires_grad && mutation_type() == MutationType::MutatedOutGraph;
  }
  bool operator==(const InputAliasInfo&) const = default;
};

struct OutputAliasInfo {
  OutputType output_type = OutputType::non_alias;
  // alias_of_input / is_input: the input; alias_of_intermediate*: the intermediate base index;
  // alias_of_intermediate_base_is_user_output: the user output that is the base.
  std::optional<std::size_t> base_idx;
  bool requires_grad = false;
  TensorMeta meta;  // the output's sizes/strides/offset/dtype/device as traced
  // Aliased outputs: the view ops that made the output from its base in the traced function
  // (PyTorch's view_meta_sequence), replayed by the runtime to regenerate it.
  std::optional<ViewReplay> view_replay;
  // The backward receives a tangent for this output: a plain output that requires grad.
  bool gets_tangent() const { return is_plain_output(output_type) && requires_grad; }
  bool operator==(const OutputAliasInfo&) const = default;
};

struct ViewAndMutationMeta {
  std::vector<InputAliasInfo> input_info;
  std::vector<OutputAliasInfo> output_info;
  std::size_t num_intermediate_bases = 0;
  bool keep_input_mutations = false;
  // Tangents the backward receives: data-mutated inputs that require grad (MUTATED_OUT_GRAPH),
  // then outputs of type non_alias/unsafe_view_alias/custom_function_view that require grad, then
  // the intermediate bases. Contiguous metadata (coerce_tangent_and_suggest_memory_format).
  std::vector<TensorMeta> traced_tangents;
  bool is_train = false;
  // The function left grad mode changed: the epilogue sets it to this value.
  std::optional<bool> grad_enabled_mutation;

  // Derived lists (schemas.py __post_init__); call finalize() after changing the fields above.
  std::vector<std::size_t> mutated_inp_runtime_indices;
  std::vector<std::size_t> mutated_graph_handled_indices;
  std::vector<std::size_t> mutated_graph_handled_indices_seen_by_autograd;
  std::vector<std::size_t> aliased_out_indices;
  std::vector<std::size_t> unsafe_view_out_indices;
  std::size_t num_outputs = 0;
  std::size_t num_outputs_non_aliased = 0;
  std::size_t num_outputs_aliased_to_inputs = 0;
  std::size_t num_unsafe_view_outputs = 0;
  std::size_t num_outputs_aliased_to_intermediates = 0;
  std::size_t num_outputs_aliased = 0;
  // Forward graph returns: mutated inputs (runtime-applied) + user outputs + intermediate bases.
  std::size_t num_forward_returns = 0;
  std::size_t num_forward = 0;

  void finalize();
  std::size_t num_mutated_inp_runtime_indices() const { return mutated_inp_runtime_indices.size(); }
  bool operator==(const ViewAndMutationMeta&) const = default;
};

}  // namespace aotpipe
