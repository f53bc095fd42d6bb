#pragma once
// Running a C++ module with its parameters and buffers replaced by other tensors for a while:
// the C++ counterpart of torch.func.functional_call / stateless._reparametrize_module, which
// aot_module uses to trace a module's forward on lifted (traced) parameters and buffers.
//
// A C++ module keeps two handles to each registered tensor: one in its registry (what
// named_parameters() / named_buffers() return) and one in a member its forward reads
// (`weight = register_parameter("weight", ...)` in LinearImpl). Both are swapped. C++ has no
// reflection, so where a module type keeps those members is declared: the libtorch layers are
// declared here; a module type of yours is declared with register_tensor_members. A module type
// that owns parameters or buffers and is not declared is refused, because its forward would read
// the real tensors and a trace would silently take them for constants.
#include <aotpipe/graph/calling_convention.h>
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace aotpipe {

// A member of a module object that holds a handle to one of the module's own registered
// tensors, with the name it was registered under ("weight", not "fc1.weight").
struct TensorMember {
  std::string registered_name;
  at::Tensor* slot;
};
using TensorMembersOf = std::function<std::vector<TensorMember>(torch::nn::Module&)>;

// Declares where modules whose dynamic type is exactly `module_type` keep their tensor members.
// A declaration with no members is right for a type whose forward reads its tensors through the
// registry (named_parameters()) only. Thread-safe; a later declaration replaces an earlier one.
void register_tensor_members(std::type_index module_type, TensorMembersOf members);

// The members of ModuleImpl given as pointers to members, as a TensorMembersOf.
template <class ModuleImpl>
TensorMembersOf tensor_members_of(std::vector<std::pair<std::string, at::Tensor ModuleImpl::*>> members) {
  return [members = std::move(members)](torch::nn::Module& module) {
    auto& self = dynamic_cast<ModuleImpl&>(module);
    std::vector<TensorMember> slots;
    slots.reserve(members.size());
    for (const auto& [name, member] : members) slots.push_back({name, &(self.*member)});
    return slots;
  };
}

// The same with pointers to members:
//   aotpipe::register_tensor_members<NetImpl>({{"scale", &NetImpl::scale}, {"shift", &NetImpl::shift}});
template <class ModuleImpl>
void register_tensor_members(std::vector<std::pair<std::string, at::Tensor ModuleImpl::*>> members) {
  register_tensor_members(typeid(ModuleImpl), tensor_members_of<ModuleImpl>(std::move(members)));
}

// The parameters, then the buffers of a module and its submodules with their fully qualified
// names ("fc1.weight"), in named_parameters() / named_buffers() order: aot_module's leading
// inputs, in the order PyTorch's aot_module lifts them.
struct LiftedModuleState {
  std::vector<std::string> parameter_names;
  std::vector<std::string> buffer_names;
  TensorList tensors;  // parameters then buffers, the module's own handles
  std::size_t size() const { return tensors.size(); }
};
LiftedModuleState lifted_state(const torch::nn::Module& module);

// Exclusive use of a module and all its submodules by this thread while alive: a trace swaps the
// module's tensors, so two traces of one module (or of a module and one of its submodules) must
// not overlap, and nobody may read the module's state in between. Blocks until every module of
// the tree is free, then takes them all at once (no lock-order deadlock). Taking a module this
// thread already holds throws std::logic_error (a forward that compiles its own module).
class ModuleUseGuard {
 public:
  explicit ModuleUseGuard(const torch::nn::Module& module);
  ~ModuleUseGuard();
  ModuleUseGuard(const ModuleUseGuard&) = delete;
  ModuleUseGuard& operator=(const ModuleUseGuard&) = delete;

 private:
  std::vector<const torch::nn::Module*> held_;
};

// Swaps `module`'s parameters and buffers (in lifted_state order) for `replacements`, in the
// registries and in the declared members, until destroyed; the destructor (or a failing
// constructor) puts the original handles back. Hold a ModuleUseGuard around it. Throws
// std::invalid_argument naming the module when a module type is not declared, a declared member
// does not hold its registered tensor, or the number of replacements is wrong.
class ReparametrizedModule {
 public:
  ReparametrizedModule(torch::nn::Module& module, const TensorList& replacements);
  ~ReparametrizedModule();
  ReparametrizedModule(const ReparametrizedModule&) = delete;
  ReparametrizedModule& operator=(const ReparametrizedModule&) = delete;

 private:
  void restore() noexcept;
  std::vector<std::pair<at::Tensor*, at::Tensor>> saved_;  // slot, original handle; restored in reverse
};

}  // namespace aotpipe
