// The tracer. The mechanism (and what was checked on libtorch 2.11) is in docs/libtorch-2.11.md;
// how to use it and its limits in docs/tracer.md. This file drives a trace (inputs, the mode, outputs, the backward of a joint trace); the ops
// are recorded by the fallback (fallback.cpp) and the unboxed kernels (unboxed_kernels.cpp).
#include <aotpipe/tracer/tracer.h>

#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/tracer/internal/fake_device_guard.h>
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/tracer/internal/trace_backward.h>
#include <aotpipe/tracer/internal/tracing_tensor.h>

#include <ATen/ATen.h>
#include <ATen/FunctionalTensorWrapper.h>
#include <c10/core/AutogradState.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/variable.h>

#include <boost/unordered/unordered_flat_map.hpp>

#include <charconv>
#include <mutex>
#include <string_view>

namespace aotpipe {
namespace {

namespace fimpl = at::functionalization::impl;
using namespace detail;

// ---------------------------------------------------------------------------------------------
// Driving a trace.

// The inner tensor of a fake trace's input: what at::empty({0}, meta).set_(base, ...) builds, made
// directly with the example's metadata. This runs for every input of every trace: the two trips
// through the dispatcher were a fifth of the metadata trace of a small graph.
// A trace frees its inputs together, as it does its tracing tensors (graph/block_cache.h).
class InputMetaImpl final : public CopiedMetadataImpl, public BlockAllocated<InputMetaImpl> {
 public:
  InputMetaImpl(c10::Storage storage, c10::TensorImpl& example)
      : CopiedMetadataImpl(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::Meta), example.dtype()) {
    copy_metadata_from(example);
  }
};

// The fake storage of a fake trace's input: a meta StorageImpl, freed with the trace's inputs.
class FakeInputStorage final : public c10::StorageImpl, public BlockAllocated<FakeInputStorage> {
 public:
  explicit FakeInputStorage(std::size_t nbytes)
      : c10::StorageImpl(use_byte_size_t(), static_cast<int64_t>(nbytes), c10::GetAllocator(c10::kMeta),
                         /*resizable=*/true) {}
};

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
    link_meta_kernels();
    link_trace_fallback();
    link_unboxed_kernels();
    link_autograd_decompositions();
    for (auto* inputs : {&initial_inputs, &traced_inputs}) inputs->reserve(num_inputs);
    input_storages.reserve(num_inputs);
    storages.reserve(num_inputs);
    seen_inputs.reserve(num_inputs);
    if (st->fake()) fake_devices.emplace();
  }

  // A graph input from an example tensor (fake: a view of one fake storage per real storage).
  at::Tensor add_input(std::string name, const at::Tensor& x) {
    c10::impl::ExcludeDispatchKeyGuard guard{below_trace_keys()};
    TORCH_CHECK(x.defined(), "aotpipe::trace: example input '", name, "' is undefined");
    TORCH_CHECK(!as_traced(x) && !fimpl::isFunctionalTensor(x), "aotpipe::trace: example input '", name,
                "' is a tracing tensor (nested traces take real example inputs)");
    TORCH_CHECK(st->fake() || !is_metadata_example(x), "aotpipe::trace: example input '", name,
                "' is a metadata example (it has no data); TraceMode::Real needs real tensors");
    install_fake_device_guard(x.device().type());
    Value* v = st->graph.add_input(std::move(name), ValueType::Tensor);
    TensorMeta& meta = v->emplace_meta();  // filled in place: each move copies its sizes and strides
    fill_meta(meta, x, x.device());
    meta.requires_grad = x.requires_grad();
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
      if (!base) base = c10::Storage(c10::make_intrusive<FakeInputStorage>(x.storage().nbytes()));
      inner = at::detail::make_tensor<InputMetaImpl>(c10::Storage(base), *x.unsafeGetTensorImpl());
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

std::string input_name(const TraceOptions& options, std::size_t i, std::string_view prefix, std::size_t base) {
  if (i < options.input_names.size()) return options.input_names[i];
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, i + base).ptr;
  std::string name;
  name.reserve(prefix.size() + static_cast<std::size_t>(end - digits));
  return name.append(prefix).append(digits, end);
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

void merge_cpu_fallbacks(CpuFallbackCounts& into, const CpuFallbackCounts& more) {
  for (const auto& [op, calls] : more) into[op] += calls;
}

std::size_t total_cpu_fallback_calls(const CpuFallbackCounts& counts) {
  std::size_t total = 0;
  for (const auto& [op, calls] : counts) total += calls;
  return total;
}

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
          if (grads[i].defined()) {
            result.push_back(grads[i]);
            continue;
          }
          // A placeholder the runtime replaces with an undefined gradient (as PyTorch's None):
          // one zero expanded, so that neither the partitioner nor the backward allocates a
          // primal-sized tensor of zeros only to drop it.
          undefined_grads.push_back(i);
          result.push_back(at::zeros({}, wrt[i].options()).expand(wrt[i].sizes()));
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
