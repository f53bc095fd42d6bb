#include <aotpipe/runtime/aot_runtime.h>
#include <aotpipe/stages/common/aliasing.h>
#include <aotpipe/stages/joint/joint.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace aotpipe {
struct ReleaseSavedVariables {};
}  // namespace aotpipe

// Note [Clearing saved tensors] (PyTorch's CompiledFunction.backward calls
// ctx.maybe_clear_saved_tensors()): when the graph is not retained, the context's saved tensors
// are dropped before the compiled backward runs, so that the backward graph frees each one at its
// last use, as eager autograd frees each node's. Otherwise all of them would stay alive until the
// whole backward returned, and the step's peak memory would exceed eager's. AutogradContext's
// saved tensors are private to CppNode<T>, for every T; this specialization is that access, used
// while CppNode<CompiledAutogradFunction>::apply holds the node's lock.
template <>
struct torch::autograd::CppNode<aotpipe::ReleaseSavedVariables> {
  static void release(AutogradContext& ctx) {
    ctx.saved_variables_.clear();
    ctx.has_freed_buffers_ = true;  // a second backward then fails as eager's does
  }
};

namespace aotpipe {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Which forward returns go through autograd: everything but metadata-only input mutations and
// aliased outputs (Python wraps those in TensorAlias so autograd.Function never sees them).
std::vector<bool> autograd_return_mask(const ViewAndMutationMeta& meta) {
  std::vector<bool> mask;
  for (std::size_t i : meta.mutated_inp_runtime_indices) {
    const auto& in = meta.input_info[i];
    mask.push_back(!(in.mutates_metadata && !in.mutates_data));
  }
  for (const auto& out : meta.output_info) mask.push_back(is_plain_output(out.output_type));
  for (std::size_t i = 0; i < meta.num_intermediate_bases; ++i) mask.push_back(true);
  return mask;
}

// What the runtime needs from a finished compile; immutable and shared by every call.
struct CompiledArtifacts {
  std::shared_ptr<const CompiledArtifact> artifact;
  const std::string& name;
  const ViewAndMutationMeta& meta;  // of the inner calling convention
  bool trace_joint = false;
  CompiledGraph forward;   // training: primals -> forward returns + saved values; else inference
  CompiledGraph backward;  // saved values + tangents -> gradients of the grad-requiring primals
  std::size_t num_saved = 0;
  std::vector<bool> tangent_mask;  // per forward return
  // Per forward return: goes through autograd (not a metadata-only input mutation or an aliased
  // output, which Python wraps in TensorAlias).
  std::vector<bool> autograd_returns;
  const std::vector<std::size_t>& grad_primals;     // primal index of each backward output
  const std::vector<std::size_t>& undefined_grads;  // backward outputs autograd left undefined
  // A call with a tensor on another device is refused by name instead of failing in a kernel.
  const std::vector<c10::Device>& input_devices;
  // Note [Detaching inputs that never need gradients]: non-leaf inputs that require grad but get
  // no gradient, detached before the autograd function, so a backward never walks their history.
  std::vector<std::size_t> inputs_to_detach;
  // Note [Intermediate Bases Optimization]: outputs returned as aten::_unsafe_view of the view the
  // graph made, so that autograd sees no view made inside a custom function (in-place ops work).
  std::vector<std::size_t> unsafe_view_outputs;
  // Inputs with a metadata-only mutation (t_(), as_strided_()): the forward bumps their version
  // before saving, as eager's mutation does before the ops after it save the input.
  std::vector<std::size_t> metadata_mutated_inputs;

