// Meta kernels of elementwise ops whose CPU kernels have no Meta twin in C++ (activations, their
// backwards, where, abs, flip, loss backwards, dropout, glu_backward). Each allocates its outputs
// as the CPU kernel does: through the same TensorIterator configuration, or empty_like where the
// kernel allocates with it before iterating.
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/result_type.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>

namespace aotpipe::detail {
namespace {

using at::Scalar;
using at::Tensor;

void check_not_bool(const Tensor& self, const char* op) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for ", op);
}

// relu is clamp_min(self, 0) in every backend.
Tensor relu_meta(const Tensor& self) {
  check_not_bool(self, "relu");
  return at::clamp_min(self, 0);
}
Tensor& relu_inplace_meta(Tensor& self) {
  check_not_bool(self, "relu_");
  return self.clamp_min_(0);
}

// hardtanh allocates empty_like(self) and clamps into it.
Tensor hardtanh_meta(const Tensor& self, const Scalar& min, const Scalar& max) {
  check_not_bool(self, "hardtanh");
  Tensor result = at::empty_like(self);
  return at::clamp_out(result, self, min, max);
}
Tensor& hardtanh_inplace_meta(Tensor& self, const Scalar& min, const Scalar& max) {
  check_not_bool(self, "hardtanh_");
  return self.clamp_(min, max);
}

// An activation backward over (grad_output, self) through a binary TensorIterator.
Tensor activation_backward_meta(const Tensor& grad_output, const Tensor& self) {
  Tensor result;
  auto iter = at::TensorIterator::borrowing_binary_op(result, grad_output, self);
  return iter.output();
}

Tensor hardtanh_backward_meta(const Tensor& grad_output, const Tensor& self, const Scalar&, const Scalar&) {
  return activation_backward_meta(grad_output, self);
}

Tensor& where_out_meta(const Tensor& condition, const Tensor& self, const Tensor& other, Tensor& out) {
  TORCH_CHECK(condition.scalar_type() == at::kByte || condition.scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", condition.scalar_type());
  const auto result_type = at::result_type(self, other);
  TORCH_CHECK(out.scalar_type() == result_type, "Expected out type to be ", result_type, " but got ",
              out.scalar_type());
  const Tensor cond = condition.scalar_type() == at::kByte ? condition.to(at::kBool) : condition;
  const Tensor self_ = self.scalar_type() != result_type ? self.to(result_type) : self;
  const Tensor other_ = other.scalar_type() != result_type ? other.to(result_type) : other;
  at::TensorIteratorConfig()
      .check_all_same_dtype(false)
      .add_output(out)
      .add_const_input(cond)
      .add_const_input(self_)
      .add_const_input(other_)
      .build();
  return out;
}

Tensor where_meta(const Tensor& condition, const Tensor& self, const Tensor& other) {
  Tensor out = at::empty({0}, self.options().dtype(at::result_type(self, other)));
  return where_out_meta(condition, self, other, out);
}

Tensor& abs_out_meta(const Tensor& self, Tensor& result) {
  TORCH_CHECK(!self.is_complex(), "aotpipe's Meta kernel of abs.out covers real dtypes only");
  at::TensorIterator::unary_op(result, self);
  return result;
}

Tensor flip_meta(const Tensor& self, at::IntArrayRef dims) {
  (void)at::dim_list_to_bitset(dims, self.dim());  // checks the dims
  return at::empty_like(self, at::MemoryFormat::Preserve);
}

std::tuple<Tensor, Tensor> log_sigmoid_forward_meta(const Tensor& input) {
  return {at::empty_like(input, at::MemoryFormat::Contiguous), at::empty_like(input, at::MemoryFormat::Contiguous)};
}

Tensor log_sigmoid_backward_meta(const Tensor& grad_output, const Tensor& input, const Tensor& buffer) {
  Tensor grad_input = at::empty_like(grad_output, at::MemoryFormat::Contiguous);
  at::TensorIteratorConfig()
      .add_output(grad_input)
      .add_const_input(input)
      .add_const_input(buffer)
      .add_const_input(grad_output)
      .build();
  return grad_input;
}

Tensor mse_loss_backward_meta(const Tensor& grad_output, const Tensor& input, const Tensor& target, int64_t) {
  Tensor grad_input = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::TensorIteratorConfig()
      .add_output(grad_input)
      .add_const_input(input)
      .add_const_input(target)
      .add_const_input(grad_output)
      .build();
  return grad_input;
}

Tensor& smooth_l1_loss_backward_out_meta(const Tensor& grad_output, const Tensor& input, const Tensor& target, int64_t,
                                         double beta, Tensor& grad_input) {
  (void)beta;  // the CPU backward accepts any beta (the forward checks it)
  at::TensorIteratorConfig()
      .add_output(grad_input)
      .add_const_input(input)
      .add_const_input(target)
      .add_const_input(grad_output)
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true)
      .build();
  return grad_input;
}

std::tuple<Tensor, Tensor> native_dropout_meta(const Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0) return {input, at::empty_like(input, input.options())};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  return {input.mul(mask), mask};
}

