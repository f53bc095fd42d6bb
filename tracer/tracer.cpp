// The tracer. The mechanism (and what was checked on libtorch 2.11) is in docs/libtorch-2.11.md;
// how to use it and its limits in docs/tracer.md.
#include <aotpipe/graph/block_cache.h>
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/tracer/internal/fake_device_guard.h>
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/tracer/internal/trace_backward.h>
#include <aotpipe/tracer/internal/unboxed_kernels.h>
#include <aotpipe/graph/op_properties.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/tracer/tracer.h>

#include <ATen/ATen.h>
#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/enum_tag.h>
#include <c10/core/AutogradState.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <boost/unordered/unordered_flat_map.hpp>

#include <algorithm>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace aotpipe {
namespace {

namespace fimpl = at::functionalization::impl;
using detail::FakeDeviceScope;
using detail::install_fake_device_guard;

// The dispatch key the fallback lives on: below Functionalize and autograd, above the backends
// (where Python's proxy/fake modes live). Unused by libtorch 2.11 itself.
constexpr c10::DispatchKey kTraceKey = c10::DispatchKey::Fake;

// What the fallback excludes before calling an op on the inner tensors.
c10::DispatchKeySet below_trace_keys() {
  return c10::DispatchKeySet(kTraceKey) | c10::autograd_dispatch_keyset_with_ADInplaceOrView |
         c10::DispatchKeySet(c10::DispatchKey::Functionalize);
}

std::string qualified_name(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

struct TraceState {
  explicit TraceState(TraceOptions opts) : options(std::move(opts)), graph(options.graph_name) {}
  TraceOptions options;
  Graph graph;
  std::mutex mutex;  // ops normally arrive on the tracing thread; this keeps stray threads safe
  bool has_backward = false;
  bool finished = false;
  bool joint = false;           // trace_joint: every node gets a phase
  bool backward_phase = false;  // ops recorded now belong to the backward (zero-filled gradients)
  std::unordered_map<const c10::TensorImpl*, Value*> constants;
  std::vector<at::Tensor> constant_keepalive;  // keeps constants' TensorImpl* keys unique
  CpuFallbackCounts cpu_fallbacks;
  bool fake() const { return options.mode == TraceMode::Fake; }
};

// The trace whose mode is active on this thread: used for ops with no tracing tensor argument
// (factories, ops on closed-over real tensors). Ops on tracing tensors use the tensor's trace.
thread_local TraceState* tls_current_trace = nullptr;
thread_local std::shared_ptr<TraceState> tls_current_owner;  // the same trace, owning

// ---------------------------------------------------------------------------------------------
// The tracing tensor.
const c10::DispatchKeySet kTracingKeys({kTraceKey, c10::DispatchKey::PrivateUse1});

class TracingTensorImpl final : public c10::TensorImpl {
 public:
  TracingTensorImpl(at::Tensor inner, std::shared_ptr<TraceState> state, Value* value, c10::Device logical_device)
      : c10::TensorImpl(c10::Storage(inner.storage()), kTracingKeys, inner.dtype()),
        inner_(std::move(inner)),
        state_(std::move(state)),
        value_(value),
        logical_device_(logical_device) {
    // Reported device: the device of the tensor it stands for, so that device inference in
    // ATen (options(), *_like, _to_copy with a dtype only) and user code see what eager sees.
    // The backward still runs on the calling thread: traces disable autograd multithreading.
    device_opt_ = logical_device_;
    refresh();
  }

  // Re-reads sizes/strides/offset (and storage) after an op that may have changed them.
  void refresh() {
    if (!storage_.is_alias_of(inner_.storage())) storage_ = inner_.storage();
    set_sizes_and_strides(inner_.sizes(), inner_.strides(), inner_.storage_offset());
  }

  const at::Tensor& inner() const { return inner_; }
  at::Tensor& inner() { return inner_; }  // what an op that writes its argument is handed
  const std::shared_ptr<TraceState>& state() const { return state_; }
  Value* value() const { return value_; }
  void set_value(Value* v) { value_ = v; }
  c10::Device logical_device() const { return logical_device_; }

  // Every traced op makes one; see graph/block_cache.h.
  static void* operator new(std::size_t size) { return Blocks::allocate(size); }
  static void operator delete(void* p, std::size_t size) { Blocks::deallocate(p, size); }

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(const c10::VariableVersion& version_counter,
                                                              bool allow_tensor_metadata_change) const override {
    return copy_impl(version_counter, allow_tensor_metadata_change);
  }
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(c10::VariableVersion&& version_counter,
                                                              bool allow_tensor_metadata_change) const override {
    return copy_impl(std::move(version_counter), allow_tensor_metadata_change);
  }
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override {
    auto* other = dynamic_cast<TracingTensorImpl*>(impl.get());
    TORCH_CHECK(other, "aotpipe tracer: shallow_copy_from a tensor that is not a tracing tensor");
    copy_tensor_metadata(other, this, version_counter(), allow_tensor_metadata_change());
    inner_ = other->inner_;
    state_ = other->state_;
    value_ = other->value_;
    logical_device_ = other->logical_device_;
    device_opt_ = logical_device_;
  }

 private:
  template <class VersionCounter>
  c10::intrusive_ptr<c10::TensorImpl> copy_impl(VersionCounter&& version_counter, bool allow_change) const {
    auto impl = c10::make_intrusive<TracingTensorImpl>(inner_, state_, value_, logical_device_);
    copy_tensor_metadata(this, impl.get(), std::forward<VersionCounter>(version_counter), allow_change);
    impl->device_opt_ = logical_device_;
    impl->refresh_numel();
    return impl;
  }

  at::Tensor inner_;
  std::shared_ptr<TraceState> state_;
  Value* value_;
  c10::Device logical_device_;
  using Blocks = BlockCache<TracingTensorImpl>;
};

TracingTensorImpl* as_traced(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  auto* impl = t.unsafeGetTensorImpl();
  if (!impl->key_set().has(kTraceKey)) return nullptr;
  // The class is final, so an exact type match is what dynamic_cast would find, for a pointer
  // compare instead of a walk of the class hierarchy (this runs for every tensor of every call).
  return typeid(*impl) == typeid(TracingTensorImpl) ? static_cast<TracingTensorImpl*>(impl) : nullptr;
}

at::Tensor wrap(at::Tensor inner, const std::shared_ptr<TraceState>& state, Value* value, c10::Device device) {
  return at::detail::make_tensor<TracingTensorImpl>(std::move(inner), state, value, device);
}

// Fills `meta` in place (a TensorMeta's sizes and strides are held in place, so each move copies them).
void fill_meta(TensorMeta& meta, const at::Tensor& t, c10::Device device) {
  const auto sizes = t.sizes(), strides = t.strides();
  meta.sizes.assign(sizes.begin(), sizes.end());  // no temporary Dims to move from
  meta.strides.assign(strides.begin(), strides.end());
  meta.storage_offset = t.storage_offset();
  meta.dtype = t.scalar_type();
  meta.device = device;
  meta.requires_grad = false;
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

// How the fallback treats one schema argument (a Tensor? that is None is a constant).
enum class ArgKind : std::uint8_t {
  Tensor,      // Tensor or Tensor?: unwrapped when the stack holds a tensor
  TensorList,  // Tensor[] or Tensor?[]: unwrapped element by element
  Device,      // Device or Device?: decides the results' device
  Other,       // recorded as a constant
};

struct ArgPlan {
  ArgKind kind = ArgKind::Other;
  bool written = false;  // the schema says the op writes it
};

// What the fallback asks the dispatcher and the schema about an op, answered once per op and
// thread: these lookups (a hashed name, tags, kernel tables, argument types) would otherwise cost
// every traced call.
struct OpTraits {
  bool data_dependent = false;      // refused in fake mode
  bool composite_implicit = false;  // has a CompositeImplicitAutograd kernel
  bool meta = false;
  bool composite_explicit = false;  // CompositeExplicitAutograd(NonFunctional)
  bool cpu_kernel = false;
  bool foreach_inplace = false;       // detail::is_foreach_inplace
  bool foreach_pointwise = false;     // detail::is_foreach_pointwise
  bool unboxed = false;               // an unboxed kernel may record it (no list or device argument)
  c10::SmallVector<ArgPlan, 8> args;  // one per schema argument
  bool meta_or_composite() const { return meta || composite_explicit; }
  bool cpu_or_composite_explicit() const { return cpu_kernel || composite_explicit; }  // the CPU fallback can run it
};

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
              std::all_of(t.args.begin(), t.args.end(), [](const ArgPlan& a) {
                return a.kind == ArgKind::Tensor || (a.kind == ArgKind::Other && !a.written);
              });
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<OpTraits>();
  *slot = std::move(t);  // in place: a reference to an older entry here stays valid
  return *slot;
}

// Functionalization runs every in-place op once more on meta copies of its arguments before it
// runs the functional variant (the generated kernels' "meta reference"): an in-place op may not
// broadcast `self` to a larger shape, cast its result to a dtype `self` cannot hold, or write to
// a tensor whose elements overlap, which the functional variant would accept. For an in-place
// foreach op (elementwise) whose operands are alike to `self` (detail::alike_foreach_operands)
// and whose `self` is dense, none of that can fail: the run is skipped. Anything else runs as
// libtorch does.
bool foreach_inplace_check_passes(const torch::jit::Stack& stack, std::size_t first) {
  const c10::IValue* self = detail::alike_foreach_operands(stack, first, detail::ForeachAlike::Sizes);
  if (self != &stack[first]) return false;
  for (const at::Tensor& t : self->toTensorList())
    if (!t.is_non_overlapping_and_dense()) return false;
  return true;
}

// Replaces each tensor of a stack entry (a Tensor, a Tensor[], or, when `optional_list` says the
// schema type is Tensor?[], a list of optional tensors) by f(tensor).
template <class F>
void map_tensors(c10::IValue& value, bool optional_list, F&& f) {
  if (value.isTensor()) {
    value = f(value.toTensor());
  } else if (value.isTensorList()) {
    std::vector<at::Tensor> v;
    for (const at::Tensor& t : value.toTensorList()) v.push_back(f(t));
    value = std::move(v);
  } else if (optional_list && value.isList()) {
    c10::List<std::optional<at::Tensor>> v;
    for (const c10::IValue& e : value.toListRef())
      v.push_back(e.isTensor() ? std::optional<at::Tensor>(f(e.toTensor())) : std::nullopt);
    value = std::move(v);
  }
}

std::string error_text(const std::exception& e) {
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) return c10e->what_without_backtrace();
  return e.what();
}

// ---------------------------------------------------------------------------------------------
// The device of an op's results, inferred as eager does (and Python's
// FakeTensor._find_common_device): a `device` argument that is not None wins; otherwise the
// common device of the tensor arguments, where a 0-dim CPU tensor (a scalar) defers to any other
// device; two tensors on different devices otherwise are the error eager raises. With no tensor
// and no device, results are on the CPU (C++'s default device).
class DeviceInference {
 public:
  // A tensor argument as errors name it: the schema argument, the list position, the graph value.
  struct ArgRef {
    const c10::Argument* arg = nullptr;
    std::optional<std::size_t> element;
    const Value* value = nullptr;
    std::string describe() const {
      return "argument '" + arg->name() + "'" + (element ? "[" + std::to_string(*element) + "]" : "") + " (%" +
             value->name() + ")";
    }
  };

