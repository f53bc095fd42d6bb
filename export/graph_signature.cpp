#include <aotpipe/driver/aot_module.h>
#include <aotpipe/export/graph_signature.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace aotpipe::signature {
namespace {

std::vector<std::string> value_names(std::span<Value* const> values) {
  std::vector<std::string> names;
  names.reserve(values.size());
  for (const Value* v : values) names.push_back(v->name());
  return names;
}

std::string where(const CompileState& state) { return fmt::format("graph signature of '{}'", state.name); }

// The graphs a signature names values of: the forward's inputs and returns, and the backward's
// outputs (empty for an inference compile).
struct SignatureGraphs {
  std::vector<std::string> inputs;
  std::vector<std::string> forward_returns;
  std::vector<std::string> gradients;
};

SignatureGraphs graphs_of(const CompileState& state) {
  if (state.function.needs_autograd) {
    if (!state.partition) throw std::logic_error(where(state) + ": a training compile without a partition");
    return {value_names(state.partition->forward.inputs()), value_names(state.partition->forward.outputs()),
            value_names(state.partition->backward.outputs())};
  }
  if (!state.traced.inference_graph) throw std::logic_error(where(state) + ": an inference compile without a graph");
  return {
      value_names(state.traced.inference_graph->inputs()), value_names(state.traced.inference_graph->outputs()), {}};
}

}  // namespace

std::string_view to_string(InputKind kind) {
  switch (kind) {
    case InputKind::UserInput: return "USER_INPUT";
    case InputKind::Parameter: return "PARAMETER";
    case InputKind::Buffer: return "BUFFER";
    case InputKind::ConstantTensor: return "CONSTANT_TENSOR";
    case InputKind::CustomObj: return "CUSTOM_OBJ";
    case InputKind::Token: return "TOKEN";
  }
  return "?";
}

std::string_view to_string(OutputKind kind) {
  switch (kind) {
    case OutputKind::UserOutput: return "USER_OUTPUT";
    case OutputKind::LossOutput: return "LOSS_OUTPUT";
    case OutputKind::BufferMutation: return "BUFFER_MUTATION";
    case OutputKind::GradientToParameter: return "GRADIENT_TO_PARAMETER";
    case OutputKind::GradientToUserInput: return "GRADIENT_TO_USER_INPUT";
    case OutputKind::UserInputMutation: return "USER_INPUT_MUTATION";
    case OutputKind::Token: return "TOKEN";
    case OutputKind::ParameterMutation: return "PARAMETER_MUTATION";
  }
  return "?";
}

ExportGraphSignature graph_signature(const CompiledModule& module, const TensorList& args,
                                     std::optional<std::size_t> loss_index) {
  CompiledModule::LiftedCompile compile = module.lifted_compile(args);
  return build_graph_signature(*compile.state,
                               {std::move(compile.parameter_names), std::move(compile.buffer_names), {}, {}},
                               args.size(), loss_index);
}

