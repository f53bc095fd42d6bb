// Ops whose result is a choice the eager backend makes from metadata alone (which attention kernel
// scaled_dot_product_attention runs): on meta tensors libtorch answers for the meta backend
// ("math"), not for the device being traced. For the CPU, aotpipe asks the CPU kernel itself on
// tensors that report the CPU and carry no data, as Python's FakeTensor asks it with fake tensors,
// so a compile records the kernel eager runs (_scaled_dot_product_flash_attention_for_cpu).
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/graph/tensor_meta.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace aotpipe::detail {

bool run_device_choice_kernel(const c10::OperatorHandle& op, std::vector<c10::IValue>& stack, std::size_t first,
                              c10::Device device) {
  static const c10::OperatorName sdp_choice{"aten::_fused_sdp_choice", ""};
  if (!device.is_cpu() || op.operator_name() != sdp_choice) return false;
  for (std::size_t i = first; i < stack.size(); ++i) {
    if (!stack[i].isTensor()) continue;
    TensorMeta meta = TensorMeta::of(stack[i].toTensor());
    meta.device = device;
    stack[i] = metadata_example(meta);
  }
  op.callBoxedForDispatchKey(c10::DispatchKey::CPU, stack);
  return true;
}

}  // namespace aotpipe::detail