  CompiledArtifacts(std::shared_ptr<const CompiledArtifact> a, CompiledGraphs graphs)
      : artifact(std::move(a)),
        name(artifact->name),
        meta(artifact->meta),
        trace_joint(artifact->training),
        forward(std::move(graphs.forward)),
        backward(std::move(graphs.backward)),
        grad_primals(artifact->grad_inputs),
        undefined_grads(artifact->undefined_grads),
        input_devices(artifact->input_devices) {
    if (!trace_joint) return;
    num_saved = artifact->num_saved;
    tangent_mask = forward_tangent_mask(meta);  // the joint's tangent inputs
    autograd_returns = autograd_return_mask(meta);
    std::vector<bool> gets_gradient(meta.input_info.size(), false);
    for (std::size_t k = 0; k < grad_primals.size(); ++k)
      if (std::find(undefined_grads.begin(), undefined_grads.end(), k) == undefined_grads.end())
        gets_gradient.at(grad_primals[k]) = true;
    for (std::size_t i = 0; i < meta.input_info.size(); ++i) {
      const InputAliasInfo& in = meta.input_info[i];
      // An input set_() in the graph must stay the caller's tensor (the detached one would get it).
      const bool set_in_graph = in.mutation_type() == MutationType::MutatedInGraph && in.mutates_storage_metadata;
      if (in.requires_grad && !in.is_leaf && !gets_gradient[i] && !set_in_graph) inputs_to_detach.push_back(i);
    }
    for (std::size_t j = 0; j < meta.output_info.size(); ++j)
      if (meta.output_info[j].output_type == OutputType::unsafe_view_alias) unsafe_view_outputs.push_back(j);
    for (std::size_t i : meta.mutated_inp_runtime_indices) {
      const InputAliasInfo& in = meta.input_info[i];
      if (in.mutates_metadata && !in.mutates_data && !in.mutates_storage_metadata) metadata_mutated_inputs.push_back(i);
    }
  }
};

// Keeps the artifacts alive for as long as the autograd graph that may run their backward, with
// what the backward needs to make a zero gradient for a tangent that autograd left undefined.
struct ArtifactsHolder : torch::CustomClassHolder {
  ArtifactsHolder(std::shared_ptr<const CompiledArtifacts> a, std::vector<torch::autograd::VariableInfo> tangents)
      : artifacts(std::move(a)), tangent_infos(std::move(tangents)) {}
  std::shared_ptr<const CompiledArtifacts> artifacts;
  std::vector<torch::autograd::VariableInfo> tangent_infos;  // per autograd return the joint has a tangent for
};

// The per-call channel between apply() and forward(): the artifacts in, the forward returns
// autograd does not see out.
struct CallFrame {
  std::shared_ptr<const CompiledArtifacts> artifacts;
  TensorList all_returns;  // every forward return, as the compiled forward produced it
};

// The compiled backward run with create_graph=True. Its results require grad when what it read
// does, and differentiating them again raises: the compiled backward graph is not differentiable.
struct CompiledBackwardOnce : torch::autograd::Function<CompiledBackwardOnce> {
  static variable_list forward(AutogradContext* ctx, const CompiledArtifacts* a, at::TensorList bw_args) {
    ctx->saved_data["name"] = a->name;
    return a->backward(bw_args.vec());
  }
  static variable_list backward(AutogradContext* ctx, const variable_list& /*grad_outputs*/) {
    throw std::runtime_error(fmt::format(
        "aotpipe ({}): double backward through a compiled function is not supported: a second-order gradient "
        "would flow through the compiled backward graph, which is not differentiable",
        ctx->saved_data["name"].toStringRef()));
  }
};

struct CompiledAutogradFunction : torch::autograd::Function<CompiledAutogradFunction> {
  // `args` is an at::TensorList: apply() only sees tensors through Tensor / TensorList arguments.
  static variable_list forward(AutogradContext* ctx, CallFrame* frame, at::TensorList args) {
    const CompiledArtifacts& a = *frame->artifacts;
    TensorList fw_outs = a.forward(args.vec());
    const std::size_t num_returns = a.meta.num_forward_returns;
    if (fw_outs.size() != num_returns + a.num_saved)
      throw std::runtime_error(fmt::format("aotpipe runtime ({}): the compiled forward returned {} values, expected {}",
                                           a.name, fw_outs.size(), num_returns + a.num_saved));
    // Eager's t_() bumps the input's version before the ops after it save the input or its views;
    // the epilogue's as_strided_ then keeps this version (make_runtime).
    for (std::size_t i : a.metadata_mutated_inputs)
      if (!args[i].is_inference()) args[i].unsafeGetTensorImpl()->bump_version();
    ctx->save_for_backward(variable_list(fw_outs.begin() + static_cast<std::ptrdiff_t>(num_returns), fw_outs.end()));
    fw_outs.resize(num_returns);
    const std::size_t num_mutated_returns = a.meta.mutated_inp_runtime_indices.size();
    for (std::size_t j : a.unsafe_view_outputs) {
      at::Tensor& out = fw_outs[num_mutated_returns + j];
      out = at::_unsafe_view(out, out.sizes());
    }

    const auto& mask = a.autograd_returns;
    // Autograd would make a zero gradient for every return that got none, the mutated buffers'
    // new values included (a BatchNorm's running statistics: three per layer, alive through the
    // whole backward). Only the returns the backward graph takes a tangent for need one, and
    // backward() makes those (PyTorch's ctx._materialize_non_diff_grads = False).
    ctx->set_materialize_grads(false);
    std::vector<torch::autograd::VariableInfo> tangent_infos;
    for (std::size_t i = 0; i < num_returns; ++i)
      if (mask[i] && a.tangent_mask[i]) tangent_infos.emplace_back(fw_outs[i]);
    ctx->saved_data["artifacts"] =
        c10::IValue::make_capsule(c10::make_intrusive<ArtifactsHolder>(frame->artifacts, std::move(tangent_infos)));

    const std::size_t num_mutated = a.meta.mutated_inp_runtime_indices.size();
    variable_list returns;
    std::vector<at::Tensor> non_differentiable;
    for (std::size_t i = 0; i < num_returns; ++i) {
      if (!mask[i]) continue;
      returns.push_back(fw_outs[i]);
      bool requires_grad = true;
      if (i < num_mutated)
        requires_grad = a.meta.input_info[a.meta.mutated_inp_runtime_indices[i]].requires_grad;
      else if (i < num_mutated + a.meta.num_outputs)
        requires_grad = a.meta.output_info[i - num_mutated].requires_grad;
      if (!requires_grad) non_differentiable.push_back(fw_outs[i]);
    }
    if (!non_differentiable.empty()) ctx->mark_non_differentiable(non_differentiable);
    frame->all_returns = std::move(fw_outs);
    return returns;
  }

