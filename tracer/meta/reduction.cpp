// Meta kernels of the variance reductions (var, std and their _mean twins): reduced sizes,
// contiguous, in the real dtype of the input (complex -> float) for the variance.
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/WrapDimUtilsMulti.h>

namespace aotpipe::detail {
namespace {

using at::Tensor;

std::vector<int64_t> reduced_sizes(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const int64_t ndim = self.dim();
  std::bitset<at::dim_bitset_size> reduce;
  if (!dim || dim->empty()) {
    for (int64_t d = 0; d < ndim; ++d) reduce.set(d);
  } else {
    reduce = at::dim_list_to_bitset(*dim, ndim);
  }
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < ndim; ++d) {
    if (!reduce[d])
      sizes.push_back(self.size(d));
    else if (keepdim)
      sizes.push_back(1);
  }
  return sizes;
}

void check_floating(const Tensor& self, const char* op) {
  TORCH_CHECK(self.layout() == at::kStrided, op, " only supports strided layout, got: ", self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), op,
              " only supports floating point and complex dtypes");
}

Tensor variance_output(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  return at::empty(reduced_sizes(self, dim, keepdim), self.options().dtype(c10::toRealValueType(self.scalar_type())));
}

Tensor var_meta(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>&, bool keepdim) {
  check_floating(self, "std and var");
  return variance_output(self, dim, keepdim);
}

std::tuple<Tensor, Tensor> var_mean_meta(const Tensor& self, at::OptionalIntArrayRef dim,
                                         const std::optional<at::Scalar>&, bool keepdim) {
  check_floating(self, "std_mean and var_mean");
  return {variance_output(self, dim, keepdim), at::empty(reduced_sizes(self, dim, keepdim), self.options())};
}

// Full reductions to a 0-dim tensor.
at::ScalarType sum_like_dtype(const Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

Tensor prod_meta(const Tensor& self, std::optional<at::ScalarType> dtype) {
  return at::empty({}, self.options().dtype(sum_like_dtype(self, dtype)));
}

Tensor nansum_meta(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  return at::empty(reduced_sizes(self, dim, keepdim), self.options().dtype(sum_like_dtype(self, dtype)));
}

Tensor min_max_meta(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0,
              "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  return at::empty({}, self.options());
}

Tensor dot_meta(const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ", other.dim(),
              "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(), "] and src [",
              other.numel(), "] to have the same number of elements, but got ", self.numel(), " and ", other.numel(),
              " elements respectively");
  return at::empty({}, self.options());
}

Tensor trace_meta(const Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  return at::empty({}, self.options().dtype(sum_like_dtype(self, std::nullopt)));
}

}  // namespace

void register_reduction_meta(MetaRegistrar& m) {
  m.impl("prod", TORCH_FN(prod_meta));
  m.impl("nansum", TORCH_FN(nansum_meta));
  m.impl("min", TORCH_FN(min_max_meta));
  m.impl("max", TORCH_FN(min_max_meta));
  m.impl("dot", TORCH_FN(dot_meta));
  m.impl("trace", TORCH_FN(trace_meta));
  m.impl("var.correction", TORCH_FN(var_meta));
  m.impl("std.correction", TORCH_FN(var_meta));
  m.impl("var_mean.correction", TORCH_FN(var_mean_meta));
  m.impl("std_mean.correction", TORCH_FN(var_mean_meta));
}

}  // namespace aotpipe::detail
