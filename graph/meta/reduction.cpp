// Meta kernels of the variance reductions (var, std and their _mean twins): reduced sizes,
// contiguous, in the real dtype of the input (complex -> float) for the variance.
#include <aotpipe/graph/internal/meta_support.h>

#include <ATen/ATen.h>
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
    if (!reduce[d]) sizes.push_back(self.size(d));
    else if (keepdim) sizes.push_back(1);
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

}  // namespace

void register_reduction_meta(MetaRegistrar& m) {
  m.impl("var.correction", TORCH_FN(var_meta));
  m.impl("std.correction", TORCH_FN(var_meta));
  m.impl("var_mean.correction", TORCH_FN(var_mean_meta));
  m.impl("std_mean.correction", TORCH_FN(var_mean_meta));
}

}  // namespace aotpipe::detail
