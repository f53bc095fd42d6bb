#include <aotpipe/driver/aot_module.h>
#include <aotpipe/stages/compile/compile_stage.h>

#include <c10/util/Type.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace aotpipe {
namespace {

namespace nn = torch::nn;

// The function aot_function compiles: the module's forward with its parameters and buffers
// replaced by the leading `num_lifted` inputs (PyTorch's functional_call in aot_module).
Function lifted_forward(std::shared_ptr<nn::Module> module, ModuleForward forward, std::size_t num_lifted) {
  return [module = std::move(module), forward = std::move(forward), num_lifted](const TensorList& args) {
    if (args.size() < num_lifted)
      throw std::invalid_argument(
          fmt::format("aot_module: called with {} inputs, fewer than the module's {} "
                      "parameters and buffers",
                      args.size(), num_lifted));
    const auto split = args.begin() + static_cast<std::ptrdiff_t>(num_lifted);
    ModuleUseGuard use(*module);
    ReparametrizedModule lifted(*module, TensorList(args.begin(), split));
    return forward(*module, TensorList(split, args.end()));
  };
}

// A forward that reads a module tensor through a handle that was not swapped (an undeclared
// member) makes the tracer record the real tensor as a graph constant: the graph would then
// ignore the lifted input, miss its gradient and never see optimizer updates. Refuse such
// graphs before they are compiled.
void check_no_module_constants(const Graph& graph, const nn::Module& module) {
  if (graph.tensor_constants().empty()) return;
  LiftedModuleState lifted;
  {
    ModuleUseGuard use(module);
    lifted = lifted_state(module);
  }
  std::unordered_map<const c10::StorageImpl*, std::size_t> by_storage;
  for (std::size_t i = 0; i < lifted.size(); ++i)
    by_storage.emplace(lifted.tensors[i].storage().unsafeGetStorageImpl(), i);
  for (const auto& [key, tensor] : graph.tensor_constants()) {
    if (!tensor.defined() || !tensor.has_storage()) continue;
    auto it = by_storage.find(tensor.storage().unsafeGetStorageImpl());
    if (it == by_storage.end()) continue;
    const std::size_t i = it->second;
    const std::size_t num_params = lifted.parameter_names.size();
    throw std::invalid_argument(fmt::format(
        "aot_module: graph '{}' reads {} '{}' of {} as a constant ({}): the forward reached it through a handle "
        "aot_module did not replace by the lifted input; declare the member that holds it with "
        "aotpipe::register_tensor_members",
        graph.name(), i < num_params ? "parameter" : "buffer",
        i < num_params ? lifted.parameter_names[i] : lifted.buffer_names[i - num_params],
        c10::demangle(typeid(module).name()), key));
  }
}

AotConfig checked_config(AotConfig config, const std::shared_ptr<nn::Module>& module, std::size_t num_lifted) {
  config = resolve_defaults(std::move(config));
  config.num_params_buffers = num_lifted;
  std::weak_ptr<nn::Module> weak = module;  // the compilers live in the module's own cache
  auto checked = [weak](Compiler inner) -> Compiler {
    std::optional<std::string> identity = identity_of(inner);
    Compiler wrapped = [weak, inner = std::move(inner)](const Graph& graph, const std::vector<TensorMeta>& metas) {
      if (auto m = weak.lock()) check_no_module_constants(graph, *m);
      return inner(graph, metas);
    };
    // The check changes nothing the compiler makes, so the wrapper keeps the inner compiler's
    // identity and module compiles stay cacheable (a hit runs the compilers, so the check too).
    if (identity) return named_compiler("aot_module checked " + *identity, std::move(wrapped));
    return wrapped;
  };
  config.fw_compiler = checked(std::move(config.fw_compiler));
  config.bw_compiler = checked(std::move(config.bw_compiler));
  config.inference_compiler = checked(std::move(config.inference_compiler));
  return config;
}

}  // namespace

std::string module_signature(const nn::Module& module) {
  fmt::memory_buffer key;
  module.apply([&](const std::string&, const nn::Module& m) { key.push_back(m.is_training() ? 't' : 'e'); });
  const LiftedModuleState lifted = lifted_state(module);
  fmt::format_to(std::back_inserter(key), "|{}|{}", fmt::join(lifted.parameter_names, ","),
                 fmt::join(lifted.buffer_names, ","));
  return fmt::to_string(key);
}

struct CompiledModule::Impl {
  std::shared_ptr<nn::Module> module;
  ModuleForward forward;
  AotConfig config;
  std::string name;
  std::shared_ptr<CompileCache> compile_cache;
  mutable std::mutex mutex;
  // One aot_function per module signature; each keeps its own per-input-signature cache.
  mutable std::map<std::string, CompiledFunction> by_module_signature;

  struct Call {
    CompiledFunction function;
    TensorList args;  // parameters, buffers, user inputs
    LiftedModuleState lifted;
  };

  // Reads the module's current tensors (under the module's guard: a concurrent trace may have
  // swapped them) and finds the aot_function for its current signature.
  Call prepare(const TensorList& user_args) const {
    std::string key;
    LiftedModuleState lifted;
    {
      ModuleUseGuard use(*module);
      key = module_signature(*module);
      lifted = lifted_state(*module);
    }
    TensorList args = lifted.tensors;
    args.insert(args.end(), user_args.begin(), user_args.end());
    std::lock_guard lock(mutex);
    auto it = by_module_signature.find(key);
    if (it == by_module_signature.end()) {
      const std::size_t n = lifted.size();
      it = by_module_signature
               .emplace(key, CompiledFunction(lifted_forward(module, forward, n), checked_config(config, module, n),
                                              fmt::format("{}[{}]", name, by_module_signature.size()), compile_cache))
               .first;
    }
    return {it->second, std::move(args), std::move(lifted)};
  }
};

CompiledModule::CompiledModule(std::shared_ptr<nn::Module> module, ModuleForward forward, AotConfig config,
                               std::string name, std::shared_ptr<CompileCache> cache)
    : impl_(std::make_shared<Impl>()) {
  if (!module) throw std::invalid_argument("aot_module: the module is null");
  if (!forward) throw std::invalid_argument("aot_module: the forward function is empty");
  impl_->module = std::move(module);
  impl_->forward = std::move(forward);
  impl_->config = std::move(config);
  impl_->name = std::move(name);
  impl_->compile_cache = std::move(cache);
}

TensorList CompiledModule::operator()(const TensorList& args) const {
  Impl::Call call = impl_->prepare(args);
  return call.function(call.args);
}

std::size_t CompiledModule::num_compiled() const {
  std::lock_guard lock(impl_->mutex);
  std::size_t n = 0;
  for (const auto& [key, function] : impl_->by_module_signature) n += function.num_compiled();
  return n;
}

std::shared_ptr<const CompileState> CompiledModule::compiled_state(const TensorList& args) const {
  Impl::Call call = impl_->prepare(args);
  return call.function.compiled_state(call.args);
}

CompiledModule::LiftedCompile CompiledModule::lifted_compile(const TensorList& args) const {
  Impl::Call call = impl_->prepare(args);
  return {call.function.compiled_state(call.args), std::move(call.lifted.parameter_names),
          std::move(call.lifted.buffer_names)};
}

const std::shared_ptr<nn::Module>& CompiledModule::module() const { return impl_->module; }

CompiledModule aot_module(std::shared_ptr<nn::Module> module, ModuleForward forward, AotConfig config,
                          std::shared_ptr<CompileCache> cache) {
  return CompiledModule(std::move(module), std::move(forward), std::move(config), "aot_module", std::move(cache));
}

}  // namespace aotpipe
