// Unboxed kernels for the most frequent functional ops (tracer/internal/unboxed_kernels.h).
//
// The fallback (fallback.cpp) is boxed: each traced call is packed into IValues on its way in (a
// list of sizes becomes a c10::List) and unpacked again for the kernel it runs. For the ops that make up
// most of a model's trace, an unboxed kernel at the same key records the same node without either
// trip when the call is the plain case: every tensor argument (list elements included) a tracing
// tensor of one live trace, all on one device, the op functional with a kernel for the trace's
// mode, no decompositions. A factory (no tensor argument) records on the mode's trace; a `device`
// argument decides the results' device and, in a fake trace, reaches the kernel as meta.
// It runs the op on the inner tensors through its unboxed entry point, then records and wraps as
// the fallback does. Any other call, and any call whose kernel or recording fails, goes to the
// fallback, boxed, which handles it or names what is wrong; the graph is the same either way.
#include <aotpipe/tracer/internal/tracing_tensor.h>
#include <aotpipe/tracer/internal/unboxed_kernels.h>

#include <aotpipe/tracer/internal/fake_device_guard.h>
#include <aotpipe/tracer/internal/meta_kernels.h>

#include <ATen/Operators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <functional>
#include <tuple>
#include <utility>
#include <type_traits>

namespace aotpipe::detail {
namespace {

// The trace of a call that may take the unboxed path (null: take the fallback), as the owning
// pointer its results will hold, and the device of its results.
struct UnboxedTrace {
  const std::shared_ptr<TraceState>* owner = nullptr;
  c10::Device device{c10::kCPU};
};

thread_local bool tls_unboxed_off = false;  // detail::UnboxedKernelsOff
thread_local std::size_t tls_unboxed_calls = 0;

UnboxedTrace unboxed_trace_of(const c10::OperatorHandle& op, const OpTraits& traits,
                              c10::ArrayRef<const at::Tensor*> tensors, std::optional<c10::Device> explicit_device) {
  UnboxedTrace found;
  if (!traits.unboxed || tls_unboxed_off) return found;
  for (const at::Tensor* t : tensors) {
    if (!t) continue;  // an absent optional tensor
    const TracingTensorImpl* tt = as_traced(*t);
    if (!tt) return {};  // a constant, a plain meta tensor, an undefined tensor: the fallback's cases
    if (!found.owner) {
      found.owner = &tt->state();
      found.device = tt->logical_device();
    } else if (tt->state() != *found.owner || tt->logical_device() != found.device) {
      return {};  // the fallback names the leaked tensor, or sorts out the devices
    }
  }
  if (!found.owner) {
    // No tensor: a factory, recorded on the mode's trace (none: not part of a program).
    if (!tls_current_trace) return {};
    found.owner = &tls_current_owner;
  }
  if (explicit_device) found.device = *explicit_device;  // it wins, as in eager
  const TraceState* st = found.owner->get();
  if (st->finished || (tls_current_trace && tls_current_trace != st) || !st->options.decompositions.empty() ||
      (st->fake() && !traits.meta_or_composite()) || missing_backend_kernel(op, found.device))
    return {};
  return found;
}

// Tensor list arguments as the kernels take them (Tensor[]).
template <class Arg>
constexpr bool is_tensor_list = std::is_same_v<Arg, at::ITensorListRef> || std::is_same_v<Arg, at::TensorList>;

template <class Arg>
void collect_tensor(c10::SmallVectorImpl<const at::Tensor*>& tensors, const Arg& arg) {
  if constexpr (std::is_same_v<Arg, at::Tensor>) {
    tensors.push_back(&arg);
  } else if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>) {
    tensors.push_back(arg && arg->defined() ? &*arg : nullptr);  // composites pass undefined ones for None
  } else if constexpr (is_tensor_list<Arg>) {
    for (const at::Tensor& t : arg) tensors.push_back(&t);  // an undefined element goes to the fallback
  } else {
    static_assert(!std::is_same_v<Arg, c10::List<std::optional<at::Tensor>>>, "Tensor?[]: the fallback's case");
  }
}

// The `device` argument, when one is given.
template <class Arg>
void collect_device(std::optional<c10::Device>& device, const Arg& arg) {
  if constexpr (std::is_same_v<Arg, c10::Device>) device = arg;
  if constexpr (std::is_same_v<Arg, std::optional<c10::Device>>)
    if (arg) device = *arg;
}

// An argument as the graph records it (what the fallback records for its boxed form).
template <class Arg>
Argument graph_argument(const Arg& arg) {
  if constexpr (std::is_same_v<Arg, at::Tensor>) {
    return Argument(as_traced(arg)->value());
  } else if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>) {
    return arg && arg->defined() ? Argument(as_traced(*arg)->value()) : Argument::none();
  } else if constexpr (is_tensor_list<Arg>) {
    ValueList values;
    for (const at::Tensor& t : arg) values.values.push_back(as_traced(t)->value());
    return Argument(std::move(values));
  } else {
    return Argument(c10::IValue(arg));
  }
}

