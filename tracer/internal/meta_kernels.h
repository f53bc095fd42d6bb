#pragma once
// aotpipe's own Meta kernels (tracer/meta/) for ATen ops that libtorch 2.11 leaves without one in
// C++ (Python registers them in torch/_meta_registrations.py or computes them by decomposition,
// which a C++ process does not load). With them a fake trace of the usual models runs on meta
// tensors only, never on the CPU fallback.
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

namespace c10 {
class OperatorHandle;
struct FunctionSchema;
}  // namespace c10

#include <cstdint>
#include <string>
#include <vector>

namespace aotpipe::detail {

// The kernels register when tracer/meta/registry.cpp is loaded. The tracer calls this so that the
// linker keeps that object file of the static library.
void link_meta_kernels();

// The overloads aotpipe registers a Meta kernel for ("aten::relu", "aten::var.correction"), in
// registration order: what the differential meta tests must cover.
const std::vector<std::string>& aotpipe_meta_kernel_ops();

// The device the op being traced runs on in eager (FakeTensor's fake_device). Meta tensors do not
// know it, yet some layouts depend on the backend (a convolution's output memory format differs
// between oneDNN on the CPU and cuDNN). The tracer sets it around every Meta call; CPU otherwise.
c10::Device meta_device_hint();

// For an op whose eager result is a backend's choice read from metadata only
// (_fused_sdp_choice), answers as `device`'s kernel would, in place on `stack` (arguments from
// `first`); false when the op is not one of them or the device's kernel cannot be asked.
bool run_device_choice_kernel(const c10::OperatorHandle& op, std::vector<c10::IValue>& stack, std::size_t first,
                              c10::Device device);

// aten::mkldnn_rnn_layer's `mode` for an LSTM (ideep::rnn_kind::LSTM), the one its Meta kernel
// covers and the one the tracer's CPU LSTM passes (autograd_decompositions.cpp).
constexpr int64_t kMkldnnLstmMode = 2;

// The in-place foreach ops that write their first list and return nothing (aten::_foreach_add_.List).
bool is_foreach_inplace(const c10::FunctionSchema& schema);
// The functional pointwise foreach ops (aten::_foreach_add.List, _foreach_sqrt...; not the
// reductions, copies and fills): what run_foreach_pointwise_shortcut may answer.
bool is_foreach_pointwise(const c10::FunctionSchema& schema);

// How alike the tensor lists of a foreach call must be, element by element.
enum class ForeachAlike : std::uint8_t { Sizes, SizesAndStrides };
// For a foreach call on meta tensors (arguments from `first`): its first tensor list when every
// tensor list has that list's length and its elements, all defined, are meta tensors of one
// floating dtype with the sizes (and strides, as `alike` says) of that list's elements, and every
// other argument is a plain number, a list of them of that length, or None; nullptr otherwise
// (a tensor broadcast against each element, a complex scalar, mixed dtypes...). Where this holds,
// an elementwise foreach op's work is the same for every element and follows from its metadata.
const c10::IValue* alike_foreach_operands(const std::vector<c10::IValue>& stack, std::size_t first, ForeachAlike alike);

// For a functional pointwise foreach op whose operands are alike in sizes and strides, with every
// element dense, not empty, and laid out so that its result's layout follows: replaces the
// arguments by the results libtorch's Meta kernel would give, without dispatching per element;
// false (stack untouched) otherwise.
bool run_foreach_pointwise_shortcut(std::vector<c10::IValue>& stack, std::size_t first);

class MetaDeviceHintScope {
 public:
  explicit MetaDeviceHintScope(c10::Device device);
  ~MetaDeviceHintScope();
  MetaDeviceHintScope(const MetaDeviceHintScope&) = delete;
  MetaDeviceHintScope& operator=(const MetaDeviceHintScope&) = delete;

 private:
  c10::Device previous_;
};

}  // namespace aotpipe::detail