  // `grad_outputs` by reference: libtorch's CppNode passes the vector it built and never reads it
  // again (custom_function.h, CppNode_apply_functional), so moving a gradient out of it here
  // releases it. Taken by value, its copy in CppNode kept every tangent alive through the whole
  // compiled backward, where eager frees each after the first op that reads it.
  static variable_list backward(AutogradContext* ctx, variable_list& grad_outputs) {
    const auto holder = c10::static_intrusive_pointer_cast<ArtifactsHolder>(ctx->saved_data["artifacts"].toCapsule());
    const CompiledArtifacts* a = holder->artifacts.get();
    const auto& returns_mask = a->autograd_returns;
    TensorList bw_args = ctx->get_saved_variables();
    if (!torch::autograd::get_current_graph_task_keep_graph())
      torch::autograd::CppNode<ReleaseSavedVariables>::release(*ctx);
    std::size_t grad_index = 0;
    std::size_t tangent_index = 0;
    for (std::size_t i = 0; i < returns_mask.size(); ++i) {
      if (!returns_mask[i]) continue;
      at::Tensor g = std::move(grad_outputs[grad_index++]);
      if (!a->tangent_mask[i]) continue;
      const torch::autograd::VariableInfo& info = holder->tangent_infos.at(tangent_index++);
      if (g.defined()) {
        bw_args.push_back(g.contiguous());
      } else {
        c10::OptionalDeviceGuard device_guard;
        bw_args.push_back(info.zeros(device_guard));
      }
    }
    // create_graph=True: the first-order gradients are computed as usual; they get a grad_fn
    // that refuses only when a second-order gradient has to flow through it (as PyTorch's
    // CompiledFunctionBackward does).
    TensorList grads = at::GradMode::is_enabled()
                           ? CompiledBackwardOnce::apply(holder->artifacts.get(), at::TensorList(bw_args))
                           : a->backward(std::move(bw_args));
    if (grads.size() != a->grad_primals.size())
      throw std::runtime_error(
          fmt::format("aotpipe runtime ({}): the compiled backward returned {} gradients, expected {}", a->name,
                      grads.size(), a->grad_primals.size()));
    for (std::size_t k : a->undefined_grads) grads[k] = at::Tensor();
    // One gradient per forward argument: the CallFrame pointer first (none), then the tensors.
    variable_list result(1 + a->meta.input_info.size());
    for (std::size_t k = 0; k < grads.size(); ++k) result[1 + a->grad_primals[k]] = std::move(grads[k]);
    return result;
  }
};

// The output handlers of the epilogue (NoopAliasHandler, IsInputHandler, AliasOfInputHandler,
// AliasOfIntermediateHandler): regenerate aliased outputs from the real tensors they alias.
at::Tensor regenerate_output(const ViewAndMutationMeta& meta, std::size_t j, const TensorList& inputs,
                             const TensorList& outs_and_bases, const at::Tensor& raw) {
  const OutputAliasInfo& info = meta.output_info[j];
  const ViewReplay* replay = info.view_replay ? &*info.view_replay : nullptr;
  switch (info.output_type) {
    case OutputType::non_alias:
    case OutputType::unsafe_view_alias:
    case OutputType::custom_function_view: return outs_and_bases[j];
    case OutputType::is_input: return inputs[*info.base_idx];
    case OutputType::alias_of_input:
      return gen_alias_from_base(inputs[*info.base_idx], TensorMeta::of(raw), info.requires_grad, replay);
    case OutputType::alias_of_intermediate:
    case OutputType::alias_of_intermediate_save_as_output:
      return gen_alias_from_base(outs_and_bases[meta.num_outputs + *info.base_idx], TensorMeta::of(raw),
                                 info.requires_grad, replay);
    case OutputType::alias_of_intermediate_base_is_user_output: {
      // A base that is an input (is_input, e.g. an input set_() in the graph) is the caller's
      // tensor, as PyTorch's forward returns the input itself for it; the raw return may be the
      // tensor the input was set_() to, which autograd does not connect to the input.
      const OutputAliasInfo& base = meta.output_info[*info.base_idx];
      const at::Tensor& base_tensor =
          base.output_type == OutputType::is_input ? inputs[*base.base_idx] : outs_and_bases[*info.base_idx];
      return gen_alias_from_base(base_tensor, TensorMeta::of(raw), info.requires_grad, replay);
    }
  }
  return raw;
}

}  // namespace