  explicit DeviceInference(std::string_view op_name) : op_name_(op_name) {}

  void set_explicit(c10::Device d) { explicit_ = d; }

  // A tensor argument: its device and whether it is 0-dim. Costs nothing beyond compares unless
  // devices differ (this runs for every argument of every traced op).
  void merge(c10::Device d, bool zero_dim, const ArgRef& where) {
    const bool cpu_scalar = d.is_cpu() && zero_dim;
    if (!common_) {
      common_ = d;
      common_is_cpu_scalar_ = cpu_scalar;
      common_where_ = where;
      return;
    }
    if (d == *common_) {
      if (common_is_cpu_scalar_) common_is_cpu_scalar_ = cpu_scalar;
      return;
    }
    if (cpu_scalar || is_multi_device(op_name_)) return;
    if (common_is_cpu_scalar_) {
      common_ = d;
      common_is_cpu_scalar_ = false;
      common_where_ = where;
      return;
    }
    const bool mixed_with_cpu = op_name_ == "aten::_foreach_copy" || op_name_ == "aten::_foreach_copy_";
    if (mixed_with_cpu && (d.is_cpu() || common_->is_cpu())) return;
    if (!conflict_)
      conflict_ = "expected all tensors to be on the same device, as eager does, but " + common_where_.describe() +
                  " is on " + common_->str() + " and " + where.describe() + " is on " + d.str();
  }

  const std::optional<std::string>& conflict() const { return conflict_; }
  c10::Device result() const { return explicit_ ? *explicit_ : common_ ? *common_ : c10::Device(c10::kCPU); }

 private:
  // Ops that take tensors on several devices and produce their first argument's device.
  static bool is_multi_device(std::string_view name) {
    static const std::unordered_set<std::string_view> ops = {"aten::copy_",
                                                             "aten::copy",
                                                             "aten::_copy_from",
                                                             "aten::_copy_from_and_resize",
                                                             "aten::_unsafe_index_put",
                                                             "aten::slice_scatter",
                                                             "aten::diagonal_scatter",
                                                             "aten::index_put",
                                                             "aten::index_put_",
                                                             "aten::_index_put_impl_",
                                                             "aten::index",
                                                             "aten::_unsafe_index"};
    return ops.count(name) > 0;
  }

  std::string_view op_name_;
  std::optional<c10::Device> explicit_;
  std::optional<c10::Device> common_;
  bool common_is_cpu_scalar_ = false;
  ArgRef common_where_;
  std::optional<std::string> conflict_;
};

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

// ---------------------------------------------------------------------------------------------
// The fallback.

// The tensors of one traced call, as the fallback unwraps them.
struct OpCall {
  bool cpu_fallback = false;
  // Inline storage for the common arity: this runs for every traced call.
  c10::SmallVector<at::Tensor, 4> inner_inputs;  // every unwrapped tensor, in argument order
  c10::SmallVector<at::Tensor, 4> outer_inputs;  // the matching outer tensor (undefined for constants)
  c10::SmallVector<bool, 4> outer_written;       // the schema says the op writes that argument
  std::vector<at::Tensor> real_inputs;           // cpu_fallback: zero-filled real stand-ins
};

Value* constant_value(TraceState& st, const at::Tensor& t) {
  auto it = st.constants.find(t.unsafeGetTensorImpl());
  if (it != st.constants.end()) return it->second;
  std::string key = st.graph.fresh_name("_tensor_constant");
  Value* v = st.graph.add_constant(key, t, key);
  st.constants.emplace(t.unsafeGetTensorImpl(), v);
  st.constant_keepalive.push_back(t);
  return v;
}

// The recorded output of a tensor result, on the results' device; filled in place (each move of
// a TensorMeta copies its in-place sizes and strides).
void fill_output_spec(OutputSpec& spec, const at::Tensor& t, c10::Device device) {
  if (t.defined()) fill_meta(spec.meta.emplace(), t, device);
  spec.type = ValueType::Tensor;
}

// Marks a node recorded during a backward (or the backward phase of a joint trace).
void mark_phase(TraceState& st, Node* node) {
  if (torch::autograd::get_current_node() != nullptr || st.backward_phase) {
    node->attrs()["phase"] = "backward";
    st.has_backward = true;
  }
}

[[noreturn]] void fail(const std::string& name, const std::string& message) { TORCH_CHECK(false, name, ": ", message); }

void trace_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::size_t nargs = schema.arguments().size();
  const std::size_t first = stack->size() - nargs;

