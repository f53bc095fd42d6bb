// Meta kernels of convolution and its backward, and of im2col / col2im (unfold, fold). libtorch's
// `convolution` is a composite that selects a backend from the tensors' device; on meta tensors it
// picks "Overrideable" and fails.
// The output's memory format is the one the eager backend produces: on the CPU the backend
// select_conv_backend chooses (oneDNN, slow, depthwise...) for tensors that report the CPU, as
// Python's FakeTensor asks it; on CUDA cuDNN's rule (channels_last when the input or the weight is).
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/tracer/internal/meta_support.h>
#include <aotpipe/graph/tensor_meta.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/native/ConvUtils.h>
#include <ATen/native/im2col_shape_check.h>

namespace aotpipe::detail {
namespace {

using at::IntArrayRef;
using at::Tensor;

std::vector<int64_t> expand_param(IntArrayRef values, int64_t spatial, const char* name) {
  if (values.size() == 1) return std::vector<int64_t>(spatial, values[0]);
  TORCH_CHECK(static_cast<int64_t>(values.size()) == spatial, "convolution: expected ", name, " to have ", spatial,
              " elements, got ", values.size());
  return values.vec();
}

std::vector<int64_t> conv_output_sizes(const Tensor& input, const Tensor& weight, IntArrayRef stride_in,
                                       IntArrayRef padding_in, IntArrayRef dilation_in, bool transposed,
                                       IntArrayRef output_padding_in, int64_t groups) {
  const int64_t dim = input.dim();
  TORCH_CHECK(dim >= 3, "convolution: expected a batched input of at least 3 dimensions, got ", input.sizes());
  TORCH_CHECK(weight.dim() == dim, "convolution: expected weight to have ", dim, " dimensions for input of sizes ",
              input.sizes(), ", got weight of sizes ", weight.sizes());
  TORCH_CHECK(groups > 0, "convolution: non-positive groups is not supported");
  const int64_t spatial = dim - 2;
  auto stride = expand_param(stride_in, spatial, "stride");
  auto padding = expand_param(padding_in, spatial, "padding");
  auto dilation = expand_param(dilation_in, spatial, "dilation");
  auto output_padding =
      expand_param(output_padding_in.empty() ? IntArrayRef{0} : output_padding_in, spatial, "output_padding");
  for (int64_t s : stride) TORCH_CHECK(s > 0, "convolution: non-positive stride is not supported");
  for (int64_t p : padding) TORCH_CHECK(p >= 0, "convolution: negative padding is not supported");
  std::vector<int64_t> out{input.size(0)};
  if (transposed) {
    TORCH_CHECK(input.size(1) == weight.size(0), "convolution: given transposed=1, weight of size ", weight.sizes(),
                ", expected input ", input.sizes(), " to have ", weight.size(0), " channels, but got ", input.size(1),
                " channels instead");
    out.push_back(weight.size(1) * groups);
  } else {
    TORCH_CHECK(input.size(1) == weight.size(1) * groups, "convolution: given groups=", groups, ", weight of size ",
                weight.sizes(), ", expected input ", input.sizes(), " to have ", weight.size(1) * groups,
                " channels, but got ", input.size(1), " channels instead");
    TORCH_CHECK(weight.size(0) % groups == 0, "convolution: given groups=", groups,
                ", expected weight to be divisible by ", groups, " at dimension 0, but got weight of size ",
                weight.sizes());
    out.push_back(weight.size(0));
  }
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t in = input.size(d + 2), k = weight.size(d + 2);
    const int64_t size = transposed
                             ? (in - 1) * stride[d] - 2 * padding[d] + dilation[d] * (k - 1) + output_padding[d] + 1
                             : (in + 2 * padding[d] - dilation[d] * (k - 1) - 1) / stride[d] + 1;
    TORCH_CHECK(transposed || in + 2 * padding[d] >= dilation[d] * (k - 1) + 1,
                "convolution: calculated padded input size per channel: (", in + 2 * padding[d], "). Kernel size: (",
                dilation[d] * (k - 1) + 1, "). Kernel size can't be greater than actual input size");
    TORCH_CHECK(size > 0 || input.numel() == 0, "convolution: output size is too small (", size, ") for input ",
                input.sizes());
    out.push_back(size);
  }
  if (input.size(1) == 0) out[1] = 0;
  return out;
}

// A tensor with `t`'s metadata that reports the eager device, for the backend selection (nothing
// is allocated). `unsqueeze2`: as t.unsqueeze(2) (of t.contiguous() when `contiguous`), made
// directly: ops on such a tensor would report the meta device again.
Tensor on_device(const Tensor& t, c10::Device device, bool unsqueeze2 = false, bool contiguous = false) {
  TensorMeta meta = TensorMeta::of(t);
  meta.device = device;
  if (contiguous) meta.strides = contiguous_strides(meta.sizes);
  if (unsqueeze2) {
    const int64_t inner = meta.strides[2] * meta.sizes[2];
    meta.sizes.insert(meta.sizes.begin() + 2, 1);
    meta.strides.insert(meta.strides.begin() + 2, inner);
  }
  return metadata_example(meta);
}

struct BackendLayout {
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
  bool empty_input = false;  // the Empty backend (a 0-sized input): gradients are zeros_like(input/weight)
  bool onednn = false;       // oneDNN's backward computes the weight gradient with the bias gradient
};

// The memory format of the eager backend's outputs for this convolution (before 1-d squeezing).
BackendLayout backend_layout(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                             IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool transposed,
                             IntArrayRef output_padding, int64_t groups, std::optional<IntArrayRef> bias_sizes) {
  const c10::Device device = meta_device_hint();
  if (input.numel() == 0) return {at::MemoryFormat::Contiguous, true};
  if (device.is_cuda()) return {at::native::cudnn_conv_suggest_memory_format(input, weight)};
  if (!device.is_cpu()) return {};
  // A 1-d convolution runs as a 2-d one on the unsqueezed contiguous input (Convolution.cpp's
  // view1d_as_2d); the examples are made 2-d directly (a view of them would report the meta device).
  const bool one_d = input.dim() == 3;
  Tensor in = on_device(input, device, one_d, one_d), w = on_device(weight, device, one_d);
  std::optional<Tensor> b;
  if (bias && bias->defined()) b = on_device(*bias, device);
  auto params = [one_d](IntArrayRef values, int64_t lead) {
    std::vector<c10::SymInt> out;
    if (one_d) out.emplace_back(lead);
    for (int64_t v : values) out.emplace_back(v);
    if (one_d && values.empty()) out.emplace_back(lead);
    return out;
  };
  const auto stride2 = params(stride, 1), padding2 = params(padding, 0), dilation2 = params(dilation, 1),
             output_padding2 = params(output_padding, 0);
  std::optional<c10::SymIntArrayRef> sym_bias_sizes;
  std::vector<c10::SymInt> bias_storage;
  if (bias_sizes) {
    for (int64_t s : *bias_sizes) bias_storage.emplace_back(s);
    sym_bias_sizes = c10::SymIntArrayRef(bias_storage);
  }
  const auto backend = at::native::select_conv_backend(in, w, b, stride2, padding2, dilation2, transposed,
                                                       output_padding2, c10::SymInt(groups), sym_bias_sizes);
  const bool onednn = backend == at::native::ConvBackend::Mkldnn || backend == at::native::ConvBackend::MkldnnTranspose;
  return {at::native::_determine_backend_memory_format(in, w, backend), false, onednn};
}

// An empty tensor of `sizes` in `format` (a 3-d tensor in channels_last: as the 2-d one squeezed).
Tensor empty_in_format(IntArrayRef sizes, const at::TensorOptions& options, at::MemoryFormat format) {
  if (sizes.size() == 3 && format == at::MemoryFormat::ChannelsLast) {
    std::vector<int64_t> four(sizes.begin(), sizes.end());
    four.insert(four.begin() + 2, 1);
    return at::empty(four, options.memory_format(format)).squeeze(2);
  }
  if (format == at::MemoryFormat::Preserve) format = at::MemoryFormat::Contiguous;
  return at::empty(sizes, options.memory_format(format));
}

Tensor convolution_meta(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool transposed,
                        IntArrayRef output_padding, int64_t groups) {
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "convolution: input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  if (bias && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == (transposed ? weight.size(1) * groups : weight.size(0)),
                "convolution: given weight of size ", weight.sizes(), ", expected bias to be 1-dimensional with ",
                transposed ? weight.size(1) * groups : weight.size(0), " elements, but got bias of size ",
                bias->sizes());
    TORCH_CHECK(bias->scalar_type() == input.scalar_type(), "convolution: input type (", input.scalar_type(),
                ") and bias type (", bias->scalar_type(), ") should be the same");
  }
  const auto sizes = conv_output_sizes(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  const auto layout =
      backend_layout(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, std::nullopt);
  return empty_in_format(sizes, input.options(), layout.format);
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward_meta(const Tensor& grad_output, const Tensor& input,
                                                             const Tensor& weight, at::OptionalIntArrayRef bias_sizes,
                                                             IntArrayRef stride, IntArrayRef padding,
                                                             IntArrayRef dilation, bool transposed,
                                                             IntArrayRef output_padding, int64_t groups,
                                                             std::array<bool, 3> output_mask) {
  const auto expected = conv_output_sizes(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  TORCH_CHECK(grad_output.sizes() == IntArrayRef(expected), "convolution_backward: grad_output of sizes ",
              grad_output.sizes(), " does not match the convolution's output sizes ", IntArrayRef(expected));
  std::optional<IntArrayRef> bias = bias_sizes ? std::optional<IntArrayRef>(*bias_sizes) : std::nullopt;
  const auto layout =
      backend_layout(input, weight, std::nullopt, stride, padding, dilation, transposed, output_padding, groups, bias);
  Tensor grad_input, grad_weight, grad_bias;
  if (layout.empty_input) {
    if (output_mask[0]) grad_input = at::empty_like(input);
    if (output_mask[1]) grad_weight = at::empty_like(weight);
  } else {
    if (output_mask[0]) grad_input = empty_in_format(input.sizes(), input.options(), layout.format);
    if (output_mask[1]) {
      grad_weight = empty_in_format(weight.sizes(), weight.options(), layout.format);
    } else if (layout.onednn && output_mask[2]) {
      // Unasked, oneDNN's weight gradient is returned anyway, as the backend made it: a 1-d
      // convolution's still unsqueezed to 2-d.
      std::vector<int64_t> sizes = weight.sizes().vec();
      if (weight.dim() == 3) sizes.insert(sizes.begin() + 2, 1);
      grad_weight = at::empty(sizes, weight.options().memory_format(layout.format));
    }
  }
  if (output_mask[2]) {
    const int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
    grad_bias = at::empty({channels}, grad_output.options());
  }
  return {grad_input, grad_weight, grad_bias};
}

// im2col (nn.Unfold) and col2im (nn.Fold, and im2col's backward): contiguous results, the CPU
// kernels' checks (ATen's im2col_shape_check.h).
void check_pairs(IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  TORCH_CHECK(kernel_size.size() == 2, "It is expected kernel_size equals to 2, but got size ", kernel_size.size());
  TORCH_CHECK(dilation.size() == 2, "It is expected dilation equals to 2, but got size ", dilation.size());
  TORCH_CHECK(padding.size() == 2, "It is expected padding equals to 2, but got size ", padding.size());
  TORCH_CHECK(stride.size() == 2, "It is expected stride equals to 2, but got size ", stride.size());
}

Tensor im2col_meta(const Tensor& self, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                   IntArrayRef stride) {
  check_pairs(kernel_size, dilation, padding, stride);
  at::native::im2col_shape_check(self, Tensor(), kernel_size[0], kernel_size[1], dilation[0], dilation[1], padding[0],
                                 padding[1], stride[0], stride[1]);
  const bool batched = self.dim() == 4;
  const int64_t planes = self.size(-3) * kernel_size[0] * kernel_size[1];
  auto out_extent = [&](int64_t in, std::size_t i) {
    return (in + 2 * padding[i] - (dilation[i] * (kernel_size[i] - 1) + 1)) / stride[i] + 1;
  };
  const int64_t length = out_extent(self.size(-2), 0) * out_extent(self.size(-1), 1);
  if (!batched) return at::empty({planes, length}, self.options());
  return at::empty({self.size(0), planes, length}, self.options());
}

Tensor col2im_meta(const Tensor& self, IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation,
                   IntArrayRef padding, IntArrayRef stride) {
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  check_pairs(kernel_size, dilation, padding, stride);
  at::native::col2im_shape_check(self, Tensor(), output_size[0], output_size[1], kernel_size[0], kernel_size[1],
                                 dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1]);
  const int64_t planes = self.size(-2) / (kernel_size[0] * kernel_size[1]);
  if (self.dim() == 2) return at::empty({planes, output_size[0], output_size[1]}, self.options());
  return at::empty({self.size(0), planes, output_size[0], output_size[1]}, self.options());
}

}  // namespace

void register_convolution_meta(MetaRegistrar& m) {
  m.impl("convolution", TORCH_FN(convolution_meta));
  m.impl("convolution_backward", TORCH_FN(convolution_backward_meta));
  m.impl("im2col", TORCH_FN(im2col_meta));
  m.impl("col2im", TORCH_FN(col2im_meta));
}

}  // namespace aotpipe::detail
