// Meta kernels of the losses whose CPU kernels have no Meta twin: binary cross entropy (and its
// backward) and the 2-d NLL loss of segmentation models.
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/core/Reduction.h>

namespace aotpipe::detail {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

void check_same_numel(const Tensor& input, const Tensor& target, const char* op) {
  TORCH_CHECK(input.numel() == target.numel(), op, ": input and target must have the same number of elements, got ",
              input.sizes(), " and ", target.sizes());
}

Tensor binary_cross_entropy_meta(const Tensor& input, const Tensor& target, const OptTensor&, int64_t reduction) {
  check_same_numel(input, target, "binary_cross_entropy");
  if (reduction == at::Reduction::None) return at::empty_like(input);
  return at::empty({}, input.options());
}

Tensor binary_cross_entropy_backward_meta(const Tensor& grad, const Tensor& input, const Tensor& target,
                                          const OptTensor&, int64_t) {
  check_same_numel(input, target, "binary_cross_entropy_backward");
  (void)grad;
  return at::empty_like(input);
}

void check_nll_loss2d(const Tensor& self, const Tensor& target, const OptTensor& weight) {
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors) but got targets of dimension: ", target.dim());
  TORCH_CHECK(self.dim() == 4,
              "only batches of spatial inputs supported (4D tensors), but got input of dimension: ", self.dim());
  TORCH_CHECK(!weight || !weight->defined() || weight->numel() == self.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "input and target batch or spatial sizes don't match: target ", target.sizes(), ", input ", self.sizes());
}

std::tuple<Tensor, Tensor> nll_loss2d_forward_meta(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                                   int64_t reduction, int64_t) {
  check_nll_loss2d(self, target, weight);
  Tensor total_weight = at::empty({}, self.options());
  if (reduction == at::Reduction::None)
    return {at::empty({self.size(0), self.size(2), self.size(3)}, self.options()), total_weight};
  return {at::empty({}, self.options()), total_weight};
}

Tensor nll_loss2d_backward_meta(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                const OptTensor& weight, int64_t, int64_t, const Tensor&) {
  check_nll_loss2d(self, target, weight);
  (void)grad_output;
  Tensor grad_input = at::empty_like(self);  // zeros_like(self) on the CPU, which then requires it contiguous
  TORCH_CHECK(grad_input.is_contiguous(), "grad_input must be contiguous");
  return grad_input;
}

}  // namespace

void register_loss_meta(MetaRegistrar& m) {
  m.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy_meta));
  m.impl("binary_cross_entropy_backward", TORCH_FN(binary_cross_entropy_backward_meta));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward_meta));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward_meta));
}

}  // namespace aotpipe::detail