  // Which trace? The one of the tracing tensor arguments (all must agree) or the mode's.
  const TracingTensorImpl* first_traced = nullptr;
  bool any_plain_meta = false;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (auto* tt = as_traced(t)) {
      const TraceState* expected = first_traced ? first_traced->state().get() : tls_current_trace;
      if (expected && tt->state().get() != expected)
        fail(qualified_name(op), "an argument is a tensor of another trace (a tracing tensor leaked out of its trace)");
      if (!first_traced) first_traced = tt;
    } else if (t.is_meta()) {
      any_plain_meta = true;
    }
  };
  const OpTraits& traits = traits_of(op);
  for (std::size_t i = 0; i < nargs; ++i) {
    const auto& a = (*stack)[first + i];
    if (a.isTensor()) {
      visit(a.toTensor());
    } else if (traits.args[i].kind == ArgKind::TensorList) {
      if (a.isTensorList()) {
        for (const at::Tensor& t : a.toTensorList()) visit(t);
      } else if (a.isList()) {
        for (const c10::IValue& e : a.toListRef())
          if (e.isTensor()) visit(e.toTensor());
      }
    }
  }
  std::shared_ptr<TraceState> owner = first_traced ? first_traced->state() : nullptr;
  TraceState* st = owner ? owner.get() : tls_current_trace;
  if (owner && owner->finished)
    fail(qualified_name(op), "an argument is a tracing tensor whose trace has already ended");
  if (!owner && (any_plain_meta || !st)) {
    // libtorch's own meta computations (functionalization checks in-place ops on meta copies)
    // or a call after the trace ended: not part of the program.
    if (st && st->options.functionalize && traits.foreach_inplace && foreach_inplace_check_passes(*stack, first)) {
      stack->resize(first);  // it returns nothing
      return;
    }
    c10::impl::ExcludeDispatchKeyGuard guard{c10::DispatchKeySet(kTraceKey)};
    try {
      op.callBoxed(stack);
    } catch (const std::exception& e) {
      fail(qualified_name(op), error_text(e));  // e.g. an in-place op's check: named like any other
    }
    return;
  }

  // Decompositions: the user's table first, then CompositeImplicitAutograd kernels (reached
  // here only when autograd keys are excluded, e.g. under InferenceMode).
  if (!st->options.decompositions.empty()) {
    auto it = st->options.decompositions.find(qualified_name(op));
    if (it != st->options.decompositions.end()) {
      std::vector<c10::IValue> args(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
      stack->resize(first);
      std::vector<c10::IValue> results = it->second(args);
      if (results.size() != schema.returns().size())
        fail(qualified_name(op), "decomposition returned " + std::to_string(results.size()) +
                                     " values, the schema has " + std::to_string(schema.returns().size()));
      for (auto& r : results) stack->push_back(std::move(r));
      return;
    }
  }
  if (traits.composite_implicit) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
    return;
  }

  const bool fake = st->fake();
  if (fake && traits.data_dependent)
    fail(qualified_name(op),
         "its output (value or shape) depends on tensor data, which fake tracing does not have; "
         "trace in TraceMode::Real or avoid the op");

  OpCall call;
  DeviceInference devices(schema.operator_name().name);
  if (fake && !traits.meta_or_composite()) {
    if (!st->options.allow_cpu_fallback)
      fail(qualified_name(op),
           "has no Meta kernel, so fake tracing cannot compute its output metadata "
           "(TraceOptions::allow_cpu_fallback is off)");
    if (!traits.cpu_kernel) fail(qualified_name(op), "has neither a Meta nor a CPU kernel; fake tracing cannot run it");
    call.cpu_fallback = true;
  }

  std::lock_guard lock(st->mutex);
  c10::impl::ExcludeDispatchKeyGuard guard{below_trace_keys()};

  // Record the arguments and unwrap them.
  std::vector<Argument> graph_args;
  graph_args.reserve(nargs);
  auto unwrap = [&](const at::Tensor& t, bool written, Value** value_out, const c10::Argument& arg,
                    std::optional<std::size_t> element) -> at::Tensor {
    at::Tensor inner;
    at::Tensor outer;
    if (!t.defined()) {
      *value_out = nullptr;
      return t;
    }
    if (auto* tt = as_traced(t)) {
      inner = tt->inner();
      outer = t;
      *value_out = tt->value();
      devices.merge(tt->logical_device(), t.dim() == 0, {&arg, element, *value_out});
    } else {
      // A closed-over real tensor: a named constant of the graph.
      *value_out = constant_value(*st, t);
      devices.merge(t.device(), t.dim() == 0, {&arg, element, *value_out});
      if (fake) {
        inner = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
        if (t.unsafeGetTensorImpl()->is_wrapped_number()) inner.unsafeGetTensorImpl()->set_wrapped_number(true);
      } else {
        inner = t;
      }
    }
    call.inner_inputs.push_back(inner);
    call.outer_inputs.push_back(outer);
    call.outer_written.push_back(written);
    return inner;
  };
  std::vector<std::size_t> device_args;

  for (std::size_t i = 0; i < nargs; ++i) {
    auto& a = (*stack)[first + i];
    const auto& arg = schema.arguments()[i];
    const ArgPlan& plan = traits.args[i];
    const bool written = plan.written;
    if (a.isTensor()) {
      Value* v = nullptr;
      a = unwrap(a.toTensor(), written, &v, arg, std::nullopt);
      graph_args.push_back(v ? Argument(v) : Argument::none());
    } else if (plan.kind == ArgKind::TensorList && a.isTensorList()) {
      ValueList values;
      std::vector<at::Tensor> inner;
      for (const at::Tensor& t : a.toTensorList()) {
        Value* v = nullptr;
        inner.push_back(unwrap(t, written, &v, arg, values.values.size()));
        values.values.push_back(v);
      }
      a = std::move(inner);
      graph_args.emplace_back(std::move(values));
    } else if (plan.kind == ArgKind::TensorList && a.isList()) {
      ValueList values;
      c10::List<std::optional<at::Tensor>> inner;
      for (const c10::IValue& e : a.toListRef()) {
        if (e.isTensor()) {
          Value* v = nullptr;
          inner.push_back(unwrap(e.toTensor(), written, &v, arg, values.values.size()));
          values.values.push_back(v);
        } else {
          inner.push_back(std::nullopt);
          values.values.push_back(nullptr);
        }
      }
      a = std::move(inner);
      graph_args.emplace_back(std::move(values));
    } else {
      graph_args.emplace_back(a);
      if (plan.kind == ArgKind::Device) {
        if (a.isDevice()) {
          devices.set_explicit(a.toDevice());
          if (fake) install_fake_device_guard(a.toDevice().type());
        }
        if (fake) device_args.push_back(first + i);
      }
    }
  }
  if (devices.conflict()) fail(qualified_name(op), *devices.conflict());
  if (const auto missing = missing_backend_kernel(op, devices.result())) fail(qualified_name(op), *missing);

  // Run the op on the inner tensors. Fake mode: on meta tensors; if there is no Meta kernel
  // (or the composite kernel ends in an op without one), on zero-filled CPU stand-ins.
  c10::SmallVector<c10::IValue, 8> saved_args;
  std::string meta_error;
  if (!call.cpu_fallback) {
    if (fake && st->options.allow_cpu_fallback)
      saved_args.assign(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
    for (std::size_t pos : device_args) (*stack)[pos] = c10::Device(c10::kMeta);
    try {
      detail::MetaDeviceHintScope hint(devices.result());
      const bool answered =
          fake && (detail::run_device_choice_kernel(op, *stack, first, devices.result()) ||
                   (traits.foreach_pointwise && detail::run_foreach_pointwise_shortcut(*stack, first)));
      if (!answered) op.callBoxed(stack);
    } catch (const std::exception& e) {
      meta_error = error_text(e);
      if (saved_args.empty() || !traits.cpu_or_composite_explicit())
        fail(qualified_name(op),
             std::string(fake ? "failed on fake (meta) tensors" : "failed on real tensors") +
                 (fake && !st->options.allow_cpu_fallback
                      ? " (TraceOptions::allow_cpu_fallback is off, so its CPU kernel was not tried): "
                      : ": ") +
                 meta_error);
      call.cpu_fallback = true;
      stack->resize(first);
      stack->insert(stack->end(), saved_args.begin(), saved_args.end());
    }
  }
  if (call.cpu_fallback) {
    ++st->cpu_fallbacks[qualified_name(op)];
    // One zero-filled CPU storage per meta storage, so aliasing between arguments is kept.
    std::unordered_map<const c10::StorageImpl*, at::Tensor> bases;
    for (const at::Tensor& in : call.inner_inputs) {
      auto& base = bases[in.storage().unsafeGetStorageImpl()];
      if (!base.defined())
        base = at::zeros({static_cast<int64_t>(in.storage().nbytes())}, at::TensorOptions().dtype(at::kByte));
      call.real_inputs.push_back(at::empty({0}, in.options().device(c10::kCPU))
                                     .set_(base.storage(), in.storage_offset(), in.sizes(), in.strides()));
    }
    auto to_real = [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined()) return t;
      for (std::size_t k = 0; k < call.inner_inputs.size(); ++k)
        if (call.inner_inputs[k].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return call.real_inputs[k];
      return t;
    };
    for (std::size_t i = first; i < stack->size(); ++i)
      map_tensors((*stack)[i], traits.args[i - first].kind == ArgKind::TensorList, to_real);
    // Factories among them run on the CPU too; the results still report the inferred device.
    for (std::size_t pos : device_args)
      if ((*stack)[pos].isDevice()) (*stack)[pos] = c10::Device(c10::kCPU);
    try {
      op.callBoxed(stack);
    } catch (const std::exception& e) {
      fail(qualified_name(op), "failed on fake tensors" +
                                   (meta_error.empty() ? std::string(" (no Meta kernel)") : ": " + meta_error) +
                                   "; its CPU kernel on zero-filled stand-ins failed too: " + error_text(e));
    }
  }
  const std::size_t nret = schema.returns().size();
  const std::size_t ret_first = stack->size() - nret;

  if (call.cpu_fallback) {
    // Back to meta, keeping aliasing with the inputs (Python's run_fallback_kernel does the same).
    auto to_meta = [&](const at::Tensor& r) -> at::Tensor {
      if (!r.defined()) return r;
      for (std::size_t k = 0; k < call.real_inputs.size(); ++k)
        if (call.real_inputs[k].unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) return call.inner_inputs[k];
      for (std::size_t k = 0; k < call.real_inputs.size(); ++k)
        if (call.real_inputs[k].storage().is_alias_of(r.storage()))
          return at::empty({0}, r.options().device(c10::kMeta))
              .set_(call.inner_inputs[k].storage(), r.storage_offset(), r.sizes(), r.strides());
      return at::empty_strided(r.sizes(), r.strides(), r.options().device(c10::kMeta));
    };
    for (std::size_t i = ret_first; i < stack->size(); ++i) map_tensors((*stack)[i], /*optional_list=*/false, to_meta);
  }

  // Metadata of written arguments may have changed (t_, as_strided_, resize_...).
  for (std::size_t k = 0; k < call.outer_inputs.size(); ++k)
    if (call.outer_written[k] && call.outer_inputs[k].defined()) as_traced(call.outer_inputs[k])->refresh();

  // Record the node.
  const c10::Device device = devices.result();
  std::vector<OutputSpec> specs;
  specs.reserve(stack->size() - ret_first);  // a list result makes more, rarely
  for (std::size_t i = ret_first; i < stack->size(); ++i) {
    const auto& r = (*stack)[i];
    if (r.isTensor()) {
      fill_output_spec(specs.emplace_back(), r.toTensor(), device);
    } else if (r.isTensorList()) {
      for (const at::Tensor& t : r.toTensorList()) fill_output_spec(specs.emplace_back(), t, device);
    } else {
      specs.emplace_back();  // a number: type from the schema
    }
  }
  Node* node = nullptr;
  try {
    node = st->graph.add_call(op, std::move(graph_args), std::move(specs));
  } catch (const std::exception& e) { fail(qualified_name(op), "cannot be recorded: " + error_text(e)); }
  mark_phase(*st, node);

  // Wrap the outputs; in-place and out= results hand back the outer tensor they wrote.
  std::shared_ptr<TraceState> state_ref = owner;
  std::size_t out_index = 0;
  auto wrap_one = [&](const at::Tensor& t) -> at::Tensor {
    Value* v = node->output(out_index++);
    if (!t.defined()) return t;
    for (std::size_t k = 0; k < call.inner_inputs.size(); ++k) {
      if (call.outer_inputs[k].defined() && call.inner_inputs[k].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        as_traced(call.outer_inputs[k])->set_value(v);
        return call.outer_inputs[k];
      }
    }
    if (!state_ref) state_ref = tls_current_owner;  // came through the mode only
    return wrap(t, state_ref, v, device);
  };
  for (std::size_t i = ret_first; i < stack->size(); ++i) {
    auto& r = (*stack)[i];
    if (r.isTensor()) {
      r = wrap_one(r.toTensor());
    } else if (r.isTensorList()) {
      std::vector<at::Tensor> v;
      for (const at::Tensor& t : r.toTensorList()) v.push_back(wrap_one(t));
      r = std::move(v);
    } else {
      ++out_index;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Unboxed kernels for the most frequent functional ops.
//
// The fallback above is boxed: each traced call is packed into IValues on its way in (a list of
// sizes becomes a c10::List) and unpacked again for the kernel it runs. For the ops that make up
// most of a model's trace, an unboxed kernel at the same key records the same node without either
// trip when the call is the plain case: every tensor argument a tracing tensor of one live trace,
// all on one device, the op functional with a kernel for the trace's mode, no decompositions.
// It runs the op on the inner tensors through its unboxed entry point, then records and wraps as
// the fallback does. Any other call, and any call whose kernel or recording fails, goes to the
// fallback, boxed, which handles it or names what is wrong; the graph is the same either way.

// The trace of a call that may take the unboxed path (null: take the fallback), its first
// tracing tensor and the device of its results.
struct UnboxedTrace {
  TraceState* state = nullptr;
  const TracingTensorImpl* first = nullptr;
  c10::Device device{c10::kCPU};
};

thread_local bool tls_unboxed_off = false;  // detail::UnboxedKernelsOff
thread_local std::size_t tls_unboxed_calls = 0;

UnboxedTrace unboxed_trace_of(const c10::OperatorHandle& op, const OpTraits& traits,
                              c10::ArrayRef<const at::Tensor*> tensors) {
  UnboxedTrace found;
  if (!traits.unboxed || tls_unboxed_off) return found;
  for (const at::Tensor* t : tensors) {
    if (!t) continue;  // an absent optional tensor
    const TracingTensorImpl* tt = as_traced(*t);
    if (!tt) return {};  // a constant, a plain meta tensor, an undefined tensor: the fallback's cases
    if (!found.first) {
      found.first = tt;
      found.device = tt->logical_device();
    } else if (tt->state() != found.first->state() || tt->logical_device() != found.device) {
      return {};  // the fallback names the leaked tensor, or sorts out the devices
    }
  }
  if (!found.first) return {};
  TraceState* st = found.first->state().get();
  if (st->finished || (tls_current_trace && tls_current_trace != st) || !st->options.decompositions.empty() ||
      (st->fake() && !traits.meta_or_composite()) || missing_backend_kernel(op, found.device))
    return {};
  found.state = st;
  return found;
}

// A result of an unboxed call as the program sees it: the outer tensor when the op handed back
// one of its inputs, else a new tracing tensor.
at::Tensor wrap_unboxed_result(const at::Tensor& result, Value* value, c10::ArrayRef<const at::Tensor*> tensors,
                               const UnboxedTrace& trace) {
  if (!result.defined()) return result;
  for (const at::Tensor* t : tensors) {
    if (t && as_traced(*t)->inner().unsafeGetTensorImpl() == result.unsafeGetTensorImpl()) {
      as_traced(*t)->set_value(value);
      return *t;
    }
  }
  return wrap(result, trace.first->state(), value, trace.device);
}

template <class Arg>
void collect_tensor(c10::SmallVectorImpl<const at::Tensor*>& tensors, const Arg& arg) {
  if constexpr (std::is_same_v<Arg, at::Tensor>) tensors.push_back(&arg);
  if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>)
    tensors.push_back(arg && arg->defined() ? &*arg : nullptr);  // composites pass undefined ones for None
}

// An argument as the graph records it (what the fallback records for its boxed form).
template <class Arg>
Argument graph_argument(const Arg& arg) {
  if constexpr (std::is_same_v<Arg, at::Tensor>) {
    return Argument(as_traced(arg)->value());
  } else if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>) {
    return arg && arg->defined() ? Argument(as_traced(*arg)->value()) : Argument::none();
  } else {
    return Argument(c10::IValue(arg));
  }
}

// An argument as the kernel sees it: tracing tensors replaced by their inner tensors (mutable,
// for a kernel that writes its argument).
template <class Arg>
decltype(auto) inner_argument(const Arg& arg) {
  if constexpr (std::is_same_v<Arg, at::Tensor>) {
    return (as_traced(arg)->inner());
  } else if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>) {
    return arg && arg->defined() ? std::optional<at::Tensor>(as_traced(*arg)->inner()) : arg;
  } else {
    return (arg);
  }
}

