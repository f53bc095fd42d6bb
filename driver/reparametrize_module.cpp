#include <aotpipe/driver/reparametrize_module.h>

#include <c10/util/Exception.h>
#include <c10/util/Type.h>
#include <fmt/format.h>
#include <torch/nn/modules.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

// The module registries are non-public members of torch::nn::Module (what named_parameters()
// and named_buffers() copy from). Module befriends every specialization of Cloneable (it needs
// them to clone), so a specialization for a tag of ours is the one standard way to reach them.
namespace aotpipe::detail {
struct RegistryAccessTag {};
}  // namespace aotpipe::detail

template <>
class torch::nn::Cloneable<aotpipe::detail::RegistryAccessTag> {
 public:
  static torch::OrderedDict<std::string, at::Tensor>& parameters(Module& m) { return m.parameters_; }
  static torch::OrderedDict<std::string, at::Tensor>& buffers(Module& m) { return m.buffers_; }
};

namespace aotpipe {
namespace {

namespace nn = torch::nn;
using RegistryAccess = nn::Cloneable<detail::RegistryAccessTag>;

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::string type_name(const nn::Module& m) { return c10::demangle(typeid(m).name()); }

// ---- declarations of tensor members --------------------------------------------------------

class MemberDeclarations {
 public:
  static MemberDeclarations& instance() {
    static MemberDeclarations* declarations = new MemberDeclarations();  // outlives static teardown
    return *declarations;
  }
  void set(std::type_index type, TensorMembersOf members) {
    std::unique_lock lock(mutex_);
    by_type_[type] = std::move(members);
  }
  // A copy: a declaration may be replaced by another thread while this one uses it.
  TensorMembersOf find(std::type_index type) const {
    std::shared_lock lock(mutex_);
    auto it = by_type_.find(type);
    return it == by_type_.end() ? TensorMembersOf{} : it->second;
  }

 private:
  MemberDeclarations() { declare_libtorch_layers(); }

  template <class Impl>
  void declare(std::vector<std::pair<std::string, at::Tensor Impl::*>> members) {
    by_type_[typeid(Impl)] = tensor_members_of<Impl>(std::move(members));
  }

