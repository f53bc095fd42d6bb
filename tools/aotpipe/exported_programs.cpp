#include "aotpipe/exported_programs.h"

#include <aotpipe/graph/random_tensor.h>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

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
  return out;
}

TensorList check_inputs(const ExportedProgram& program, uint64_t seed) {
  TensorList args;
  for (const at::Tensor& t : program.lifted_tensors())
    args.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
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