// The first written tensor argument (an in-place op's `self`).
template <class Declared, class Arg>
void first_written(at::Tensor*& out, Arg& arg) {
  if constexpr (std::is_same_v<Declared, at::Tensor&>)
    if (!out) out = &arg;
}

// After the kernel: a written tensor's metadata may have changed (resize_, as_strided_...).
template <class Declared, class Arg>
void refresh_written(const Arg& arg) {
  if constexpr (std::is_same_v<Declared, at::Tensor&>)
    static_cast<TracingTensorImpl*>(arg.unsafeGetTensorImpl())->refresh();
}

// Calls `f` on each tensor of a kernel's result (a tensor, a list, a tuple), in order.
template <class Ret, class F>
void for_each_result(const Ret& r, F&& f) {
  if constexpr (std::is_same_v<Ret, at::Tensor>) {
    f(r);
  } else if constexpr (std::is_same_v<Ret, std::vector<at::Tensor>>) {
    for (const at::Tensor& t : r) f(t);
  } else {
    std::apply([&](const auto&... t) { (f(t), ...); }, r);
  }
}

template <class Op, class Schema = typename Op::schema>
struct UnboxedKernel;

template <class Op, class Ret, class... Args>
struct UnboxedKernel<Op, Ret(Args...)> {
  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return op;
  }

  static Ret boxed(c10::DispatchKeySet ks, Args... args) {
    torch::jit::Stack stack;
    stack.reserve(sizeof...(Args));
    (torch::jit::push(stack, args), ...);
    trace_fallback(handle(), ks, &stack);
    if constexpr (std::is_same_v<Ret, at::Tensor&>) {
      at::Tensor* written = nullptr;  // as libtorch's boxing does: an in-place op returns its `self`
      (first_written<Args>(written, args), ...);
      return *written;
    } else {
      return c10::impl::PopResult<Ret>::call(stack);
    }
  }

  static Ret call(c10::DispatchKeySet ks, Args... args) {
    const c10::OperatorHandle& op = handle();
    c10::SmallVector<const at::Tensor*, 4> tensors;
    (collect_tensor(tensors, args), ...);
    const UnboxedTrace trace = unboxed_trace_of(op, traits_of(op), tensors);
    if (!trace.state) return boxed(ks, args...);
    TraceState& st = *trace.state;
    std::unique_lock lock(st.mutex);
    // An in-place op returns the inner tensor of its written argument; the program gets the outer.
    at::Tensor* written = nullptr;
    (first_written<Args>(written, args), ...);
    std::optional<Held> result;
    Node* node = nullptr;
    {
      c10::impl::ExcludeDispatchKeyGuard guard{below_trace_keys()};
      try {
        detail::MetaDeviceHintScope hint(trace.device);
        result.emplace(Op::call(inner_argument(args)...));
      } catch (const std::exception&) {}
      if constexpr (std::is_same_v<Ret, at::Tensor&>) {
        if (result && returned(*result).unsafeGetTensorImpl() != as_traced(*written)->inner().unsafeGetTensorImpl())
          result.reset();  // not the in-place contract: the fallback decides
      }
      if (result) {
        (refresh_written<Args>(args), ...);
        std::vector<Argument> graph_args;
        graph_args.reserve(sizeof...(Args));
        (graph_args.push_back(graph_argument(args)), ...);
        std::vector<OutputSpec> specs;
        specs.reserve(3);
        for_each_result(returned(*result),
                        [&](const at::Tensor& r) { fill_output_spec(specs.emplace_back(), r, trace.device); });
        try {
          node = st.graph.add_call(op, std::move(graph_args), std::move(specs));
        } catch (const std::exception& e) { fail(qualified_name(op), "cannot be recorded: " + error_text(e)); }
      }
    }
    if (!node) {
      lock.unlock();
      return boxed(ks, args...);  // the kernel failed: reported as any traced call's failure
    }
    mark_phase(st, node);
    ++tls_unboxed_calls;
    if constexpr (std::is_same_v<Ret, at::Tensor&>) {
      as_traced(*written)->set_value(node->output(0));
      return *written;
    } else if constexpr (std::is_same_v<Ret, at::Tensor>) {
      return wrap_unboxed_result(*result, node->output(0), tensors, trace);
    } else if constexpr (std::is_same_v<Ret, std::vector<at::Tensor>>) {
      std::vector<at::Tensor> outer;
      outer.reserve(result->size());
      for (std::size_t i = 0; i < result->size(); ++i)
        outer.push_back(wrap_unboxed_result((*result)[i], node->output(i), tensors, trace));
      return outer;
    } else {
      return std::apply(
          [&](const auto&... r) {
            std::size_t i = 0;
            return Ret{wrap_unboxed_result(r, node->output(i++), tensors, trace)...};
          },
          *result);
    }
  }

 private:
  // What holds the kernel's result: a reference for an in-place op.
  using Held = std::conditional_t<std::is_reference_v<Ret>, std::reference_wrapper<std::remove_reference_t<Ret>>, Ret>;
  static const std::remove_reference_t<Ret>& returned(const Held& held) {
    if constexpr (std::is_reference_v<Ret>) {
      return held.get();
    } else {
      return held;
    }
  }
};

}  // namespace

