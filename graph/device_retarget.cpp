#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/graph/example_tensor.h>

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

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

}  // namespace

bool device_available(c10::Device device) {
  if (device.is_cpu() || device.is_meta()) return true;
  if (!c10::impl::hasDeviceGuardImpl(device.type())) return false;
  const auto count = c10::impl::getDeviceGuardImpl(device.type())->deviceCount();
  return (device.has_index() ? device.index() : 0) < count;
}

std::size_t retarget_device(Graph& graph, c10::Device device) {
  std::size_t changes = 0;
  for (Value* in : graph.inputs()) changes += retarget_meta(in, device) ? 1 : 0;
  for (Node* node : graph.nodes()) {
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
    if (!tensor.defined() || !tensor.device().is_cpu()) continue;
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
