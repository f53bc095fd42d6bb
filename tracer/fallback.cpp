// The tracer's fallback (tracer/internal/tracing_tensor.h): one boxed kernel on the trace key
// for every op. It finds the call's trace, records its arguments, runs the op on the inner tensors
// (meta tensors in a fake trace; zero-filled CPU stand-ins for an op with no Meta kernel, counted),
// infers the results' device as eager does, and records and wraps the results.
#include <aotpipe/tracer/internal/tracing_tensor.h>

#include <aotpipe/tracer/internal/fake_device_guard.h>
#include <aotpipe/tracer/internal/meta_kernels.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace aotpipe::detail {
namespace {

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

// aten::index.Tensor is tagged dynamic_output_shape for its boolean-mask form; with integer
// indices only its output shape is the indices' broadcast shape, which its Meta kernel computes
// (Swin's relative position bias, embedding-like gathers), as PyTorch's fake tensors allow.
bool integer_indexing(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first) {
  if (op.operator_name().name != "aten::index" || op.operator_name().overload_name != "Tensor") return false;
  if (stack.size() != first + 2 || !stack[first + 1].isList()) return false;
  for (const c10::IValue& index : stack[first + 1].toListRef()) {
    if (index.isNone()) continue;
    if (!index.isTensor() || !c10::isIntegralType(index.toTensor().scalar_type(), /*includeBool=*/false)) return false;
  }
  return true;
}

// The tensors of one traced call, as the fallback unwraps them.
struct OpCall {
  bool cpu_fallback = false;
  // Inline storage for the common arity: this runs for every traced call.
  c10::SmallVector<at::Tensor, 4> inner_inputs;  // every unwrapped tensor, in argument order
  c10::SmallVector<at::Tensor, 4> outer_inputs;  // the matching outer tensor (undefined for constants)
  c10::SmallVector<bool, 4> outer_written;       // the schema says the op writes that argument
  std::vector<at::Tensor> real_inputs;           // cpu_fallback: zero-filled real stand-ins
};

}  // namespace

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
  // here only when autograd keys are excluded, e.g. under InferenceMode), except for an op with
  // a Meta kernel of its own (silu_backward, reached through its autograd formula, see
  // autograd_decompositions.cpp): recorded as one call, as PyTorch's fake tensors record it.
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
  if (traits.composite_implicit && !traits.meta) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
    return;
  }

  const bool fake = st->fake();
  if (fake && traits.data_dependent && !integer_indexing(op, *stack, first))
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
  // One description per value (a list result defines one per element), types from the schema;
  // the tensors' metadata is filled in place once the node exists, as the unboxed kernels do.
  c10::SmallVector<OutputSpec, 3> specs;
  for (std::size_t i = ret_first; i < stack->size(); ++i) {
    const auto& r = (*stack)[i];
    specs.resize(specs.size() + (r.isTensorList() ? r.toTensorList().size() : 1));
  }
  Node* node = nullptr;
  try {
    node = st->graph.add_call(op, std::move(graph_args), std::span<OutputSpec>(specs));
  } catch (const std::exception& e) { fail(qualified_name(op), "cannot be recorded: " + error_text(e)); }
  std::size_t value_index = 0;
  for (std::size_t i = ret_first; i < stack->size(); ++i) {
    const auto& r = (*stack)[i];
    if (r.isTensor()) {
      fill_value_meta(*node->output(value_index++), r.toTensor(), device);
    } else if (r.isTensorList()) {
      for (const at::Tensor& t : r.toTensorList()) fill_value_meta(*node->output(value_index++), t, device);
    } else {
      ++value_index;  // a number
    }
  }
  mark_phase(*st, node);

  // Wrap the outputs; in-place and out= results hand back the outer tensor they wrote.
  const std::shared_ptr<TraceState>& state_ref = owner ? owner : tls_current_owner;  // no owner: came through the mode
  auto outer_of = [&](const c10::TensorImpl* inner) -> const at::Tensor* {
    for (std::size_t k = 0; k < call.inner_inputs.size(); ++k)
      if (call.outer_inputs[k].defined() && call.inner_inputs[k].unsafeGetTensorImpl() == inner)
        return &call.outer_inputs[k];
    return nullptr;
  };
  std::size_t out_index = 0;
  auto wrap_one = [&](const at::Tensor& t) {
    return wrap_result(t, node->output(out_index++), outer_of, state_ref, device);
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

void link_trace_fallback() {}

namespace {
TORCH_LIBRARY_IMPL(_, Fake, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&trace_fallback>()); }
}  // namespace

}  // namespace aotpipe::detail
