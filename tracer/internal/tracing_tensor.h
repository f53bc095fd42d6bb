#pragma once
// The tracer's shared internals (tracer.cpp drives a trace; fallback.cpp records any op, boxed;
// unboxed_kernels.cpp records the frequent ones without boxing; autograd_decompositions.cpp
// rewrites a few ops above autograd): the trace's state, the tracing tensor, and what the
// recording paths share. Not installed for users: only the tracer's own files include it.
#include <aotpipe/graph/block_cache.h>
#include <aotpipe/graph/error_text.h>
#include <aotpipe/graph/graph.h>
#include <aotpipe/tracer/tracer.h>

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace c10 {
class OperatorHandle;
}  // namespace c10

namespace aotpipe::detail {

// The dispatch key the fallback lives on: below Functionalize and autograd, above the backends
// (where Python's proxy/fake modes live). Unused by libtorch 2.11 itself.
constexpr c10::DispatchKey kTraceKey = c10::DispatchKey::Fake;

// What the fallback excludes before calling an op on the inner tensors.
inline c10::DispatchKeySet below_trace_keys() {
  return c10::DispatchKeySet(kTraceKey) | c10::autograd_dispatch_keyset_with_ADInplaceOrView |
         c10::DispatchKeySet(c10::DispatchKey::Functionalize);
}

// "aten::add.Tensor": how errors and the CPU-fallback counts name an op.
std::string qualified_name(const c10::OperatorHandle& op);

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
extern constinit thread_local TraceState* tls_current_trace;
extern thread_local std::shared_ptr<TraceState> tls_current_owner;  // the same trace, owning

// The autocast key eager tensors of `device` carry (AutocastCPU, AutocastCUDA; none for others).
inline c10::DispatchKeySet autocast_keys(c10::DeviceType device) {
  switch (device) {
    case c10::DeviceType::CPU: return c10::DispatchKeySet(c10::DispatchKey::AutocastCPU);
    case c10::DeviceType::CUDA: return c10::DispatchKeySet(c10::DispatchKey::AutocastCUDA);
    default: return {};
  }
}

// ---------------------------------------------------------------------------------------------
// The tracing tensor.
inline const c10::DispatchKeySet kTracingKeys({kTraceKey, c10::DispatchKey::PrivateUse1});

// A TensorImpl that takes another's sizes, strides, offset and contiguity as they are: whoever made
// the other (a kernel, an example) computed the contiguity already, which set_sizes_and_strides
// would compute once more for every tensor of every trace.
class CopiedMetadataImpl : public c10::TensorImpl {
 public:
  using c10::TensorImpl::TensorImpl;

 protected:
  void copy_metadata_from(c10::TensorImpl& src) {
    sizes_and_strides_.set_sizes(src.sizes());  // the accessors: right for any layout policy
    sizes_and_strides_.set_strides(src.strides());
    storage_offset_ = src.storage_offset();
    numel_ = src.numel();
    is_contiguous_ = src.is_contiguous();
    is_channels_last_contiguous_ = src.is_contiguous(at::MemoryFormat::ChannelsLast);
    is_channels_last_3d_contiguous_ = src.is_contiguous(at::MemoryFormat::ChannelsLast3d);
    is_channels_last_ = src.is_strides_like_channels_last();
    is_channels_last_3d_ = src.is_strides_like_channels_last_3d();
    is_non_overlapping_and_dense_ = src.is_non_overlapping_and_dense();
  }
};

// Every traced op makes one; see graph/block_cache.h.
class TracingTensorImpl final : public CopiedMetadataImpl, public BlockAllocated<TracingTensorImpl> {
 public:
  TracingTensorImpl(at::Tensor inner, std::shared_ptr<TraceState> state, Value* value, c10::Device logical_device)
      : CopiedMetadataImpl(c10::Storage(inner.storage()), kTracingKeys, inner.dtype()),
        inner_(std::move(inner)),
        state_(std::move(state)),
        value_(value),
        logical_device_(logical_device) {
    // Reported device: the device of the tensor it stands for, so that device inference in
    // ATen (options(), *_like, _to_copy with a dtype only) and user code see what eager sees.
    // The backward still runs on the calling thread: traces disable autograd multithreading.
    device_opt_ = logical_device_;
    // Autocast's key is that of the device the tensor stands for (AutocastCPU, AutocastCUDA), not
    // PrivateUse1's: a node that ran under torch.autocast gets eager's casts in a trace.
    key_set_ = (key_set_ - c10::autocast_dispatch_keyset) | autocast_keys(logical_device_.type());
    copy_inner_metadata();
  }