namespace detail {
UnboxedKernelsOff::UnboxedKernelsOff() : previous_(std::exchange(tls_unboxed_off, true)) {}
UnboxedKernelsOff::~UnboxedKernelsOff() { tls_unboxed_off = previous_; }
std::size_t unboxed_calls() { return tls_unboxed_calls; }
}  // namespace detail

void merge_cpu_fallbacks(CpuFallbackCounts& into, const CpuFallbackCounts& more) {
  for (const auto& [op, calls] : more) into[op] += calls;
}

std::size_t total_cpu_fallback_calls(const CpuFallbackCounts& counts) {
  std::size_t total = 0;
  for (const auto& [op, calls] : counts) total += calls;
  return total;
}

namespace {

TORCH_LIBRARY_IMPL(_, Fake, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&trace_fallback>()); }

// The ops recorded by unboxed kernels: the views, arithmetic, matrix products, activations and
// normalizations that most of a model's trace is made of.
#define AOTPIPE_UNBOXED(op, name) m.impl(name, TORCH_FN(UnboxedKernel<at::_ops::op>::call))
TORCH_LIBRARY_IMPL(aten, Fake, m) {
  AOTPIPE_UNBOXED(view, "view");
  AOTPIPE_UNBOXED(_unsafe_view, "_unsafe_view");
  AOTPIPE_UNBOXED(expand, "expand");
  AOTPIPE_UNBOXED(t, "t");
  AOTPIPE_UNBOXED(transpose_int, "transpose.int");
  AOTPIPE_UNBOXED(permute, "permute");
  AOTPIPE_UNBOXED(unsqueeze, "unsqueeze");
  AOTPIPE_UNBOXED(squeeze_dim, "squeeze.dim");
  AOTPIPE_UNBOXED(select_int, "select.int");
  AOTPIPE_UNBOXED(slice_Tensor, "slice.Tensor");
  AOTPIPE_UNBOXED(split_Tensor, "split.Tensor");
  AOTPIPE_UNBOXED(unbind_int, "unbind.int");
  AOTPIPE_UNBOXED(alias, "alias");
  AOTPIPE_UNBOXED(add_Tensor, "add.Tensor");
  AOTPIPE_UNBOXED(sub_Tensor, "sub.Tensor");
  AOTPIPE_UNBOXED(mul_Tensor, "mul.Tensor");
  AOTPIPE_UNBOXED(div_Tensor, "div.Tensor");
  AOTPIPE_UNBOXED(mm, "mm");
  AOTPIPE_UNBOXED(addmm, "addmm");
  AOTPIPE_UNBOXED(bmm, "bmm");
  AOTPIPE_UNBOXED(clone, "clone");
  AOTPIPE_UNBOXED(_softmax, "_softmax");
  AOTPIPE_UNBOXED(gelu, "gelu");
  AOTPIPE_UNBOXED(relu, "relu");
  AOTPIPE_UNBOXED(sigmoid, "sigmoid");
  AOTPIPE_UNBOXED(tanh, "tanh");
  AOTPIPE_UNBOXED(hardtanh, "hardtanh");
  AOTPIPE_UNBOXED(native_layer_norm, "native_layer_norm");
  AOTPIPE_UNBOXED(convolution, "convolution");
  AOTPIPE_UNBOXED(max_pool2d_with_indices, "max_pool2d_with_indices");
  AOTPIPE_UNBOXED(mean_dim, "mean.dim");
  AOTPIPE_UNBOXED(native_dropout, "native_dropout");
  AOTPIPE_UNBOXED(_log_softmax, "_log_softmax");
  AOTPIPE_UNBOXED(nll_loss_forward, "nll_loss_forward");
  AOTPIPE_UNBOXED(_adaptive_avg_pool2d, "_adaptive_avg_pool2d");
  AOTPIPE_UNBOXED(_native_batch_norm_legit, "_native_batch_norm_legit");  // writes the running statistics
  AOTPIPE_UNBOXED(_native_batch_norm_legit_no_training, "_native_batch_norm_legit_no_training");
  AOTPIPE_UNBOXED(hardswish, "hardswish");
  AOTPIPE_UNBOXED(hardsigmoid, "hardsigmoid");
  AOTPIPE_UNBOXED(silu, "silu");
  AOTPIPE_UNBOXED(neg, "neg");
  AOTPIPE_UNBOXED(exp, "exp");
  AOTPIPE_UNBOXED(rsqrt, "rsqrt");
  AOTPIPE_UNBOXED(pow_Tensor_Scalar, "pow.Tensor_Scalar");
  AOTPIPE_UNBOXED(where_self, "where.self");
  AOTPIPE_UNBOXED(sum_dim_IntList, "sum.dim_IntList");
  AOTPIPE_UNBOXED(embedding, "embedding");
  // In place (what dropout and residual connections record outside functionalization).
  AOTPIPE_UNBOXED(add__Tensor, "add_.Tensor");
  AOTPIPE_UNBOXED(mul__Tensor, "mul_.Tensor");
  AOTPIPE_UNBOXED(div__Scalar, "div_.Scalar");
  AOTPIPE_UNBOXED(relu_, "relu_");
  AOTPIPE_UNBOXED(bernoulli__float, "bernoulli_.float");
  // What the backward of the ops above records.
  AOTPIPE_UNBOXED(threshold_backward, "threshold_backward");
  AOTPIPE_UNBOXED(hardtanh_backward, "hardtanh_backward");
  AOTPIPE_UNBOXED(gelu_backward, "gelu_backward");
  AOTPIPE_UNBOXED(sigmoid_backward, "sigmoid_backward");
  AOTPIPE_UNBOXED(tanh_backward, "tanh_backward");
  AOTPIPE_UNBOXED(_softmax_backward_data, "_softmax_backward_data");
  AOTPIPE_UNBOXED(_log_softmax_backward_data, "_log_softmax_backward_data");
  AOTPIPE_UNBOXED(native_layer_norm_backward, "native_layer_norm_backward");
  AOTPIPE_UNBOXED(convolution_backward, "convolution_backward");
  AOTPIPE_UNBOXED(max_pool2d_with_indices_backward, "max_pool2d_with_indices_backward");
  AOTPIPE_UNBOXED(nll_loss_backward, "nll_loss_backward");
  AOTPIPE_UNBOXED(native_dropout_backward, "native_dropout_backward");
}
#undef AOTPIPE_UNBOXED

