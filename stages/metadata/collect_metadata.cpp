// Stage 1: run_functionalized_fw_and_collect_metadata (collect_metadata_analysis.py), ported.
// The function runs once under the tracer (fake tensors, functionalization); the analysis reads
// the functional wrappers' mutation counters and autograd's view bookkeeping before the trace
// is finished. Python's comments explain every case; the ones that matter are cited inline.
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/MemoryFormat.h>
#include <torch/csrc/autograd/function.h>

#include <map>
#include <tuple>
#include <unordered_map>

namespace aotpipe {
namespace {

namespace fimpl = at::functionalization::impl;

const c10::StorageImpl* storage_key(const at::Tensor& t) { return t.storage().unsafeGetStorageImpl(); }

// MetadataKey.make: outputs with equal keys in one storage are interchangeable aliases.
using MetadataKey = std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t, bool, bool>;
MetadataKey metadata_key(const at::Tensor& t) {
  return {t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.is_conj(), t.is_neg()};
}

bool same_metadata(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset();
}

bool is_multi_output_view(const at::Tensor& t) {
  return fimpl::isFunctionalTensor(t) && fimpl::unsafeGetFunctionalWrapper(t)->is_multi_output_view();
}

bool was_storage_changed(const at::Tensor& t) {
  return fimpl::isFunctionalTensor(t) && fimpl::unsafeGetFunctionalWrapper(t)->was_storage_changed();
}

// A C++ custom autograd Function's node (torch::autograd::CppNode<T>): Python's "CppFunction".
bool is_custom_function_node(const std::shared_ptr<torch::autograd::Node>& fn) {
  return fn && fn->name().find("CppNode") != std::string::npos;
}

// coerce_tangent_and_suggest_memory_format: a tangent is dense in the suggested memory format.
TensorMeta tangent_meta(const at::Tensor& t) {
  TensorMeta meta;
  meta.sizes = t.sizes();
  meta.dtype = t.scalar_type();
  meta.device = t.device();
  switch (t.suggest_memory_format()) {
    case c10::MemoryFormat::ChannelsLast: meta.strides = c10::get_channels_last_strides_2d(t.sizes()); break;
    case c10::MemoryFormat::ChannelsLast3d: meta.strides = c10::get_channels_last_strides_3d(t.sizes()); break;
    default: meta.strides = contiguous_strides(meta.sizes);
  }
  return meta;
}

InputAliasInfo analyze_input(const at::Tensor& example, const at::Tensor& initial, const at::Tensor& f_arg,
                             bool keep_input_mutations) {
  InputAliasInfo info;
  info.keep_input_mutations = keep_input_mutations;
  info.is_leaf = example.is_leaf();
  info.requires_grad = f_arg.requires_grad();
  auto* w = fimpl::unsafeGetFunctionalWrapper(f_arg);
  info.mutates_data = w->has_data_mutation();
  const at::Tensor after = fimpl::from_functional_tensor(f_arg);
  // set_() calls that cancel out are not a storage mutation (has_metadata_mutation).
  info.mutates_storage_metadata = w->was_storage_changed() && !initial.storage().is_alias_of(after.storage());
  // Metadata mutations that cancel out (t_() twice) are not a mutation either.
  info.mutates_metadata =
      info.mutates_storage_metadata || (w->has_metadata_mutation() && !same_metadata(initial, after));
  info.mutations_hidden_from_autograd = w->are_all_mutations_hidden_from_autograd();
  info.mutations_under_no_grad_or_inference_mode =
      info.mutates_data && w->are_all_mutations_under_no_grad_or_inference_mode();
  if (info.mutates_storage_metadata) info.mutates_data = false;
  return info;
}

struct OutputAnalysis {
  std::vector<OutputAliasInfo> infos;
  std::vector<at::Tensor> intermediate_bases;
};

OutputAnalysis analyze_outputs(const TensorList& f_args, const std::vector<c10::Storage>& input_storages,
                               const TensorList& outs) {
  // Each input's storage as it was passed in (a set_() inside the function does not move it).
  std::unordered_map<const c10::StorageImpl*, std::size_t> inp_storage_refs;
  for (std::size_t i = 0; i < input_storages.size(); ++i)
    inp_storage_refs[input_storages[i].unsafeGetStorageImpl()] = i;  // last wins
  auto is_input_tensor = [&](const at::Tensor& o) {
    for (const auto& a : f_args)
      if (a.unsafeGetTensorImpl() == o.unsafeGetTensorImpl()) return true;
    return false;
  };
  std::unordered_map<const c10::TensorImpl*, std::size_t> out_tensor_ids;  // last wins
  for (std::size_t i = 0; i < outs.size(); ++i) out_tensor_ids[outs[i].unsafeGetTensorImpl()] = i;

  std::unordered_map<const c10::StorageImpl*, std::size_t> alias_counts;
  std::unordered_map<const c10::StorageImpl*, std::size_t> multi_output_view_counts;
  // storage -> metadata key -> outputs (that require grad) with that key, in output order.
  std::unordered_map<const c10::StorageImpl*, std::map<MetadataKey, std::vector<std::size_t>>> by_metadata;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const auto* s = storage_key(outs[i]);
    ++alias_counts[s];
    if (is_multi_output_view(outs[i])) ++multi_output_view_counts[s];
    if (outs[i].requires_grad()) by_metadata[s][metadata_key(outs[i])].push_back(i);
  }