ExportGraphSignature build_graph_signature(const CompileState& state, const LiftedNames& lifted,
                                           std::size_t num_user_inputs, std::optional<std::size_t> loss_index) {
  const ViewAndMutationMeta& meta = state.function.meta;
  const std::size_t num_params = lifted.parameters.size();
  const std::size_t num_buffers_end = num_params + lifted.buffers.size();
  const std::size_t num_lifted = num_buffers_end + lifted.constants.size();
  const std::size_t num_inputs = num_lifted + num_user_inputs;
  // PyTorch: "We have enough restrictions on the graph (no de-duping, synthetic bases, etc), such
  // that # graph inps = # user inps + # params + # buffers".
  // meta is of the inner convention (after dedupe and synthetic bases), as the graphs are.
  if (meta.input_info.size() != num_inputs)
    throw std::invalid_argument(fmt::format(
        "{}: the compiled graph takes {} inputs for a call with {} ({} parameters and buffers, {} user inputs); a "
        "graph "
        "signature needs one graph input per input, so a call that passes one tensor twice and mutates it, or "
        "passes aliased inputs of which one is mutated, has none",
        where(state), meta.input_info.size(), num_inputs, num_lifted, num_user_inputs));
  const SignatureGraphs graphs = graphs_of(state);
  if (graphs.inputs.size() != num_inputs)
    throw std::logic_error(
        fmt::format("{}: the graph has {} inputs, the call {}", where(state), graphs.inputs.size(), num_inputs));
  const std::size_t num_mutated = meta.mutated_inp_runtime_indices.size();
  if (graphs.forward_returns.size() < num_mutated + meta.num_outputs)
    throw std::logic_error(fmt::format("{}: the graph returns {} values, fewer than {} mutated inputs + {} outputs",
                                       where(state), graphs.forward_returns.size(), num_mutated, meta.num_outputs));
  if (loss_index) {
    if (!state.function.needs_autograd)
      throw std::invalid_argument(fmt::format(
          "{}: a loss output (index {}) needs a training compile (grad mode on and an input that requires grad); "
          "this compile has no backward graph",
          where(state), *loss_index));
    if (*loss_index >= meta.num_outputs)
      throw std::invalid_argument(fmt::format("{}: loss index {} is out of range: the function has {} outputs",
                                              where(state), *loss_index, meta.num_outputs));
    const OutputAliasInfo& loss = meta.output_info[*loss_index];
    if (!loss.requires_grad || loss.meta.numel() != 1)
      throw std::invalid_argument(fmt::format(
          "{}: output {} is not a loss: a loss is a scalar that requires grad (it has {} elements{})", where(state),
          *loss_index, loss.meta.numel(), loss.requires_grad ? "" : " and does not require grad"));
  }

  ExportGraphSignature sig;
  for (std::size_t i = 0; i < num_inputs; ++i) {
    InputSpec spec{InputKind::UserInput, {graphs.inputs[i]}, std::nullopt, std::nullopt};
    if (i < num_params) {
      spec.kind = InputKind::Parameter;
      spec.target = lifted.parameters[i];
    } else if (i < num_buffers_end) {
      spec.kind = InputKind::Buffer;
      spec.target = lifted.buffers[i - num_params];
      spec.persistent = std::find(lifted.non_persistent_buffers.begin(), lifted.non_persistent_buffers.end(),
                                  *spec.target) == lifted.non_persistent_buffers.end();
    } else if (i < num_lifted) {
      spec.kind = InputKind::ConstantTensor;
      spec.target = lifted.constants[i - num_buffers_end];
    }
    sig.input_specs.push_back(std::move(spec));
  }

  // Forward returns: the inputs the runtime writes back, then the user outputs (then, in a
  // training compile, intermediate bases and saved values, which are not part of the signature).
  for (std::size_t k = 0; k < num_mutated; ++k) {
    const std::size_t i = meta.mutated_inp_runtime_indices[k];
    const InputSpec& input = sig.input_specs[i];
    OutputSpec spec{OutputKind::UserInputMutation, {graphs.forward_returns[k]}, input.arg.name};
    if (input.kind == InputKind::Parameter) spec.kind = OutputKind::ParameterMutation;
    if (input.kind == InputKind::Buffer) spec.kind = OutputKind::BufferMutation;
    if (input.kind != InputKind::UserInput) spec.target = input.target;
    sig.output_specs.push_back(std::move(spec));
  }
  for (std::size_t j = 0; j < meta.num_outputs; ++j)
    sig.output_specs.push_back({loss_index == j ? OutputKind::LossOutput : OutputKind::UserOutput,
                                {graphs.forward_returns[num_mutated + j]},
                                std::nullopt});

  // The backward returns one gradient per input the joint differentiated, in input order (the
  // runtime's grad_primals).
  const std::set<std::size_t> grad_inputs(state.traced.grad_inputs.begin(), state.traced.grad_inputs.end());
  std::size_t g = 0;
  for (std::size_t i = 0; i < num_inputs && state.function.needs_autograd; ++i) {
    if (!grad_inputs.count(i)) continue;
    if (g >= graphs.gradients.size())
      throw std::logic_error(
          fmt::format("{}: the backward graph returns {} gradients, fewer than the inputs that "
                      "require grad",
                      where(state), graphs.gradients.size()));
    const InputSpec& input = sig.input_specs[i];
    if (input.kind == InputKind::Buffer)
      throw std::invalid_argument(fmt::format(
          "{}: buffer '{}' requires grad; torch.export has no gradient kind for a buffer (make it a parameter)",
          where(state), *input.target));
    if (input.kind == InputKind::Parameter)
      sig.output_specs.push_back({OutputKind::GradientToParameter, {graphs.gradients[g++]}, input.target});
    else
      sig.output_specs.push_back({OutputKind::GradientToUserInput, {graphs.gradients[g++]}, input.arg.name});
  }
  if (g != graphs.gradients.size())
    throw std::logic_error(fmt::format("{}: the backward graph returns {} gradients, {} inputs require grad",
                                       where(state), graphs.gradients.size(), g));
  return sig;
}

// ---- the views of ExportGraphSignature -----------------------------------------------------

namespace {

template <class Spec, class Kind, class Project>
auto collect(const std::vector<Spec>& specs, Kind kind, Project project) {
  std::vector<decltype(project(specs.front()))> out;
  for (const Spec& s : specs)
    if (s.kind == kind) out.push_back(project(s));
  return out;
}

const auto target_of = [](const auto& s) { return s.target.value_or(""); };
const auto name_of = [](const auto& s) { return s.arg.name; };
const auto name_to_target = [](const auto& s) { return std::pair{s.arg.name, s.target.value_or("")}; };

}  // namespace

std::vector<std::string> ExportGraphSignature::parameters() const {
  return collect(input_specs, InputKind::Parameter, target_of);
}
std::vector<std::string> ExportGraphSignature::buffers() const {
  return collect(input_specs, InputKind::Buffer, target_of);
}
std::vector<std::string> ExportGraphSignature::user_inputs() const {
  return collect(input_specs, InputKind::UserInput, name_of);
}
std::vector<std::string> ExportGraphSignature::user_outputs() const {
  return collect(output_specs, OutputKind::UserOutput, name_of);
}
NameMap ExportGraphSignature::inputs_to_parameters() const {
  return collect(input_specs, InputKind::Parameter, name_to_target);
}
NameMap ExportGraphSignature::inputs_to_buffers() const {
  return collect(input_specs, InputKind::Buffer, name_to_target);
}
NameMap ExportGraphSignature::buffers_to_mutate() const {
  return collect(output_specs, OutputKind::BufferMutation, name_to_target);
}
NameMap ExportGraphSignature::user_inputs_to_mutate() const {
  return collect(output_specs, OutputKind::UserInputMutation, name_to_target);
}

std::optional<ExportBackwardSignature> ExportGraphSignature::backward_signature() const {
  const std::vector<std::string> loss = collect(output_specs, OutputKind::LossOutput, name_of);
  if (loss.empty()) return std::nullopt;
  return ExportBackwardSignature{collect(output_specs, OutputKind::GradientToParameter, name_to_target),
                                 collect(output_specs, OutputKind::GradientToUserInput, name_to_target), loss.front()};
}

}  // namespace aotpipe::signature