Tensor native_dropout_backward_meta(const Tensor& grad_output, const Tensor& mask, double scale) {
  return grad_output.mul(mask).mul_(scale);  // what the CPU kernel computes (it accepts any mask dtype)
}

// isnan is self != self in every backend.
Tensor isnan_meta(const Tensor& self) { return at::ne(self, self); }

Tensor& logical_binary_out_meta(const Tensor& self, const Tensor& other, Tensor& out) {
  at::TensorIterator::comparison_op(out, self, other);
  return out;
}

Tensor& logical_not_out_meta(const Tensor& self, Tensor& out) {
  at::TensorIteratorConfig().check_all_same_dtype(false).add_output(out).add_const_input(self).build();
  return out;
}

// rsub(self, other) is sub(other, self).
Tensor rsub_meta(const Tensor& self, const Tensor& other, const Scalar& alpha) { return at::sub(other, self, alpha); }

Tensor floor_divide_meta(const Tensor& self, const Tensor& other) {
  Tensor result;
  auto iter = at::TensorIterator::binary_op(result, self, other);
  return iter.output();
}

Tensor logit_meta(const Tensor& self, std::optional<double>) {
  Tensor result;
  auto iter = at::TensorIterator::unary_float_op(result, self);
  return iter.output();
}

Tensor hardswish_meta(const Tensor& self) {
  Tensor result;
  auto iter = at::TensorIterator::unary_op(result, self);
  return iter.output();
}

// glu_backward: the CPU and CUDA kernels resize an empty result as the input (contiguous) and
// iterate over its halves with grad_output.
Tensor glu_backward_meta(const Tensor& grad_output, const Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support 0-dimensional tensors");
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.size(wrapped);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", wrapped, " is size ", n);
  std::vector<int64_t> half(self.sizes().begin(), self.sizes().end());
  half[static_cast<std::size_t>(wrapped)] = n / 2;
  TORCH_CHECK(at::infer_size(grad_output.sizes(), half) == half, "glu_backward: grad_output of size ",
              grad_output.sizes(), " does not broadcast to ", at::IntArrayRef(half));
  TORCH_CHECK(grad_output.scalar_type() == self.scalar_type(), "glu_backward: expected grad_output of dtype ",
              self.scalar_type(), " but got ", grad_output.scalar_type());
  return at::empty(self.sizes(), self.options());
}

}  // namespace

void register_pointwise_meta(MetaRegistrar& m) {
  m.impl("isnan", TORCH_FN(isnan_meta));
  m.impl("logical_and.out", TORCH_FN(logical_binary_out_meta));
  m.impl("logical_or.out", TORCH_FN(logical_binary_out_meta));
  m.impl("logical_xor.out", TORCH_FN(logical_binary_out_meta));
  m.impl("logical_not.out", TORCH_FN(logical_not_out_meta));
  m.impl("rsub.Tensor", TORCH_FN(rsub_meta));
  m.impl("floor_divide", TORCH_FN(floor_divide_meta));
  m.impl("logit", TORCH_FN(logit_meta));
  m.impl("hardswish", TORCH_FN(hardswish_meta));
  m.impl("hardswish_backward", TORCH_FN(activation_backward_meta));
  m.impl("relu", TORCH_FN(relu_meta));
  m.impl("relu_", TORCH_FN(relu_inplace_meta));
  m.impl("hardtanh", TORCH_FN(hardtanh_meta));
  m.impl("hardtanh_", TORCH_FN(hardtanh_inplace_meta));
  m.impl("hardtanh_backward", TORCH_FN(hardtanh_backward_meta));
  m.impl("where.self", TORCH_FN(where_meta));
  m.impl("where.self_out", TORCH_FN(where_out_meta));
  m.impl("abs.out", TORCH_FN(abs_out_meta));
  m.impl("flip", TORCH_FN(flip_meta));
  m.impl("log_sigmoid_forward", TORCH_FN(log_sigmoid_forward_meta));
  m.impl("log_sigmoid_backward", TORCH_FN(log_sigmoid_backward_meta));
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward_meta));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(smooth_l1_loss_backward_out_meta));
  m.impl("native_dropout", TORCH_FN(native_dropout_meta));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward_meta));
  m.impl("glu_backward", TORCH_FN(glu_backward_meta));
}

}  // namespace aotpipe::detail