  OutputAnalysis result;
  std::unordered_map<const c10::TensorImpl*, std::size_t> intermediate_base_ids;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const at::Tensor& o = outs[i];
    const auto* s = storage_key(o);
    OutputAliasInfo info;
    info.requires_grad = o.requires_grad();
    info.meta = TensorMeta::of(o);
    info.meta.requires_grad = info.requires_grad;
    const std::size_t num_aliased = alias_counts[s];
    const std::size_t num_not_multi_output_views = num_aliased - multi_output_view_counts[s];
    const auto& grad_fn = o.grad_fn();
    const bool storage_changed = was_storage_changed(o);
    const auto input_it = inp_storage_refs.find(s);
    const at::Tensor base = o.is_view() ? at::Tensor(o._base()) : at::Tensor();

    if (input_it != inp_storage_refs.end() && grad_fn && is_custom_function_node(grad_fn)) {
      info.output_type = OutputType::custom_function_view;
    } else if (input_it != inp_storage_refs.end() && !storage_changed) {
      info.base_idx = input_it->second;
      // Differentiable outputs that alias each other through one multi-output view call
      // (unbind, split...) are treated as plain outputs: autograd cannot regenerate them.
      if (grad_fn && num_not_multi_output_views == 0)
        info.output_type = OutputType::non_alias;
      else if (is_input_tensor(o))
        info.output_type = OutputType::is_input;
      else
        info.output_type = OutputType::alias_of_input;
    } else if (storage_changed && is_input_tensor(o)) {
      for (std::size_t k = 0; k < f_args.size(); ++k)
        if (f_args[k].unsafeGetTensorImpl() == o.unsafeGetTensorImpl()) info.base_idx = k;  // last wins
      info.output_type = OutputType::is_input;
    } else if (base.defined() && o.requires_grad() && base.requires_grad()) {
      if (num_aliased == 1 || num_not_multi_output_views <= 1) {
        // Note [Intermediate Bases Optimization]: the only alias of its base among the outputs
        // is returned as a plain output (_unsafe_view) and needs no regeneration.
        info.output_type = OutputType::unsafe_view_alias;
      } else if (auto user = out_tensor_ids.find(base.unsafeGetTensorImpl()); user != out_tensor_ids.end()) {
        info.output_type = OutputType::alias_of_intermediate_base_is_user_output;
        info.base_idx = user->second;
      } else if (auto known = intermediate_base_ids.find(base.unsafeGetTensorImpl());
                 known != intermediate_base_ids.end()) {
        info.output_type = OutputType::alias_of_intermediate;
        info.base_idx = known->second;
      } else {
        info.output_type = OutputType::alias_of_intermediate_save_as_output;
        info.base_idx = result.intermediate_bases.size();
        intermediate_base_ids[base.unsafeGetTensorImpl()] = result.intermediate_bases.size();
        result.intermediate_bases.push_back(base);
      }
    } else {
      // The `(out, out.detach())` case: a non-differentiable alias of a differentiable output
      // is regenerated from that output.
      const std::size_t* other = nullptr;
      if (num_aliased > 1 && !o.requires_grad()) {
        auto by_storage = by_metadata.find(s);
        if (by_storage != by_metadata.end())
          if (auto same = by_storage->second.find(metadata_key(o)); same != by_storage->second.end())
            for (const std::size_t& j : same->second)
              if (outs[j].unsafeGetTensorImpl() != o.unsafeGetTensorImpl()) {
                other = &j;
                break;
              }
      }
      if (other) {
        info.output_type = OutputType::alias_of_intermediate_base_is_user_output;
        info.base_idx = out_tensor_ids[outs[*other].unsafeGetTensorImpl()];
      } else {
        info.output_type = OutputType::non_alias;
      }
    }
    result.infos.push_back(std::move(info));
  }
  return result;
}

}  // namespace