// C++'s batch_norm (what torch::nn::BatchNorm*d calls) reaches aten::native_batch_norm, which
// updates running_mean/running_var in place although its schema does not say so: functionalization
// would miss the mutation and leave it in the graph as a hidden side effect on the inputs. PyTorch
// decomposes the op on the Autograd key for AOTAutograd into _native_batch_norm_legit*, whose
// schemas declare the mutation (torch/_decomp/decompositions.py, native_batch_norm_decomposition);
// so do we, for tracing tensors only (their autograd key is AutogradPrivateUse1).
std::tuple<at::Tensor, at::Tensor, at::Tensor> traced_native_batch_norm(const at::Tensor& input,
                                                                        const std::optional<at::Tensor>& weight,
                                                                        const std::optional<at::Tensor>& bias,
                                                                        const std::optional<at::Tensor>& running_mean,
                                                                        const std::optional<at::Tensor>& running_var,
                                                                        bool training, double momentum, double eps) {
  const bool has_mean = running_mean && running_mean->defined();
  const bool has_var = running_var && running_var->defined();
  if (!has_mean && !has_var) return at::_native_batch_norm_legit(input, weight, bias, training, momentum, eps);
  TORCH_CHECK(has_mean && has_var,
              "native_batch_norm: running_mean and running_var must both be given or both be None");
  at::Tensor mean = *running_mean;
  at::Tensor var = *running_var;
  if (training) return at::_native_batch_norm_legit(input, weight, bias, mean, var, training, momentum, eps);
  return at::_native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps);
}

// On a CUDA tensor, batch_norm picks cudnn_batch_norm, which has no Meta or CPU kernel and hides
// the same running-stat update: PyTorch decomposes it on the Autograd key into native_batch_norm
// (torch/_decomp/decompositions.py, cudnn_batch_norm), and so do we, with the same extra result.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> traced_cudnn_batch_norm(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double exponential_average_factor, double epsilon) {
  auto [out, mean, invstd] = traced_native_batch_norm(input, weight, bias, running_mean, running_var, training,
                                                      exponential_average_factor, epsilon);
  at::Tensor reserve = input.new_zeros({0}, input.options().dtype(at::kByte));
  if (training) return {out, mean, invstd, reserve};
  return {out, weight.new_zeros({0}), weight.new_zeros({0}), reserve};
}

// aten::lstm picks a fused backend kernel (mkldnn_rnn_layer on the CPU, _cudnn_rnn on CUDA)
// whose workspace size only the backend library knows. PyTorch decomposes it on the Autograd key
// into per-step cell ops (torch/_decomp/decompositions.py, lstm_impl with one_layer_lstm), so the
// traced graph is plain ATen and fake-traceable; so do we. Projections (proj_size) keep the
// backend path. Dropout between layers is applied in training, as eager does.
std::tuple<at::Tensor, at::Tensor> traced_lstm_layer(const at::Tensor& input, const at::Tensor& h0,
                                                     const at::Tensor& c0, at::ArrayRef<at::Tensor> params,
                                                     bool has_biases, bool reverse) {
  const at::Tensor& ih_weight = params[0];
  const at::Tensor& hh_weight = params[1];
  std::optional<at::Tensor> ih_bias, hh_bias;
  if (has_biases) ih_bias = params[2], hh_bias = params[3];
  at::Tensor hx = h0.unsqueeze(0), cx = c0.unsqueeze(0);
  at::Tensor precomputed = at::linear(input, ih_weight, ih_bias);
  if (reverse) precomputed = precomputed.flip(0);
  std::vector<at::Tensor> steps;
  for (const at::Tensor& step_input : precomputed.unbind(0)) {
    auto gates = (at::linear(hx, hh_weight, hh_bias) + step_input).chunk(4, 2);
    at::Tensor cy = gates[1].sigmoid() * cx + gates[0].sigmoid() * gates[2].tanh();
    hx = gates[3].sigmoid() * cy.tanh();
    cx = cy;
    steps.push_back(hx);
  }
  if (reverse) std::reverse(steps.begin(), steps.end());
  return {at::cat(steps, 0), at::stack({hx.squeeze(0), cx.squeeze(0)})};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> traced_lstm(const at::Tensor& input, at::TensorList hx,
                                                           at::TensorList params, bool has_biases, int64_t num_layers,
                                                           double dropout, bool train, bool bidirectional,
                                                           bool batch_first) {
  TORCH_CHECK(hx.size() == 2, "lstm expects two hidden states, got ", hx.size());
  const std::size_t group = has_biases ? 4 : 2;
  const int64_t directions = bidirectional ? 2 : 1;
  if (hx[0].size(2) != hx[1].size(2)) {
    // Projections: libtorch's own composite, whose ops still go through autograd (excluding the
    // autograd key around at::lstm instead would record them without gradients).
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  }
  TORCH_CHECK(params.size() == group * static_cast<std::size_t>(num_layers * directions), "lstm: expected ",
              group * num_layers * directions, " parameters, got ", params.size());
  at::Tensor layer_input = batch_first ? input.transpose(0, 1) : input;
  std::vector<at::Tensor> final_h, final_c;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<at::Tensor> outputs;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const int64_t index = layer * directions + direction;
      auto [out, state] = traced_lstm_layer(layer_input, hx[0][index], hx[1][index], params.slice(index * group, group),
                                            has_biases, direction == 1);
      outputs.push_back(out);
      final_h.push_back(state[0]);
      final_c.push_back(state[1]);
    }
    layer_input = bidirectional ? at::cat(outputs, outputs[0].dim() - 1) : outputs[0];
    if (dropout != 0 && train && layer < num_layers - 1) layer_input = at::dropout(layer_input, dropout, true);
  }
  at::Tensor output = batch_first ? layer_input.transpose(0, 1) : layer_input;
  return {output, at::stack(final_h, 0), at::stack(final_c, 0)};
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(traced_native_batch_norm));
  m.impl("cudnn_batch_norm", TORCH_FN(traced_cudnn_batch_norm));
  m.impl("lstm.input", TORCH_FN(traced_lstm));
}

// ---------------------------------------------------------------------------------------------
// Driving a trace.