  // The libtorch layers that own tensors, with the members their forward reads.
  void declare_libtorch_layers() {
    declare<nn::LinearImpl>({{"weight", &nn::LinearImpl::weight}, {"bias", &nn::LinearImpl::bias}});
    declare<nn::BilinearImpl>({{"weight", &nn::BilinearImpl::weight}, {"bias", &nn::BilinearImpl::bias}});
    declare_weight_bias<nn::Conv1dImpl, nn::Conv2dImpl, nn::Conv3dImpl, nn::ConvTranspose1dImpl,
                        nn::ConvTranspose2dImpl, nn::ConvTranspose3dImpl, nn::LayerNormImpl, nn::GroupNormImpl>();
    declare_norm<nn::BatchNorm1dImpl, nn::BatchNorm2dImpl, nn::BatchNorm3dImpl, nn::InstanceNorm1dImpl,
                 nn::InstanceNorm2dImpl, nn::InstanceNorm3dImpl>();
    declare<nn::EmbeddingImpl>({{"weight", &nn::EmbeddingImpl::weight}});
    declare<nn::EmbeddingBagImpl>({{"weight", &nn::EmbeddingBagImpl::weight}});
    declare<nn::PReLUImpl>({{"weight", &nn::PReLUImpl::weight}});
    using MHA = nn::MultiheadAttentionImpl;
    declare<MHA>({{"in_proj_weight", &MHA::in_proj_weight},
                  {"in_proj_bias", &MHA::in_proj_bias},
                  {"bias_k", &MHA::bias_k},
                  {"bias_v", &MHA::bias_v},
                  {"q_proj_weight", &MHA::q_proj_weight},
                  {"k_proj_weight", &MHA::k_proj_weight},
                  {"v_proj_weight", &MHA::v_proj_weight}});
    declare<nn::NLLLossImpl>({{"weight", &nn::NLLLossImpl::weight}});
    declare<nn::CrossEntropyLossImpl>({{"weight", &nn::CrossEntropyLossImpl::weight}});
    declare<nn::BCEWithLogitsLossImpl>(
        {{"weight", &nn::BCEWithLogitsLossImpl::weight}, {"pos_weight", &nn::BCEWithLogitsLossImpl::pos_weight}});
  }
  template <class... Impl>
  void declare_weight_bias() {
    (declare<Impl>({{"weight", &Impl::weight}, {"bias", &Impl::bias}}), ...);
  }
  template <class... Impl>
  void declare_norm() {
    (declare<Impl>({{"weight", &Impl::weight},
                    {"bias", &Impl::bias},
                    {"running_mean", &Impl::running_mean},
                    {"running_var", &Impl::running_var},
                    {"num_batches_tracked", &Impl::num_batches_tracked}}),
     ...);
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::type_index, TensorMembersOf> by_type_;
};

// ---- modules in use ------------------------------------------------------------------------

class ModulesInUse {
 public:
  static ModulesInUse& instance() {
    static ModulesInUse* in_use = new ModulesInUse();  // outlives static teardown
    return *in_use;
  }
  void acquire(const std::vector<const nn::Module*>& modules) {
    std::unique_lock lock(mutex_);
    const auto me = std::this_thread::get_id();
    for (const nn::Module* m : modules)
      if (auto it = owner_.find(m); it != owner_.end() && it->second == me)
        throw std::logic_error(fmt::format(
            "aot_module: module {} is already in use by this thread (its forward compiles or calls a compiled "
            "module over itself or a module it contains while being traced)",
            type_name(*m)));
    free_.wait(lock, [&] {
      return std::none_of(modules.begin(), modules.end(), [&](const nn::Module* m) { return owner_.count(m) != 0; });
    });
    for (const nn::Module* m : modules) owner_.emplace(m, me);
  }
  void release(const std::vector<const nn::Module*>& modules) {
    {
      std::lock_guard lock(mutex_);
      for (const nn::Module* m : modules) owner_.erase(m);
    }
    free_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable free_;
  std::unordered_map<const nn::Module*, std::thread::id> owner_;
};

}  // namespace

void register_tensor_members(std::type_index module_type, TensorMembersOf members) {
  MemberDeclarations::instance().set(module_type, std::move(members));
}

LiftedModuleState lifted_state(const nn::Module& module) {
  LiftedModuleState state;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    state.parameter_names.push_back(item.key());
    state.tensors.push_back(item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    state.buffer_names.push_back(item.key());
    state.tensors.push_back(item.value());
  }
  return state;
}

ModuleUseGuard::ModuleUseGuard(const nn::Module& module) {
  std::vector<const nn::Module*> tree;
  module.apply([&](const std::string&, const nn::Module& m) { tree.push_back(&m); });
  std::sort(tree.begin(), tree.end());
  tree.erase(std::unique(tree.begin(), tree.end()), tree.end());  // a submodule registered twice
  ModulesInUse::instance().acquire(tree);
  held_ = std::move(tree);
}

ModuleUseGuard::~ModuleUseGuard() { ModulesInUse::instance().release(held_); }

ReparametrizedModule::ReparametrizedModule(nn::Module& module, const TensorList& replacements) {
  const LiftedModuleState lifted = lifted_state(module);
  if (replacements.size() != lifted.size())
    throw std::invalid_argument(fmt::format(
        "aot_module: {} has {} parameters and buffers, but {} tensors were given to replace them (did the module "
        "register or remove tensors since it was compiled?)",
        type_name(module), lifted.size(), replacements.size()));
  std::unordered_map<std::string, std::size_t> parameter_index, buffer_index;
  for (std::size_t i = 0; i < lifted.parameter_names.size(); ++i) parameter_index.emplace(lifted.parameter_names[i], i);
  for (std::size_t i = 0; i < lifted.buffer_names.size(); ++i)
    buffer_index.emplace(lifted.buffer_names[i], lifted.parameter_names.size() + i);

  auto swap_into = [&](at::Tensor& slot, const at::Tensor& replacement) {
    saved_.emplace_back(&slot, slot);
    slot = replacement;
  };
  try {
    module.apply([&](const std::string& prefix, nn::Module& m) {
      // m's own defined tensors by registered name: the original handle and its replacement.
      std::unordered_map<std::string, std::pair<at::Tensor, const at::Tensor*>> own;
      auto swap_registry = [&](torch::OrderedDict<std::string, at::Tensor>& registry,
                               const std::unordered_map<std::string, std::size_t>& index) {
        for (auto& item : registry) {
          if (!item.value().defined()) continue;  // registered as None (a Linear without bias)
          const at::Tensor& replacement = replacements[index.at(join_name(prefix, item.key()))];
          own.emplace(item.key(), std::pair{item.value(), &replacement});
          swap_into(item.value(), replacement);
        }
      };
      swap_registry(RegistryAccess::parameters(m), parameter_index);
      swap_registry(RegistryAccess::buffers(m), buffer_index);
      if (own.empty()) return;
      const TensorMembersOf members_of = MemberDeclarations::instance().find(typeid(m));
      const std::string path = prefix.empty() ? "<root>" : prefix;
      if (!members_of)
        throw std::invalid_argument(fmt::format(
            "aot_module: module '{}' of type {} owns parameters or buffers, but aotpipe does not know which of its "
            "members hold them (C++ modules have no reflection); declare them once with "
            "aotpipe::register_tensor_members<{}>({{{{\"name\", &{}::member}}, ...}}) (an empty list if its forward "
            "reads them through named_parameters()/named_buffers() only)",
            path, type_name(m), type_name(m), type_name(m)));
      for (const TensorMember& member : members_of(m)) {
        auto it = own.find(member.registered_name);
        if (it == own.end()) continue;  // not registered, or registered undefined
        const auto& [original, replacement] = it->second;
        if (!member.slot->is_same(original))
          throw std::invalid_argument(fmt::format(
              "aot_module: the member declared for '{}' of module '{}' ({}) does not hold the tensor registered under "
              "that name (was the member reassigned without registering the new tensor?)",
              member.registered_name, path, type_name(m)));
        swap_into(*member.slot, *replacement);
      }
    });
  } catch (...) {
    restore();
    throw;
  }
}

ReparametrizedModule::~ReparametrizedModule() { restore(); }

void ReparametrizedModule::restore() noexcept {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) *it->first = std::move(it->second);
  saved_.clear();
}

}  // namespace aotpipe