MetadataCollector::MetadataCollector(const TensorList& example_args, const CollectMetadataOptions& options)
    : options_(options), prior_grad_enabled_(at::GradMode::is_enabled()) {
  bool any_requires_grad = false;
  for (const auto& a : example_args) any_requires_grad |= a.defined() && a.requires_grad();
  meta_.keep_input_mutations = options.keep_input_mutations;
  meta_.is_train = options.is_train.value_or(any_requires_grad && prior_grad_enabled_);
}

TraceOptions MetadataCollector::trace_options() const {
  TraceOptions trace_options;
  trace_options.mode = TraceMode::Fake;
  trace_options.functionalize = true;
  trace_options.graph_name = "collect_metadata";
  trace_options.allow_cpu_fallback = options_.allow_cpu_fallback;
  return trace_options;
}

void MetadataCollector::inspect(const TraceInspection& t) {
  ViewAndMutationMeta& meta = meta_;
  forward_fallbacks_ = t.cpu_fallbacks;  // the function's own (a joint trace's backward comes later)
  // A function that leaves grad mode changed: recorded, restored, replayed by the epilogue.
  if (at::GradMode::is_enabled() != prior_grad_enabled_) {
    meta.grad_enabled_mutation = at::GradMode::is_enabled();
    at::GradMode::set_enabled(prior_grad_enabled_);
  }
  for (std::size_t i = 0; i < t.inputs.size(); ++i)
    meta.input_info.push_back(
        analyze_input(t.example_inputs[i], t.initial_inputs[i], t.inputs[i], options_.keep_input_mutations));
  OutputAnalysis outputs = analyze_outputs(t.inputs, t.input_storages, t.outputs);
  meta.output_info = std::move(outputs.infos);
  meta.num_intermediate_bases = outputs.intermediate_bases.size();

  // Tangents: data-mutated inputs the runtime applies and that require grad, differentiable
  // non-aliased outputs, intermediate bases.
  for (std::size_t i = 0; i < t.inputs.size(); ++i)
    if (meta.input_info[i].gets_tangent()) meta.traced_tangents.push_back(tangent_meta(t.inputs[i]));
  for (std::size_t i = 0; i < t.outputs.size(); ++i)
    if (meta.output_info[i].gets_tangent()) meta.traced_tangents.push_back(tangent_meta(t.outputs[i]));
  for (const auto& base : outputs.intermediate_bases) meta.traced_tangents.push_back(tangent_meta(base));
  // finalize() refuses some set_() mutations; that error is finish()'s, outside the trace (as
  // collect_metadata has always reported it), and a caller deciding now sees finalized() false.
  try {
    meta.finalize();
    finalized_ = true;
  } catch (const std::exception&) { finalized_ = false; }
}

ViewAndMutationMeta MetadataCollector::finish(const TraceResult& traced, std::size_t first_output, bool trace_went_on) {
  if (options_.cpu_fallbacks)
    merge_cpu_fallbacks(*options_.cpu_fallbacks, trace_went_on ? forward_fallbacks_ : traced.cpu_fallbacks);
  for (std::size_t i = 0; i < meta_.output_info.size() && first_output + i < traced.num_user_outputs; ++i) {
    OutputAliasInfo& info = meta_.output_info[i];
    if (info.output_type == OutputType::alias_of_input || info.output_type == OutputType::alias_of_intermediate ||
        info.output_type == OutputType::alias_of_intermediate_save_as_output ||
        info.output_type == OutputType::alias_of_intermediate_base_is_user_output)
      info.view_replay = extract_view_replay(traced.graph, traced.graph.outputs()[first_output + i]);
  }
  meta_.finalize();
  return std::move(meta_);
}

ViewAndMutationMeta collect_metadata(const Function& fn, const TensorList& example_args, bool keep_input_mutations) {
  return collect_metadata(fn, example_args, CollectMetadataOptions{keep_input_mutations, std::nullopt});
}

ViewAndMutationMeta collect_metadata(const Function& fn, const TensorList& example_args,
                                     const CollectMetadataOptions& options) {
  MetadataCollector collector(example_args, options);
  TraceOptions trace_options = collector.trace_options();
  trace_options.inspect = [&](const TraceInspection& t) { collector.inspect(t); };
  return collector.finish(trace_program(fn, example_args, std::move(trace_options)));
}

}  // namespace aotpipe