class ModeScope {
 public:
  ModeScope(const std::shared_ptr<TraceState>& st)
      : prev_(tls_current_trace), prev_owner_(tls_current_owner), include_(kTraceKey) {
    tls_current_trace = st.get();
    tls_current_owner = st;
  }
  ~ModeScope() {
    tls_current_trace = prev_;
    tls_current_owner = prev_owner_;
  }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;

 private:
  TraceState* prev_;
  std::shared_ptr<TraceState> prev_owner_;
  c10::impl::IncludeDispatchKeyGuard include_;
};

class MultithreadingOff {
 public:
  MultithreadingOff() : previous_(c10::AutogradState::get_tls_state().get_multithreading_enabled()) {
    c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
  }
  ~MultithreadingOff() { c10::AutogradState::get_tls_state().set_multithreading_enabled(previous_); }
  MultithreadingOff(const MultithreadingOff&) = delete;
  MultithreadingOff& operator=(const MultithreadingOff&) = delete;

 private:
  bool previous_;
};

struct Tracer {
  std::shared_ptr<TraceState> st;
  // Fake traces of CUDA programs make no CUDA call (tracer/internal/fake_device_guard.h).
  std::optional<FakeDeviceScope> fake_devices;
  std::vector<at::Tensor> traced_inputs;     // what fn sees (functional wrappers when functionalizing)
  std::vector<at::Tensor> initial_inputs;    // the tracing tensors of the inputs, as created
  std::vector<c10::Storage> input_storages;  // of traced_inputs, as created (kept alive: TraceInspection)
  // Open-addressing tables (no allocation per entry): every input of every trace visits both.
  boost::unordered_flat_map<const c10::StorageImpl*, c10::Storage> storages;   // example storage -> the trace's copy
  boost::unordered_flat_map<const c10::TensorImpl*, std::size_t> seen_inputs;  // example -> first position

  Tracer(TraceOptions options, std::size_t num_inputs) : st(std::make_shared<TraceState>(std::move(options))) {
    detail::link_meta_kernels();
    for (auto* inputs : {&initial_inputs, &traced_inputs}) inputs->reserve(num_inputs);
    input_storages.reserve(num_inputs);
    storages.reserve(num_inputs);
    seen_inputs.reserve(num_inputs);
    if (st->fake()) fake_devices.emplace();
  }

  // A graph input from an example tensor (fake: a view of one fake storage per real storage).
  at::Tensor add_input(const std::string& name, const at::Tensor& x) {
    c10::impl::ExcludeDispatchKeyGuard guard{below_trace_keys()};
    TORCH_CHECK(x.defined(), "aotpipe::trace: example input '", name, "' is undefined");
    TORCH_CHECK(!as_traced(x) && !fimpl::isFunctionalTensor(x), "aotpipe::trace: example input '", name,
                "' is a tracing tensor (nested traces take real example inputs)");
    TORCH_CHECK(st->fake() || !is_metadata_example(x), "aotpipe::trace: example input '", name,
                "' is a metadata example (it has no data); TraceMode::Real needs real tensors");
    install_fake_device_guard(x.device().type());
    TensorMeta meta;
    fill_meta(meta, x, x.device());
    meta.requires_grad = x.requires_grad();
    Value* v = st->graph.add_input(name, std::move(meta));
    // The same tensor twice: one tracing tensor, as AOTAutograd's to_fun memo does.
    auto [seen, fresh] = seen_inputs.emplace(x.unsafeGetTensorImpl(), traced_inputs.size());
    if (!fresh) {
      initial_inputs.push_back(initial_inputs[seen->second]);
      input_storages.push_back(input_storages[seen->second]);
      traced_inputs.push_back(traced_inputs[seen->second]);
      return traced_inputs.back();
    }
    auto& base = storages[x.storage().unsafeGetStorageImpl()];
    at::Tensor inner;
    if (st->fake()) {
      if (!base)
        base = c10::Storage(c10::Storage::use_byte_size_t(), x.storage().nbytes(), c10::GetAllocator(c10::kMeta),
                            /*resizable=*/true);
      // What at::empty({0}, meta).set_(base, ...) builds, made directly: this runs for every
      // input of every trace, and the two trips through the dispatcher were a fifth of the
      // metadata trace of a small graph.
      inner = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(base), c10::DispatchKeySet(c10::DispatchKey::Meta),
                                                       x.dtype());
      inner.unsafeGetTensorImpl()->set_sizes_and_strides(x.sizes(), x.strides(), x.storage_offset());
    } else {
      if (!base) {
        // A private copy: the trace must not modify the caller's tensors.
        const auto nbytes = static_cast<int64_t>(x.storage().nbytes());
        base = at::empty({0}, x.options().dtype(at::kByte)).set_(x.storage(), 0, {nbytes}, {1}).clone().storage();
      }
      inner = at::empty({0}, x.options().requires_grad(false)).set_(base, x.storage_offset(), x.sizes(), x.strides());
    }
    at::Tensor w = wrap(inner, st, v, x.device());
    initial_inputs.push_back(w);
    if (st->options.functionalize) w = fimpl::to_functional_tensor(w);
    if (x.requires_grad()) {
      if (x.is_leaf()) {
        w.requires_grad_(true);
      } else {
        // A non-leaf example (e.g. x.clone() of a leaf) stays a non-leaf, so the callable may
        // mutate it in place as eager code could. The stand-in grad_fn is never run: gradients
        // with respect to this input are captured at its edge.
        auto node = std::make_shared<torch::autograd::Identity>();
        node->add_input_metadata(w);
        torch::autograd::impl::set_gradient_edge(w, torch::autograd::Edge(std::move(node), 0));
      }
    }
    traced_inputs.push_back(w);
    input_storages.push_back(w.storage());
    return w;
  }

  // A fresh graph input of the given metadata (tangents).
  at::Tensor add_input(const std::string& name, const TensorMeta& meta) {
    at::Tensor example;
    {
      c10::impl::ExcludeDispatchKeyGuard guard{below_trace_keys()};
      example = at::empty_strided(meta.sizes, meta.strides, at::TensorOptions().dtype(meta.dtype).device(c10::kMeta));
    }
    // Reuse the example path with a meta example (fake storage) but the logical device.
    c10::impl::ExcludeDispatchKeyGuard guard{below_trace_keys()};
    at::Tensor inner = st->fake() ? example
                                  : at::empty_strided(meta.sizes, meta.strides,
                                                      at::TensorOptions().dtype(meta.dtype).device(meta.device));
    Value* v = st->graph.add_input(name, meta);
    at::Tensor w = wrap(inner, st, v, meta.device);
    if (st->options.functionalize) w = fimpl::to_functional_tensor(w);
    return w;
  }

  template <class F>
  TensorList run(F&& body) {
    ModeScope mode(st);
    // Backward nodes run on this thread's CPU ready queue whatever device they report, as
    // AOTAutograd does with torch.autograd.set_multithreading_enabled(False).
    MultithreadingOff single_threaded_autograd;
    std::optional<c10::impl::IncludeDispatchKeyGuard> functionalize;
    std::optional<fimpl::FunctionalizationReapplyViewsGuard> reapply;
    if (st->options.functionalize) {
      functionalize.emplace(c10::DispatchKey::Functionalize);
      reapply.emplace(true);
    }
    return body();
  }

  TraceInspection inspection(const TensorList& example_inputs, const TensorList& outputs) const {
    return {example_inputs, initial_inputs, traced_inputs, outputs, input_storages, st->cpu_fallbacks};
  }

  // Graph value of an output tensor.
  Value* value_of_output(const at::Tensor& out, std::size_t index) {
    TORCH_CHECK(out.defined(), "aotpipe::trace: output ", index, " is undefined");
    if (auto* tt = traced_of(out)) {
      TORCH_CHECK(tt->state() == st, "aotpipe::trace: output ", index, " is a tensor of another trace");
      return tt->value();
    }
    // A real tensor the function returned as is (a closed-over constant).
    std::lock_guard lock(st->mutex);
    return constant_value(*st, out);
  }

  TraceResult finish(const TensorList& user_outputs, std::size_t num_tangents, std::size_t num_grads) {
    TraceResult result;
    std::vector<Value*> outputs;
    for (std::size_t i = 0; i < user_outputs.size(); ++i) {
      Value* v = value_of_output(user_outputs[i], i);
      if (const TensorMeta* m = v->meta(); m && !v->is_input() && m->requires_grad != user_outputs[i].requires_grad()) {
        TensorMeta updated = *m;
        updated.requires_grad = user_outputs[i].requires_grad();
        v->set_meta(std::move(updated));
      }
      outputs.push_back(v);
    }

    // Output aliasing: storages of the tracing tensors (functional wrappers when functionalizing).
    auto storage_of = [&](const at::Tensor& t) -> const c10::StorageImpl* {
      if (!t.defined()) return nullptr;
      if (fimpl::isFunctionalTensor(t)) return fimpl::unsafeGetFunctionalWrapper(t)->storage().unsafeGetStorageImpl();
      return t.storage().unsafeGetStorageImpl();
    };
    const std::size_t num_primals = traced_inputs.size();
    for (std::size_t i = 0; i < user_outputs.size(); ++i) {
      TracedOutputInfo info;
      const auto* s = storage_of(user_outputs[i]);
      for (std::size_t k = 0; k < num_primals && s; ++k) {
        if (user_outputs[i].unsafeGetTensorImpl() == traced_inputs[k].unsafeGetTensorImpl()) info.is_input = true;
        if (storage_of(traced_inputs[k]) == s) {
          info.aliased_input = k;
          break;
        }
      }
      for (std::size_t k = 0; k < i && s && !info.aliased_input; ++k)
        if (storage_of(user_outputs[k]) == s) {
          info.aliased_output = k;
          break;
        }
      result.outputs.push_back(info);
    }

    // Input mutations (functionalization): the final value becomes an extra output.
    result.inputs.resize(num_primals);
    if (st->options.functionalize) {
      for (std::size_t k = 0; k < num_primals; ++k) {
        const at::Tensor& t = traced_inputs[k];
        fimpl::sync(t);
        auto* w = fimpl::unsafeGetFunctionalWrapper(t);
        auto& info = result.inputs[k];
        info.mutates_data = w->has_data_mutation();
        info.mutates_metadata = w->has_metadata_mutation();
        info.mutates_storage = w->was_storage_changed();
        if (!(info.mutates_data || info.mutates_metadata || info.mutates_storage)) continue;
        Value* final_value = as_traced(fimpl::from_functional_tensor(t))->value();
        const auto& keep = st->options.keep_input_mutations_in_graph;
        if (k < keep.size() && keep[k]) {
          Value* input = st->graph.inputs()[k];
          // A set_() swapped the input's storage: keep it as set_ (PyTorch's apply_in_graph_mutations),
          // so the caller's tensor ends up sharing the new storage; a data mutation is a copy_.
          if (final_value != input)
            st->graph.add_call(info.mutates_storage ? "aten::set_.source_Tensor" : "aten::copy_", {input, final_value},
                               {}, nullptr);
        } else if (st->options.return_mutated_inputs) {
          info.mutated_output_index = outputs.size();
          outputs.push_back(final_value);
        }
      }
    }
    Graph& g = st->graph;
    g.set_outputs(outputs);
    if (st->options.eliminate_dead_code) eliminate_dead_code(g);
    if (st->has_backward || st->joint)
      for (Node* n : g.nodes())
        if (!n->attrs().count("phase")) n->attrs()["phase"] = "forward";
    result.num_user_outputs = user_outputs.size() - num_grads;
    result.has_backward = st->has_backward;
    result.cpu_fallbacks = st->cpu_fallbacks;
    result.num_tangents = num_tangents;
    result.num_grad_outputs = num_grads;
    result.graph = std::move(g);
    st->finished = true;
    return result;
  }
};