// An argument as the kernel sees it: tracing tensors replaced by their inner tensors (mutable,
// for a kernel that writes its argument); in a fake trace, a device given is meta.
template <class Arg>
decltype(auto) inner_argument(const Arg& arg, bool fake) {
  if constexpr (std::is_same_v<Arg, at::Tensor>) {
    return (as_traced(arg)->inner());
  } else if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>) {
    return arg && arg->defined() ? std::optional<at::Tensor>(as_traced(*arg)->inner()) : arg;
  } else if constexpr (is_tensor_list<Arg>) {
    std::vector<at::Tensor> inner;  // lives to the end of the kernel's call expression
    inner.reserve(arg.size());
    for (const at::Tensor& t : arg) inner.push_back(as_traced(t)->inner());
    return inner;
  } else if constexpr (std::is_same_v<Arg, c10::Device>) {
    return fake ? c10::Device(c10::kMeta) : arg;
  } else if constexpr (std::is_same_v<Arg, std::optional<c10::Device>>) {
    return fake && arg ? std::optional<c10::Device>(c10::kMeta) : arg;
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

  // Looked up once per thread: traits_of keeps each op's entry where it first put it.
  static const OpTraits& traits() {
    thread_local const OpTraits* const traits = &traits_of(handle());
    return *traits;
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
    std::optional<c10::Device> explicit_device;
    (collect_device(explicit_device, args), ...);
    const UnboxedTrace trace = unboxed_trace_of(op, traits(), tensors, explicit_device);
    if (!trace.owner) return boxed(ks, args...);
    TraceState& st = **trace.owner;
    std::unique_lock lock(st.mutex);
    // An in-place op returns the inner tensor of its written argument; the program gets the outer.
    at::Tensor* written = nullptr;
    (first_written<Args>(written, args), ...);
    std::optional<Held> result;
    Node* node = nullptr;
    {
      c10::impl::ExcludeDispatchKeyGuard guard{below_trace_keys()};
      try {
        if (explicit_device && st.fake()) install_fake_device_guard(explicit_device->type());
        MetaDeviceHintScope hint(trace.device);
        result.emplace(Op::call(inner_argument(args, st.fake())...));
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
        // The schema gives the results' types; a Tensor[] result's count is told. Their metadata
        // is filled in place below.
        c10::SmallVector<OutputSpec, 1> list_results;
        if constexpr (std::is_same_v<Ret, std::vector<at::Tensor>>) list_results.resize(result->size());
        try {
          node = st.graph.add_call(op, std::move(graph_args), std::span<OutputSpec>(list_results));
        } catch (const std::exception& e) { fail(qualified_name(op), "cannot be recorded: " + error_text(e)); }
        std::size_t i = 0;
        for_each_result(returned(*result),
                        [&](const at::Tensor& r) { fill_value_meta(*node->output(i++), r, trace.device); });
      }
    }
    if (!node) {
      lock.unlock();
      return boxed(ks, args...);  // the kernel failed: reported as any traced call's failure
    }
    mark_phase(st, node);
    ++tls_unboxed_calls;
    // A result that is an argument's inner tensor is handed back as that argument.
    auto outer_of = [&](const c10::TensorImpl* inner) -> const at::Tensor* {
      for (const at::Tensor* t : tensors)
        if (t && as_traced(*t)->inner().unsafeGetTensorImpl() == inner) return t;
      return nullptr;
    };
    auto wrap_one = [&](const at::Tensor& r, std::size_t i) {
      return wrap_result(r, node->output(i), outer_of, *trace.owner, trace.device);
    };
    if constexpr (std::is_same_v<Ret, at::Tensor&>) {
      as_traced(*written)->set_value(node->output(0));
      return *written;
    } else if constexpr (std::is_same_v<Ret, at::Tensor>) {
      return wrap_one(*result, 0);
    } else if constexpr (std::is_same_v<Ret, std::vector<at::Tensor>>) {
      std::vector<at::Tensor> outer;
      outer.reserve(result->size());
      for (std::size_t i = 0; i < result->size(); ++i) outer.push_back(wrap_one((*result)[i], i));
      return outer;
    } else {
      return [&]<std::size_t... I>(std::index_sequence<I...>) { return Ret{wrap_one(std::get<I>(*result), I)...}; }
      (std::make_index_sequence<std::tuple_size_v<Ret>>{});
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

UnboxedKernelsOff::UnboxedKernelsOff() : previous_(std::exchange(tls_unboxed_off, true)) {}
UnboxedKernelsOff::~UnboxedKernelsOff() { tls_unboxed_off = previous_; }
std::size_t unboxed_calls() { return tls_unboxed_calls; }

void link_unboxed_kernels() {}

namespace {

// The ops recorded by unboxed kernels: the views, arithmetic, matrix products, activations,
// normalizations, factories and joins that most of a model's trace is made of.
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
  AOTPIPE_UNBOXED(add_Scalar, "add.Scalar");
  AOTPIPE_UNBOXED(sub_Scalar, "sub.Scalar");
  AOTPIPE_UNBOXED(mul_Scalar, "mul.Scalar");
  AOTPIPE_UNBOXED(div_Scalar, "div.Scalar");
  AOTPIPE_UNBOXED(fill_Scalar, "fill.Scalar");
  AOTPIPE_UNBOXED(_reshape_alias, "_reshape_alias");
  AOTPIPE_UNBOXED(roll, "roll");
  AOTPIPE_UNBOXED(upsample_bilinear2d, "upsample_bilinear2d");
  AOTPIPE_UNBOXED(reflection_pad2d, "reflection_pad2d");
  AOTPIPE_UNBOXED(nll_loss2d_forward, "nll_loss2d_forward");
  AOTPIPE_UNBOXED(mse_loss, "mse_loss");
  AOTPIPE_UNBOXED(bernoulli_p, "bernoulli.p");
  AOTPIPE_UNBOXED(_native_batch_norm_legit_functional, "_native_batch_norm_legit_functional");
  AOTPIPE_UNBOXED(_scaled_dot_product_flash_attention_for_cpu, "_scaled_dot_product_flash_attention_for_cpu");
  // In place (what dropout and residual connections record outside functionalization).
  AOTPIPE_UNBOXED(add__Tensor, "add_.Tensor");
  AOTPIPE_UNBOXED(mul__Tensor, "mul_.Tensor");
  AOTPIPE_UNBOXED(div__Scalar, "div_.Scalar");
  AOTPIPE_UNBOXED(relu_, "relu_");
  AOTPIPE_UNBOXED(bernoulli__float, "bernoulli_.float");
  AOTPIPE_UNBOXED(add__Scalar, "add_.Scalar");
  AOTPIPE_UNBOXED(sub__Tensor, "sub_.Tensor");
  AOTPIPE_UNBOXED(mul__Scalar, "mul_.Scalar");
  AOTPIPE_UNBOXED(fill__Scalar, "fill_.Scalar");
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
  AOTPIPE_UNBOXED(native_batch_norm_backward, "native_batch_norm_backward");
  AOTPIPE_UNBOXED(hardswish_backward, "hardswish_backward");
  AOTPIPE_UNBOXED(hardsigmoid_backward, "hardsigmoid_backward");
  AOTPIPE_UNBOXED(embedding_dense_backward, "embedding_dense_backward");
  AOTPIPE_UNBOXED(_adaptive_avg_pool2d_backward, "_adaptive_avg_pool2d_backward");
  AOTPIPE_UNBOXED(select_backward, "select_backward");
  AOTPIPE_UNBOXED(upsample_bilinear2d_backward, "upsample_bilinear2d_backward");
  AOTPIPE_UNBOXED(reflection_pad2d_backward, "reflection_pad2d_backward");
  AOTPIPE_UNBOXED(nll_loss2d_backward, "nll_loss2d_backward");
  AOTPIPE_UNBOXED(mse_loss_backward, "mse_loss_backward");
  AOTPIPE_UNBOXED(_scaled_dot_product_flash_attention_for_cpu_backward,
                  "_scaled_dot_product_flash_attention_for_cpu_backward");
  // Lists of tensors.
  AOTPIPE_UNBOXED(cat, "cat");
  AOTPIPE_UNBOXED(stack, "stack");
  // Factories and the ops that take a device (the mode's trace; a device given decides).
  AOTPIPE_UNBOXED(empty_memory_format, "empty.memory_format");
  AOTPIPE_UNBOXED(empty_strided, "empty_strided");
  AOTPIPE_UNBOXED(zeros, "zeros");
  AOTPIPE_UNBOXED(ones, "ones");
  AOTPIPE_UNBOXED(full, "full");
  AOTPIPE_UNBOXED(arange, "arange");
  AOTPIPE_UNBOXED(arange_start, "arange.start");
  AOTPIPE_UNBOXED(arange_start_step, "arange.start_step");
  AOTPIPE_UNBOXED(scalar_tensor, "scalar_tensor");
  AOTPIPE_UNBOXED(empty_like, "empty_like");
  AOTPIPE_UNBOXED(zeros_like, "zeros_like");
  AOTPIPE_UNBOXED(ones_like, "ones_like");
  AOTPIPE_UNBOXED(full_like, "full_like");
  AOTPIPE_UNBOXED(new_empty, "new_empty");
  AOTPIPE_UNBOXED(new_empty_strided, "new_empty_strided");
  AOTPIPE_UNBOXED(new_zeros, "new_zeros");
  AOTPIPE_UNBOXED(new_ones, "new_ones");
  AOTPIPE_UNBOXED(new_full, "new_full");
  AOTPIPE_UNBOXED(_to_copy, "_to_copy");
}
#undef AOTPIPE_UNBOXED

}  // namespace

}  // namespace aotpipe::detail