RuntimeFn make_runtime(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs) {
  auto artifacts = std::make_shared<const CompiledArtifacts>(std::move(artifact), std::move(graphs));
  return [artifacts](TensorList args) -> TensorList {
    const CompiledArtifacts& a = *artifacts;
    const ViewAndMutationMeta& meta = a.meta;
    if (args.size() != meta.input_info.size())
      throw std::invalid_argument(fmt::format("aotpipe ({}): called with {} inputs, compiled for {}", a.name,
                                              args.size(), meta.input_info.size()));
    for (std::size_t i = 0; i < args.size() && i < a.input_devices.size(); ++i)
      if (args[i].defined() && args[i].device() != a.input_devices[i])
        throw std::invalid_argument(fmt::format(
            "aotpipe ({}): input {} is on {}, but the function was compiled for {} (compile it again for this "
            "device; aot_function does so by itself)",
            a.name, i, args[i].device().str(), a.input_devices[i].str()));
    const TensorList inputs = args;  // the caller's tensors, for mutations and aliases
    TensorList all;                  // every forward return
    if (a.trace_joint) {
      at::AutoGradMode enable(true);
      CallFrame frame{artifacts, {}};
      for (std::size_t i : a.inputs_to_detach)
        if (args[i].defined()) args[i] = args[i].detach();
      variable_list through_autograd = CompiledAutogradFunction::apply(&frame, at::TensorList(args));
      args.clear();
      // Put the autograd-tracked returns back in place of the raw ones.
      all = std::move(frame.all_returns);
      const auto& mask = a.autograd_returns;
      std::size_t k = 0;
      for (std::size_t i = 0; i < all.size(); ++i)
        if (mask[i]) all[i] = through_autograd[k++];
    } else {
      at::AutoGradMode disable(false);
      all = a.forward(std::move(args));
    }
    const std::size_t num_mutated = meta.mutated_inp_runtime_indices.size();
    if (all.size() != num_mutated + meta.num_outputs + meta.num_intermediate_bases)
      throw std::runtime_error(fmt::format("aotpipe runtime ({}): {} forward returns, expected {}", a.name, all.size(),
                                           num_mutated + meta.num_outputs + meta.num_intermediate_bases));

    // Input mutations, applied to the caller's tensors.
    for (std::size_t i = 0; i < num_mutated; ++i) {
      const auto& info = meta.input_info[meta.mutated_inp_runtime_indices[i]];
      const at::Tensor& original = inputs[meta.mutated_inp_runtime_indices[i]];
      const at::Tensor& updated = all[i];
      if (info.mutates_storage_metadata) {
        at::NoGradGuard no_grad;
        original.set_(updated);
        continue;
      }
      if (info.mutates_metadata) {
        // A training forward bumped the version of a metadata-only mutation already, before it
        // saved what its backward reads (CompiledAutogradFunction::forward): the as_strided_
        // keeps that version. Otherwise its bump is eager's t_()'s: what other graphs saved of
        // this input is refused at their backward, as eager refuses it. Inference tensors have
        // no version.
        const bool keep_version = a.trace_joint && !info.mutates_data && !original.is_inference();
        std::optional<c10::VariableVersion> version;
        if (keep_version) version = original.unsafeGetTensorImpl()->version_counter();
        const auto before = keep_version ? version->current_version() : 0;
        original.as_strided_(updated.sizes(), updated.strides(), updated.storage_offset());
        if (keep_version) version->set_version(before);
      }
      if (!info.mutates_data) continue;
      if (info.is_leaf && original.requires_grad()) {
        original.detach().copy_(updated);
      } else if (info.mutations_hidden_from_autograd || info.mutations_under_no_grad_or_inference_mode) {
        // Mutated under no_grad or through a detached alias: eager's mutation left the input's
        // history as it was; a recorded copy_ would replace it with the forward's.
        at::NoGradGuard no_grad;
        original.copy_(updated);
      } else {
        original.copy_(updated);
      }
    }
    TensorList outs_and_bases(all.begin() + static_cast<std::ptrdiff_t>(num_mutated), all.end());
    TensorList result;
    result.reserve(meta.num_outputs);
    for (std::size_t j = 0; j < meta.num_outputs; ++j)
      result.push_back(meta.num_outputs_aliased == 0
                           ? outs_and_bases[j]
                           : regenerate_output(meta, j, inputs, outs_and_bases, outs_and_bases[j]));
    if (meta.grad_enabled_mutation) at::GradMode::set_enabled(*meta.grad_enabled_mutation);
    return result;
  };
}

}  // namespace aotpipe