std::string input_name(const TraceOptions& options, std::size_t i, const char* prefix, std::size_t base) {
  if (i < options.input_names.size()) return options.input_names[i];
  return std::string(prefix) + std::to_string(i + base);
}

template <class F>
auto translate_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const TraceError&) { throw; } catch (const std::exception& e) {
    std::string msg = error_text(e);
    // c10 appends the C++ location on a new line; the first line names the op.
    throw TraceError("aotpipe trace: " + msg);
  }
}

}  // namespace

bool is_tracing_tensor(const at::Tensor& tensor) {
  return as_traced(tensor) != nullptr || (tensor.defined() && fimpl::isFunctionalTensor(tensor) &&
                                          as_traced(fimpl::from_functional_tensor(tensor)) != nullptr);
}

TraceResult trace_program(const TraceFunction& fn, const TensorList& example_inputs, TraceOptions options) {
  return translate_errors([&] {
    Tracer tracer(std::move(options), example_inputs.size());
    for (std::size_t i = 0; i < example_inputs.size(); ++i)
      tracer.add_input(input_name(tracer.st->options, i, "arg", 0), example_inputs[i]);
    TensorList outs = tracer.run([&] { return fn(tracer.traced_inputs); });
    if (tracer.st->options.inspect) tracer.st->options.inspect(tracer.inspection(example_inputs, outs));
    return tracer.finish(outs, 0, 0);
  });
}

Graph trace(const TraceFunction& fn, const TensorList& example_inputs, TraceOptions options) {
  return trace_program(fn, example_inputs, std::move(options)).graph;
}

TraceResult trace_joint(const TraceFunction& fn, const TensorList& example_inputs, TraceOptions options) {
  return translate_errors([&] {
    Tracer tracer(std::move(options), example_inputs.size());
    tracer.st->joint = true;
    for (std::size_t i = 0; i < example_inputs.size(); ++i)
      tracer.add_input(input_name(tracer.st->options, i, "primals_", 1), example_inputs[i]);
    std::size_t num_tangents = 0;
    std::size_t num_grads = 0;
    std::vector<std::size_t> undefined_grads;
    std::vector<std::size_t> grad_inputs;
    const TensorList primals = tracer.traced_inputs;
    TensorList fw_outs = tracer.run([&] { return fn(primals); });
    std::vector<bool> mask = tracer.st->options.tangent_mask;
    if (const auto& plan = tracer.st->options.plan_backward) {
      std::optional<std::vector<bool>> planned = plan(tracer.inspection(example_inputs, fw_outs), fw_outs);
      if (!planned) {
        tracer.st->joint = false;  // a forward-only trace, as trace_program's
        return tracer.finish(fw_outs, 0, 0);
      }
      mask = std::move(*planned);
    }
    TensorList outs = tracer.run([&] {
      std::vector<at::Tensor> diff_outs;
      std::vector<at::Tensor> tangents;
      std::vector<at::Tensor> diff_tangents;
      TORCH_CHECK(mask.empty() || mask.size() == fw_outs.size(), "aotpipe::trace_joint: tangent_mask has ", mask.size(),
                  " entries for ", fw_outs.size(), " outputs");
      for (std::size_t oi = 0; oi < fw_outs.size(); ++oi) {
        const at::Tensor& o = fw_outs[oi];
        if (mask.empty() ? (!o.defined() || !o.requires_grad()) : !mask[oi]) continue;
        TORCH_CHECK(o.defined(), "aotpipe::trace_joint: output ", oi, " needs a tangent but is undefined");
        TensorMeta meta;
        meta.sizes = o.sizes();
        meta.strides = contiguous_strides(meta.sizes);
        meta.dtype = o.scalar_type();
        if (auto* tt = traced_of(o)) meta.device = tt->logical_device();
        const std::size_t k = tangents.size();
        std::string name = k + example_inputs.size() < tracer.st->options.input_names.size()
                               ? tracer.st->options.input_names[k + example_inputs.size()]
                               : "tangents_" + std::to_string(k + 1);
        at::Tensor tangent = tracer.add_input(name, meta);
        tangents.push_back(tangent);
        if (o.requires_grad()) {
          diff_outs.push_back(o);
          diff_tangents.push_back(tangent);
        }
      }
      num_tangents = tangents.size();
      std::vector<at::Tensor> wrt;
      for (std::size_t i = 0; i < primals.size(); ++i)
        if (primals[i].requires_grad()) {
          wrt.push_back(primals[i]);
          grad_inputs.push_back(i);
        }
      TensorList result = fw_outs;
      if (!wrt.empty()) {
        std::vector<at::Tensor> grads;
        tracer.st->backward_phase = true;  // what the backward nodes record, and the zeros below
        if (!diff_outs.empty())
          grads = detail::trace_backward(diff_outs, wrt, diff_tangents);
        else
          grads.resize(wrt.size());
        for (std::size_t i = 0; i < wrt.size(); ++i) {
          if (!grads[i].defined()) undefined_grads.push_back(i);
          result.push_back(grads[i].defined() ? grads[i] : at::zeros_like(wrt[i]));
        }
        num_grads = wrt.size();
      }
      return result;
    });
    TraceResult result = tracer.finish(outs, num_tangents, num_grads);
    result.undefined_grads = std::move(undefined_grads);
    result.grad_inputs = std::move(grad_inputs);
    return result;
  });
}

}  // namespace aotpipe
