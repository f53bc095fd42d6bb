#pragma once
// The graph signature of a compile: which graph input is a parameter, a buffer or a user input,
// and which graph output is a user output, the loss, a mutated buffer or input, or a gradient —
// each named after a value of the compiled graphs. The data model is torch.export's
// (torch/export/graph_signature.py: InputSpec, OutputSpec, ExportGraphSignature,
// ExportBackwardSignature); it is built from a compile the way AOTAutograd builds its
// GraphSignature (input_output_analysis.create_graph_signature, schemas.py
// GraphSignature.from_tracing_metadata). See docs/aot_module.md.
#include <aotpipe/stages/compile_state.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aotpipe {
class CompiledModule;  // driver/aot_module.h
}  // namespace aotpipe

namespace aotpipe {
// The signature types live in their own namespace (graph.h has an OutputSpec of its own, the
// value a new node defines); the main names are also declared in aotpipe.
namespace signature {

// torch.export's InputKind (to_string gives its spelling, e.g. "USER_INPUT").
enum class InputKind { UserInput, Parameter, Buffer, ConstantTensor, CustomObj, Token };
// torch.export's OutputKind, with PARAMETER_MUTATION (torch 2.11) besides the seed's kinds.
enum class OutputKind {
  UserOutput,
  LossOutput,
  BufferMutation,
  GradientToParameter,
  GradientToUserInput,
  UserInputMutation,
  Token,
  ParameterMutation,
};
std::string_view to_string(InputKind kind);
std::string_view to_string(OutputKind kind);

// A tensor value of a graph, by name. (The other ArgumentSpecs — SymInt, constants, custom
// objects, tokens — do not occur: our graphs take and return tensors only.)
struct TensorArgument {
  std::string name;
  bool operator==(const TensorArgument&) const = default;
};

struct InputSpec {
  InputKind kind = InputKind::UserInput;
  TensorArgument arg;
  std::optional<std::string> target;  // PARAMETER/BUFFER: the fully qualified name
  std::optional<bool> persistent;     // BUFFER only (C++ modules have only persistent buffers)
  bool operator==(const InputSpec&) const = default;
};

struct OutputSpec {
  OutputKind kind = OutputKind::UserOutput;
  TensorArgument arg;
  // BUFFER_MUTATION / PARAMETER_MUTATION / GRADIENT_TO_PARAMETER: the fully qualified name;
  // USER_INPUT_MUTATION / GRADIENT_TO_USER_INPUT: the name of the user input's graph value.
  std::optional<std::string> target;
  bool operator==(const OutputSpec&) const = default;
};

// Insertion-ordered name -> target pairs (Python's dicts keep insertion order).
using NameMap = std::vector<std::pair<std::string, std::string>>;

struct ExportBackwardSignature {
  NameMap gradients_to_parameters;   // gradient value -> parameter FQN
  NameMap gradients_to_user_inputs;  // gradient value -> user input value
  std::string loss_output;           // the loss value
};

// Inputs  = [*parameters, *buffers, *user_inputs]              (the forward graph's inputs)
// Outputs = [*mutated_inputs, *user_outputs, *gradients]       (forward returns, then the
//                                                               backward graph's outputs)
struct ExportGraphSignature {
  std::vector<InputSpec> input_specs;
  std::vector<OutputSpec> output_specs;

  // The views torch.export's ExportGraphSignature offers.
  std::vector<std::string> parameters() const;    // FQNs
  std::vector<std::string> buffers() const;       // FQNs
  std::vector<std::string> user_inputs() const;   // graph value names
  std::vector<std::string> user_outputs() const;  // graph value names (the loss is not one)
  NameMap inputs_to_parameters() const;
  NameMap inputs_to_buffers() const;
  NameMap buffers_to_mutate() const;
  NameMap user_inputs_to_mutate() const;
  // Present when an output is the LOSS_OUTPUT.
  std::optional<ExportBackwardSignature> backward_signature() const;
};

// Which leading inputs of a compile are a module's parameters, buffers and lifted constants
// (their FQNs, in input order): what the compile itself does not know.
struct LiftedNames {
  std::vector<std::string> parameters;
  std::vector<std::string> buffers;
  std::vector<std::string> constants;               // CONSTANT_TENSOR inputs, after the buffers
  std::vector<std::string> non_persistent_buffers;  // among `buffers`: not in the state_dict
};

// The signature of a finished compile of a function whose `lifted.parameters.size() +
// lifted.buffers.size() + lifted.constants.size()` leading inputs are those tensors, followed by `num_user_inputs` user
// inputs. `loss_index` (among the user outputs) marks the LOSS_OUTPUT; it needs a training
// compile (a joint graph) and a scalar output that requires grad. Input names are the forward
// graph's inputs (training) or the inference graph's, mutation and user output names its
// outputs, gradient names the backward graph's outputs. Like PyTorch's, the signature needs one
// graph input per input of the call: a compile whose dedupe or synthetic-base stage changed the
// inputs (the same tensor passed twice and mutated, aliased inputs of which one is mutated)
// throws std::invalid_argument, as does a loss_index that does not fit.
ExportGraphSignature build_graph_signature(const CompileState& state, const LiftedNames& lifted,
                                           std::size_t num_user_inputs,
                                           std::optional<std::size_t> loss_index = std::nullopt);

// The graph signature of the compile of `module` serving `args` (compiling it if needed), with
// the module's parameters and buffers as the lifted inputs. `loss_index` names the user output
// that is the loss (LOSS_OUTPUT); it needs a training compile.
ExportGraphSignature graph_signature(const CompiledModule& module, const TensorList& args,
                                     std::optional<std::size_t> loss_index = std::nullopt);

// {"input_specs": [{"kind": "PARAMETER", "arg": {"name": ...}, "target": ..., "persistent": ...}],
//  "output_specs": [{"kind": ..., "arg": {"name": ...}, "target": ...}],
//  "backward_signature": {"gradients_to_parameters": {...}, "gradients_to_user_inputs": {...},
//                         "loss_output": ...} | null}
std::string to_json(const ExportGraphSignature& signature);

}  // namespace signature

using signature::build_graph_signature;
using signature::ExportBackwardSignature;
using signature::ExportGraphSignature;
using signature::graph_signature;
using signature::LiftedNames;
using signature::to_json;

}  // namespace aotpipe
