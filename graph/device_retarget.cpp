#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/graph/example_tensor.h>

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <map>
#include <vector>

namespace aotpipe {
namespace {

bool retarget_meta(Value* v, c10::Device device) {
  const TensorMeta* meta = v->meta();
  if (!meta || !meta->device.is_cpu()) return false;
  TensorMeta moved = *meta;
  moved.device = device;
  v->set_meta(std::move(moved));
  return true;
}

// The CPU flash attention a graph recorded on the CPU has no kernel elsewhere: where only its
// output is read, it becomes the scaled_dot_product_attention it came from, which picks the
// device's own kernel in eager (as it picked this one on the CPU).
std::size_t restore_attention(Graph& graph) {
  std::vector<Node*> cpu_attention;
  for (Node* node : graph.nodes())
    if (node->is_call() && node->qualified_name() == "aten::_scaled_dot_product_flash_attention_for_cpu")
      cpu_attention.push_back(node);
  if (cpu_attention.empty()) return 0;
  const auto uses = graph.compute_uses();
  const auto outputs = graph.outputs();
  std::size_t changes = 0;
  for (Node* node : cpu_attention) {
    Value* logsumexp = node->outputs()[1];
    if (uses.count(logsumexp) || std::find(outputs.begin(), outputs.end(), logsumexp) != outputs.end()) continue;
    auto arg = [node](std::string_view name) -> Argument {
      const std::optional<int> a = node->schema().argumentIndexWithName(name);
      return a && static_cast<std::size_t>(*a) < node->args().size() ? node->args()[*a] : Argument::none();
    };
    Value* output = node->outputs()[0];
    std::vector<OutputSpec> spec(1);
    if (output->meta()) spec[0].meta = *output->meta();
    Node* sdpa = graph.add_call(
        "aten::scaled_dot_product_attention",
        {arg("query"), arg("key"), arg("value"), arg("attn_mask"), arg("dropout_p"), arg("is_causal"), arg("scale")},
        std::move(spec), node);
    graph.replace_all_uses(output, sdpa->output());
    graph.erase_node(node);
    ++changes;
  }
  return changes;
}

// A view torch.export recorded where the CPU's strides allowed one becomes reshape, which views
// where the device's strides allow it and copies where they do not. The model's own code often
// was `.contiguous().view()` or `.reshape()`: on the CPU the tensor was contiguous already, so the
// export recorded no copy, but another device's kernels (attention, convolutions) may leave
// other strides, and eager's contiguous() copies there. Same result where a view is possible.
std::size_t relax_views(Graph& graph) {
  std::vector<Node*> views;
  for (Node* node : graph.nodes())
    if (node->is_call() && node->qualified_name() == "aten::view") views.push_back(node);
  for (Node* node : views) {
    Value* output = node->output();
    std::vector<OutputSpec> spec(1);
    if (output->meta()) spec[0].meta = *output->meta();
    Node* reshape = graph.add_call("aten::reshape", node->args(), std::move(spec), node);
    reshape->attrs() = node->attrs();
    graph.replace_all_uses(output, reshape->output());
    graph.erase_node(node);
  }
  return views.size();
}

}  // namespace

bool device_available(c10::Device device) {
  if (device.is_cpu() || device.is_meta()) return true;
  if (!c10::impl::hasDeviceGuardImpl(device.type())) return false;
  const auto count = c10::impl::getDeviceGuardImpl(device.type())->deviceCount();
  return (device.has_index() ? device.index() : 0) < count;
}

std::size_t retarget_device(Graph& graph, c10::Device device) {
  std::size_t changes = 0;
  // A wrapped number (a Python scalar an importer passed for a Tensor parameter) is a CPU scalar
  // on every device, as in eager: moved, it would lose its place in type promotion.
  auto is_wrapped_number = [](const at::Tensor& t) {
    return t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number();
  };
  auto is_wrapped_constant = [&](const std::string& key) {
    auto it = graph.tensor_constants().find(key);
    return it != graph.tensor_constants().end() && is_wrapped_number(it->second);
  };
  if (!device.is_cpu()) changes += restore_attention(graph) + relax_views(graph);
  for (Value* in : graph.inputs()) changes += retarget_meta(in, device) ? 1 : 0;
  for (Node* node : graph.nodes()) {
    if (!node->is_call() && is_wrapped_constant(node->constant_name())) continue;
    for (Value* out : node->outputs()) changes += retarget_meta(out, device) ? 1 : 0;
    for (Argument& arg : node->args()) {
      if (arg.is_constant() && arg.constant().isDevice() && arg.constant().toDevice().is_cpu()) {
        arg = Argument(c10::IValue(device));
        ++changes;
      }
    }
  }
  const bool here = device_available(device);
  for (const auto& [key, tensor] : std::map<std::string, at::Tensor>(graph.tensor_constants())) {
    if (!tensor.defined() || !tensor.device().is_cpu() || is_wrapped_number(tensor)) continue;
    if (here) {
      graph.bind_constant(key, tensor.to(device));
    } else {
      TensorMeta meta = TensorMeta::of(tensor);
      meta.device = device;
      graph.bind_constant(key, metadata_example(meta));
    }
    ++changes;
  }
  return changes;
}

}  // namespace aotpipe
