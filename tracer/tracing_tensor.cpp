// The tracer's shared internals (tracer/internal/tracing_tensor.h): the trace's thread-locals,
// what is known about an op, and the small pieces every recording path uses.
#include <aotpipe/tracer/internal/tracing_tensor.h>

#include <aotpipe/graph/op_properties.h>
#include <aotpipe/tracer/internal/meta_kernels.h>

#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>

#include <boost/unordered/unordered_flat_map.hpp>

#include <algorithm>

namespace aotpipe::detail {

namespace fimpl = at::functionalization::impl;

constinit thread_local TraceState* tls_current_trace = nullptr;
thread_local std::shared_ptr<TraceState> tls_current_owner;  // the same trace, owning

std::string qualified_name(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// A tracing tensor of `state` unwrapped from functionalization (when present).
TracingTensorImpl* traced_of(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  if (fimpl::isFunctionalTensor(t)) {
    fimpl::sync(t);
    return as_traced(fimpl::from_functional_tensor(t));
  }
  return as_traced(t);
}

void fail(const std::string& name, const std::string& message) { TORCH_CHECK(false, name, ": ", message); }

namespace {

// Optional types count as their element type (Tensor?, Tensor?[], Device?).
const c10::Type* without_optional(const c10::Type* type) {
  const auto* opt = type->castRaw<c10::OptionalType>();
  return opt ? opt->getElementType().get() : type;
}

ArgKind arg_kind_of(const c10::Argument& arg) {
  const c10::Type* type = without_optional(arg.type().get());
  if (type->kind() == c10::TypeKind::TensorType) return ArgKind::Tensor;
  if (type->kind() == c10::TypeKind::DeviceObjType) return ArgKind::Device;
  if (const auto* list = type->castRaw<c10::ListType>();
      list && without_optional(list->getElementType().get())->kind() == c10::TypeKind::TensorType)
    return ArgKind::TensorList;
  return ArgKind::Other;
}

}  // namespace

const OpTraits& traits_of(const c10::OperatorHandle& op) {
  // Open addressing; the traits sit in their own blocks, so a reference handed out stays valid
  // while nested calls add entries.
  thread_local boost::unordered_flat_map<const c10::FunctionSchema*, std::unique_ptr<OpTraits>> cache;
  const c10::FunctionSchema* key = &op.schema();
  auto it = cache.find(key);
  // A schema of another arity at a cached address (an op registered where a deregistered one
  // lived; tests register ops in a scope) is looked up afresh: the argument plan indexes by it.
  if (it != cache.end() && it->second->args.size() == key->arguments().size()) return *it->second;
  OpTraits t;
  t.data_dependent = has_data_dependent_output(op);
  t.composite_implicit = op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
  t.meta = op.hasKernelForDispatchKey(c10::DispatchKey::Meta);
  t.composite_explicit = op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
                         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  t.cpu_kernel = op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
  for (const c10::Argument& arg : key->arguments())
    t.args.push_back({arg_kind_of(arg), arg.alias_info() && arg.alias_info()->isWrite()});
  t.foreach_inplace = detail::is_foreach_inplace(*key);
  t.foreach_pointwise = detail::is_foreach_pointwise(*key);
  t.unboxed = !t.data_dependent && !t.composite_implicit && !t.foreach_inplace && !t.foreach_pointwise &&
              std::none_of(t.args.begin(), t.args.end(),
                           [](const ArgPlan& a) { return a.written && a.kind != ArgKind::Tensor; });
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<OpTraits>();
  *slot = std::move(t);  // in place: a reference to an older entry here stays valid
  return *slot;
}

// An op the program calls on a device whose backend has no kernel for it (a CPU-only kernel such
// as _scaled_dot_product_flash_attention_for_cpu in a CUDA program): eager raises
// NotImplementedError when it runs; a compile raises it now. Checked for CUDA when libtorch's CUDA
// kernels are loaded (a CPU-only libtorch registers none, so nothing could be told apart there).
std::optional<std::string> missing_backend_kernel(const c10::OperatorHandle& op, c10::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  static const bool cuda_kernels_loaded = [] {
    auto add = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
    return add && add->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
  }();
  if (!cuda_kernels_loaded) return std::nullopt;
  for (auto key :
       {c10::DispatchKey::CUDA, c10::DispatchKey::CompositeExplicitAutograd,
        c10::DispatchKey::CompositeExplicitAutogradNonFunctional, c10::DispatchKey::CompositeImplicitAutograd})
    if (op.hasKernelForDispatchKey(key)) return std::nullopt;
  return "has no CUDA kernel, so eager would fail here on " + device.str() +
         " (the program calls a kernel of another backend)";
}

Value* constant_value(TraceState& st, const at::Tensor& t) {
  auto it = st.constants.find(t.unsafeGetTensorImpl());
  if (it != st.constants.end()) return it->second;
  std::string key = st.graph.fresh_name("_tensor_constant");
  Value* v = st.graph.add_constant(key, t, key);
  st.constants.emplace(t.unsafeGetTensorImpl(), v);
  st.constant_keepalive.push_back(t);
  return v;
}

void mark_phase(TraceState& st, Node* node) {
  if (torch::autograd::get_current_node() != nullptr || st.backward_phase) {
    node->attrs()["phase"] = "backward";
    st.has_backward = true;
  }
}

}  // namespace aotpipe::detail
