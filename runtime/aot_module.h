#pragma once
// aot_module: compile a torch::nn::Module ahead of time, as PyTorch's aot_module does: its
// parameters and buffers become the leading inputs of a function compiled with aot_function,
// read from the module at every call (so optimizer steps are seen); gradients land in
// param.grad() and buffer updates (BatchNorm running statistics) in the module's buffers, as in
// eager. See docs/aot_module.md.
#include <aotpipe/runtime/aot_function.h>
#include <aotpipe/runtime/graph_signature.h>
#include <aotpipe/runtime/reparametrize_module.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace torch::nn {
class Module;
}

namespace aotpipe {

// How to call a module (C++ modules have no common virtual forward), e.g.
//   [](torch::nn::Module& m, const TensorList& a) { return TensorList{static_cast<NetImpl&>(m).forward(a[0])}; }
// While a compile traces it, the module's parameters and buffers are the traced tensors.
using ModuleForward = std::function<TensorList(torch::nn::Module&, const TensorList&)>;

// What aot_module adds to the cache key of aot_function (input_signature, which covers the
// parameters and buffers as inputs): the training flag of the module and of every submodule, and
// the names of its parameters and buffers.
std::string module_signature(const torch::nn::Module& module);

class CompiledModule {
 public:
  CompiledModule(std::shared_ptr<torch::nn::Module> module, ModuleForward forward, AotConfig config = {},
                 std::string name = "aot_module");
  // `args` are the user inputs (the module's tensors are prepended). The first call with a new
  // module signature or input signature compiles; later calls reuse the compile.
  TensorList operator()(const TensorList& args) const;
  std::size_t num_compiled() const;
  // The compile serving a call with `args` (compiling it if needed), for inspection; its inputs
  // are the parameters, the buffers, then `args`.
  std::shared_ptr<const CompileState> compiled_state(const TensorList& args) const;
  // The graph signature of that compile (see graph_signature.h). `loss_index` names the user
  // output that is the loss (LOSS_OUTPUT); it needs a training compile.
  ExportGraphSignature graph_signature(const TensorList& args,
                                       std::optional<std::size_t> loss_index = std::nullopt) const;
  const std::shared_ptr<torch::nn::Module>& module() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Throws std::invalid_argument for a null module or an empty forward. A module type that owns
// parameters or buffers must be a libtorch layer or declared with register_tensor_members (see
// reparametrize_module.h); otherwise the first call fails (with the pipeline's StageError, as
// every compile error) naming the module and its type.
CompiledModule aot_module(std::shared_ptr<torch::nn::Module> module, ModuleForward forward, AotConfig config = {});

}  // namespace aotpipe
