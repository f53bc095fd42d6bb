#pragma once
// aot_module: compile a torch::nn::Module ahead of time, as PyTorch's aot_module does: its
// parameters and buffers become the leading inputs of a function compiled with aot_function,
// read from the module at every call (so optimizer steps are seen); gradients land in
// param.grad() and buffer updates (BatchNorm running statistics) in the module's buffers, as in
// eager. See docs/aot_module.md.
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/driver/reparametrize_module.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  // `cache`: where each compile is looked up first and stored after (null: none).
  CompiledModule(std::shared_ptr<torch::nn::Module> module, ModuleForward forward, AotConfig config = {},
                 std::string name = "aot_module", std::shared_ptr<CompileCache> cache = nullptr);
  // `args` are the user inputs (the module's tensors are prepended). The first call with a new
  // module signature or input signature compiles; later calls reuse the compile.
  TensorList operator()(const TensorList& args) const;
  std::size_t num_compiled() const;
  // The compile serving a call with `args` (compiling it if needed), for inspection; its inputs
  // are the parameters, the buffers, then `args`.
  std::shared_ptr<const CompileState> compiled_state(const TensorList& args) const;
  // That compile with the names of the parameters and buffers it lifted, in input order (what
  // export/graph_signature.h's graph_signature(CompiledModule, ...) builds the signature from).
  struct LiftedCompile {
    std::shared_ptr<const CompileState> state;
    std::vector<std::string> parameter_names;
    std::vector<std::string> buffer_names;
  };
  LiftedCompile lifted_compile(const TensorList& args) const;
  const std::shared_ptr<torch::nn::Module>& module() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Throws std::invalid_argument for a null module or an empty forward. A module type that owns
// parameters or buffers must be a libtorch layer or declared with register_tensor_members (see
// reparametrize_module.h); otherwise the first call fails (with the pipeline's StageError, as
// every compile error) naming the module and its type.
CompiledModule aot_module(std::shared_ptr<torch::nn::Module> module, ModuleForward forward, AotConfig config = {},
                          std::shared_ptr<CompileCache> cache = nullptr);

}  // namespace aotpipe
