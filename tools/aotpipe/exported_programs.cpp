#include "aotpipe/exported_programs.h"

#include <aotpipe/graph/random_tensor.h>
#include <aotpipe/runtime/graph_function.h>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <unordered_map>

namespace aotpipe::cli {

std::string describe_exported_program(const ExportedProgram& program) {
  std::string out = fmt::format("# torch.export program '{}' ({} IR, exported by torch {})\n", program.name(),
                                program.dialect(), program.torch_version());
  auto target = [](const std::optional<std::string>& t) { return t ? *t : std::string(); };
  out += "# inputs:\n";
  for (const auto& spec : program.signature().input_specs)
    out += fmt::format("#   {:<16} %{:<28} {}{}\n", signature::to_string(spec.kind), spec.arg.name, target(spec.target),
                       spec.persistent == false ? " (not persistent)" : "");
  out += "# outputs:\n";
  for (const auto& spec : program.signature().output_specs)
    out += fmt::format("#   {:<16} %{:<28} {}\n", signature::to_string(spec.kind), spec.arg.name, target(spec.target));
  for (const SymbolicDim& dim : program.symbolic_dims())
    out += fmt::format("# symbolic dimension {} in [{}, {}]\n", dim.symbol, dim.min, dim.max);
  for (const SymbolicDim& dim : program.data_dependent_dims())
    out += fmt::format("# data-dependent size {} in [{}, {}] (read from tensor values: runs as exported, no compile)\n",
                       dim.symbol, dim.min, dim.max);
  return out;
}

namespace {

// Where the program's state holds one tensor under two names (tied parameters), `args` gets one
// tensor there too: the first's. A compile must see the duplicate pattern every call will have,
// and a check must see how eager's one leaf adds up its gradients.
void tie_like_state(TensorList& args, const ExportedProgram& program) {
  const TensorList lifted = program.lifted_tensors();
  std::unordered_map<const c10::TensorImpl*, std::size_t> first;
  for (std::size_t i = 0; i < lifted.size() && i < args.size(); ++i) {
    auto [it, fresh] = first.try_emplace(lifted[i].unsafeGetTensorImpl(), i);
    if (!fresh) args[i] = args[it->second];
  }
}

}  // namespace

TensorList compile_example_args(const ExportedProgram& program) {
  TensorList args = metadata_example_args(program.graph());
  tie_like_state(args, program);
  return args;
}

TensorList check_inputs(const ExportedProgram& program, uint64_t seed) {
  TensorList args;
  for (const at::Tensor& t : program.lifted_tensors())
    args.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
  tie_like_state(args, program);
  if (program.sample_inputs()) {
    for (const at::Tensor& t : *program.sample_inputs()) args.push_back(t.detach().clone());
    return args;
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const Graph& graph = program.graph();
  for (std::size_t i = graph.num_inputs() - program.num_user_inputs(); i < graph.num_inputs(); ++i)
    args.push_back(random_tensor(*graph.input(i)->meta(), gen));
  return args;
}

}  // namespace aotpipe::cli