  // Re-reads sizes/strides/offset (and storage) after an op that may have changed them, with the
  // check set_sizes_and_strides makes (a detached tensor's metadata may not change).
  void refresh() {
    TORCH_CHECK(allow_tensor_metadata_change(), "set_sizes_and_strides ", err_msg_tensor_metadata_change_not_allowed);
    if (!storage_.is_alias_of(inner_.storage())) storage_ = inner_.storage();
    copy_inner_metadata();
  }

  const at::Tensor& inner() const { return inner_; }
  at::Tensor& inner() { return inner_; }  // what an op that writes its argument is handed
  const std::shared_ptr<TraceState>& state() const { return state_; }
  Value* value() const { return value_; }
  void set_value(Value* v) { value_ = v; }
  c10::Device logical_device() const { return logical_device_; }

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
  void copy_inner_metadata() { copy_metadata_from(*inner_.unsafeGetTensorImpl()); }

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
};

inline TracingTensorImpl* as_traced(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  auto* impl = t.unsafeGetTensorImpl();
  if (!impl->key_set().has(kTraceKey)) return nullptr;
  // The class is final, so an exact type match is what dynamic_cast would find, for a pointer
  // compare instead of a walk of the class hierarchy (this runs for every tensor of every call).
  return typeid(*impl) == typeid(TracingTensorImpl) ? static_cast<TracingTensorImpl*>(impl) : nullptr;
}

inline at::Tensor wrap(at::Tensor inner, const std::shared_ptr<TraceState>& state, Value* value, c10::Device device) {
  return at::detail::make_tensor<TracingTensorImpl>(std::move(inner), state, value, device);
}

// Fills `meta` in place (a TensorMeta's sizes and strides are held in place, so each move copies them).
inline void fill_meta(TensorMeta& meta, const at::Tensor& t, c10::Device device) {
  const auto sizes = t.sizes(), strides = t.strides();
  meta.sizes.assign(sizes.begin(), sizes.end());  // no temporary Dims to move from
  meta.strides.assign(strides.begin(), strides.end());
  meta.storage_offset = t.storage_offset();
  meta.dtype = t.scalar_type();
  meta.device = device;
  meta.requires_grad = false;
}

// A tracing tensor unwrapped from functionalization (when present; syncs the wrapper first).
TracingTensorImpl* traced_of(const at::Tensor& t);

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
  bool unboxed = false;               // an unboxed kernel may record it (writes no list or non-tensor)
  c10::SmallVector<ArgPlan, 8> args;  // one per schema argument
  bool meta_or_composite() const { return meta || composite_explicit; }
  bool cpu_or_composite_explicit() const { return cpu_kernel || composite_explicit; }  // the CPU fallback can run it
};

// The traits of `op`, cached per thread.
const OpTraits& traits_of(const c10::OperatorHandle& op);

[[noreturn]] void fail(const std::string& name, const std::string& message);

// Why eager would fail to run `op` on `device` (no kernel for its backend); nothing if it would run.
std::optional<std::string> missing_backend_kernel(const c10::OperatorHandle& op, c10::Device device);

// The graph value of a closed-over real tensor: a named constant, one per tensor.
Value* constant_value(TraceState& st, const at::Tensor& t);

// The recorded metadata of a tensor result, filled in place in its graph value (none for an
// undefined one).
inline void fill_value_meta(Value& value, const at::Tensor& t, c10::Device device) {
  if (t.defined()) fill_meta(value.emplace_meta(), t, device);
}

// Marks a node recorded during a backward (or the backward phase of a joint trace).
void mark_phase(TraceState& st, Node* node);

// The tracer's boxed kernel for every op (fallback.cpp): records the call on the trace of its
// tracing tensors (or the mode's), runs it on their inner tensors and wraps the results.
void trace_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, std::vector<c10::IValue>* stack);

// The results of a traced call as the program sees them: a result that is the inner tensor of
// one of the call's tracing tensors (an in-place op's `self`) is handed back as that outer
// tensor, now standing for `value`; any other is wrapped in a new tracing tensor.
// `outer_of_inner(impl)` finds the call's outer tensor for an inner TensorImpl (or null).
template <class OuterOfInner>
at::Tensor wrap_result(const at::Tensor& result, Value* value, OuterOfInner&& outer_of_inner,
                       const std::shared_ptr<TraceState>& state, c10::Device device) {
  if (!result.defined()) return result;
  if (const at::Tensor* outer = outer_of_inner(result.unsafeGetTensorImpl())) {
    as_traced(*outer)->set_value(value);
    return *outer;
  }
  return wrap(result, state, value, device);
}

// Anchors: the tracer calls these so that the linker keeps the object files whose kernels
// register themselves (the library is static).
void link_trace_fallback();
void link_unboxed_kernels();
void link_autograd_decompositions();

}  // namespace aotpipe::detail
