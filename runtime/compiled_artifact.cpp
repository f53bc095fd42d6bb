#include <aotpipe/runtime/compiled_artifact.h>

#include <fmt/format.h>

#include <stdexcept>

namespace aotpipe {

std::optional<std::string> why_not_artifact(const CompileState& state) {
  for (const RuntimeWrapper& wrapper : state.wrappers)
    if (!wrapper.plan)
      return fmt::format("stage '{}' left a runtime wrapper that is a closure, not data", wrapper.stage);
  return std::nullopt;
}

void CompiledArtifact::set_graphs(ArtifactGraphs graphs) {
  traced_ = Lazy<TracedProgram>::made(std::move(graphs.traced));
  partition_ = Lazy<std::shared_ptr<const PartitionResult>>::made(std::move(graphs.partition));
}

void CompiledArtifact::set_graph_decoders(std::function<TracedProgram()> traced,
                                          std::function<std::shared_ptr<const PartitionResult>()> partition) {
  traced_ = Lazy<TracedProgram>::deferred(std::move(traced));
  // No decoder: nothing to decode, and nothing (the entry's bytes) kept alive for it.
  partition_ = partition ? Lazy<std::shared_ptr<const PartitionResult>>::deferred(std::move(partition))
                         : Lazy<std::shared_ptr<const PartitionResult>>::made(nullptr);
}

std::shared_ptr<const CompiledArtifact> artifact_of(const CompileState& state) {
  auto a = std::make_shared<CompiledArtifact>();
  a->name = state.name;
  for (const RuntimeWrapper& wrapper : state.wrappers)
    if (wrapper.plan) a->wrappers.push_back(*wrapper.plan);
  a->meta = state.function.meta;
  for (const at::Tensor& arg : state.function.args)
    a->input_devices.push_back(arg.defined() ? arg.device() : c10::Device(c10::kCPU));
  a->cpu_fallbacks = state.cpu_fallbacks;
  a->backend_notes = state.compiled.notes;
  // The graphs are shared with the state, not copied. traced.grad_inputs: the joint
  // differentiates with respect to the primals that require grad once the function has run (as
  // PyTorch's create_joint), counting an input the function made require grad
  // (`a.requires_grad_(true)`) but not a mutated input that came to require grad through the
  // mutation: prepare_forward mutates a clone of it, as fn_prepped_for_autograd does.
  const TracedProgram& traced = state.traced;
  a->training = traced.training();
  a->grad_inputs = traced.grad_inputs;
  a->undefined_grads = traced.undefined_grads;
  if (state.partition) a->num_saved = state.partition->saved_values.size();
  if (state.function.needs_autograd && (!traced.joint || !state.partition))
    throw std::logic_error(fmt::format("aotpipe ({}): a training compile without a partitioned joint graph", a->name));
  if (!state.function.needs_autograd && (traced.joint || !traced.inference_graph))
    throw std::logic_error(fmt::format("aotpipe ({}): an inference compile without its graph", a->name));
  a->set_graphs({traced, state.partition});
  return a;
}

}  // namespace aotpipe
