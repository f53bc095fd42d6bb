// Meta kernels of adaptive average pooling (what adaptive_avg_pool2d runs for outputs other than
// 1x1), reflection padding and roll, as the CPU kernels allocate them.
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/WrapDimUtils.h>

namespace aotpipe::detail {
namespace {

using at::IntArrayRef;
using at::Tensor;

void check_3d_or_4d(const Tensor& t, const char* op) {
  TORCH_CHECK(t.dim() == 3 || t.dim() == 4, op, "(): Expected 3D or 4D tensor, but got ", t.sizes());
  for (int64_t d = 1; d < t.dim(); ++d)
    TORCH_CHECK(t.size(d) > 0, op,
                "(): Expected input to have non-zero size for non-batch dimensions, but input has "
                "sizes ",
                t.sizes(), " with dimension ", d, " being empty");
}

// 4-d: in the input's suggested memory format (channels_last in, channels_last out), as the CPU
// pooling and padding kernels allocate.
Tensor empty_pooled(const Tensor& self, IntArrayRef sizes) {
  if (self.dim() == 4) return at::empty(sizes, self.options().memory_format(self.suggest_memory_format()));
  return at::empty(sizes, self.options());
}

Tensor adaptive_avg_pool2d_meta(const Tensor& self, IntArrayRef output_size) {
  check_3d_or_4d(self, "adaptive_avg_pool2d");
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
              "adaptive_avg_pool2d: elements of output_size must be "
              "greater than or equal to 0 but received {",
              output_size[0], ", ", output_size[1], "}");
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - 2);
  sizes.push_back(output_size[0]);
  sizes.push_back(output_size[1]);
  return empty_pooled(self, sizes);
}

Tensor adaptive_avg_pool2d_backward_meta(const Tensor& grad_output, const Tensor& self) {
  check_3d_or_4d(grad_output, "adaptive_avg_pool2d_backward");
  TORCH_CHECK(self.dtype() == grad_output.dtype(), "expected dtype ", self.dtype(), " for `grad_output` but got dtype ",
              grad_output.dtype());
  return empty_pooled(self, self.sizes());
}

// [N,] C, H, W padded by (left, right, top, bottom), reflected: each pad shorter than its dimension.
std::vector<int64_t> reflection_padded_sizes(const Tensor& input, IntArrayRef padding) {
  TORCH_CHECK(padding.size() == 4, "padding size is expected to be 4");
  TORCH_CHECK((input.dim() == 3 || input.dim() == 4) && input.size(-1) != 0 && input.size(-2) != 0,
              "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
              "input, but got: ",
              input.sizes());
  const int64_t h = input.size(-2), w = input.size(-1);
  TORCH_CHECK(padding[0] < w && padding[1] < w,
              "Argument #4: Padding size should be less than the corresponding "
              "input dimension, but got: padding (",
              padding[0], ", ", padding[1], ") at dimension ", input.dim() - 1, " of input ", input.sizes());
  TORCH_CHECK(padding[2] < h && padding[3] < h,
              "Argument #6: Padding size should be less than the corresponding "
              "input dimension, but got: padding (",
              padding[2], ", ", padding[3], ") at dimension ", input.dim() - 2, " of input ", input.sizes());
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[input.dim() - 2] = h + padding[2] + padding[3];
  sizes[input.dim() - 1] = w + padding[0] + padding[1];
  TORCH_CHECK(sizes[input.dim() - 2] >= 1 || sizes[input.dim() - 1] >= 1, "input (H: ", h, " W: ", w,
              ") is too small. Calculated output H: ", sizes[input.dim() - 2], " W: ", sizes[input.dim() - 1]);
  return sizes;
}

Tensor reflection_pad2d_meta(const Tensor& input, IntArrayRef padding) {
  return empty_pooled(input, reflection_padded_sizes(input, padding));
}

Tensor reflection_pad2d_backward_meta(const Tensor& grad_output, const Tensor& input, IntArrayRef padding) {
  const auto sizes = reflection_padded_sizes(input, padding);
  TORCH_CHECK(grad_output.sizes() == IntArrayRef(sizes), "gradOutput sizes ", grad_output.sizes(),
              " do not match the padded input sizes ", IntArrayRef(sizes));
  return empty_pooled(input, input.sizes());
}

Tensor roll_meta(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(),
                ", dims:", dims.size());
    return at::empty({self.numel()}, self.options()).view(self.sizes());  // roll of the flattened tensor
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  for (int64_t d : dims) (void)at::maybe_wrap_dim(d, self.dim());
  return at::empty(self.sizes(), self.options().memory_format(self.suggest_memory_format()));
}

}  // namespace

void register_pooling_meta(MetaRegistrar& m) {
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool2d_meta));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool2d_backward_meta));
  m.impl("reflection_pad2d", TORCH_FN(reflection_pad2d_meta));
  m.impl("reflection_pad2d_backward", TORCH_FN(reflection_pad2d_backward_meta));
  m.impl("roll", TORCH_FN(roll_meta));
}

}  // namespace aotpipe::detail
